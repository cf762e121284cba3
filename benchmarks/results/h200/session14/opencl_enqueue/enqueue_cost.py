"""Host cost of one clEnqueueNDRangeKernel of an empty kernel (in-order queue, 3000 back to back, then one
finish): through pyopencl (which returns an event) and through ctypes with no event. Run from the repository
root: `python benchmarks/results/h200/session14/opencl_enqueue/enqueue_cost.py [platform index]`. (The run
recorded next to it was this logic, written as a throwaway script.)"""

import ctypes
import sys
import time

import numpy as np
import pyopencl as cl

sys.path.insert(0, ".")
from portable.runtime_cl.cmdbuf import _library  # noqa: E402 - the ICD loader pyopencl loaded

N = 3000
SOURCE = "__kernel void k(__global float* a, int n) { if (get_global_id(0) == 0 && n < 0) a[0] = 1; }"


def main() -> None:
    platform = cl.get_platforms()[int(sys.argv[1]) if len(sys.argv) > 1 else 0]
    ctx = cl.Context([platform.get_devices()[0]])
    q = cl.CommandQueue(ctx)
    program = cl.Program(ctx, SOURCE).build()
    kernel = cl.Kernel(program, "k")
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 1024)  # referenced until the end: the kernels read it
    kernel.set_arg(0, buf)
    kernel.set_arg(1, np.int32(5))
    enqueue = _library().clEnqueueNDRangeKernel
    vp = ctypes.c_void_p
    enqueue.argtypes = [vp, vp, ctypes.c_uint32, vp, vp, vp, ctypes.c_uint32, vp, vp]
    enqueue.restype = ctypes.c_int32
    size = (ctypes.c_size_t * 3)(64, 1, 1)
    qp, kp = vp(q.int_ptr), vp(kernel.int_ptr)
    ways = {"pyopencl": lambda: cl.enqueue_nd_range_kernel(q, kernel, (64,), (64,)),
            "ctypes  ": lambda: enqueue(qp, kp, 1, None, size, size, 0, None, None)}
    for _ in range(3):
        for name, call in ways.items():
            q.finish()
            t0 = time.perf_counter()
            for _ in range(N):
                call()
            t1 = time.perf_counter()
            q.finish()
            t2 = time.perf_counter()
            print(f"{name} enqueue {(t1 - t0) / N * 1e6:.2f} us, with finish {(t2 - t0) / N * 1e6:.2f} us")
    buf.release()


if __name__ == "__main__":
    main()
