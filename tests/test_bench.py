"""The benchmark harness end to end on one tiny workload: portable on each device, numpy the only peer.
Checks the files and their shape, never a time (timed tests are forbidden)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from portable.bench import BenchConfig, build, run_bench, select
from portable.bench.harness import relative_error
from portable.bench.peers.numpy_peer import reference
from portable.bench.runner import best_of_rounds


def test_workload_table_builds_every_size_class():
    for wid in select(None):
        for sc in ("gpu", "cpu", "tiny"):
            w = build(wid, sc)
            assert w.mlir.startswith("module") and "func.func @main" in w.mlir
            assert w.flops > 0 and w.bytes > 0 and w.bound in ("compute", "memory")
    assert select("matmul*") == [w for w in select(None) if w.startswith("matmul")]
    assert select("softmax,add") == ["softmax_4096", "softmax_rows256", "add_64Mi"]
    assert select("softmax_4096,add*") == ["softmax_4096", "add_64Mi"]


def test_numpy_reference_and_error_measure():
    w = build("conv3x3_resnet", "tiny")
    x, k = w.make_inputs()
    ref = reference(w, [x, k])
    # direct loop convolution, NHWC x HWCF, padding 1
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    direct = np.zeros_like(ref)
    for i in range(3):
        for j in range(3):
            direct += np.einsum("nhwc,cf->nhwf", xp[:, i:i + ref.shape[1], j:j + ref.shape[2], :], k[i, j])
    assert relative_error(direct, ref) < 1e-5
    assert relative_error(ref[..., :1], ref) == float("inf")  # a shape mismatch is never close
    bad = ref.copy()
    bad.flat[0] = np.nan
    assert relative_error(bad, ref) == float("inf")


def test_bench_writes_json_and_markdown(device, tmp_path):
    cfg = BenchConfig(devices=device, filter="add_64Mi", out=tmp_path, sizes="tiny", peers=("portable", "numpy"),
                      iters=2, chart=False, command="pytest", log=False)
    result = run_bench(cfg)
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["devices"][0]["uri"] == device and data["devices"][0]["size_class"] == "tiny"
    assert {"numpy", "portable"} <= set(data["packages"])
    by_peer = {r["peer"]: r for r in data["results"]}
    assert set(by_peer) == {"numpy", "portable"}, data["results"]
    mine = by_peer["portable"]
    assert mine["status"] == "ok", mine.get("error")
    assert mine["max_rel_err"] <= mine["tolerance"]
    for key in ("device_ms", "e2e_ms"):
        stats = mine[key]
        assert stats["n"] >= 2 and stats["min_ms"] <= stats["median_ms"] <= stats["max_ms"]
    md = (tmp_path / "results.md").read_text()
    assert f"## {device}" in md and "add_64Mi" in md and "numpy/portable" in md
    assert result["workloads"]["tiny"]["add_64Mi"]["label"] == "add 4 Ki f32"


def test_f16_mlp_layer_is_mlir_text_with_an_f32_epilogue_and_reference(device, tmp_path):
    """mlp_gelu_4096_f16: x, W f16, bias f32, one f32 linalg.generic (bias + tanh-GELU) after the mixed-type
    matmul, f32 out; the numpy reference is the f32-widened layer with the Graph's tanh-GELU, and portable's
    compile of the text matches it."""
    w = build("mlp_gelu_4096_f16", "tiny")
    assert [d for _, d in w.inputs] == ["float16", "float16", "float32"] and w.output == ((64, 64), "float32")
    assert w.label == "gelu(matmul 64x64x64 + bias) f16 (f32 acc+out)" and w.bound == "compute"
    assert w.flops == 2.0 * 64 ** 3 and w.bytes == 2 * 64 * 64 * 2 + 64 * 4 + 64 * 64 * 4
    assert w.mlir.count("linalg.generic") == 1 and "math.tanh" in w.mlir
    assert "ins(%x, %w : tensor<64x64xf16>, tensor<64x64xf16>) outs(%acc : tensor<64x64xf32>)" in w.mlir
    x, wt, bias = w.make_inputs()
    h = x.astype(np.float64) @ wt.astype(np.float64) + bias
    direct = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    ref = reference(w, [x, wt, bias])
    assert ref.dtype == np.float32 and relative_error(ref, direct.astype(np.float32)) < 1e-5
    cfg = BenchConfig(devices=device, filter="mlp_gelu_4096_f16", out=tmp_path, sizes="tiny",
                      peers=("portable", "numpy"), iters=1, chart=False, command="pytest", log=False)
    mine, = [r for r in run_bench(cfg)["results"] if r["peer"] == "portable"]
    assert mine["status"] == "ok", mine.get("error")
    assert mine["max_rel_err"] <= 1e-5  # f32 accumulation of exact f16 products: far inside the f16 tolerance


def test_f16_linear_layer_is_mlir_text_with_an_f16_bias_and_reference(device, tmp_path):
    """linear_4096_f16: x, W, bias f16, the mixed-type matmul accumulated in f32, one linalg.generic that rounds
    it to f16 and adds the bias in f16, f16 out; the numpy reference rounds the product before the f16 add, and
    portable's compile of the text matches it."""
    w = build("linear_4096_f16", "tiny")
    assert [d for _, d in w.inputs] == ["float16"] * 3 and w.output == ((64, 64), "float16")
    assert w.label == "matmul 64x64x64 + bias f16 (f32 acc, f16 out)" and w.bound == "compute"
    assert w.flops == 2.0 * 64 ** 3 and w.bytes == 2 * 64 * 64 * 2 + 64 * 2 + 64 * 64 * 2
    assert w.mlir.count("linalg.generic") == 1 and "arith.truncf %v : f32 to f16" in w.mlir
    assert "ins(%x, %w : tensor<64x64xf16>, tensor<64x64xf16>) outs(%acc : tensor<64x64xf32>)" in w.mlir
    x, wt, bias = w.make_inputs()
    direct = (x.astype(np.float64) @ wt.astype(np.float64)).astype(np.float16) + bias  # f16 + f16: an f16 add
    ref = reference(w, [x, wt, bias])
    assert ref.dtype == np.float16 and relative_error(ref, direct) < 2e-3
    # the product is rounded to f16 before the bias: not the same as adding the bias first
    assert not np.array_equal(ref, (x.astype(np.float32) @ wt.astype(np.float32) + bias).astype(np.float16))
    cfg = BenchConfig(devices=device, filter="linear_4096_f16", out=tmp_path, sizes="tiny",
                      peers=("portable", "numpy"), iters=1, chart=False, command="pytest", log=False)
    result = run_bench(cfg)
    mine, = [r for r in result["results"] if r["peer"] == "portable"]
    assert mine["status"] == "ok", mine.get("error")
    assert mine["max_rel_err"] <= 4e-3  # f32 sums in another order: the two f16 roundings may each flip an ulp
    assert result["workloads"]["tiny"]["linear_4096_f16"]["label"] == w.label


