"""The one module that imports the MLIR Python bindings (from the torch-mlir wheel), so another
distribution of the upstream bindings can be swapped in here alone."""

from torch_mlir import ir, passmanager
from torch_mlir.dialects import arith, bufferization, func, gpu, linalg, math, memref, scf, tensor, transform, vector
from torch_mlir.dialects import torch as torch_dialect  # the ONNX frontend registers it in its context


def onnx_importer():
    """torch-mlir's ONNX importer (`torch_mlir.extras.onnx_importer`); loaded on first use since it imports onnx."""
    from torch_mlir.extras import onnx_importer as importer

    return importer


__all__ = ["ir", "passmanager", "arith", "func", "gpu", "linalg", "math", "memref", "scf", "tensor", "vector", "transform", "bufferization"]
__all__ += ["torch_dialect", "onnx_importer"]
