"""Prototype (not shipped): depthwise 3x3 NHWC 8x112x112x32 f32, pad 1, OpenCL event timing: the generated
kernel vs hand-written ones where each thread computes WPT outputs along the width (inputs reused in registers)."""
import json, sys
import numpy as np
import pyopencl as cl
sys.path.insert(0, ".")
from portable.executable import Executable

N, H, W, C = 8, 112, 112, 32
rng = np.random.default_rng(0)
x = rng.standard_normal((N, H, W, C), dtype=np.float32)
w = rng.standard_normal((3, 3, C), dtype=np.float32)
xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
ref = sum(xp[:, i:i + H, j:j + W, :] * w[i, j] for i in range(3) for j in range(3))

SRC = r"""
__kernel __attribute__((reqd_work_group_size(8, TY, 1))) void k(__global float* restrict out,
        __global const float* restrict x, __global const float* restrict wt) {
    int g = get_group_id(0);
    int wg_per_row = 112 / (TY * WPT);
    int n = g / (112 * wg_per_row), r = g % (112 * wg_per_row);
    int h = r / wg_per_row, w0 = (r % wg_per_row) * TY * WPT + get_local_id(1) * WPT;
    int c = get_local_id(0) * 4;
    float4 acc[WPT];
    for (int j = 0; j < WPT; j++) acc[j] = (float4)(0.0f);
    for (int kh = 0; kh < 3; kh++) {
        int hh = h + kh - 1;
        if (hh < 0 || hh >= 112) continue;
        float4 wk0 = vload4(0, wt + (kh * 3 + 0) * 32 + c);
        float4 wk1 = vload4(0, wt + (kh * 3 + 1) * 32 + c);
        float4 wk2 = vload4(0, wt + (kh * 3 + 2) * 32 + c);
        float4 in[WPT + 2];
        for (int j = 0; j < WPT + 2; j++) {
            int ww = w0 + j - 1;
            in[j] = (ww >= 0 && ww < 112) ? vload4(0, x + ((n * 112 + hh) * 112 + ww) * 32 + c) : (float4)(0.0f);
        }
        for (int j = 0; j < WPT; j++) acc[j] += in[j] * wk0 + in[j + 1] * wk1 + in[j + 2] * wk2;
    }
    for (int j = 0; j < WPT; j++) vstore4(acc[j], 0, out + ((n * 112 + h) * 112 + w0 + j) * 32 + c);
}
"""

ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
mf = cl.mem_flags
bx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
bw = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=w)
bo = cl.Buffer(ctx, mf.READ_WRITE, size=x.nbytes)


def timeit(kern, gsize, lsize):
    for _ in range(200):
        kern(q, gsize, lsize, bo, bx, bw)
    q.finish()
    out = np.empty_like(x)
    cl.enqueue_copy(q, out, bo); q.finish()
    err = float(np.abs(out - ref).max())
    best = []
    for _ in range(5):
        evs = [kern(q, gsize, lsize, bo, bx, bw) for _ in range(50)]
        q.finish()
        ks = sorted((e.profile.end - e.profile.start) * 1e-3 for e in evs)
        best.append(ks[len(ks) // 2])
    return err, min(best)


res = []
exe = Executable.load(sys.argv[1])
k = exe.kernels[0]
prg = cl.Program(ctx, k.opencl).build()
kern = prg.main_kernel
gx = exe.dispatches[0].grid
ws = k.workgroup_size
gs = tuple(g * l for g, l in zip(gx, ws))
# generated kernel takes (out, x, w)
err, us = timeit(kern, gs, tuple(ws))
res.append({"variant": "generated", "max_abs_err": err, "kernel_us": us}); print(res[-1], flush=True)
for wpt in (1, 2, 4):
    for ty in (28, 14, 7):
        if 112 % (ty * wpt):
            continue
        p = cl.Program(ctx, SRC).build(options=f"-DWPT={wpt} -DTY={ty}")
        groups = N * 112 * (112 // (ty * wpt))
        err, us = timeit(p.k, (groups * 8, ty), (8, ty))
        res.append({"variant": f"wpt{wpt}_ty{ty}", "max_abs_err": err, "kernel_us": us}); print(res[-1], flush=True)
json.dump(res, open(sys.argv[2], "w"), indent=1)
