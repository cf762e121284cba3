"""The one module that imports the MLIR Python bindings (from the torch-mlir wheel), so another
distribution of the upstream bindings can be swapped in here alone."""

try:
    from torch_mlir import ir, passmanager
    from torch_mlir.dialects import (
        arith,
        bufferization,
        func,
        gpu,
        linalg,
        math,
        memref,
        scf,
        tensor,
        transform,
        vector,
    )
    from torch_mlir.dialects import torch as torch_dialect  # the ONNX frontend registers it in its context
except ImportError as e:  # a runtime-only install: say which extra compiles, not where the import broke
    from ..errors import CompilerMissing

    raise CompilerMissing(f"compiling needs the MLIR Python bindings ({e}): pip install 'portable[compiler]' "
                          "(the torch-mlir wheel); a runtime-only install loads and runs packages built elsewhere "
                          "(`portable compile ... -o model.ptpk`, then portable.load)") from e


def onnx_importer():
    """torch-mlir's ONNX importer (`torch_mlir.extras.onnx_importer`); loaded on first use since it imports onnx."""
    from torch_mlir.extras import onnx_importer as importer

    return importer


__all__ = ["ir", "passmanager", "arith", "func", "gpu", "linalg", "math", "memref", "scf", "tensor", "vector",
           "transform", "bufferization"]
__all__ += ["torch_dialect", "onnx_importer"]