@pytest.mark.parametrize("peer", ["onnxruntime", "torch", "tinygrad"])
def test_f16_linear_layer_peers_match_the_reference(peer):
    """Each peer's f16 linear layer (ONNX Gemm in f16, torch addmm in f16, tinygrad's f32-accumulated matmul
    cast to half + bias) gives an f16 result within the f16 tolerance of the numpy reference, where the peer
    is installed and has its device."""
    from portable.bench.peers.base import Unavailable

    if peer == "onnxruntime":
        from portable.bench.peers.ort_peer import OrtPeer as Peer
    elif peer == "torch":
        from portable.bench.peers.torch_peer import TorchPeer as Peer
    else:
        from portable.bench.peers.tinygrad_peer import TinygradPeer as Peer
    p = Peer()
    try:
        p.describe()
    except Unavailable as e:
        pytest.skip(str(e))
    w = build("linear_4096_f16", "tiny")
    xs = w.make_inputs()
    ref = reference(w, xs)
    prepared = p.prepare(w, xs)
    for out in (prepared.run_e2e(xs), prepared.device_result()):
        if out is None:  # host peers: the device path is the e2e path
            continue
        assert out.dtype == np.float16 and out.shape == ref.shape
        assert relative_error(out, ref) <= 4e-3  # an f16 ulp or two apart, far inside w.tolerance()
    assert w.tolerance() == 2e-2


def test_bench_reports_a_missing_device():
    from portable.errors import DeviceNotFound

    with pytest.raises(DeviceNotFound):
        run_bench(BenchConfig(devices="vulkan:99", peers=("numpy",), sizes="tiny", log=False, chart=False))


