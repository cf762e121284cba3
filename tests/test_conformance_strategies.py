"""The `strategies` conformance suite (portable/conformance/strategies.py): generated cases at the shapes where
the code generator's strategies switch, checked by the same runner as onnx's node cases. Here: every case's
model is valid ONNX; a sample runs on every device against its float64 reference; a profile's compile-only
export takes kernels on cooperative matrices (which spirv-val here cannot check) and f16 dot products."""

from __future__ import annotations

import argparse
import json

import numpy as np
import onnx
import pytest

from portable.conformance import strategies

SAMPLE = ["matmul_3x513x31", "matmul_f16_33x100x70", "conv_depthwise_5x5_odd", "softmax_3x70000",
          "layernorm_300x63", "argmax_4x2048_axis1_last", "reduce_sum_64x130x33_axes02_keep1", "rotary_halves_6x64"]


def _conformance(*argv) -> int:
    from portable.conformance.cli import add_parser

    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="cmd"))
    args = p.parse_args(["conformance", *argv])
    return args.fn(args)


def _write(names: list[str], root) -> None:
    rng = np.random.default_rng(strategies.SEED)
    by_name = {s.name: s for s in strategies.specs()}
    for n in names:
        strategies.write_case(by_name[n], root, rng)


def test_every_case_is_a_valid_model():
    from onnx import TensorProto

    specs = strategies.specs()
    assert len({s.name for s in specs}) == len(specs) > 80
    for s in specs:
        model = strategies._model(s, TensorProto.FLOAT)
        for node in model.graph.node:
            onnx.checker.check_node(node)
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        known = {v.name for v in inferred.graph.value_info} | {v.name for v in inferred.graph.output
                                                                 if v.type.tensor_type.elem_type}
        assert set(s.outputs) <= known, s.name
        assert all(np.prod(shape) * 4 <= 4 << 20 for shape, _, _ in s.inputs.values()), s.name  # travels


def test_sample_passes_on_every_device(tmp_path):
    from conftest import AVAILABLE

    if not AVAILABLE:
        pytest.skip("no device")
    _write(SAMPLE, tmp_path / "cases")
    case = json.loads((tmp_path / "cases" / "test_layernorm_300x63" / "case.json").read_text())
    assert case == {"op": "LayerNormalization", "rtol": 1e-4, "atol": 1e-4}
    out = tmp_path / "results"
    assert _conformance("--suite", str(tmp_path / "cases"), "--device", ",".join(AVAILABLE), "--out", str(out),
                        "--jobs", "2", "--no-progress") == 0
    res = json.loads((out / "results.json").read_text())["results"]
    assert sorted(res) == sorted(f"test_{n}" for n in SAMPLE)
    for name, cols in res.items():
        for dev in AVAILABLE:
            assert cols[dev]["status"] == "pass", (name, dev, cols[dev])


def test_wrong_kernels_fail_the_reference(tmp_path):
    """The tolerances scale with a reduction's length but still catch a missed term: a reference off by one
    product in one element fails the comparison."""
    from portable.conformance.cases import load_tensor
    from portable.conformance.compare import compare_outputs

    _write(["matmul_1x4100x100"], tmp_path)
    ds = tmp_path / "test_matmul_1x4100x100" / "test_data_set_0"
    a, b, y = (load_tensor(str(ds / f)) for f in ("input_0.pb", "input_1.pb", "output_0.pb"))
    case = json.loads((tmp_path / "test_matmul_1x4100x100" / "case.json").read_text())
    assert compare_outputs([a @ b], [y], case["rtol"], case["atol"])["status"] == "pass"
    off = y.copy()
    off[0, 7] -= a[0, 11] * b[11, 7]
    assert compare_outputs([a @ b], [off], case["rtol"], case["atol"])["status"] == "fail"


def test_profile_export_takes_cooperative_matrices_and_f16_dot_products(tmp_path):
    """For nvidia: the 512^3 f16 matmul runs on cooperative matrices (SPIR-V 1.6, a capability this spirv-val
    does not know: not validated, not an error); the 33x100x70 one leaves each thread one output, a dot product
    of f16 vectors into f32, which neither target lowered before (it compiled for no GPU profile)."""
    _write(["matmul_f16_512x512x512", "matmul_f16_33x100x70"], tmp_path / "cases")
    out, exp = tmp_path / "results", tmp_path / "export"
    assert _conformance("--suite", str(tmp_path / "cases"), "--device", "vulkan:0,opencl:0", "--profile", "nvidia",
                        "--compile-only", "--export", str(exp), "--out", str(out), "--no-progress") == 0
    res = json.loads((out / "profile-nvidia.json").read_text())["results"]
    for name, cols in res.items():
        for col, rec in cols.items():
            assert rec["status"] == "compiled-only", (name, col, rec)
    assert sorted(p.name for p in exp.iterdir()) == ["test_matmul_f16_33x100x70", "test_matmul_f16_512x512x512"]
    assert all((exp / "test_matmul_f16_33x100x70" / f"{api}.ptx").exists() for api in ("vulkan", "opencl"))
