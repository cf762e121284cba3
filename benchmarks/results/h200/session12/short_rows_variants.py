"""Hand-written OpenCL softmax over short rows (65536 x 256 f32), to choose how a row chain over short rows should
map to threads on the H200 (session 12; session 11's copy indexed a subgroup variant's row by get_group_id(0),
which is 0 for its (32, R) grid, and checked an output buffer the previous variant had filled). Each variant is checked against numpy, then timed with OpenCL events:
after a second of the same kernel (the GPU's clocks ramp under load: cold, the first figures were 2x apart between
neighbouring variants), 20 kernels back to back in an in-order queue, per-kernel time = (last end - first start)
/ 20, best of 10. Every loop is unrolled (#pragma unroll): without it the first run's figures jumped 3x between
neighbouring variants (per-thread arrays left in local memory where the driver did not unroll).

    python short_rows_variants.py --out F.json [--rows 65536 --cols 256]
"""

import argparse
import json
import time

import numpy as np
import pyopencl as cl

U = '_Pragma("unroll")'  # every loop unrolled: the per-thread arrays stay in registers
SHFL = """
float shx(float v, int m) {
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(m));
    return as_float(r);
}
float wmax(float v) { _Pragma("unroll") for (int m = 16; m; m >>= 1) v = fmax(v, shx(v, m)); return v; }
float wsum(float v) { _Pragma("unroll") for (int m = 16; m; m >>= 1) v += shx(v, m); return v; }
"""


def workgroup_variant(threads: int, cols: int) -> str:
    """One row per workgroup of `threads`: each thread cols/threads values, two-level combine (shuffles, then
    one value per subgroup through local memory): the form portable generates."""
    per = cols // threads
    groups = threads // 32
    return SHFL + f"""
__kernel __attribute__((reqd_work_group_size({threads}, 1, 1)))
void k(__global const float* x, __global float* y) {{
    __local float part[{groups}];
    int row = get_group_id(0), t = get_local_id(0);
    float v[{per}];
    float m = -INFINITY;
    {U} for (int i = 0; i < {per}; i++) {{ v[i] = x[row * {cols} + i * {threads} + t]; m = fmax(m, v[i]); }}
    m = wmax(m);
    if (t % 32 == 0) part[t / 32] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    m = part[0];
    {U} for (int g = 1; g < {groups}; g++) m = fmax(m, part[g]);
    barrier(CLK_LOCAL_MEM_FENCE);
    float s = 0.0f;
    {U} for (int i = 0; i < {per}; i++) {{ v[i] = exp(v[i] - m); s += v[i]; }}
    s = wsum(s);
    if (t % 32 == 0) part[t / 32] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    s = part[0];
    {U} for (int g = 1; g < {groups}; g++) s += part[g];
    {U} for (int i = 0; i < {per}; i++) y[row * {cols} + i * {threads} + t] = v[i] / s;
}}"""


def subgroup_variant(rows: int, cols: int, vec: bool) -> str:
    """`rows` rows per workgroup, one subgroup of 32 lanes per row, shuffles only (no local memory, no barrier);
    `vec`: each lane's values as float4 runs."""
    per = cols // 32
    if vec:
        n4 = per // 4
        load = f"{U} for (int i = 0; i < {n4}; i++) {{ float4 a = vload4(0, x + base + (i * 32 + lane) * 4); " \
               f"v[4*i] = a.x; v[4*i+1] = a.y; v[4*i+2] = a.z; v[4*i+3] = a.w; }}"
        store = f"{U} for (int i = 0; i < {n4}; i++) vstore4((float4)(v[4*i], v[4*i+1], v[4*i+2], v[4*i+3]) * r, 0, " \
                f"y + base + (i * 32 + lane) * 4);"
    else:
        load = f"{U} for (int i = 0; i < {per}; i++) v[i] = x[base + i * 32 + lane];"
        store = f"{U} for (int i = 0; i < {per}; i++) y[base + i * 32 + lane] = v[i] * r;"
    return SHFL + f"""
__kernel __attribute__((reqd_work_group_size(32, {rows}, 1)))
void k(__global const float* x, __global float* y) {{
    int lane = get_local_id(0);
    int base = (get_group_id(1) * {rows} + get_local_id(1)) * {cols};
    float v[{per}];
    {load}
    float m = -INFINITY;
    {U} for (int i = 0; i < {per}; i++) m = fmax(m, v[i]);
    m = wmax(m);
    float s = 0.0f;
    {U} for (int i = 0; i < {per}; i++) {{ v[i] = exp(v[i] - m); s += v[i]; }}
    float r = 1.0f / wsum(s);
    {store}
}}"""


