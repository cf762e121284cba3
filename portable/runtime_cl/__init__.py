"""OpenCL runtime: device discovery and a Backend that builds OpenCL C (with a binary cache) and runs plans.

Imports only numpy and pyopencl, never MLIR, so compiled executables run on hosts without the compiler.
"""

from .backend import OpenCLBackend
from .discovery import enumerate_devices

__all__ = ["OpenCLBackend", "enumerate_devices"]
