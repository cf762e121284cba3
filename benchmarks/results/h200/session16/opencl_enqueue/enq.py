import time, numpy as np, pyopencl as cl, cffi, ctypes.util
ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
print(ctx.devices[0].name)
q = cl.CommandQueue(ctx)
prg = cl.Program(ctx, "__kernel void k(__global float* a){ a[get_global_id(0)] += 1.0f; }").build()
buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * 64)
k = prg.k; k.set_args(buf)
N = 20000
gs, ls = (64,), (64,)
q.finish()
t = time.perf_counter()
for _ in range(N):
    cl.enqueue_nd_range_kernel(q, k, gs, ls)
t1 = time.perf_counter(); q.finish(); t2 = time.perf_counter()
print(f"pyopencl enqueue_nd_range_kernel: {(t1-t)/N*1e6:.2f} us/call host, {(t2-t)/N*1e6:.2f} us/call incl. finish")
ffi = cffi.FFI()
ffi.cdef("int clEnqueueNDRangeKernel(void*, void*, unsigned int, const size_t*, const size_t*, const size_t*, unsigned int, const void*, void*);")
lib = ffi.dlopen(ctypes.util.find_library("OpenCL"))
qp = ffi.cast("void*", q.int_ptr); kp = ffi.cast("void*", k.int_ptr)
g = ffi.new("size_t[1]", [64]); l = ffi.new("size_t[1]", [64])
q.finish()
t = time.perf_counter()
for _ in range(N):
    r = lib.clEnqueueNDRangeKernel(qp, kp, 1, ffi.NULL, g, l, 0, ffi.NULL, ffi.NULL)
t1 = time.perf_counter(); q.finish(); t2 = time.perf_counter()
print(f"cffi clEnqueueNDRangeKernel (no event): {(t1-t)/N*1e6:.2f} us/call host, {(t2-t)/N*1e6:.2f} us/call incl. finish", r)
a = np.empty(64, np.float32); cl.enqueue_copy(q, a, buf); print(a[0], 2 * N + 0)

import ctypes
lib2 = ctypes.CDLL(ctypes.util.find_library("OpenCL"))
f = lib2.clEnqueueNDRangeKernel
f.restype = ctypes.c_int32
f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
G = (ctypes.c_size_t * 1)(64); L = (ctypes.c_size_t * 1)(64)
qi, ki = q.int_ptr, k.int_ptr
q.finish()
t = time.perf_counter()
for _ in range(N):
    r = f(qi, ki, 1, None, G, L, 0, None, None)
t1 = time.perf_counter(); q.finish(); t2 = time.perf_counter()
print(f"ctypes clEnqueueNDRangeKernel (no event): {(t1-t)/N*1e6:.2f} us/call host, {(t2-t)/N*1e6:.2f} us/call incl. finish", r)
ev = []
q.finish()
t = time.perf_counter()
for _ in range(N):
    ev.append(cl.enqueue_nd_range_kernel(q, k, gs, ls))
t1 = time.perf_counter(); q.finish(); t2 = time.perf_counter()
print(f"pyopencl, events kept: {(t1-t)/N*1e6:.2f} us/call host, {(t2-t)/N*1e6:.2f} us/call incl. finish")