def test_model_workloads_build_without_torch_and_stay_out_of_exports(tmp_path):
    """The model table builds with no torch (the ONNX file is made by the runner), and `--export --models`
    exports nothing, saying why (ResNet-50's weights do not travel to the GPU host)."""
    from portable.bench.cli import main
    from portable.bench.workloads import MODEL_TABLE

    assert select(None, models=True) == list(MODEL_TABLE) == ["resnet50"]
    for sc in ("gpu", "cpu", "tiny"):
        w = build("resnet50", sc)
        assert w.family == "model" and w.inputs[0][0][:2] == (1, 3) and w.output[0] == (1, 1000)
    assert build("resnet50", "gpu").label == "ResNet-50 1x3x224x224 f32"
    assert main(["--models", "--export", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_bench_model_workload_runs_against_onnxruntime(device, tmp_path):
    """The tiny model workload end to end: exported with torch, portable checked against onnxruntime."""
    pytest.importorskip("torch", reason="the model workloads export from models/cv.py with PyTorch")
    pytest.importorskip("onnxruntime", reason="onnxruntime is the reference of the model workloads")
    cfg = BenchConfig(devices=device, out=tmp_path, sizes="tiny", peers=("portable", "onnxruntime", "numpy"),
                      iters=1, chart=False, command="pytest", log=False, models=True)
    result = run_bench(cfg)
    by_peer = {r["peer"]: r for r in result["results"]}
    assert by_peer["portable"]["status"] == "ok", by_peer["portable"].get("error")
    assert by_peer["portable"]["max_rel_err"] <= by_peer["portable"]["tolerance"]
    assert by_peer["portable"]["info"]["kernels"] > 10
    assert by_peer["onnxruntime"]["status"] == "ok"
    assert "numpy" not in by_peer  # numpy has no form of a network; onnxruntime is the reference
    w = result["workloads"]["tiny"]["resnet50"]
    assert w["flops"] > 0 and w["reference"].startswith("onnxruntime")


def test_bench_runs_an_export_made_without_iree(device, tmp_path):
    """An export from a host without the IREE compiler (no .vmfb, no IREE targets) still runs on the GPU host."""
    from portable import profiles
    from portable.bench.aot import export
    from portable.devices import open_device

    profile = profiles.match(open_device(device).info)["name"]
    export(tmp_path / "x", profile, "add_64Mi", sizes="tiny", iree_targets=(), log=lambda *a: None)
    from portable.bench.cli import main

    assert main(["--import", str(tmp_path / "x"), "--device", device, "--peers", "portable", "--out",
                 str(tmp_path / "r"), "--no-chart", "--iters", "2"]) == 0
    mine, = [r for r in json.loads((tmp_path / "r" / "results.json").read_text())["results"] if r["peer"] == "portable"]
    assert mine["status"] == "ok", mine.get("error")
    # The importer pins each executable by the sha256 the export recorded: a file changed since is refused.
    entry = json.loads((tmp_path / "x" / "manifest.json").read_text())["workloads"]["add_64Mi"]
    rel = entry["portable_by_api"][device.split(":")[0]]
    assert sorted(entry["portable_sha256"]) == sorted(entry["portable_by_api"].values())
    with open(tmp_path / "x" / rel, "ab") as f:
        f.write(b"\0")
    assert main(["--import", str(tmp_path / "x"), "--device", device, "--peers", "portable", "--out",
                 str(tmp_path / "r2"), "--no-chart", "--iters", "2"]) in (0, 1)
    results = json.loads((tmp_path / "r2" / "results.json").read_text())["results"]
    mine, = [r for r in results if r["peer"] == "portable"]
    assert mine["status"] != "ok" and "pinned" in str(mine.get("error")), mine


def test_bench_rounds_keep_each_workloads_best_round(device, tmp_path):
    cfg = BenchConfig(devices=device, filter="add_64Mi", out=tmp_path, sizes="tiny", peers=("portable", "numpy"),
                      iters=2, chart=False, command="pytest", log=False, rounds=2)
    result = run_bench(cfg)
    mine = [r for r in result["results"] if r["peer"] == "portable"]
    assert len(mine) == 1 and mine[0]["status"] == "ok", mine
    rounds = mine[0]["round_device_ms"]
    assert len(rounds) == 2 and mine[0]["device_ms"]["median_ms"] == pytest.approx(min(rounds), abs=1e-6)
    assert "Rounds: 2 rounds" in (tmp_path / "results.md").read_text()


def test_best_of_rounds_never_hides_a_failure():
    def rec(status, ms):
        return {"peer": "portable", "device": "d", "size_class": "tiny", "workload": "w", "status": status,
                "device_ms": {"median_ms": ms} if status == "ok" else None}
    assert best_of_rounds([[rec("ok", 2.0)], [rec("ok", 1.0)]])[0]["round_device_ms"] == [2.0, 1.0]
    assert best_of_rounds([[rec("ok", 2.0)], [rec("ok", 1.0)]])[0]["device_ms"]["median_ms"] == 1.0
    assert best_of_rounds([[rec("ok", 1.0)], [rec("WRONG", 0)]])[0]["status"] == "WRONG"


def test_targets_section_marks_misses_with_their_reasons():
    """The report's Targets section reads each rule of the device's profile off the run's figures: met, missed
    with the recorded reason and this run's back-to-back time, or missed with no reason recorded."""
    from portable.bench import report, targets

    def rec(peer, device, wid, ms, kernel=None):
        r = {"peer": peer, "device": device, "size_class": "cpu", "workload": wid, "status": "ok",
             "device_ms": {"median_ms": ms}}
        if kernel:
            r["kernel_ms"] = {"median_ms": kernel}
        return r

    w = {"flops": 1.0, "bytes": 1.0, "bound": "memory", "label": "x"}
    dev = {"uri": "opencl:0", "profile": "pocl", "size_class": "cpu", "name": "pthread-haswell"}
    result = {"workloads": {"cpu": {"add_64Mi": w, "matmul_1024_f32": dict(w, bound="compute")}},
              "results": [rec("portable", "opencl:0", "add_64Mi", 1.0, kernel=0.9),
                          rec("tinygrad", "opencl:0", "add_64Mi", 1.5),
                          rec("portable", "opencl:0", "matmul_1024_f32", 1.0),
                          rec("tinygrad", "opencl:0", "matmul_1024_f32", 3.0),
                          rec("numpy", "host", "matmul_1024_f32", 0.2),
                          rec("numpy", "host", "add_64Mi", 2.0)]}
    where = {"tinygrad": "opencl:0", "numpy": "host"}
    rows = {(r.split(" | ")[0][2:], r.split(" | ")[1]): r for r in
            targets.section(result, dev, report.index(result), report.median_ms, where)[4:]}
    add = rows[(">= 2x tinygrad on every workload", "add_64Mi")]
    assert "1.50x tinygrad" in add and "**no**" in add and "memory-bound" in add and "0.900 ms" in add
    assert "meeting it takes at most 0.750 ms; the fastest library on this silicon, numpy, took 2.000 ms" in add
    assert "| yes |" in rows[(">= 2x tinygrad on every workload", "matmul_1024_f32")]
    slow = rows[("matmul within 3x of numpy", "matmul_1024_f32")]
    assert "0.20x numpy" in slow and "**no**" in slow and "no reason recorded" in slow
    assert targets.section(result, dict(dev, profile="generic"), report.index(result), report.median_ms, where) == []
    # A peer that failed a workload leaves its target unjudged, and the row says so instead of vanishing.
    result["workloads"]["cpu"]["matmul_4096_f16"] = dict(w, bound="compute")
    result["results"] += [rec("portable", "opencl:0", "matmul_4096_f16", 1.0),
                          {"peer": "tinygrad", "device": "opencl:0", "size_class": "cpu", "workload": "matmul_4096_f16",
                           "status": "error", "stage": "prepare"}]
    rows = {(r.split(" | ")[0][2:], r.split(" | ")[1]): r for r in
            targets.section(result, dev, report.index(result), report.median_ms, where)[4:]}
    assert "not judged | tinygrad has no time here (error at prepare)" in \
        rows[(">= 2x tinygrad on every workload", "matmul_4096_f16")]


def test_bandwidth_miss_states_the_floor_this_runs_copies_fit():
    """A bandwidth target missed on the H200 profile states the floor this run's pure streams (scale, add) put
    under the workload's bytes, t = fixed + bytes / rate by least squares, and how far above it the kernel is;
    a fit that is not physical (a negative fixed time) gives no floor."""
    from portable.bench import report, targets

    mib = 2 ** 20
    ws = {"scale_4096": {"family": "scale", "bytes": 128 * mib, "bound": "memory"},
          "add_64Mi": {"family": "add", "bytes": 768 * mib, "bound": "memory"},
          "softmax_4096": {"family": "softmax", "bytes": 128 * mib, "bound": "memory"}}

    def rec(peer, device, wid, ms):
        return {"peer": peer, "device": device, "size_class": "gpu", "workload": wid, "status": "ok",
                "device_ms": {"median_ms": ms}, "kernel_ms": {"median_ms": ms}}

    def copy_ms(nbytes, fixed_ms=0.005, rate=4.4e9):  # rate in bytes per ms: 4.4 TB/s
        return fixed_ms + nbytes / rate

    dev = {"uri": "vulkan:0", "profile": "nvidia", "size_class": "gpu", "name": "NVIDIA H200"}
    runs = [rec("portable", "vulkan:0", "scale_4096", copy_ms(128 * mib)),
            rec("portable", "vulkan:0", "add_64Mi", copy_ms(768 * mib)),
            rec("portable", "vulkan:0", "softmax_4096", 1.1 * copy_ms(128 * mib)),
            rec("torch", "torch", "scale_4096", copy_ms(128 * mib)),
            rec("torch", "torch", "add_64Mi", copy_ms(768 * mib))]
    result = {"workloads": {"gpu": ws}, "results": runs}
    fixed, rate, fitted = targets.stream_floor(result, dev, report.index(result), report.median_ms, "kernel_ms")
    assert fixed == pytest.approx(0.005) and rate == pytest.approx(4.4e9) and fitted == ["add_64Mi", "scale_4096"]
    rows = targets.section(result, dev, report.index(result), report.median_ms, {"torch": "torch"})
    soft = next(r for r in rows if "| softmax_4096 |" in r)
    floor_pct = 100 * 128 * mib / (copy_ms(128 * mib) / 1e3) / 4.8e12
    assert "**no**" in soft and "t = 5.0 us + bytes / 4.40 TB/s" in soft
    assert f"{floor_pct:.1f}% of peak at best" in soft
    assert "this kernel 1.10x that" in soft and "PyTorch's copies take 1.00x / 1.00x these times" in soft

    runs[0]["kernel_ms"]["median_ms"] = 0.001  # fixed time below zero on the line through both: no floor
    assert targets.stream_floor(result, dev, report.index(result), report.median_ms, "kernel_ms") is None
    rows = targets.section(result, dev, report.index(result), report.median_ms, {})
    soft = next(r for r in rows if "| softmax_4096 |" in r)
    assert "at best" not in soft and "scale_4096 in this run" in soft


def test_weightless_draws_are_pinned_bits():
    """The draw is the same on every machine: these values were read once and must never change (a GPU host
    restoring a package from its skeleton relies on it)."""
    from portable.bench.weightless import draw

    assert draw(0, 0, 4, 1.0).tolist() == [0.7666215896606445, -0.13694405555725098, -0.9471324682235718,
                                            0.9417638778686523]
    assert draw(3, 7, 3, 0.5, 1.0).tolist() == [0.9502168297767639, 0.8158985376358032, 0.5432773232460022]


def test_weightless_package_restores_byte_for_byte(tmp_path):
    """A package compiled from a seeded ONNX model travels as a skeleton without the drawn weights; restoring it
    gives the same content hash, and the emptied graph gets its initializers back."""
    onnx = pytest.importorskip("onnx", reason="the seeded model is an ONNX file")
    from onnx import TensorProto, helper, numpy_helper

    from portable import package
    from portable.bench import weightless
    from portable.errors import PackageError

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((32, 48)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(48).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([0.5], np.float32), "half")]  # too small to draw: kept
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Mul", ["hb", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 48])], inits)
    m = weightless.seed_initializers(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), seed=5)
    w = numpy_helper.to_array(m.graph.initializer[0])
    assert np.abs(w).max() <= np.sqrt(6 / 32) and np.abs(w).max() > 0.5 * np.sqrt(6 / 32)  # He over the rows
    assert numpy_helper.to_array(m.graph.initializer[2]).tolist() == [0.5]
    src = tmp_path / "m.onnx"
    onnx.save(m, str(src))
    pkg, skel = tmp_path / "m.ptpk", tmp_path / "m.skel"
    digest = package.build(str(src), ["opencl:generic"], pkg)
    stats = weightless.strip(pkg, skel, m)
    assert stats["stripped"] >= 1 and skel.stat().st_size < pkg.stat().st_size
    again = tmp_path / "again.ptpk"
    assert weightless.restore(skel, again) == digest
    bare = weightless.without_weights(m)
    assert len(bare.SerializeToString()) < 1000
    back = weightless.restore_onnx(bare)
    for a, b in zip(back.graph.initializer, m.graph.initializer):
        assert np.array_equal(numpy_helper.to_array(a), numpy_helper.to_array(b))
    with pytest.raises(PackageError, match="not a package skeleton"):
        weightless.restore(pkg, tmp_path / "x.ptpk")


