"""How long one blocking run takes with the dedicated transfer queue ("auto": upload, compute and download as
three command buffers on two queues, chained by timeline semaphores) and without it ("off": one command buffer
on the compute queue), for y = relu(x) from 4 KiB to 16 MiB each way.

    python benchmarks/results/h200/session15/transfer_lanes.py export build/lanes   # here (MLIR)
    python benchmarks/results/h200/session15/transfer_lanes.py run build/lanes --out lanes.json   # GPU host
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from transfer_overlap import _open, graph  # noqa: E402

SIZES = [1024, 16384, 65536, 262144, 1048576, 4194304]  # floats each way
RUNS = 300


def export(out: Path) -> None:
    from portable.api import graph_text
    from portable.compiler.pipeline import compile_module
    from portable.profiles import all_profiles, codegen_options

    out.mkdir(parents=True, exist_ok=True)
    for n in SIZES:
        exe = compile_module(graph_text(graph((n // 1024, 1024))), codegen_options(all_profiles()["nvidia"]),
                             ("vulkan",))
        exe.save(out / f"relu_{n}.ptx")


def run(folder: Path, out: Path, rounds: int) -> None:
    from portable.api import CompiledGraph
    from portable.executable import Executable

    rows = []
    for n in SIZES:
        exe = Executable.load(folder / f"relu_{n}.ptx")
        x = np.random.default_rng(0).standard_normal((n // 1024, 1024)).astype(np.float32)
        for r in range(rounds):
            for mode in ("auto", "off"):
                live = _open(0, mode, False)
                try:
                    cg = CompiledGraph(exe, live)
                    for _ in range(20):
                        y = cg(x)
                    np.testing.assert_array_equal(y[0], np.maximum(x, 0))
                    ts = []
                    for _ in range(RUNS):
                        t0 = time.perf_counter()
                        cg(x)
                        ts.append(time.perf_counter() - t0)
                    lanes = cg._cell[0].recordings[0].lanes
                    cg.close()
                finally:
                    live.backend.close()
                row = {"floats": n, "bytes_each_way": 4 * n, "mode": mode, "round": r, "lanes": lanes,
                       "median_us": 1e6 * statistics.median(ts), "min_us": 1e6 * min(ts)}
                print(json.dumps(row), flush=True)
                rows.append(row)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("export").add_argument("folder", type=Path)
    r = sub.add_parser("run")
    r.add_argument("folder", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    export(a.folder) if a.cmd == "export" else run(a.folder, a.out, a.rounds)
