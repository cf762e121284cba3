"""Prototype timing (not shipped): GLSL row-kernel variants vs ours, 4096x4096 f32, Vulkan device clock."""
import dataclasses, json, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, "benchmarks")
import gpu_time_probe as P
from portable.executable import Executable
from portable.runtime_vk import VulkanBackend

out = Path(sys.argv[1]); check_only = len(sys.argv) > 2
R = 4096 if not check_only else 64
rng = np.random.default_rng(1)
x = rng.standard_normal((4096, 4096), dtype=np.float32) * 3 + 1
g = rng.standard_normal(4096, dtype=np.float32); bt = rng.standard_normal(4096, dtype=np.float32)
s = x * np.float32(0.125); e = np.exp(s - s.max(-1, keepdims=True)); sm_ref = e / e.sum(-1, keepdims=True)
mu = x.mean(-1, keepdims=True); var = ((x - mu) ** 2).mean(-1, keepdims=True)
ln_ref = (x - mu) / np.sqrt(var + 1e-5) * g + bt
be = VulkanBackend(0)
res = []
VARIANTS = [("softmax_ours", "softmax", None, sm_ref, [x], 0), ("layernorm_ours", "layernorm", None, ln_ref, [x, g, bt], 0)]
VARIANTS += [("softmax_vec4_two_rows", "softmax", "sm4r2", sm_ref, [x], 256),
             ("layernorm_vec4_two_rows", "layernorm", "ln4r2", ln_ref, [x, g, bt], 256)]
for T in (256,):
    VARIANTS += [(f"copy_vec4_{T}", "softmax", f"copy4_{T}", x * 0.125, [x], T),
                 (f"softmax_vec4_{T}", "softmax", f"sm4_{T}", sm_ref, [x], T),
                 (f"layernorm_vec4_{T}", "layernorm", f"ln4_{T}", ln_ref, [x, g, bt], T)]
for name, exe_file, spv, ref, ins, threads in VARIANTS:
    exe = Executable.load(f".vx/glsl/{exe_file}_4096.vulkan.ptx")
    if spv:
        k = dataclasses.replace(exe.kernels[0], spirv=Path(f".vx/glsl/{spv}.spv").read_bytes(),
                                workgroup_size=(threads, 1, 1))
        exe = dataclasses.replace(exe, kernels=[k])
    if check_only:
        exe = dataclasses.replace(exe, dispatches=[dataclasses.replace(exe.dispatches[0], grid=(1, R, 1))])
    if "two_rows" in name:
        gx, gy, gz = exe.dispatches[0].grid
        exe = dataclasses.replace(exe, dispatches=[dataclasses.replace(
            exe.dispatches[0], grid=(gx // 2, gy, gz) if gx > 1 else (gx, gy // 2, gz))])
    rec = {"variant": name, "grid": list(exe.dispatches[0].grid)}
    plan, bufs = P._bind(exe, be, ins)
    try:
        be.execute(plan)
        ids = [s.id for s in exe.slots]
        y = be.download(bufs[ids.index(exe.outputs[0][0])], 4096 * 4096 * 4).view(np.float32).reshape(4096, 4096)
        rec["max_abs_err"] = float(np.abs(y[:R] - ref[:R]).max())
        if not check_only:
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
