"""`portable profile`: every dispatch of a small ONNX model timed on each device, shares summing to one, the
kernels traced back to the model's own node names."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the profiled model is an ONNX file")
from onnx import TensorProto, helper, numpy_helper

from portable.cli import main
from portable.devices import devices

NODES = {"fc1", "bias1", "act1", "fc2", "norm_max"}


def _model(path):
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32) * 0.1, "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(96).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((96, 32)).astype(np.float32) * 0.1, "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
             helper.make_node("Relu", ["hb"], ["a"], name="act1"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="fc2"),
             helper.make_node("ReduceMax", ["y"], ["z"], name="norm_max", keepdims=1, axes=[1])]
    g = helper.make_graph(nodes, "tiny_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [16, 1])], [w1, b1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, str(path))
    return path


def _uris():
    found, _ = devices()
    return [d.uri for d in found] or ["none"]


@pytest.mark.parametrize("uri", _uris())
def test_profile_lists_every_dispatch_with_its_nodes(tmp_path, uri, capsys):
    if uri == "none":
        pytest.skip("no Vulkan or OpenCL device on this host")
    model = _model(tmp_path / "mlp.onnx")
    out = tmp_path / "p.json"
    assert main(["profile", str(model), "--device", uri, "--runs", "2", "--json", str(out),
                 "--html", str(tmp_path / "p.html")]) == 0
    res = json.loads(out.read_text())
    import portable

    exe = portable.compile(str(model), device=uri).executable
    assert len(res["dispatches"]) == len(exe.dispatches) > 0
    assert [r["dispatch"] for r in res["dispatches"]] == list(range(len(exe.dispatches)))
    assert sum(r["share"] for r in res["dispatches"]) == pytest.approx(1.0, abs=1e-6)
    assert all(r["ms"] >= 0 and r["bytes"] > 0 for r in res["dispatches"])
    named = {n for r in res["dispatches"] for n in r["nodes"]}
    assert named and named <= NODES, named  # the model's names, nothing else
    assert {"fc1", "fc2"} <= named  # both matmuls are traced back
    assert any(r["flops"] > 0 for r in res["dispatches"])
    text = capsys.readouterr().out
    assert f"{len(exe.dispatches)} dispatches" in text and "fc2" in text
    assert "fc1" in (tmp_path / "p.html").read_text()


def test_profile_of_a_package_reads_its_source_map(tmp_path):
    found, _ = devices()
    if not found:
        pytest.skip("no Vulkan or OpenCL device on this host")
    from portable import package, profiling
    from portable.devices import open_device

    live = open_device(found[0].uri)
    model = _model(tmp_path / "mlp.onnx")
    pkg = tmp_path / "mlp.ptpk"
    prof = live.profile["name"]
    package.build(str(model), [f"{live.info.api}:{prof}"], pkg)
    smap = profiling.source_map(str(model), prof, live.info.api, tmp_path / "mlp.sources.json")
    res = profiling.profile(pkg, found[0].uri, runs=1, sources=smap)
    assert {"fc1", "fc2"} <= {n for r in res["dispatches"] for n in r["nodes"]}
    bare = profiling.profile(pkg, found[0].uri, runs=1)
    assert len(bare["dispatches"]) == len(res["dispatches"])
    assert all(r["nodes"] == [] for r in bare["dispatches"])


def test_profile_refuses_a_missing_file(tmp_path):
    from portable.profiling import ProfileError, profile

    with pytest.raises(ProfileError, match="no such file"):
        profile(tmp_path / "nope.onnx", _uris()[0] if _uris()[0] != "none" else "vulkan:0")
