"""ResNet-50, MobileNetV3-large and BERT-base at batch 1 and 8 on a GPU host without MLIR, against PyTorch eager.

    python benchmarks/h200_models.py export .h200m            # here: ONNX, seeded weights, packages, skeletons
    python benchmarks/h200_models.py run .h200m --out r.json  # GPU host: portable per API vs PyTorch eager

`--seq N` (both sides, same N; default 128) sets BERT-base's sequence length: the ONNX model is exported at that
length, so each length needs its own export folder (e.g. `export .h200m127 --seq 127 --models bert_base`).

The export also writes `<model>-b<batch>.<api>.sources.json` (ONNX nodes and FLOPs per dispatch) for `portable
profile --sources` on the GPU host; benchmarks/h200_run.sh is the GPU host's side of a run.

What travels is limited to 64 MiB, and the three networks' f32 weights are 560 MiB. So every float initializer
of the exported ONNX model is drawn from a recorded seed (portable/bench/weightless.py), the packages are
compiled from that model here, and only their skeletons travel (kernels, plans, the weights the seed cannot
give); the GPU host draws the weights again, and the restored package must pass its own content hash. The ONNX
graph travels without its weights too and is restored there for onnxruntime (CPU), the numeric reference.

PyTorch eager runs the torchvision / transformers module itself (the code users run), on CUDA with TF32 off.
Its weights are its own random ones: the kernels' time does not depend on the values, and correctness is
checked against onnxruntime on the seeded graph instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 0
SEQ = 128
BATCHES = (1, 8)
TARGETS = ("vulkan:nvidia", "opencl:nvidia")
MODELS = {  # name -> (zoo builder, opset)
    "resnet50": ("resnet50", 17),
    "mobilenet_v3_large": ("mobilenet_v3_large", 17),
    "bert_base": ("bert_base", 17),
}


def _entry(name: str, batch: int):
    from portable.zoo.registry import Entry, Input

    builder, opset = MODELS[name]
    if name == "bert_base":
        ins = tuple(Input(n, (batch, SEQ), "int64", k, {0: "batch"})
                    for n, k in (("input_ids", "ids:30522"), ("attention_mask", "ones"), ("token_type_ids", "zeros")))
        return Entry(name, "transformer", "transformers", builder, ins, ("last_hidden_state", "pooler_output"),
                     "legacy", opset)
    return Entry(name, "classification", "torchvision", builder, (Input("input", (batch, 3, 224, 224),
                                                                        dynamic={0: "batch"}),), ("logits",),
                 "legacy", opset)


def _module(name: str):
    from portable.zoo import builders

    if name == "bert_base":
        tf = builders._transformers()
        import torch

        torch.manual_seed(builders.SEED)
        return builders._TextOutputs(tf.BertModel(tf.BertConfig()), ("last_hidden_state", "pooler_output")).eval()
    return builders.build(_entry(name, 1))


def _inputs(name: str, batch: int) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED + batch)
    if name == "bert_base":
        return [rng.integers(0, 30522, (batch, SEQ)).astype(np.int64), np.ones((batch, SEQ), np.int64),
                np.zeros((batch, SEQ), np.int64)]
    return [rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)]


def export(out: Path, only: list[str]) -> None:
    import onnx
    import torch

    from portable import package
    from portable.bench import weightless
    from portable.zoo import builders

    out.mkdir(parents=True, exist_ok=True)
    for name in only:
        entry = _entry(name, 1)
        onnx_path = out / f"{name}.onnx"
        if not onnx_path.exists():
            model = _module(name)
            args = tuple(torch.from_numpy(a) for a in _inputs(name, 1))
            builders.export(entry, model, args, onnx_path)
            m = weightless.seed_initializers(onnx.load(str(onnx_path)), SEED)
            onnx.save(m, str(onnx_path))
            onnx.save(weightless.without_weights(m), str(out / f"{name}.graph.onnx"))
        m = onnx.load(str(onnx_path))
        for batch in BATCHES:
            pkg = out / f"{name}-b{batch}.ptpk"
            shapes = {i.name: (batch, *i.shape[1:]) for i in entry.inputs}
            t = time.perf_counter()
            if not pkg.exists():
                _compile_with_sources(str(onnx_path), shapes, out / f"{name}-b{batch}")
                package.build(str(onnx_path), TARGETS, pkg, input_shapes=shapes)
            stats = weightless.strip(pkg, out / f"{name}-b{batch}.skel", m)
            (out / f"{name}-b{batch}.hash").write_text(package.Package(pkg).content_hash)  # the pin for run
            print(f"{name} b{batch}: compiled in {time.perf_counter() - t:.0f} s; package "
                  f"{pkg.stat().st_size / 2**20:.1f} MiB, skeleton "
                  f"{(out / f'{name}-b{batch}.skel').stat().st_size / 2**20:.2f} MiB {stats}", flush=True)


def _compile_with_sources(onnx_path: str, shapes: dict, stem: Path) -> None:
    """Compile each target once with the profiler's source records (ONNX nodes and FLOPs per dispatch), write them
    as `<stem>.<api>.sources.json` for `portable profile --sources` on the GPU host, and leave the executables in
    the disk cache, where package.build finds them: one compile per target, not two."""
    from portable import cache, package, profiles, profiling
    from portable.api import graph_text
    from portable.compiler.pipeline import compile_module

    text = graph_text(onnx_path, shapes)
    known = profiles.all_profiles()
    for spec in TARGETS:
        api, name = package.parse_target(spec)
        src = Path(f"{stem}.{api}.sources.json")
        if src.exists():
            continue
        opts = profiles.codegen_options(known[name])
        with profiling._recording() as rec:
            exe = compile_module(text, opts, (api,))
        cache.store(cache.key(text, opts, (api,)), exe)
        src.write_text(json.dumps({"api": api, "profile": name,
                                   "kernels": [exe.kernels[d.kernel].name for d in exe.dispatches],
                                   "dispatches": profiling._per_dispatch(rec, exe)}))


# ---- GPU host ---------------------------------------------------------------------------------------------
def _settle(fn, seconds: float = 1.0) -> None:
    """Keep the GPU busy before timing: the H200 runs kernels slower for its first ~0.3 s of load."""
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


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a.astype(np.float64) - b).max() / (np.abs(b).max() + 1e-12))


def run(src: Path, out: Path, iters: int, devices: list[str], only: list[str], keep: bool = False) -> None:
    import onnx
    import onnxruntime as ort

    import portable
    from portable.bench import weightless

    res: dict = {"seed": SEED, "seq": SEQ, "iters": iters, "targets": list(TARGETS), "results": {}}
    try:
        import torch

        res["torch"] = torch.__version__
        res["gpu"] = torch.cuda.get_device_name(0)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    except Exception as e:  # noqa: BLE001 - portable's figures stand without the peer
        torch = None
        res["torch_error"] = f"{type(e).__name__}: {e}"
    for name in only:
        g = weightless.restore_onnx(onnx.load(str(src / f"{name}.graph.onnx")))
        sess = ort.InferenceSession(g.SerializeToString(), providers=["CPUExecutionProvider"])
        module = None
        if torch is not None:
            module = _module(name).cuda()
        for batch in BATCHES:
            key = f"{name}-b{batch}"
            rec: dict = {}
            res["results"][key] = rec
            xs = _inputs(name, batch)
            refs = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
            if module is not None:
                xt = [torch.from_numpy(x).cuda() for x in xs]
                with torch.no_grad():
                    def step(module=module, xt=xt):
                        module(*xt)
                        torch.cuda.synchronize()

                    _settle(step)
                    t = _time(step, iters)
                rec["pytorch-eager"] = {"median_ms": statistics.median(t), "min_ms": min(t)}
                print(f"{key} pytorch eager: {statistics.median(t):.3f} ms", flush=True)
            pkg = src / f"{key}.ptpk"
            try:
                rec["content_hash"] = weightless.restore(src / f"{key}.skel", pkg)
            except Exception as e:  # noqa: BLE001
                rec["restore_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            for dev in devices:
                try:
                    t0 = time.perf_counter()
                    exe = portable.load(pkg, device=dev, expect_hash=(src / f"{key}.hash").read_text().strip())
                    outs = exe(*xs)
                    first = time.perf_counter() - t0
                    err = max(_rel(o, r) for o, r in zip(outs, refs))
                    _settle(lambda exe=exe, xs=xs: exe(*xs))
                    t = _time(lambda exe=exe, xs=xs: exe(*xs), iters)
                    r = {"median_ms": statistics.median(t), "min_ms": min(t), "first_run_s": first,
                         "max_rel_err_vs_onnxruntime": err,
                         "dispatches": len(exe.executable.dispatches) if hasattr(exe, "executable") else None}
                    if "pytorch-eager" in rec:
                        r["vs_pytorch_eager"] = rec["pytorch-eager"]["median_ms"] / r["median_ms"]
                    rec[f"portable-{dev}"] = r
                    print(f"{key} portable {dev}: {r['median_ms']:.3f} ms, err {err:.2e}, "
                          f"x{r.get('vs_pytorch_eager', float('nan')):.2f} of pytorch", flush=True)
                    exe.close()
                except Exception as e:  # noqa: BLE001 - one API failing is reported, the other still runs
                    rec[f"portable-{dev}"] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
                    print(f"{key} portable {dev}: {type(e).__name__}: {e}", flush=True)
            if not keep:
                pkg.unlink()
        out.write_text(json.dumps(res, indent=1))
    out.write_text(json.dumps(res, indent=1))


def main(argv=None) -> int:
    global SEQ
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir", type=Path)
    e.add_argument("--models", default=",".join(MODELS))
    e.add_argument("--seq", type=int, default=SEQ, help="BERT-base's sequence length")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--iters", type=int, default=30)
    r.add_argument("--device", default="vulkan:0,opencl:0")
    r.add_argument("--models", default=",".join(MODELS))
    r.add_argument("--keep", action="store_true", help="keep the restored packages (for portable profile)")
    r.add_argument("--seq", type=int, default=SEQ, help="BERT-base's sequence length, as exported")
    a = ap.parse_args(argv)
    SEQ = a.seq
    only = [m for m in a.models.split(",") if m]
    if a.cmd == "export":
        export(a.dir, only)
    else:
        run(a.dir, a.out, a.iters, a.device.split(","), only, a.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
