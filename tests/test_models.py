"""ONNX models from the `onnx` package's light model tests, end to end on every device, against the outputs
stored with them (inputs generated the way onnx's own runner does)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import portable
from portable.conformance.cases import _light_cases

CASES = {c.op: c for c in _light_cases()}


@pytest.mark.parametrize("name", ["squeezenet", "inception_v1"])
def test_light_model_matches_stored_output(device, name):
    if name not in CASES:
        pytest.skip(f"the installed onnx package ships no light_{name} test data")
    case = CASES[name]
    (inputs, outputs), = case.data_sets
    xs = [numpy_helper.to_array(onnx.load_tensor(p)) for p in inputs]
    refs = [numpy_helper.to_array(onnx.load_tensor(p)) for p in outputs]
    exe = portable.compile(case.model, device=device)
    outs = exe(*xs)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=case.rtol, atol=max(case.atol, 1e-5))


@pytest.mark.parametrize("name", ["squeezenet", "bvlc_alexnet"])
def test_light_model_compiles_for_the_nvidia_profile(name):
    """What runs on the GPU host is compiled here for its profile: squeezenet's pool put 256 threads on z
    (over the 64 GPUs allow), alexnet's 1x1000 softmax row chain failed in tile-and-map (now the plain
    fallback: no row chains, scalar tiles)."""
    from portable import profiles
    from portable.api import graph_text
    from portable.compiler.pipeline import compile_module

    if name not in CASES:
        pytest.skip(f"the installed onnx package ships no light_{name} test data")
    opts = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    exe = compile_module(graph_text(CASES[name].model), opts, ("vulkan", "opencl"))
    assert exe.kernels and all(k.spirv and k.opencl for k in exe.kernels)
    assert all(k.workgroup_size[2] <= 64 for k in exe.kernels)
