"""Prototype timing (not shipped): GLSL matmul variants vs our kernel, f32 4096, Vulkan device clock + registers."""
import dataclasses, json, sys, time
from pathlib import Path
import numpy as np
sys.path.insert(0, "benchmarks")
import gpu_time_probe as P
import pipeline_stats as PS
from portable.executable import Executable
from portable.runtime_vk import VulkanBackend

out = Path(sys.argv[1])
base = Executable.load(".vx/glsl/ours.vulkan.ptx")
variants = [("ours", None, None, None)]
for name, wg, grid in (("g0", (16, 8, 1), (64, 32, 1)), ("g1", (16, 8, 1), (64, 32, 1)),
                       ("g2", (16, 16, 1), (32, 32, 1)), ("g3", (16, 16, 1), (32, 32, 1))):
    variants.append((name, Path(f".vx/glsl/{name}.spv").read_bytes(), wg, grid))
try:
    info, close, report = PS.vulkan_reporter(0, 0)
except Exception as e:
    report = None; print('no stats:', e)
be = VulkanBackend(0)
rng = np.random.default_rng(0)
a = rng.standard_normal((4096, 4096), dtype=np.float32); b = rng.standard_normal((4096, 4096), dtype=np.float32)
ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
res = []
for name, spv, wg, grid in variants[1:] if len(sys.argv) > 2 else variants:
    exe = base
    if spv is not None:
        k = dataclasses.replace(base.kernels[0], spirv=spv, workgroup_size=wg)
        exe = dataclasses.replace(base, kernels=[k], dispatches=[dataclasses.replace(base.dispatches[0], grid=grid)])
    rec = {"variant": name}
    try:
        st = report(exe.kernels[0]) if report else {'executables': []}
        rec["stats"] = {s["name"]: s["value"] for e in st["executables"] for s in e["statistics"]}
    except Exception as e:
        rec["stats_error"] = str(e)[:200]
    plan, bufs = P._bind(exe, be, [a, b])
    try:
        be.execute(plan)
        osid = exe.outputs[0][0]
        slot_ids = [s.id for s in exe.slots]
        c = be.download(bufs[slot_ids.index(osid)], 4096 * 4096 * 4).view(np.float32).reshape(4096, 4096)
        rec["max_rel_err"] = float(np.abs(c - ref).max() / np.abs(ref).max())
        if len(sys.argv) > 2:
            raise SystemExit if False else RuntimeError('correctness only')
        runs = P._vulkan_times(be, plan, 20, True)
        rec["gpu_ms"], rec["runs"] = min(runs), runs
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    finally:
        for bb in bufs:
            be.free(bb)
    res.append(rec); print(json.dumps(rec), flush=True)
out.write_text(json.dumps(res, indent=1))
