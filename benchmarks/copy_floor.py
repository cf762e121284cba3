"""PyTorch's own scaled copy (y = 2x on CUDA) at several sizes: the streaming floor of the GPU, without portable.

    python benchmarks/copy_floor.py --out copy_floor.json     # GPU host with PyTorch (CUDA)

Each size runs 20 copies back to back between two CUDA events (the stream orders them, as the bench's barriers
order portable's repeats), after a second of warm-up; the median of 7 such blocks is kept. The least-squares line
t = fixed + bytes / rate through all sizes is the floor `portable bench` states beside a missed bandwidth target
(portable/bench/targets.py fits it to portable's own copies in the same run); this fits it to PyTorch's. Run from
the repository root (or with it on PYTHONPATH): the fit is targets.line_fit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

PEAK = 4.8e12  # H200 HBM3e, bytes/s (portable/bench/peaks.py)
MIB = 1 << 20


def main() -> None:
    import torch

    from portable.bench.targets import line_fit  # the report's own fit (no MLIR needed)

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--mib", default="16,32,64,128,256,512,1024", help="sizes of x in MiB (y is as large)")
    a = ap.parse_args()
    rows = []
    for mib in (int(v) for v in a.mib.split(",")):
        x = torch.randn(mib * MIB // 4, device="cuda")
        y = torch.empty_like(x)
        t_end = time.perf_counter() + 1.0
        while time.perf_counter() < t_end:
            torch.mul(x, 2.0, out=y)
        torch.cuda.synchronize()
        blocks = []
        for _ in range(7):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(20):
                torch.mul(x, 2.0, out=y)
            end.record()
            end.synchronize()
            blocks.append(start.elapsed_time(end) / 20)
        ms = statistics.median(blocks)
        moved = 2 * mib * MIB
        rows.append({"mib_each_way": mib, "bytes": moved, "ms": ms, "fraction_of_peak": moved / (ms / 1e3) / PEAK})
        print(f"{mib:5d} MiB each way: {1e3 * ms:9.1f} us  {100 * rows[-1]['fraction_of_peak']:5.1f}% of 4.8 TB/s")
        del x, y
    fixed, slope = line_fit([r["bytes"] for r in rows], [r["ms"] for r in rows])
    fit = {"fixed_us": 1e3 * fixed, "rate_tb_s": 1 / slope / 1e9,
           "worst_residual_us": max(abs(r["ms"] - fixed - slope * r["bytes"]) for r in rows) * 1e3}
    print(f"fit: t = {fit['fixed_us']:.1f} us + bytes / {fit['rate_tb_s']:.2f} TB/s "
          f"(worst residual {fit['worst_residual_us']:.1f} us)")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows, "fit": fit},
                      f, indent=1)


if __name__ == "__main__":
    main()
