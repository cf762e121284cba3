"""Prototype timing (not shipped): persistent GLSL row kernels vs ours, 4096x4096 f32, Vulkan device clock."""
import dataclasses, json, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "benchmarks")
import gpu_time_probe as P
from portable.executable import Executable
from portable.runtime_vk import VulkanBackend

out = Path(sys.argv[1])
rng = np.random.default_rng(1)
x = rng.standard_normal((4096, 4096), dtype=np.float32) * 3 + 1
g = rng.standard_normal(4096, dtype=np.float32); bt = rng.standard_normal(4096, dtype=np.float32)
s = x * np.float32(0.125); e = np.exp(s - s.max(-1, keepdims=True)); sm_ref = e / e.sum(-1, keepdims=True)
mu = x.mean(-1, keepdims=True); var = ((x - mu) ** 2).mean(-1, keepdims=True)
ln_ref = (x - mu) / np.sqrt(var + 1e-5) * g + bt
be = VulkanBackend(0)
res = []
V = [("softmax_ours", "softmax", None, sm_ref, [x], None), ("layernorm_ours", "layernorm", None, ln_ref, [x, g, bt], None)]
for G in (4096, 2112, 1056, 528, 264):
    for p in (0, 1):
        if G == 4096 and p == 1:
            continue
        V += [(f"copy_p{p}_G{G}", "softmax", f"copy_p{p}", x * 0.125, [x], G),
              (f"softmax_p{p}_G{G}", "softmax", f"softmax_p{p}", sm_ref, [x], G),
              (f"layernorm_p{p}_G{G}", "layernorm", f"layernorm_p{p}", ln_ref, [x, g, bt], G)]
for name, exe_file, spv, ref, ins, G in V:
    exe = Executable.load(f".vx/glsl/{exe_file}_4096.vulkan.ptx")
    if spv:
        k = dataclasses.replace(exe.kernels[0], spirv=Path(f".vx/glsl9/{spv}.spv").read_bytes(),
                                workgroup_size=(256, 1, 1))
        exe = dataclasses.replace(exe, kernels=[k], dispatches=[dataclasses.replace(exe.dispatches[0], grid=(G, 1, 1))])
    rec = {"variant": name, "grid": list(exe.dispatches[0].grid)}
    plan, bufs = P._bind(exe, be, ins)
    try:
        be.execute(plan)
        ids = [s.id for s in exe.slots]
        y = be.download(bufs[ids.index(exe.outputs[0][0])], 4096 * 4096 * 4).view(np.float32).reshape(4096, 4096)
        rec["max_abs_err"] = float(np.abs(y - ref).max())
        if len(sys.argv) > 2: res.append(rec); print(rec, flush=True); continue
        runs = P._vulkan_times(be, plan, 20, True)
        rec["gpu_ms"], rec["runs"] = min(runs), runs
        rec["pct_4p8"] = 2 * x.nbytes / (rec["gpu_ms"] * 1e-3) / 4.8e12 * 100
        rec["gpu_ms_no_barrier_between_repeats"] = min(P._vulkan_times(be, plan, 20, False))
    except Exception as ex:
        rec["error"] = f"{type(ex).__name__}: {str(ex)[:300]}"
    finally:
        for bb in bufs:
            be.free(bb)
    res.append(rec); print(json.dumps({k: v for k, v in rec.items() if k != "runs"}), flush=True)
    out.write_text(json.dumps(res, indent=1))