def test_weightless_restores_a_scale_folded_into_a_matmul_weight(tmp_path):
    """The compiler folds a per-channel scale (a normalization's weight) into the matrix that follows it, so the
    package holds draw(w) * draw(gamma)[:, None], not a draw: the skeleton records the product's recipe instead of
    its bytes, and the restored package has the same content hash."""
    import zipfile

    pytest.importorskip("onnx", reason="the seeded model is an ONNX file")
    from onnx import TensorProto, helper, numpy_helper

    from portable import package
    from portable.bench import weightless

    inits = [numpy_helper.from_array(np.ones(64, np.float32), "gamma"),
             numpy_helper.from_array(np.zeros((64, 96), np.float32), "w")]
    nodes = [helper.make_node("Mul", ["x", "gamma"], ["h"]), helper.make_node("MatMul", ["h", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 96])], inits)
    m = weightless.seed_initializers(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), seed=2)
    pkg, skel = tmp_path / "m.ptpk", tmp_path / "m.skel"
    digest = package.build(m, ["opencl:generic"], pkg)
    stats = weightless.strip(pkg, skel, m)
    assert stats["kept"] == 0, stats
    with zipfile.ZipFile(skel) as z:
        assert len(json.loads(z.read(weightless.RECIPE))["row_scaled"]) == 1
    assert weightless.restore(skel, tmp_path / "again.ptpk") == digest


