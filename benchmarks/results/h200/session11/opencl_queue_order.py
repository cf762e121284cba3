"""Does a plan of many small kernels run faster on NVIDIA's OpenCL from an in-order queue than from the
out-of-order one portable uses where the device offers it (each kernel then carries its dependencies as event
waits)? Session 11, H200. Each (package, mode) runs in a fresh process, modes alternating, 3 rounds: blocking
calls exe(*inputs) with random floats and zero integers, after a second of warm-up; median of 300 calls; or, with
--decode, tokens/s of models.generate's greedy loop (cache on the device, 64 new tokens).

    python opencl_queue_order.py --out F.json [--decode] PACKAGE...
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np


def one(package: str, mode: str, decode: bool = False) -> dict:
    import portable
    import portable.runtime_cl.backend as B

    if mode == "in-order":
        orig = B.OpenCLBackend.__init__

        def init(self, index, *, out_of_order=True, command_buffer=True):
            orig(self, index, out_of_order=False, command_buffer=command_buffer)

        B.OpenCLBackend.__init__ = init
    exe = portable.load(package, device="opencl:0")
    if decode:  # greedy decoding with the cache on the device (models/generate.py), 64 new tokens
        from models.generate import generate_portable

        generate_portable(exe, [1, 2, 3], 8)
        g = generate_portable(exe, list(range(1, 34)), min(64, exe.inputs[2].shape[1] - 33))
        return {"tokens_per_s": g.tokens_per_s, "dispatches": len(exe.executable.dispatches)}
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s.shape).astype(s.dtype) if np.dtype(s.dtype).kind == "f" else np.zeros(s.shape, s.dtype)
          for s in exe.inputs]
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        exe(*xs)
    times = []
    for _ in range(300):
        t = time.perf_counter()
        exe(*xs)
        times.append((time.perf_counter() - t) * 1e3)
    backend = exe.device.backend if hasattr(exe, "device") else None
    return {"median_ms": statistics.median(times), "min_ms": min(times),
            "out_of_order": getattr(backend, "out_of_order", None), "dispatches": len(exe.executable.dispatches)}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2], sys.argv[3], len(sys.argv) > 4)))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--decode", action="store_true", help="packages are decoder steps: time models.generate's loop")
    ap.add_argument("packages", nargs="+")
    a = ap.parse_args()
    res = {}
    for pkg in a.packages:
        res[pkg] = {"out-of-order": [], "in-order": []}
        for _ in range(3):
            for mode in ("out-of-order", "in-order"):
                cmd = [sys.executable, __file__, "--one", pkg, mode] + (["decode"] if a.decode else [])
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    res[pkg][mode].append({"error": r.stderr[-2000:]})
                    continue
                res[pkg][mode].append(json.loads(r.stdout.strip().splitlines()[-1]))
                print(pkg, mode, res[pkg][mode][-1], flush=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
