"""Uniform texel-buffer reads (codegen_spirv/texel_reads.py) on a GPU's Vulkan driver, ahead of time:

    python benchmarks/texel_reads_gpu.py make DIR          # here (MLIR): bench workloads, nvidia profile, off and on
    python benchmarks/texel_reads_gpu.py run DIR OUT.json  # on the GPU host: check against numpy, time device-only

Each executable is checked against numpy, then timed device-only (the plan recorded a batch of times, median per
run over 1 s), off and on interleaved, two rounds. Lavapipe's profile turns the reads on; this says whether a GPU
driver runs them right and whether they pay there (benchmarks/results/h200/session19/texel_reads.json).
"""

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import portable
from portable.bench import workloads as W

WIDS = ["add_64Mi", "scale_8192", "ew_chain_16Mi", "softmax_4096", "layernorm_4096", "gemv_4096", "matmul_4096_f32",
        "conv3x3_resnet", "dwconv3x3_mobilenet"]

def make(d):
    from portable import profiles
    from portable.compiler.pipeline import compile_module
    opts = profiles.codegen_options(profiles.all_profiles()["nvidia"], None)
    for wid in WIDS:
        w = W.build(wid, "gpu")
        for on in (False, True):
            o = dict(opts, texel_reads=on, max_texel_buffer_elements=1 << 27)
            exe = compile_module(w.mlir, o, ("vulkan",))
            exe.save(Path(d) / f"{wid}-{int(on)}.ptx")
            print(wid, on, [k.texel_buffers for k in exe.kernels], flush=True)

def run(d):
    from portable.bench.peers.numpy_peer import reference
    from portable.bench.peers.portable_peer import DeviceOnly
    from portable.devices import open_device
    live = open_device("vulkan:0")
    rows = []
    for wid in WIDS:
        w = W.build(wid, "gpu")
        xs = w.make_inputs()
        ref = reference(w, xs)
        ref = ref[0] if isinstance(ref, (tuple, list)) else ref
        for rnd in range(2):
            for on in (False, True):
                g = portable.load(Path(d) / f"{wid}-{int(on)}.ptx", device="vulkan:0")
                exe = g.executable
                out = g(*xs)
                out = out[0] if isinstance(out, tuple) else out
                err = float(np.max(np.abs(out.astype(np.float64) - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
                dev = DeviceOnly(exe, live.backend, xs)
                for _ in range(3):
                    dev.run_batch()
                t0, ts = time.perf_counter(), []
                while time.perf_counter() - t0 < 1.0:
                    t = time.perf_counter()
                    n = dev.run_batch()
                    ts.append((time.perf_counter() - t) * 1e3 / n)
                dev.close()
                r = dict(workload=wid, texel=on, round=rnd, err=err, ok=err <= w.tolerance(), ms=statistics.median(ts),
                         min_ms=min(ts), texel_buffers=[list(k.texel_buffers) for k in exe.kernels])
                rows.append(r)
                print(json.dumps(r), flush=True)
    return rows

if __name__ == "__main__":
    if sys.argv[1] == "make":
        Path(sys.argv[2]).mkdir(parents=True, exist_ok=True)
        make(sys.argv[2])
    else:
        rows = run(sys.argv[2])
        Path(sys.argv[3]).write_text(json.dumps(rows, indent=1))
