"""ONNX frontend: small models built with onnx.helper, run on every device and checked against onnx's own
reference evaluator; bad models raise the specific PortableError; the conformance runner end to end."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import portable  # noqa: E402
from portable.errors import CompileError, ShapeMismatch, UnsupportedOp  # noqa: E402
from portable.frontend.onnx_import import onnx_to_mlir  # noqa: E402

RNG = np.random.default_rng(7)


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def check(m, feeds, device, rtol=1e-4, atol=1e-5):
    refs = ReferenceEvaluator(m).run(None, feeds)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def test_gemm_relu(device):
    w, b = rand(16, 8), rand(8)
    m = model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=0, alpha=0.5),
               helper.make_node("Relu", ["h"], ["y"])],
              [vi("x", [5, 16])], [vi("y", [5, 8])], [("w", w), ("b", b)])
    check(m, {"x": rand(5, 16)}, device)


def test_conv_add(device):
    m = model([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
               helper.make_node("Add", ["c", "b"], ["y"])],
              [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 8, 8])], [("w", rand(4, 3, 3, 3)), ("b", rand(1, 4, 1, 1))])
    check(m, {"x": rand(1, 3, 8, 8)}, device)


def test_softmax(device):
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [vi("x", [6, 33])], [vi("y", [6, 33])])
    check(m, {"x": rand(6, 33)}, device)


def test_matmul_add_dynamic_batch(device):
    """Compile per shape: the symbolic batch dim is pinned by input_shapes (and defaults to 1)."""
    m = model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
              [vi("x", ["batch", 12])], [vi("y", ["batch", 7])], [("w", rand(12, 7)), ("b", rand(7))])
    assert "tensor<1x12xf32>" in onnx_to_mlir(m)
    text = onnx_to_mlir(m, {"x": (4, 12)})
    assert "tensor<4x12xf32>" in text and "?" not in text.split("{")[0]
    x = rand(4, 12)
    (out,) = portable.run(text, x, device=device)
    (ref,) = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMean"])
def test_reductions(device, op):
    axes = np.array([1], dtype=np.int64)
    m = model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
              [vi("x", [4, 9, 5])], [vi("y", [4, 5])], [("axes", axes)])
    check(m, {"x": rand(4, 9, 5)}, device)


def test_argmax_argmin(device):
    """ArgMax/ArgMin (a two-result reduction: value and index) once crashed the compiler, which erased the
    reduction when only its value result was dead."""
    x = rand(4, 7, 5)
    x[1, 3, 2] = x[1, 5, 2] = 9.0  # a tie: select_last_index decides
    for op, last in (("ArgMax", 0), ("ArgMax", 1), ("ArgMin", 0)):
        m = model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=1, select_last_index=last)],
                  [vi("x", [4, 7, 5])], [vi("y", [4, 1, 5], T.INT64)])
        check(m, {"x": x}, device)


def test_reduction_of_empty_axis(device):
    """A reduction over a zero-length axis is its identity (0 for ReduceSum, 1 for ReduceProd): folded."""
    for op in ("ReduceSum", "ReduceProd", "ReduceSumSquare"):
        m = model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)], [vi("x", [2, 0, 4])],
                  [vi("y", [2, 1, 4])], [("axes", np.array([1], np.int64))])
        check(m, {"x": np.zeros((2, 0, 4), np.float32)}, device)


def test_full_reduction_of_gather(device):
    """A full reduction (to a scalar) whose input is a gather: the reduction gets a leading unit loop and the
    gather's linalg.index must follow it (NegativeLogLikelihoodLoss with reduction='sum')."""
    m = model([helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="sum")],
              [vi("x", [3, 5, 4]), vi("t", [3, 4], T.INT64)], [vi("y", [])], opset=22)
    check(m, {"x": rand(3, 5, 4), "t": RNG.integers(0, 5, (3, 4)).astype(np.int64)}, device, rtol=1e-4)


