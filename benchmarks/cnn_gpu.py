"""A CNN (ResNet-50 or MobileNetV2) on a GPU host that has no MLIR, against PyTorch there on the same weights.

    python benchmarks/cnn_gpu.py export .r50 [--model resnet50|mobilenetv2] [--hw 224]  # here: ONNX -> package
    python benchmarks/cnn_gpu.py run .r50 --out r50.json     # GPU host: portable per API vs PyTorch eager

The package holds kernels for vulkan:nvidia and opencl:nvidia. What travels to the GPU host is limited (64 MiB),
and ResNet-50's f32 weights are 98 MiB of incompressible noise. So the exported network's weights are put on a
per-tensor grid of 15 levels (w = k * scale, k in -7..7) after BatchNorm folding: still f32 tensors and the same
kernels and memory traffic, but the package compresses to a fraction. The codes travel as int8 with one f32 scale
per tensor; the GPU host rebuilds the exact f32 weights (k * scale is exact in f32) for PyTorch, which runs the
ONNX graph eagerly op by op (F.conv2d with cuDNN, TF32 off). Outputs are compared between portable and PyTorch
before timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

LEVELS = 7  # codes -7..7


def quantize_initializers(m) -> dict[str, tuple[np.ndarray, np.float32]]:
    """Put every float initializer of the ONNX model on its grid in place; returns {name: (codes, scale)}."""
    from onnx import numpy_helper

    codes = {}
    for i, init in enumerate(m.graph.initializer):
        w = numpy_helper.to_array(init)
        if w.dtype != np.float32:
            continue
        scale = np.float32(np.abs(w).max() / LEVELS) if w.size and np.abs(w).max() > 0 else np.float32(1)
        k = np.clip(np.rint(w / scale), -LEVELS, LEVELS).astype(np.int8)
        m.graph.initializer[i].CopyFrom(numpy_helper.from_array(k.astype(np.float32) * scale, init.name))
        codes[init.name] = (k, scale)
    return codes


MODELS = {"resnet50": "ResNet-50", "mobilenetv2": "MobileNetV2 1.0"}


def export(out: Path, hw: int, model_name: str = "resnet50") -> None:
    import onnx
    import torch  # noqa: F401 - the model is built and exported with PyTorch

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    import portable
    from models import cv
    from portable import package

    out.mkdir(parents=True, exist_ok=True)
    shape = (1, 3, hw, hw)
    net = cv.resnet50() if model_name == "resnet50" else cv.MobileNetV2()
    model = cv.calibrate_batchnorm(cv.init_weights(net), shape, seed=1, batches=2, batch=4)
    path = cv.export_onnx(model, shape, out / "full.onnx")
    m = onnx.load(str(path))
    codes = quantize_initializers(m)
    onnx.save(m, str(out / "full.onnx"))
    np.savez_compressed(out / "weights.npz", **{f"{n}.codes": k for n, (k, _) in codes.items()},
                        **{f"{n}.scale": s for n, (_, s) in codes.items()})
    graph = onnx.load(str(out / "full.onnx"))
    del graph.graph.initializer[:]  # the structure only: the host rebuilds the weights from weights.npz
    onnx.save(graph, str(out / "graph.onnx"))
    t = time.perf_counter()
    digest = package.build(str(out / "full.onnx"), ["vulkan:nvidia", "opencl:nvidia"], out / f"{model_name}.ptpk")
    (out / f"{model_name}.hash").write_text(digest + "\n")  # the GPU host pins the package by it
    print(f"compiled in {time.perf_counter() - t:.0f} s")
    (out / "full.onnx").unlink()
    (out / "meta.json").write_text(json.dumps({"model": model_name, "input_shape": shape, "levels": LEVELS,
                                                "portable": portable.__version__}))
    for f in sorted(out.iterdir()):
        print(f"{f.name}: {f.stat().st_size / 2**20:.1f} MiB")


# ---- GPU host ---------------------------------------------------------------------------------------------
def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def torch_runner(graph_path: Path, weights_path: Path, device: str):
    """A function running the ONNX graph eagerly with torch ops on `device` (the ops ResNet-50 and MobileNetV2
    export to)."""
    import onnx
    import torch
    import torch.nn.functional as F
    from onnx import numpy_helper

    g = onnx.load(str(graph_path)).graph
    z = np.load(weights_path)
    names = {k.rsplit(".", 1)[0] for k in z.files}
    weights = {n: torch.from_numpy(z[f"{n}.codes"].astype(np.float32) * z[f"{n}.scale"]).to(device) for n in names}
    nodes = [(n.op_type, list(n.input), list(n.output), _attrs(n)) for n in g.node if n.op_type != "Constant"]
    # Constants up front, on the device: nothing is copied from the host while a CUDA graph is captured.
    consts = {n.output[0]: numpy_helper.to_array(_attrs(n)["value"]).copy() for n in g.node if n.op_type == "Constant"}
    weights.update({k: torch.from_numpy(v).to(device) for k, v in consts.items()})
    inp, outp = g.input[0].name, g.output[0].name

    def conv(x, w, b, a):
        pads = a.get("pads", [0, 0, 0, 0])
        if pads[:2] != pads[2:]:
            x, pads = F.pad(x, (pads[1], pads[3], pads[0], pads[2])), [0, 0, 0, 0]
        return F.conv2d(x, w, b, tuple(a.get("strides", [1, 1])), tuple(pads[:2]), tuple(a.get("dilations", [1, 1])),
                        a.get("group", 1))

    def run(x):
        env = dict(weights)
        env[inp] = x
        for op, ins, outs, a in nodes:
            v = [env[i] if i else None for i in ins]
            if op == "Conv":
                r = conv(v[0], v[1], v[2] if len(v) > 2 else None, a)
            elif op == "Relu":
                r = torch.relu(v[0])
            elif op == "Add":
                r = v[0] + v[1]
            elif op == "MaxPool":
                p = a.get("pads", [0, 0, 0, 0])
                r = F.max_pool2d(v[0], tuple(a["kernel_shape"]), tuple(a.get("strides", [1, 1])), tuple(p[:2]))
            elif op == "GlobalAveragePool":
                r = v[0].mean(dim=(2, 3), keepdim=True)
            elif op == "ReduceMean":
                axes = a.get("axes") or [int(i) for i in consts[ins[1]]]
                r = v[0].mean(dim=tuple(axes), keepdim=bool(a.get("keepdims", 1)))
            elif op == "Clip":
                r = torch.clamp(v[0], v[1] if len(v) > 1 else None, v[2] if len(v) > 2 else None)
            elif op == "Flatten":
                r = torch.flatten(v[0], a.get("axis", 1))
            elif op == "Gemm":
                b = v[1].t() if a.get("transB", 0) else v[1]
                r = v[0] @ b + (v[2] if len(v) > 2 else 0)
            else:
                raise NotImplementedError(f"op {op} in the exported graph")
            env[outs[0]] = r
        return env[outp]

    return run


def _settle(fn, seconds: float = 1.0) -> None:
    """Keep the GPU busy before timing: the H200 ran kernels slower for its first ~0.3 s of load
    (benchmarks/results/h200/README.md, session 4)."""
    t = time.perf_counter()
    while time.perf_counter() - t < seconds:
        fn()


def _time(fn, iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def run(src: Path, out: Path, iters: int, devices: list[str]) -> None:
    import portable

    meta = json.loads((src / "meta.json").read_text())
    x = np.random.default_rng(0).standard_normal(meta["input_shape"], dtype=np.float32)
    name = meta.get("model", "resnet50")
    res: dict = {"model": f"{MODELS[name]} (models/cv.py, BatchNorm folded, weights on a 15-level grid)",
                 "input_shape": meta["input_shape"], "iters": iters, "results": {}}
    ref = None
    try:
        import torch

        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            fn = torch_runner(src / "graph.onnx", src / "weights.npz", "cuda")
            xt = torch.from_numpy(x).cuda()
            with torch.no_grad():
                ref = fn(xt).cpu().numpy()

                def step():
                    fn(xt)
                    torch.cuda.synchronize()

                _settle(step)
                t = _time(step, iters)
                # Device time of one forward pass, CUDA events around it (no host sync per op).
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                dev = []
                for _ in range(iters):
                    s.record()
                    fn(xt)
                    e.record()
                    torch.cuda.synchronize()
                    dev.append(s.elapsed_time(e))
            res["results"]["pytorch-cuda-eager"] = {"median_ms": statistics.median(t), "min_ms": min(t),
                                                    "device_median_ms": statistics.median(dev),
                                                    "torch": torch.__version__}
            print(f"pytorch eager: {statistics.median(t):.2f} ms (device {statistics.median(dev):.2f} ms)")
            # At batch 1 eager PyTorch is bound by launching its ops one by one from Python; a CUDA graph of the
            # same ops replays cuDNN's kernels without that: the peer's kernels alone.
            try:
                with torch.no_grad():
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        for _ in range(3):
                            fn(xt)
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        yg = fn(xt)
                    graph.replay()
                    torch.cuda.synchronize()
                    gerr = float(np.abs(yg.cpu().numpy() - ref).max() / (np.abs(ref).max() + 1e-12))

                    def replay():
                        graph.replay()
                        torch.cuda.synchronize()

                    _settle(replay)
                    tg = _time(replay, iters)
                res["results"]["pytorch-cuda-graph"] = {"median_ms": statistics.median(tg), "min_ms": min(tg),
                                                        "max_rel_err_vs_eager": gerr, "torch": torch.__version__}
                print(f"pytorch CUDA graph: {statistics.median(tg):.2f} ms")
            except Exception as e:  # noqa: BLE001 - the eager figure stands without it
                res["results"]["pytorch-cuda-graph"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                print(f"pytorch CUDA graph: {type(e).__name__}: {e}")
    except ImportError:
        res["results"]["pytorch-cuda-eager"] = {"skipped": "torch not installed"}
    for dev in devices:
        try:
            t0 = time.perf_counter()
            pin = (src / f"{name}.hash").read_text().strip()
            exe = portable.load(src / f"{name}.ptpk", device=dev, expect_hash=pin)
            y, = exe(x)
            load_s = time.perf_counter() - t0
            err = None if ref is None else float(np.abs(y - ref).max() / (np.abs(ref).max() + 1e-12))
            _settle(lambda exe=exe: exe(x))
            t = _time(lambda exe=exe: exe(x), iters)
            res["results"][f"portable-{dev}"] = {"median_ms": statistics.median(t), "min_ms": min(t),
                                                 "first_run_s": load_s, "max_rel_err_vs_torch": err,
                                                 "kernels": len(exe.executable.kernels)
                                                 if hasattr(exe, "executable") else None}
            print(f"portable {dev}: {statistics.median(t):.2f} ms, rel err vs torch {err}")
        except Exception as e:  # noqa: BLE001 - one API failing is reported, the other still runs
            res["results"][f"portable-{dev}"] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
            print(f"portable {dev}: {type(e).__name__}: {e}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir", type=Path)
    e.add_argument("--hw", type=int, default=224)
    e.add_argument("--model", choices=sorted(MODELS), default="resnet50")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--iters", type=int, default=30)
    r.add_argument("--device", default="vulkan:0,opencl:0")
    a = ap.parse_args(argv)
    if a.cmd == "export":
        export(a.dir, a.hw, a.model)
    else:
        run(a.dir, a.out, a.iters, a.device.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
