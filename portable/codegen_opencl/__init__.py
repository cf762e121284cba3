"""OpenCL C code generation: a lowered gpu.module (scf/arith/math/memref/vector/gpu ops) -> kernel source.

`emit_opencl(gpu_module)` returns an `OpenCLKernel`; compiling and running the source is the runtime's job.
"""

from .kernel import OpenCLKernel, emit_opencl

__all__ = ["OpenCLKernel", "emit_opencl"]