def test_weighted_softmax_cross_entropy(device):
    """torch-mlir's nll_loss lowering sums fractional class weights in int64 (a 'mean' then divides by 0): the
    loss ops take their ONNX function bodies instead."""
    w = np.array([0.3, 0.9, 0.5, 0.25, 0.7], np.float32)
    m = model([helper.make_node("SoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"], reduction="mean")],
              [vi("x", [6, 5]), vi("t", [6], T.INT64)], [vi("y", [])], [("w", w)], opset=13)
    check(m, {"x": rand(6, 5), "t": RNG.integers(0, 5, (6,)).astype(np.int64)}, device, rtol=1e-4)


# ------------------------------------------------------------------------------ ONNX function bodies
def test_attention_function_body(device):
    """onnx Attention with a causal mask and a softcap has no torch-mlir lowering: it is expanded into its
    ONNX function body (a context-dependent one, built from the node's attributes and input types)."""
    m = model([helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1, softcap=3.0)],
              [vi("q", [1, 2, 4, 8]), vi("k", [1, 2, 6, 8]), vi("v", [1, 2, 6, 8])], [vi("y", [1, 2, 4, 8])],
              opset=23)
    check(m, {"q": rand(1, 2, 4, 8), "k": rand(1, 2, 6, 8), "v": rand(1, 2, 6, 8)}, device, rtol=1e-4)


def test_rms_normalization_and_swish(device):
    """RMSNormalization (opset 23) and Swish (opset 24) are ONNX functions torch-mlir does not lower; their
    bodies compute axes at run time (Shape -> Size -> Range), which folding turns into constants."""
    m = model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-1, epsilon=1e-5)],
              [vi("x", [3, 4, 16])], [vi("y", [3, 4, 16])], [("s", rand(16))], opset=24)
    check(m, {"x": rand(3, 4, 16)}, device, rtol=1e-4)
    m = model([helper.make_node("Swish", ["x"], ["y"], alpha=1.5)], [vi("x", [3, 4, 16])], [vi("y", [3, 4, 16])],
              opset=24)
    check(m, {"x": rand(3, 4, 16)}, device, rtol=1e-4)


def test_shape_computations_fold():
    """Axes computed from shapes (what ONNX function bodies and their '_expanded' exports do) fold to constants,
    so shape inference knows every shape; before, the ReduceMean's output shape was unknown."""
    m = model([helper.make_node("Shape", ["x"], ["shape"]),
               helper.make_node("Size", ["shape"], ["rank"]),
               helper.make_node("Range", ["one", "rank", "one"], ["axes"]),
               helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)],
              [vi("x", [2, 3, 5])], [vi("y", None)], [("one", np.array(1, np.int64))])
    text = onnx_to_mlir(m)
    assert "tensor<2x1x1xf32>" in text.split("{")[0] or "-> tensor<2x1x1xf32>" in text


def test_path_bytes_and_modelproto(tmp_path, device):
    m = model([helper.make_node("Abs", ["x"], ["y"])], [vi("x", [3, 5])], [vi("y", [3, 5])])
    p = tmp_path / "abs.onnx"
    onnx.save(m, str(p))
    x = rand(3, 5)
    for given in (str(p), p, m.SerializeToString(), m):
        (out,) = portable.run(given, x, device=device)
        np.testing.assert_array_equal(out, np.abs(x))


# ------------------------------------------------------------------------------------------- bad input
def _relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="r0")], [vi("x", [3, 4])], [vi("y", [3, 4])])


def test_truncated_file(tmp_path):
    data = _relu_model().SerializeToString()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 3])
    with pytest.raises(CompileError, match="not a valid ONNX model|no ONNX graph"):
        onnx_to_mlir(p)
    with pytest.raises(CompileError, match="not a valid ONNX model|no ONNX graph"):
        portable.compile(b"\x08\x07garbage", device="vulkan:0")
    with pytest.raises(CompileError, match="does not exist"):
        onnx_to_mlir(tmp_path / "missing.onnx")


