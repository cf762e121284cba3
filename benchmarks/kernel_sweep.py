"""Strategy sweep for the GPU host: compile variants here (MLIR), time them there (no MLIR).

    python benchmarks/kernel_sweep.py export .aot            # here: one Executable per (workload, variant)
    python benchmarks/kernel_sweep.py run .aot --device vulkan:0 --out results.json   # GPU host

Timing is device-side: the plan's dispatches only (one submit + wait per iteration), no transfers; inputs are
checked against torch (GPU) or numpy before timing. PyTorch runs the same workload as the ceiling.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

WORKLOADS = {
    # name: (graph builder, flops or bytes, kind)
    "matmul4096": ("matmul", (4096, 4096, 4096)),
    "matmul1024": ("matmul", (1024, 1024, 1024)),
    "add64Mi": ("add", (64 << 20,)),
    "softmax4096": ("softmax", (4096, 4096)),
    "mlp_softmax": ("mlp_softmax", (256, 512, 256)),  # the demo graph: matmul + bias + relu, then softmax
    "matmul4096f16": ("matmul_f16", (4096, 4096, 4096)),  # f16 in, f32 accumulate and out: cooperative matrices
    # A residual input of the output's shape: the NVIDIA NonWritable quirk (device_profiles/nvidia.toml) checked on the
    # GPU.
    "gemv_residual": ("gemv_residual", (1, 4096, 4096)),
}
# Kinds whose strategy exists on one API only: compiled for that API alone.
ONLY_API = {"matmul_f16": "vulkan"}
VARIANTS = {
    # Register tiles x workgroup sizes were swept before (benchmarks/results/h200/sweep_matmul_*.json: 8x4 per
    # thread, 64 threads, best at 5.9 ms); now operand tiles staged in workgroup memory
    # (compiler/schedule/promotion.py).
    "matmul": [{"thread_tile": [8, 4], "matmul_workgroup_invocations": 64, "matmul_promote_tiles": []}]
              + [{"matmul_promote_tiles": [tile], "matmul_promote_k": kt}
                 for tile, kt in (([64, 64, 8, 4], 32), ([128, 64, 8, 4], 32), ([64, 128, 8, 4], 32),
                                  ([128, 128, 8, 4], 32), ([128, 128, 8, 4], 16), ([128, 64, 16, 4], 32),
                                  ([128, 128, 16, 4], 32), ([64, 64, 8, 4], 64), ([64, 64, 4, 4], 32))],
    "add": [{"elementwise_per_thread": p, "workgroup_invocations": wg} for p in (1, 4) for wg in (128, 256)],
    "softmax": [{"reduction_threads": t, "workgroup_invocations": 256} for t in (0, 128, 256)],
    "mlp_softmax": [{}],
    "gemv_residual": [{}],
    "matmul_f16": [{"coop_workgroup_tile": wg, "coop_subgroup_tile": sg}
                   for wg, sg in (((64, 64), (16, 16)), ((64, 64), (32, 32)), ((128, 128), (64, 32)),
                                  ((128, 128), (32, 64)), ((128, 64), (32, 32)), ((128, 128), (64, 64)))],
}


def build(kind: str, shape):
    import portable

    g = portable.Graph(kind)
    if kind == "matmul":
        m, k, n = shape
        g.output(g.matmul(g.input((m, k)), g.input((k, n))))
    elif kind == "matmul_f16":
        m, k, n = shape
        g.output(g.matmul(g.input((m, k), "float16"), g.input((k, n), "float16"), out_dtype="float32"))
    elif kind == "add":
        g.output(g.add(g.input(shape), g.input(shape)))
    elif kind == "gemv_residual":
        m, k, n = shape
        g.output(g.add(g.matmul(g.input((m, k)), g.input((k, n))), g.input((m, n))))
    elif kind == "softmax":
        g.output(g.softmax(g.input(shape), axis=-1))
    elif kind == "mlp_softmax":
        m, k, n = shape
        h = g.relu(g.add(g.matmul(g.input((m, k)), g.input((k, n))), g.input((n,))))
        g.output(g.softmax(h, axis=-1))
    return g


def export(out: Path, profile_name: str, only: str | None = None) -> None:
    from portable import profiles
    from portable.compiler.pipeline import compile_module

    out.mkdir(parents=True, exist_ok=True)
    base = profiles.codegen_options(profiles.all_profiles()[profile_name])
    index = []
    for name, (kind, shape) in WORKLOADS.items():
        if only and only not in name:
            continue
        g = build(kind, shape)
        text = g.to_mlir()
        for i, var in enumerate(VARIANTS[kind]):
            opts = dict(base, **var)
            for api in [ONLY_API[kind]] if kind in ONLY_API else ("vulkan", "opencl"):
                fname = f"{name}-{i}-{api}.ptx"
                try:
                    exe = compile_module(text, opts, (api,))
                    exe.save(out / fname)
                    index.append({"workload": name, "kind": kind, "shape": shape, "variant": var, "api": api,
                                  "file": fname})
                except Exception as e:  # a variant the compiler rejects is reported, not fatal
                    print(f"{fname}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
    (out / "index.json").write_text(json.dumps(index, indent=1))
    print(f"exported {len(index)} executables to {out}")


def _inputs(kind, shape, rng):
    if kind == "matmul_f16":
        m, k, n = shape
        return [rng.standard_normal((m, k), dtype=np.float32).astype(np.float16),
                rng.standard_normal((k, n), dtype=np.float32).astype(np.float16)]
    if kind == "matmul":
        m, k, n = shape
        return [rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)]
    if kind == "mlp_softmax":
        m, k, n = shape
        return [rng.standard_normal((m, k), dtype=np.float32) * 0.1,
                rng.standard_normal((k, n), dtype=np.float32) * 0.1,
                rng.standard_normal((n,), dtype=np.float32) * 0.1]
    if kind == "add":
        return [rng.standard_normal(shape, dtype=np.float32), rng.standard_normal(shape, dtype=np.float32)]
    if kind == "gemv_residual":
        m, k, n = shape
        return [rng.standard_normal(s, dtype=np.float32) for s in ((m, k), (k, n), (m, n))]
    return [rng.standard_normal(shape, dtype=np.float32)]


def _torch_ref(kind, xs, iters):
    try:
        import torch
    except ImportError:
        return None, None
    if not torch.cuda.is_available():
        return None, None
    torch.backends.cuda.matmul.allow_tf32 = False
    t = [torch.from_numpy(x).cuda() for x in xs]
    fn = {"matmul": lambda: t[0] @ t[1], "matmul_f16": lambda: (t[0] @ t[1]).float(), "add": lambda: t[0] + t[1],
          "softmax": lambda: torch.softmax(t[0], dim=-1),
          "mlp_softmax": lambda: torch.softmax(torch.relu(t[0] @ t[1] + t[2]), dim=-1),
          "gemv_residual": lambda: t[0] @ t[1] + t[2]}[kind]
    out = fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:  # the same warm-up as portable's variants
        fn()
        torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return out.cpu().numpy(), statistics.median(times)


def run(src: Path, device: str, out: Path, iters: int, only: str | None) -> None:
    from portable.devices import open_device
    from portable.executable import Executable

    index = json.loads((src / "index.json").read_text())
    live = open_device(device)
    backend = live.backend
    api = live.info.api
    rng = np.random.default_rng(0)
    results = []
    refs: dict[str, tuple] = {}
    for entry in index:
        if entry["api"] != api or (only and only not in entry["workload"]):
            continue
        kind, shape = entry["kind"], tuple(entry["shape"])
        if entry["workload"] not in refs:
            xs = _inputs(kind, shape, rng)
            ref, torch_ms = _torch_ref(kind, xs, iters)
            if ref is None and kind == "mlp_softmax":
                h = np.maximum(xs[0] @ xs[1] + xs[2], 0)
                e = np.exp(h - h.max(-1, keepdims=True))
                ref = e / e.sum(-1, keepdims=True)
            if ref is None:
                ref = {"matmul": lambda xs=xs: xs[0] @ xs[1],
                       "matmul_f16": lambda xs=xs: xs[0].astype(np.float32) @ xs[1].astype(np.float32),
                       "add": lambda xs=xs: xs[0] + xs[1],
                       "gemv_residual": lambda xs=xs: xs[0] @ xs[1] + xs[2],
                       "softmax": lambda xs=xs: np.exp(xs[0] - xs[0].max(-1, keepdims=True)) /
                       np.exp(xs[0] - xs[0].max(-1, keepdims=True)).sum(-1, keepdims=True)}[kind]()
            refs[entry["workload"]] = (xs, ref, torch_ms)
        xs, ref, torch_ms = refs[entry["workload"]]
        exe = Executable.load(src / entry["file"])
        rec = dict(entry, device=live.info.name, driver=live.info.driver_version, torch_ms=torch_ms)
        bufs = {}
        try:
            kernels = [backend.load_kernel(k) for k in exe.kernels]
            for s in exe.slots:
                bufs[s.id] = backend.allocate(s.nbytes)
            for sid, x in zip(exe.input_slots, xs):
                backend.upload(bufs[sid], x)
            plan = [(kernels[d.kernel], [bufs[s] for s in d.slots], d.grid, d.push_constants)
                    for d in exe.dispatches]
            backend.execute(plan)
            sid, sig = exe.outputs[0]
            got = np.frombuffer(backend.download(bufs[sid], sig.nbytes).tobytes(), np.float32).reshape(sig.shape)
            err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-30))
            rec["rel_err"] = err
            rec["correct"] = err < 1e-3
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < 1.0:  # the GPU runs slower for its first ~0.3 s of load
                backend.execute(plan)
            times = []
            for _ in range(iters):
                t0 = time.perf_counter()
                backend.execute(plan)
                times.append((time.perf_counter() - t0) * 1e3)
            rec.update(median_ms=statistics.median(times), min_ms=min(times), max_ms=max(times))
            if kind in ("matmul", "matmul_f16", "gemv_residual"):
                m, k, n = shape
                rec["tflops"] = 2 * m * n * k / (rec["min_ms"] * 1e-3) / 1e12
            else:
                nbytes = sum(x.nbytes for x in xs) + ref.nbytes
                rec["gbps"] = nbytes / (rec["min_ms"] * 1e-3) / 1e9
            if torch_ms:
                rec["vs_torch"] = torch_ms / rec["min_ms"]
        except Exception as e:
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        finally:
            for b in bufs.values():
                backend.free(b)
        results.append(rec)
        print(json.dumps({k: rec.get(k) for k in ("workload", "api", "variant", "min_ms", "tflops", "gbps",
                                                  "torch_ms", "vs_torch", "correct", "error")}), flush=True)
    out.write_text(json.dumps(results, indent=1))


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir", type=Path)
    e.add_argument("--profile", default="nvidia")
    e.add_argument("--only", help="workloads whose name contains this")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--device", default="vulkan:0")
    r.add_argument("--out", type=Path, default=Path("sweep.json"))
    r.add_argument("--iters", type=int, default=10)
    r.add_argument("--only")
    a = p.parse_args()
    if a.cmd == "export":
        export(a.dir, a.profile, a.only)
    else:
        run(a.dir, a.device, a.out, a.iters, a.only)


if __name__ == "__main__":
    main()