def test_weightless_strips_convolution_filters_stored_transposed(tmp_path):
    """At batch 2 on the nvidia profile (conv_batch_rows) a convolution's filters are stored as the (C*KH*KW, F)
    transpose of the drawn (F, C, KH, KW) weight: the skeleton draws them again instead of carrying them."""
    pytest.importorskip("onnx", reason="the seeded model is an ONNX file")
    from onnx import TensorProto, helper, numpy_helper

    from portable import package
    from portable.bench import weightless

    inits = [numpy_helper.from_array(np.zeros((16, 8, 3, 3), np.float32), "w")]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 6, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 6, 6])], inits)
    m = weightless.seed_initializers(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), seed=3)
    pkg, skel = tmp_path / "m.ptpk", tmp_path / "m.skel"
    digest = package.build(m, ["vulkan:nvidia"], pkg)
    assert weightless.strip(pkg, skel, m) == {"stripped": 1, "kept": 0, "kept_bytes": 0}
    assert weightless.restore(skel, tmp_path / "again.ptpk") == digest


def test_weightless_strips_projections_merged_into_one_weight(tmp_path):
    """Two one-row products of the same input run as one over their weights side by side (horizontal fusion): the
    skeleton records the merged weight as its blocks' draws, and the restored package has the same content hash."""
    pytest.importorskip("onnx", reason="the seeded model is an ONNX file")
    from onnx import TensorProto, helper, numpy_helper

    from portable import package
    from portable.bench import weightless
    from portable.package import npy_load

    inits = [numpy_helper.from_array(np.zeros((64, 96), np.float32), n) for n in ("wa", "wb")]
    nodes = [helper.make_node("MatMul", ["x", "wa"], ["a"]), helper.make_node("MatMul", ["x", "wb"], ["b"]),
             helper.make_node("Sigmoid", ["a"], ["sa"]), helper.make_node("Mul", ["sa", "b"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 96])], inits)
    m = weightless.seed_initializers(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), seed=4)
    pkg, skel = tmp_path / "m.ptpk", tmp_path / "m.skel"
    digest = package.build(m, ["vulkan:nvidia"], pkg)
    import zipfile

    with zipfile.ZipFile(pkg) as z:
        assert any(npy_load(z.read(n)).shape[-1] == 192 for n in z.namelist() if n.startswith("weights/"))
    assert weightless.strip(pkg, skel, m) == {"stripped": 1, "kept": 0, "kept_bytes": 0}
    assert weightless.restore(skel, tmp_path / "again.ptpk") == digest