def test_unknown_op_names_node():
    m = model([helper.make_node("Relu", ["x"], ["h"], name="first"),
               helper.make_node("FrobnicateAll", ["h"], ["y"], name="the_bad_one")],
              [vi("x", [3, 4])], [vi("y", [3, 4])])
    with pytest.raises(UnsupportedOp, match=r"node 'the_bad_one' \(op FrobnicateAll\).*unknown op"):
        onnx_to_mlir(m)


def test_op_without_lowering_names_node():
    m = model([helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], kernel_shape=[2, 2])],
              [vi("x", [1, 1, 4, 4]), vi("offset", [1, 8, 3, 3])], [vi("y", [1, 1, 3, 3])],
              [("w", np.ones((1, 1, 2, 2), np.float32))], opset=19)
    with pytest.raises(UnsupportedOp, match=r"node 'DeformConv_0' \(op DeformConv, kernel_shape=\[2, 2\]\)"):
        onnx_to_mlir(m)


def test_known_importer_hang_is_refused():
    """Pad mode=wrap with pads known only at run time cannot become Gathers (onnx_decomp_pad) and makes
    torch-mlir's pipeline loop forever: refused up front, by node."""
    m = model([helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap", name="wrapper")],
              [vi("x", [3, 4]), vi("pads", [4], T.INT64)], [vi("y", [3, 6])], [])
    with pytest.raises(UnsupportedOp, match=r"node 'wrapper' \(op Pad\): mode 'wrap'"):
        onnx_to_mlir(m)


def test_unsupported_dtype():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [vi("x", [3], T.STRING)], [vi("y", [3], T.STRING)])
    with pytest.raises(UnsupportedOp, match=r"input 'x'.*Identity.*dtype STRING"):
        onnx_to_mlir(m)
    m = model([helper.make_node("Abs", ["x"], ["y"])], [vi("x", [3], T.COMPLEX64)], [vi("y", [3], T.COMPLEX64)])
    with pytest.raises(UnsupportedOp, match="COMPLEX64"):
        onnx_to_mlir(m)


def test_bad_input_shapes():
    with pytest.raises(ShapeMismatch, match="rank 2"):
        onnx_to_mlir(_relu_model(), {"x": (3, 4, 5)})
    with pytest.raises(ShapeMismatch, match="dimension 1 is 4"):
        onnx_to_mlir(_relu_model(), {"x": (3, 5)})
    with pytest.raises(ShapeMismatch, match="no input"):
        onnx_to_mlir(_relu_model(), {"nope": (3, 4)})


def test_inconsistent_model_names_node():
    m = model([helper.make_node("Add", ["x", "z"], ["y"], name="adder")], [vi("x", [3, 4]), vi("z", [5, 7])],
              [vi("y", None)])
    with pytest.raises(CompileError, match="adder"):
        onnx_to_mlir(m)


# ------------------------------------------------------------------------------------------- conformance
@pytest.fixture(scope="module")
def node_cases(tmp_path_factory):
    """A few of onnx's own node cases, generated for this test only (not the whole ~1,900)."""
    from portable.conformance.cases import write_node_cases

    root = tmp_path_factory.mktemp("node-cases")
    names = write_node_cases(root, ["relu", "abs", "deformconv"])
    # A uint16 Add (dtype portable does not take) from onnx's Add cases, written by hand to stay fast.
    x = np.arange(6, dtype=np.uint16).reshape(2, 3)
    m = model([helper.make_node("Add", ["x", "y"], ["s"])], [vi("x", [2, 3], T.UINT16), vi("y", [2, 3], T.UINT16)],
              [vi("s", [2, 3], T.UINT16)])
    d = root / "test_add_uint16"
    (d / "test_data_set_0").mkdir(parents=True)
    onnx.save(m, str(d / "model.onnx"))
    for i, a in enumerate([x, x]):
        (d / "test_data_set_0" / f"input_{i}.pb").write_bytes(numpy_helper.from_array(a).SerializeToString())
    (d / "test_data_set_0" / "output_0.pb").write_bytes(numpy_helper.from_array(x + x).SerializeToString())
    return root, names + ["test_add_uint16"]


