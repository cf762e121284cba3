"""Cold vs warm start: a fresh process runs its first inference, twice, sharing one cache directory.

    python benchmarks/startup.py [--device vulkan:0 --device opencl:0] [--out startup.json]

Cold: empty PORTABLE_CACHE_DIR, so the graph is compiled (MLIR), pipelines / programs are built by the driver.
Warm: a second process with the caches the first one left: the executable cache (no MLIR, not even imported),
the Vulkan pipeline cache and the OpenCL program-binary cache (no driver compile). Both the `compile` path
(graph in, cache lookup) and the package path (`portable.load(x.ptpk)`, runtime only) are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

GRAPH = textwrap.dedent("""
    def demo_graph():
        import portable  # the `portable demo` graph: matmul + bias + relu, then a row softmax
        g = portable.Graph("demo")
        a, b, bias = g.input((256, 512)), g.input((512, 256)), g.input((256,))
        g.output(g.softmax(g.relu(g.add(g.matmul(a, b), bias)), axis=-1))
        return g
""")
CHILD = GRAPH + textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import numpy as np, portable
    t_import = time.perf_counter()
    mode, device, source, pinned = sys.argv[1:5]
    if mode == "compile":
        g = demo_graph()
        exe = portable.compile(g, device=device)
    else:
        exe = portable.load(source, device=device, expect_hash=pinned)
    t_ready = time.perf_counter()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s.shape).astype(s.dtype) for s in exe.inputs]
    exe(*xs)
    t_first = time.perf_counter()
    exe(*xs)
    t_second = time.perf_counter()
    b = exe.device.backend
    pipeline = sys.modules.get("portable.compiler.pipeline")
    print(json.dumps({
        "import_ms": (t_import - t0) * 1e3, "compile_or_load_ms": (t_ready - t_import) * 1e3,
        "first_run_ms": (t_first - t_ready) * 1e3, "second_run_ms": (t_second - t_first) * 1e3,
        "total_to_first_result_ms": (t_first - t0) * 1e3,
        "mlir_compiles": pipeline.COMPILE_COUNT if pipeline else 0,
        "mlir_imported": any("mlir" in m for m, v in sys.modules.items() if v is not None),
        "opencl_driver_builds": getattr(b, "builds", None),
        "vulkan_pipeline_cache_loaded_bytes": getattr(b, "pipeline_cache_loaded_bytes", None),
    }))
""")


def run_child(mode: str, device: str, source: str, pinned: str, cache: Path) -> dict:
    env = dict(os.environ, PORTABLE_CACHE_DIR=str(cache))
    env.pop("PORTABLE_VK_VALIDATION", None)  # validation would dominate the timings
    done = subprocess.run([sys.executable, "-c", CHILD, mode, device, source, pinned], check=False, capture_output=True,
                          text=True, env=env, timeout=600)
    if done.returncode:
        raise RuntimeError(f"{mode} on {device} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", action="append", help="device URI (repeatable); default: every device found")
    p.add_argument("--out", default="startup.json")
    args = p.parse_args(argv)
    from portable.devices import devices
    from portable.package import build

    scope: dict = {}
    exec(GRAPH, scope)  # noqa: S102 - our own constant source, shared with the child processes
    demo_graph = scope["demo_graph"]
    uris = args.device or [d.uri for d in devices()[0]]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pkg = Path(tmp) / "demo.ptpk"
        pinned = build(demo_graph(), ["vulkan:lavapipe", "opencl:pocl", "vulkan:generic", "opencl:generic"], pkg)
        for uri in uris:
            for mode in ("compile", "package"):
                cache = Path(tmp) / f"cache-{uri.replace(':', '')}-{mode}"
                for phase in ("cold", "warm"):
                    rows.append({"device": uri, "mode": mode, "phase": phase,
                                 **run_child(mode, uri, str(pkg), pinned, cache)})
    Path(args.out).write_text(json.dumps(rows, indent=1))
    head = (f"{'device':9s} {'mode':8s} {'phase':5s} {'import':>7s} {'compile/load':>12s} {'1st run':>8s} "
            f"{'to 1st result':>13s} {'2nd run':>8s} {'MLIR':>5s} {'CL builds':>9s} {'VK cache':>9s}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        vkc = r["vulkan_pipeline_cache_loaded_bytes"]
        print(f"{r['device']:9s} {r['mode']:8s} {r['phase']:5s} {r['import_ms']:5.0f}ms "
              f"{r['compile_or_load_ms']:10.0f}ms "
              f"{r['first_run_ms']:6.0f}ms {r['total_to_first_result_ms']:11.0f}ms {r['second_run_ms']:6.1f}ms "
              f"{r['mlir_compiles']:5d} {r['opencl_driver_builds']!s:>9s} {vkc!s:>9s}")
    print(f"(MLIR = compiles in that process; CL builds = driver compiles; VK cache = pipeline-cache bytes loaded; "
          f"JSON in {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
