"""A/B of codegen options on a GPU host, ahead of time: compile bench workloads for a profile with option variants
here (MLIR), then check and time them there (no MLIR).

    python benchmarks/variants_gpu.py make DIR PROFILE WIDS 'VARIANTS'   # here: WIDS comma-separated bench ids,
                                                                       # VARIANTS a JSON list of option overrides
                                                                       # (a "targets" list: fewer APIs)
    python benchmarks/variants_gpu.py run DIR OUT.json [DEVICES]         # GPU host: default vulkan:0,opencl:0

Each executable (compiled for both APIs at the bench's GPU sizes) is checked against numpy, then timed device-only
(the plan recorded as a batch; median per batch over 1 s), the variants of a workload interleaved, two rounds; each
row records the kernels' count. Used for: texel reads on the H200 (session 19, variants [{"texel_reads": false},
{"texel_reads": true}]), the 1x1 convolution view and the row-chain forms (session 20).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import portable
from portable.bench import workloads as W


def make(d: Path, profile: str, wids: list[str], variants: list[dict]) -> None:
    from portable import profiles
    from portable.compiler.pipeline import compile_module

    opts = profiles.codegen_options(profiles.all_profiles()[profile], None)
    from portable.trust import file_digest

    sha256 = {}
    for wid in wids:
        w = W.build(wid, "gpu")
        for i, v in enumerate(variants):
            # A variant's "targets" (default both APIs) compiles it for fewer: one strategy serves every target
            # of an executable, so an OpenCL target can turn off what only Vulkan carries out.
            v = dict(v)
            targets = tuple(v.pop("targets", ("vulkan", "opencl")))
            exe = compile_module(w.mlir, dict(opts, **v), targets)
            exe.save(d / f"{wid}-{i}.ptx")
            sha256[f"{wid}-{i}.ptx"] = file_digest(d / f"{wid}-{i}.ptx")  # run() pins each file by it
            print(wid, json.dumps(v), len(exe.kernels), "kernels", flush=True)
    (d / "manifest.json").write_text(json.dumps({"profile": profile, "workloads": wids, "variants": variants,
                                                 "sha256": sha256}))


def batch_times(executable, backend, xs: list, warmup: int) -> list[float]:
    """Milliseconds per plan run, over 1 s of batches (the plan recorded as a batch, inputs resident), after
    `warmup` batches."""
    from portable.bench.peers.portable_peer import DeviceOnly

    dev = DeviceOnly(executable, backend, xs)
    for _ in range(warmup):
        dev.run_batch()
    t0, ts = time.perf_counter(), []
    while time.perf_counter() - t0 < 1.0:
        t = time.perf_counter()
        n = dev.run_batch()
        ts.append((time.perf_counter() - t) * 1e3 / n)
    dev.close()
    return ts


def run(d: Path, devices: list[str]) -> list[dict]:
    from portable.bench.peers.numpy_peer import reference
    from portable.devices import open_device

    m = json.loads((d / "manifest.json").read_text())
    rows = []
    for device in devices:
        live = open_device(device)
        for wid in m["workloads"]:
            w = W.build(wid, "gpu")
            xs = w.make_inputs()
            ref = reference(w, xs)
            for rnd in range(2):
                for i, v in enumerate(m["variants"]):
                    g = portable.load(d / f"{wid}-{i}.ptx", device=device, expect_hash=m["sha256"][f"{wid}-{i}.ptx"])
                    out = g(*xs)
                    out = out[0] if isinstance(out, tuple) else out
                    err = float(np.max(np.abs(out.astype(np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
                    ts = batch_times(g.executable, live.backend, xs, warmup=3)
                    r = dict(device=device, workload=wid, variant=v, round=rnd, err=err, ok=err <= w.tolerance(),
                             ms=statistics.median(ts), min_ms=min(ts), kernels=len(g.executable.kernels))
                    rows.append(r)
                    print(json.dumps(r), flush=True)
    return rows


if __name__ == "__main__":
    if sys.argv[1] == "make":
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        make(out, sys.argv[3], sys.argv[4].split(","), json.loads(sys.argv[5]))
    else:
        rows = run(Path(sys.argv[2]), (sys.argv[4] if len(sys.argv) > 4 else "vulkan:0,opencl:0").split(","))
        Path(sys.argv[3]).write_text(json.dumps(rows, indent=1))
