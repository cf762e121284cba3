"""Host cost of running a recorded plan (replay) against recording it again on every run (re-record).

    python benchmarks/replay.py [--device vulkan:0 --device opencl:0] [--dispatches 50] [--out replay.json]

The kernel is tiny (one workgroup, c = a + b*k), so the device work is negligible and what is measured is the
host: Python, driver calls, synchronisation. Modes, per device:
  re-record  Backend.execute: descriptor sets / kernel arguments set and commands recorded on every run
  replay     Recording.submit + wait: the command buffer (Vulkan) / command buffer or preset kernels (OpenCL)
  submit     the host time of Recording.submit alone (what the caller's thread pays per run)
  pipelined  runs submitted back to back on two recordings (as `CompiledGraph.submit` does): throughput
Figures are per dispatch (run time / dispatches) and per run. Writes JSON and prints a table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
N, WG = 64, 64


SPIRV: Path | None = None  # --spirv: a prebuilt add_scaled.spv, for hosts without spirv-tools


def kernel():
    from portable.executable import Kernel

    spirv = SPIRV.read_bytes() if SPIRV else None
    spirv_as = shutil.which("spirv-as")
    if spirv is None and spirv_as:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "k.spv"
            subprocess.run([spirv_as, "--target-env", "vulkan1.1", str(ROOT / "tests/data/vk/add_scaled.spvasm"),
                            "-o", str(out)], check=True, capture_output=True)
            spirv = out.read_bytes()
    source = (ROOT / "tests/data/cl/axpy.cl").read_text().replace("axpy", "add_scaled")
    return Kernel(name="add_scaled", workgroup_size=(WG, 1, 1), num_buffers=3, spirv=spirv, opencl=source,
                  push_constants=("n", "k"), access=("r", "r", "w"))


def plan(backend, pool, dispatches: int):
    """A chain where each dispatch reads the previous one's output (a barrier / event edge per dispatch)."""
    from portable.backend import Step

    lk = backend.load_kernel(kernel())
    x, y, p, q = (pool.acquire(4 * N) for _ in range(4))
    steps = []
    for i in range(dispatches):
        src, dst = (x, p) if i == 0 else ((p, q) if i % 2 else (q, p))
        steps.append(Step(lk, (src, y, dst), (1, 1, 1), (N, 1)))
    out = steps[-1].buffers[2]
    return steps, [(x, 4 * N), (y, 4 * N)], [(out, 4 * N)]


def timed(fn, iters: int) -> list[float]:
    fn()  # warm
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def bench(uri: str, b, pool, dispatches: int, iters: int) -> dict:
    steps, uploads, downloads = plan(b, pool, dispatches)
    inputs = [np.ones(N, np.float32), np.ones(N, np.float32)]
    legacy = [(s.kernel, list(s.buffers), s.grid, s.push_constants) for s in steps]

    def rerecord():
        for (buf, _), arr in zip(uploads, inputs):
            b.upload(buf, arr)
        b.execute(legacy)
        b.download(downloads[0][0], downloads[0][1])

    recs = [b.record(steps, uploads, downloads) for _ in range(2)]
    expect = 1 + dispatches  # x + y*1 applied `dispatches` times, starting from x = 1, y = 1
    got = recs[0].submit(inputs).result()[0].view(np.float32)
    assert np.allclose(got, expect), (got[:4], expect)

    def replay():
        recs[0].run(inputs)  # a blocking run, as a caller of the compiled graph makes it

    submit_times = []

    def submit_only():
        t0 = time.perf_counter()
        f = recs[0].submit(inputs)
        submit_times.append(time.perf_counter() - t0)
        f.result()

    def pipelined(runs: int = 20):
        futures = [recs[i % 2].submit(inputs) for i in range(runs)]
        for f in futures:
            f.result()

    r_rec = statistics.median(timed(rerecord, max(iters // 4, 5)))
    r_rep = statistics.median(timed(replay, iters))
    timed(submit_only, iters)
    r_sub = statistics.median(submit_times)
    r_pipe = statistics.median(timed(pipelined, max(iters // 20, 3))) / 20
    for r in recs:
        r.close()
    return {
        "device": uri, "name": b.info.name, "mode": recs[0].mode, "dispatches": dispatches,
        "barriers": recs[0].barriers,
        "rerecord_us_per_run": r_rec * 1e6, "replay_us_per_run": r_rep * 1e6,
        "submit_us_per_run": r_sub * 1e6, "pipelined_us_per_run": r_pipe * 1e6,
        "rerecord_us_per_dispatch": r_rec * 1e6 / dispatches, "replay_us_per_dispatch": r_rep * 1e6 / dispatches,
        "submit_us_per_dispatch": r_sub * 1e6 / dispatches,
        "replay_speedup": r_rec / r_rep,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", action="append", help="device URI (repeatable); default: every device found")
    p.add_argument("--dispatches", type=int, default=50)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--out", default="replay.json")
    p.add_argument("--spirv", type=Path, help="prebuilt SPIR-V of tests/data/vk/add_scaled.spvasm")
    args = p.parse_args(argv)
    global SPIRV
    SPIRV = args.spirv
    from portable.devices import devices, open_device
    from portable.memory import BufferPool

    uris = args.device or [d.uri for d in devices()[0]]
    rows = []
    for uri in uris:
        live = open_device(uri)
        backends = [(live.backend, live.pool)]
        if uri.startswith("opencl") and getattr(live.backend, "command_buffers", False):
            from portable.runtime_cl import OpenCLBackend  # the fallback path: preset kernels, no command buffer

            plain = OpenCLBackend(live.info.index, command_buffer=False)
            backends.append((plain, BufferPool(plain)))
        for b, pool in backends:
            for n in sorted({1, args.dispatches}):
                rows.append(bench(uri, b, pool, n, args.iters))
    Path(args.out).write_text(json.dumps(rows, indent=1))
    head = f"{'device':10s} {'mode':22s} {'disp':>4s} {'re-record':>11s} {'replay':>9s} {'submit':>8s} " \
           f"{'pipelined':>9s} {'submit/disp':>11s} {'speedup':>7s}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['device']:10s} {r['mode']:22s} {r['dispatches']:4d} {r['rerecord_us_per_run']:9.0f}us "
              f"{r['replay_us_per_run']:7.0f}us {r['submit_us_per_run']:6.1f}us {r['pipelined_us_per_run']:7.0f}us "
              f"{r['submit_us_per_dispatch']:9.2f}us {r['replay_speedup']:6.1f}x")
    print(f"(per-run medians; JSON in {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
