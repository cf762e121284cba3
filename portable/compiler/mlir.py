from torch_mlir import ir, passmanager
from torch_mlir.dialects import arith, func, gpu, linalg, math, memref, scf, tensor, vector, transform, bufferization

__all__ = ["ir", "passmanager", "arith", "func", "gpu", "linalg", "math", "memref", "scf", "tensor", "vector", "transform", "bufferization"]
