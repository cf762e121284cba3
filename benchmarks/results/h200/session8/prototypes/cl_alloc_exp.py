"""Experiment (not shipped): does how an OpenCL buffer is allocated change streaming bandwidth on the H200?"""
import json, sys, time
import numpy as np, pyopencl as cl
N = 4096 * 4096
SRC = """
__kernel __attribute__((reqd_work_group_size(256,1,1))) void vec4copy(__global const float4* restrict x, __global float4* restrict y) {
    int i = get_global_id(0);
    y[i] = x[i] * 0.125f;
}"""
dev = cl.get_platforms()[0].get_devices()[0]
ctx = cl.Context([dev]); q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
prg = cl.Program(ctx, SRC).build()
k = prg.vec4copy
mf = cl.mem_flags
x = np.random.default_rng(0).standard_normal(N, dtype=np.float32)
nb = x.nbytes
big = cl.Buffer(ctx, mf.READ_WRITE, 1 << 30)
big2 = [cl.Buffer(ctx, mf.READ_WRITE, 512 << 20) for _ in range(2)]
variants = {
    "separate_64MiB": (cl.Buffer(ctx, mf.READ_WRITE, nb), cl.Buffer(ctx, mf.READ_WRITE, nb)),
    "sub_buffers_of_1GiB": (big.get_sub_region(0, nb), big.get_sub_region(256 << 20, nb)),
    "first_64MiB_of_512MiB_each": tuple(b.get_sub_region(0, nb) for b in big2),
}
res = []
for rnd in range(2):
    for name, (bx, by) in variants.items():
        cl.enqueue_copy(q, bx, x); q.finish()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 1.0:
            for _ in range(50):
                k(q, (N // 4,), (256,), bx, by)
            q.finish()
        runs = []
        for _ in range(5):
            evs = [k(q, (N // 4,), (256,), bx, by) for _ in range(20)]
            q.finish()
            runs.append((evs[-1].profile.end - evs[0].profile.start) * 1e-6 / 20)
        ms = float(np.median(runs))
        res.append({"variant": name, "round": rnd, "ms": ms, "pct_4p8": 2 * nb / (ms * 1e-3) / 4.8e12 * 100})
        print(json.dumps(res[-1]), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