def _conformance(*argv) -> int:
    from portable.conformance.cli import add_parser

    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="cmd"))
    args = p.parse_args(["conformance", *argv])
    return args.fn(args)


def test_conformance_runner(node_cases, tmp_path):
    from conftest import AVAILABLE

    if not AVAILABLE:
        pytest.skip("no device")
    root, names = node_cases
    assert "test_relu" in names and "test_basic_deform_conv_with_padding" in names
    out = tmp_path / "results"
    devs = ",".join(AVAILABLE)
    pattern = "^test_(relu|basic_deform_conv_with_padding|add_uint16)$"
    assert _conformance("--suite", str(root), "--filter", pattern, "--device", devs,
                        "--out", str(out), "--jobs", "2", "--no-progress") == 0
    data = json.loads((out / "results.json").read_text())
    res = data["results"]
    assert set(res) == {"test_relu", "test_basic_deform_conv_with_padding", "test_add_uint16"}
    for dev in AVAILABLE:
        assert res["test_relu"][dev]["status"] == "pass", res["test_relu"][dev]
        assert res["test_add_uint16"][dev]["status"] == "unsupported"
        assert res["test_add_uint16"][dev]["reason"] == "dtype"
        assert res["test_basic_deform_conv_with_padding"][dev]["status"] == "unsupported"
        assert "DeformConv" in res["test_basic_deform_conv_with_padding"][dev]["message"]
    assert data["cases"]["test_relu"]["op"] == "Relu"
    md = (out / "results.md").read_text()
    assert "| Relu |" in md and "| test_relu | Relu | pass" in md
    html = (out / "results.html").read_text()
    assert "<table>" in html and "test_basic_deform_conv_with_padding" in html
    assert (out / "FAILURES.md").exists()
    # --resume: nothing left to do, results kept.
    before = (out / "results.json").read_text()
    assert _conformance("--suite", str(root), "--filter", pattern, "--device", devs,
                        "--out", str(out), "--resume", "--no-progress") == 0
    after = json.loads((out / "results.json").read_text())
    assert after["results"] == json.loads(before)["results"]
    # A new run into a directory that has results is refused: nothing overwritten.
    kept = (out / "results.json").read_text()
    assert _conformance("--suite", str(root), "--filter", pattern, "--device", devs,
                        "--out", str(out), "--no-progress") == 2
    assert (out / "results.json").read_text() == kept


def test_conformance_export_and_replay(node_cases, tmp_path):
    """Cases compiled for a profile here, replayed from the export with the runtime alone (a GPU host's way)."""
    from conftest import AVAILABLE

    from portable.conformance import replay

    if not AVAILABLE:
        pytest.skip("no device")
    root, _ = node_cases
    devs = ",".join(AVAILABLE)
    exp, out = tmp_path / "export", tmp_path / "results"
    assert _conformance("--suite", str(root), "--filter", "^test_(relu|abs|add_uint16)$", "--device", devs,
                        "--profile", "generic", "--out", str(out), "--export", str(exp), "--compile-only",
                        "--no-progress") == 0
    cases = ["test_abs", "test_relu"]
    assert sorted(p.name for p in exp.iterdir()) == cases  # unsupported cases have nothing to export
    here = json.loads((out / "profile-generic.json").read_text())["results"]
    assert {r["status"] for c in cases for r in here[c].values()} == {"compiled-only"}  # nothing ran here
    one, two = out / "replayed.json", out / "replayed2.json"
    assert replay.main([str(exp), "--device", devs, "--profile", "generic", "--out", str(one)]) == 0
    res = json.loads(one.read_text())["results"]
    assert sorted(res) == cases
    for case in cases:
        for dev in AVAILABLE:
            assert res[case][f"generic@{dev}"]["status"] == "pass", res[case]
    # Two processes, one case each, merged: the same statuses, and no share's file left behind.
    assert replay.main([str(exp), "--device", devs, "--profile", "generic", "--out", str(two), "--jobs", "2"]) == 0
    merged = json.loads(two.read_text())["results"]
    assert {c: {d: r["status"] for d, r in v.items()} for c, v in merged.items()} == \
        {c: {d: r["status"] for d, r in v.items()} for c, v in res.items()}
    assert sorted(p.name for p in out.glob("replayed2*")) == ["replayed2.json"]
    # --resume with every pair recorded runs nothing: the records (their run times too) stay as they were.
    assert replay.main([str(exp), "--device", devs, "--profile", "generic", "--out", str(one), "--resume"]) == 0
    assert json.loads(one.read_text())["results"] == res
    assert _conformance("--suite", str(root), "--device", devs, "--export", str(exp), "--no-progress") == 2
    assert _conformance("--suite", str(root), "--device", devs, "--compile-only", "--no-progress") == 2