def test_zoo_models_report_geomeans_and_marks_failures():
    """The zoo report: ratios are peer time / portable time, the geomean takes the models that ran, a failed
    cell shows its status instead of a time."""
    from portable.bench.zoo_models import _geomean, markdown

    assert _geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert _geomean([None, 0.0, 4.0]) == pytest.approx(4.0)
    assert _geomean([]) is None
    res = {"date": "2026-12-05", "host": "h", "cpu_count": 2, "command": "portable bench --models --zoo",
           "devices": ["opencl:0"], "models": {
               "a": {"onnxruntime": {"ort_ms": 10.0}, "pytorch": {"torch_ms": 20.0},
                     "ncnn": {"vulkan": {"ms": 15.0}, "cpu": {"ms": 7.0}},
                     "opencl:0": {"status": "pass", "steady_ms": 5.0, "vs_onnxruntime": 2.0, "vs_pytorch": 4.0,
                                  "vs_ncnn_vulkan": 3.0}},
               "b": {"onnxruntime": {"ort_ms": 10.0}, "pytorch": {"error": "x"},
                     "ncnn": {"error": "ncnn takes float inputs; this model has a int64 input"},
                     "opencl:0": {"status": "unsupported"}},
               "c": {"onnxruntime": {"ort_ms": 10.0}, "pytorch": {"torch_ms": 20.0},
                     "ncnn": {"vulkan": {"ms": 15.0, "max_rel": 1.0}, "cpu": {"ms": 7.0, "max_rel": 0.03}},
                     "opencl:0": {"status": "pass", "steady_ms": 5.0, "vs_onnxruntime": 2.0, "vs_pytorch": 4.0}}},
           "geomean": {"opencl:0": {"vs_onnxruntime": 2.0, "vs_pytorch": 4.0, "vs_ncnn_vulkan": 3.0, "models": 1}}}
    text = markdown(res)
    assert "| a | 10.00 | 20.00 | 15.00 | 7.00 | 5.00 | 2.000 | 4.000 | 3.000 |" in text
    assert "| b | 10.00 | - | - | - | unsupported | - | - | - |" in text
    assert "- b: ncnn: ncnn takes float inputs" in text
    # ncnn's answer past NCNN_WRONG is shown as wrong, and its drift noted
    assert "| c | 10.00 | 20.00 | wrong (15.00) | 7.00 | 5.00 | 2.000 | 4.000 | - |" in text
    assert "- c: ncnn's max relative error vs onnxruntime: vulkan 1.0e+00, cpu 3.0e-02 (past 0.5: not compared)" in text
    assert "opencl:0: 2.000x onnxruntime, 4.000x PyTorch, 3.000x ncnn-vulkan (1 models)" in text


