"""portable: a cross-vendor compute runtime for Vulkan and OpenCL.

    out = portable.run(graph, a, b, device="vulkan:0")
    exe = portable.compile(graph, device="opencl:0"); out = exe(a, b)
"""

from .api import CompiledGraph, StatefulGraph, compile, load, run
from .config import VERSION as __version__
from .devices import devices
from .errors import (
    CompileError,
    DeviceLost,
    DeviceNotFound,
    KernelBuildError,
    OutOfDeviceMemory,
    PackageError,
    PortableError,
    ShapeMismatch,
    UnsupportedOp,
)

__all__ = ["run", "compile", "load", "devices", "CompiledGraph", "StatefulGraph", "Graph", "PortableError",
           "DeviceNotFound", "UnsupportedOp", "CompileError", "KernelBuildError", "ShapeMismatch", "OutOfDeviceMemory",
           "DeviceLost", "PackageError", "__version__"]


def __getattr__(name):
    # Graph lives in the frontend; importing it lazily keeps `import portable` light.
    if name == "Graph":
        from .frontend.graph import Graph

        return Graph
    raise AttributeError(name)
