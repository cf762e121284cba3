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