def test_ncnn_peer_converts_and_checks_a_zoo_model(tmp_path):
    """The ncnn peer converts a zoo model with pnnx and runs it on ncnn's CPU backend and, where ncnn sees a
    Vulkan device, on Vulkan; each output is checked against the onnxruntime reference (ncnn's defaults store
    fp16, hence the loose bound); a model ncnn cannot take is a record naming why."""
    import importlib.util

    pytest.importorskip("ncnn", reason="ncnn is in the models extra: pip install -e '.[models]'")
    for lib in ("torchvision", "onnxruntime", "pnnx"):  # found, not imported: see builders._torchvision
        if importlib.util.find_spec(lib) is None:
            pytest.skip(f"{lib} is in the models extra, not installed: pip install -e '.[models]'")
    import ncnn

    from portable.bench import ncnn_peer
    from portable.zoo import registry, worker

    entry = registry.get("squeezenet1_1-legacy14-64")
    worker.prepare(entry, tmp_path)
    rec = ncnn_peer.worker(entry.name, tmp_path)
    assert "error" not in rec, rec
    assert rec["cpu"]["ms"] > 0 and rec["cpu"]["max_rel"] < 2e-2, rec
    if ncnn.get_gpu_count():
        assert rec["vulkan"]["ms"] > 0 and rec["vulkan"]["max_rel"] < 2e-2, rec
    bert = registry.get("bert_tiny-legacy14")
    worker.prepare(bert, tmp_path)
    assert "float inputs" in ncnn_peer.worker(bert.name, tmp_path)["error"]
