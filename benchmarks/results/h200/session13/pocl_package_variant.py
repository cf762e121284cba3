"""Which PoCL target does a package load on this host, and how fast is each? Session 13, on the H200 machine's
host CPU (PoCL, AVX-512 Xeon). The package holds opencl:pocl (8x16 tile) and the variant compiled for 16-lane
hosts (8x32); `portable.load` picks one, both are then timed alternately (3 rounds, median of 10 calls each after
3 warm-up calls, inputs uploaded every call) and checked against numpy.

    python pocl_package_variant.py PACKAGE --out F.json       (build: --build PACKAGE, on a host with MLIR)
"""

import json
import statistics
import sys
import time

import numpy as np

SIZES = [(512, 512, 512), (1024, 1024, 1024)]


def build(path: str) -> None:
    import portable
    from portable.package import build as build_package

    g = portable.Graph("mm")
    outs = []
    for m, k, n in SIZES:
        a, b = g.input((m, k)), g.input((k, n))
        outs.append(g.matmul(a, b))
    g.output(*outs)
    build_package(g, ["opencl:pocl"], path)


def main() -> None:
    if sys.argv[1] == "--build":
        build(sys.argv[2])
        return
    import portable
    from portable.api import CompiledGraph
    from portable.package import Package

    path, out = sys.argv[1], sys.argv[sys.argv.index("--out") + 1]
    exe = portable.load(path, device="opencl:0")
    live = exe.device
    pkg = Package(path)
    rng = np.random.default_rng(0)
    xs = []
    for m, k, n in SIZES:
        xs += [rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)]
    refs = [xs[2 * i] @ xs[2 * i + 1] for i in range(len(SIZES))]
    res = {"device": live.info.name, "limits": {k: live.info.limits.get(k) for k in ("native_float_vector_width",
                                                                                      "global_mem_cache_bytes")},
           "loaded": exe.package_target, "targets": {}}
    graphs = {str(t): CompiledGraph(pkg.executable(t), live) for t in pkg.targets}
    for name, g in graphs.items():
        outs = g(*xs)
        res["targets"][name] = {"max_rel_err": max(float(np.abs(o - r).max() / np.abs(r).max())
                                                   for o, r in zip(outs, refs)), "ms": []}
    for _ in range(3):
        for name, g in graphs.items():
            for _ in range(3):
                g(*xs)
            ts = []
            for _ in range(10):
                t = time.perf_counter()
                g(*xs)
                ts.append((time.perf_counter() - t) * 1e3)
            res["targets"][name]["ms"].append(round(statistics.median(ts), 3))
            print(name, res["targets"][name]["ms"][-1], "ms", flush=True)
    print(json.dumps(res, indent=1))
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