def rows_variant(threads: int, rows: int, cols: int, serial: bool) -> str:
    """The form portable generates (each thread one float4 run per pass, partials combined by shuffles and then
    through local memory) for `rows` rows per workgroup: one after the other (`serial`, a barrier ending each
    row) or side by side (a (threads, rows) workgroup)."""
    n4 = cols // (4 * threads)
    groups = threads // 32
    row = "(get_group_id(0) * {R} + r)" if serial else "(get_group_id(1) * {R} + get_local_id(1))"
    row = row.format(R=rows)
    ly = "0" if serial else "get_local_id(1)"
    body = f"""
    int base = {row} * {cols};
    float4 v[{n4}];
    {U} for (int i = 0; i < {n4}; i++) v[i] = vload4(0, x + base + (i * {threads} + t) * 4);
    float m = -INFINITY;
    {U} for (int i = 0; i < {n4}; i++) m = fmax(m, fmax(fmax(v[i].x, v[i].y), fmax(v[i].z, v[i].w)));
    m = wmax(m);
    if (t % 32 == 0) pm[{ly}][t / 32] = m;
    barrier(CLK_LOCAL_MEM_FENCE);
    m = pm[{ly}][0];
    {U} for (int g = 1; g < {groups}; g++) m = fmax(m, pm[{ly}][g]);
    float s = 0.0f;
    {U} for (int i = 0; i < {n4}; i++) {{ v[i] = exp(v[i] - m); s += v[i].x + v[i].y + v[i].z + v[i].w; }}
    s = wsum(s);
    if (t % 32 == 0) ps[{ly}][t / 32] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    s = ps[{ly}][0];
    {U} for (int g = 1; g < {groups}; g++) s += ps[{ly}][g];
    {U} for (int i = 0; i < {n4}; i++) vstore4(v[i] / s, 0, y + base + (i * {threads} + t) * 4);"""
    if serial:
        body = f"for (int r = 0; r < {rows}; r++) {{{body}\n    barrier(CLK_LOCAL_MEM_FENCE);\n    }}"
    ny = 1 if serial else rows
    return SHFL + f"""
__kernel __attribute__((reqd_work_group_size({threads}, {ny}, 1)))
void k(__global const float* x, __global float* y) {{
    __local float pm[{ny}][{groups}], ps[{ny}][{groups}];
    int t = get_local_id(0);
    {body}
}}"""


COPY = """
__kernel void k(__global const float4* x, __global float4* y) { size_t i = get_global_id(0); y[i] = x[i]; }"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--cols", type=int, default=256)
    a = ap.parse_args()
    R, C = a.rows, a.cols
    ctx = cl.Context([d for p in cl.get_platforms() for d in p.get_devices() if d.type & cl.device_type.GPU][:1])
    q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    x = np.random.default_rng(1).standard_normal((R, C)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    ref = e / e.sum(-1, keepdims=True)
    mf = cl.mem_flags
    bx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    by = cl.Buffer(ctx, mf.READ_WRITE, x.nbytes)
    variants = {}
    variants["copy_vec4_no_softmax"] = (COPY, (R * C // 4,), (256,))
    for t in (256, 128, 64, 32):
        if C % t == 0 and C // t >= 1:
            variants[f"row_per_workgroup_{t}_threads"] = (workgroup_variant(t, C), (R * t,), (t,))
    for t in (256, 128, 64, 32):
        if C % (4 * t) or C // (4 * t) > 8:
            continue
        for rows in (1, 2, 4, 8):
            variants[f"generated_form_{t}_threads_{rows}_rows_serial"] = (
                rows_variant(t, rows, C, True), (R // rows * t,), (t,))
            if rows > 1 and t * rows <= 1024:
                variants[f"generated_form_{t}_threads_{rows}_rows_parallel"] = (
                    rows_variant(t, rows, C, False), (t, R), (t, rows))
    for rows in (1, 2, 4, 8, 16):
        for vec in (False, True):
            if vec and (C // 32) % 4 or C > 1024:
                continue
            variants[f"row_per_subgroup_{rows}_rows{'_vec4' if vec else ''}"] = (
                subgroup_variant(rows, C, vec), (32, R), (32, rows))
    out = {"device": ctx.devices[0].name, "driver": ctx.devices[0].driver_version, "rows": R, "cols": C,
           "bytes": 2 * x.nbytes, "variants": {}}
    for name, (src, gs, ls) in variants.items():
        k = cl.Program(ctx, src).build().k
        cl.enqueue_fill_buffer(q, by, np.float32(np.nan), 0, x.nbytes)  # a variant must write every output
        k(q, gs, ls, bx, by).wait()
        y = np.empty_like(x)
        cl.enqueue_copy(q, y, by)
        err = float(np.abs(y - (x if name.startswith("copy") else ref)).max())
        if not err < 1e-5:
            print(f"{name}: WRONG (max error {err})")
            continue
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            for _ in range(20):
                k(q, gs, ls, bx, by)
            q.finish()
        best = []
        for _ in range(10):
            evs = [k(q, gs, ls, bx, by) for _ in range(20)]
            q.finish()
            best.append((evs[-1].profile.end - evs[0].profile.start) / 20 / 1e3)
        us = min(best)
        out["variants"][name] = {"us": round(us, 2), "runs_us": [round(v, 2) for v in best],
                                 "of_4p8_TBps": round(2 * x.nbytes / (us * 1e-6) / 4.8e12, 4), "max_err": err}
        print(f"{name:36s} {us:8.2f} us  {out['variants'][name]['of_4p8_TBps'] * 100:5.1f}%  err {err:.1e}")
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