def test_conformance_timeout_is_isolated(node_cases, tmp_path):
    """A case that exceeds its time is killed with its worker; the run still finishes and records an error."""
    from portable.conformance import cases, runner

    root, _ = node_cases
    sel = cases.discover((str(root),), "^test_relu$")
    res = runner.Results(tmp_path / "r.json")
    runner.run(sel, ["vulkan:0"], res, timeout_s=0.01, progress=False)
    rec = res.data["results"]["test_relu"]["vulkan:0"]
    assert rec["status"] == "error" and rec["stage"] == "timeout", rec


def test_profile_assumptions():
    """--profile runs a kernel on a local device only where the profile's assumptions hold there."""
    from types import SimpleNamespace

    from portable.backend import DeviceInfo
    from portable.conformance.execute import assumptions_fail, spirv_target_env
    from portable.executable import Kernel

    info = DeviceInfo("vulkan", 0, "small", "drv", "1", 0, 0, "gpu",
                      limits={"max_workgroup_invocations": 128, "max_workgroup_size": (128, 128, 64), "int64": False})
    exe = SimpleNamespace(kernels=[Kernel("k", (256, 1, 1), 2, spirv=b"")])
    why = assumptions_fail(exe, {"limits": {}}, {}, info)
    assert why and "256" in why[0]
    exe = SimpleNamespace(kernels=[Kernel("k", (64, 1, 1), 2, spirv=b"")])
    assert assumptions_fail(exe, {"limits": {}}, {}, info) == []
    assert spirv_target_env({"spirv_version": "v1.5"}) == "vulkan1.2"
    assert spirv_target_env({"spirv_version": "v1.3"}) == "vulkan1.1"


def test_compare_outputs():
    from portable.conformance.compare import compare_outputs

    a = np.array([1.0, 2.0, np.nan], np.float32)
    assert compare_outputs([a], [a.copy()], 1e-3, 1e-7)["status"] == "pass"
    r = compare_outputs([a + 1], [a], 1e-3, 1e-7)
    assert r["status"] == "fail" and r["max_abs"] == 1.0 and "elements off" in r["message"]
    i = np.array([[1, 2], [3, 4]], np.int8)
    r = compare_outputs([i + 1], [i], 1e-3, 1e-7)
    assert r["status"] == "fail" and "first at (0, 0)" in r["message"]
    assert compare_outputs([i], [i], 0, 0)["status"] == "pass"
    assert "shape" in compare_outputs([i.T[:1]], [i], 0, 0)["message"]
    assert "dtype" in compare_outputs([i.astype(np.int32)], [i], 0, 0)["message"]


def test_average_pool_3d_dilated(device):
    """Dilated 3-D pooling with padding counted: a transposed (permutation-map) vector read in the OpenCL
    generator, ceildivsi index math on SPIR-V."""
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[5, 5, 5], strides=[3, 3, 3],
                            dilations=[2, 2, 2], count_include_pad=1, ceil_mode=0)
    m = model([node], [vi("x", [1, 1, 32, 32, 32])], [vi("y", [1, 1, 8, 8, 8])], opset=22)
    check(m, {"x": rand(1, 1, 32, 32, 32)}, device)
