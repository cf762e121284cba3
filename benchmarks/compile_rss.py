"""Resident memory of compiling many distinct graphs in one process.

Two phases, in one process, every graph distinct and compiled for real (a fresh temporary disk cache):
1. RSS (/proc/self/status VmRSS) every `--every` graphs over `--graphs` graphs after `--warmup`, without tracemalloc
   (its per-allocation records would be counted as growth); the per-graph figure is the slope over the second half
   (a leak keeps growing there; an allocator's high-water mark does not), and the RSS once glibc's malloc_trim has
   returned freed memory; plus the MLIR contexts still alive (the bindings' own count).
2. The Python heap per graph under tracemalloc over `--traced` more graphs, with the lines that grew most.

    python benchmarks/compile_rss.py --graphs 200 [--device vulkan:0] [--run] [--json out.json]

--run also runs each graph once on the device (kernels loaded: pipelines or programs), then closes it.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import tempfile
import time
import tracemalloc


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def graph(i: int):
    """A small graph distinct per i: a matmul, a bias, an activation and a row sum over shapes that vary with i."""
    import portable

    g = portable.Graph()
    m, k, n = 4 + i % 13, 8 + i // 13, 4 + i % 3
    a, b, bias = g.input((m, k)), g.input((k, n)), g.input((n,))
    y = g.add(g.matmul(a, b), bias)
    y = [g.relu, g.sigmoid, g.tanh][i % 3](y)
    g.output(g.sum(y, axis=-1))
    return g


def _slope(points: list[tuple[int, int]]) -> float:
    """Least-squares KB per graph."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--graphs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--traced", type=int, default=20)
    p.add_argument("--device", default="vulkan:0")
    p.add_argument("--run", action="store_true", help="run each graph once on the device too")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    os.environ["PORTABLE_CACHE_DIR"] = tempfile.mkdtemp(prefix="portable-rss-")
    import portable
    from portable.ir.mlir import ir

    libc = ctypes.CDLL("libc.so.6")

    import numpy as np

    def compile_one(i):
        exe = portable.compile(graph(i), device=args.device)
        if args.run:
            exe(*[np.ones(sig.shape, sig.dtype) for sig in exe.inputs])
        exe.close()

    t0 = time.time()
    for i in range(args.warmup):
        compile_one(args.graphs + i)
    gc.collect()
    series = [(0, rss_kb())]
    for i in range(args.graphs):
        compile_one(i)
        if (i + 1) % args.every == 0:
            gc.collect()
            series.append((i + 1, rss_kb()))
    half = [pt for pt in series if pt[0] >= args.graphs // 2]
    rss_end = series[-1][1]
    libc.malloc_trim(0)
    rss_trimmed = rss_kb()
    contexts = ir.Context._get_live_count()

    gc.collect()
    tracemalloc.start(10)
    snap0 = tracemalloc.take_snapshot()
    for i in range(args.traced):
        compile_one(args.graphs + args.warmup + i)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    heap = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    top = [{"where": str(s.traceback[-1]), "kb": round(s.size_diff / 1024, 1), "count": s.count_diff}
           for s in snap1.compare_to(snap0, "traceback")[:8]]
    out = {"device": args.device, "run": args.run, "graphs": args.graphs, "warmup": args.warmup,
           "rss_kb_series": series, "rss_growth_kb": series[-1][1] - series[0][1],
           "rss_per_graph_kb_whole_run": round((series[-1][1] - series[0][1]) / args.graphs, 1),
           "rss_per_graph_kb_second_half_slope": round(_slope(half), 1),
           "rss_after_malloc_trim_kb": rss_trimmed, "rss_trim_returned_kb": rss_end - rss_trimmed,
           "mlir_contexts_alive": contexts, "traced_graphs": args.traced,
           "python_heap_per_graph_kb": round(heap / 1024 / args.traced, 2), "top_python_growth": top,
           "seconds": round(time.time() - t0, 1), "python": sys.version.split()[0]}
    print(json.dumps(out, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
