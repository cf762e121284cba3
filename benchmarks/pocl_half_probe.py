"""Is reading f16 through vload_halfN what makes f16 kernels slower on PoCL? A sum over 16 Mi elements read as
vload_half16 (f16 bits converted by the OpenCL built-in), as vload16 of f32, and as ushort16 converted by integer
code, on the first PoCL device; best of 5 after a warm-up, wall clock around enqueue + finish.

    python benchmarks/pocl_half_probe.py
"""

import time

import numpy as np
import pyopencl as cl

SRC = """
__kernel void read_half(__global const half* a, __global float* o, int n) {
  int g = get_global_id(0); float16 s = 0;
  for (int i = g * 16; i < n; i += get_global_size(0) * 16) s += vload_half16(0, a + i);
  vstore16(s, g, o);
}
__kernel void read_float(__global const float* a, __global float* o, int n) {
  int g = get_global_id(0); float16 s = 0;
  for (int i = g * 16; i < n; i += get_global_size(0) * 16) s += vload16(0, a + i);
  vstore16(s, g, o);
}
__kernel void read_bits(__global const ushort* a, __global float* o, int n) {
  int g = get_global_id(0); float16 s = 0;
  for (int i = g * 16; i < n; i += get_global_size(0) * 16) {
    uint16 x = convert_uint16(vload16(0, a + i));
    uint16 e = (x >> 10) & 0x1f, m = x & 0x3ff, sg = (x & 0x8000) << 16;
    s += as_float16(sg | select((e + 112) << 23 | m << 13, (uint16)0, e == 0));  /* normals and zeros only */
  }
  vstore16(s, g, o);
}
"""


def main() -> None:
    platform = next(p for p in cl.get_platforms() if "Portable" in p.name)
    ctx = cl.Context(platform.get_devices())
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, SRC).build()
    n, threads = 1 << 24, 1024
    a16 = np.random.default_rng(0).standard_normal(n).astype(np.float16)
    mf = cl.mem_flags
    b16 = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a16)
    b32 = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a16.astype(np.float32))
    out = cl.Buffer(ctx, mf.WRITE_ONLY, threads * 16 * 4)
    for name, buf in (("read_half", b16), ("read_float", b32), ("read_bits", b16)):
        kernel = cl.Kernel(prg, name)
        times = []
        for _ in range(6):
            t = time.perf_counter()
            kernel(q, (threads,), (64,), buf, out, np.int32(n))
            q.finish()
            times.append(time.perf_counter() - t)
        print(f"{name:10s} {1e3 * min(times[1:]):7.2f} ms  ({n >> 20} Mi elements, {platform.get_devices()[0].name})")


if __name__ == "__main__":
    main()
