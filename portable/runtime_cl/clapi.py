"""pyopencl, imported once for the room, and the two ways a program object is made.

A host without pyopencl (a Vulkan-only phone package) must still import portable and list devices, so the
import failure is kept as a reason instead of being raised here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache
from typing import Any

try:
    import pyopencl as cl

    IMPORT_ERROR: str | None = None
except Exception as e:  # ImportError, or OSError from a broken OpenCL loader
    cl = None  # type: ignore[assignment]
    IMPORT_ERROR = f"pyopencl cannot be imported ({type(e).__name__}: {e}); install it with `pip install pyopencl`"


# pyopencl.Program adds its own source-build cache on some platforms and its include path to the options.
# We build the underlying program object instead, so our binary cache is the only cache (the `builds`
# counter then means real driver compiles everywhere) and the driver sees exactly our options.


def program_from_source(context: Any, source: str) -> Any:
    """An unbuilt program object for OpenCL C `source`."""
    return cl._cl._Program(context, source)


def program_from_binary(context: Any, device: Any, binary: bytes) -> Any:
    """An unbuilt program object for a driver binary obtained earlier from `program_binary`."""
    return cl._cl._Program(context, [device], [binary])


def program_binary(program: Any) -> bytes:
    """The driver binary of a built single-device program."""
    return bytes(program.get_info(cl.program_info.BINARIES)[0])


@lru_cache(maxsize=1)
def opencl_library() -> ctypes.CDLL | None:
    """The OpenCL ICD loader pyopencl itself loaded (its wheels bundle one), else the system's: for the entry
    points and queries pyopencl does not wrap."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libOpenCL" in line and line.rstrip().endswith((".so", ".1", ".0")):
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass  # no /proc (not Linux): ask the linker
    try:
        name = ctypes.util.find_library("OpenCL")
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


@lru_cache(maxsize=1)
def get_device_info() -> Any:
    """clGetDeviceInfo through ctypes, its signature set once (None without a loader)."""
    lib = opencl_library()
    if lib is None:
        return None
    info = lib.clGetDeviceInfo
    info.restype = ctypes.c_int32
    info.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p,
                     ctypes.POINTER(ctypes.c_size_t)]
    return info


def device_info_uint(device: Any, param: int) -> int | None:
    """A cl_uint device property by its raw enum (vendor queries pyopencl refuses: it has no name for them);
    None when the driver does not answer it."""
    info = get_device_info()
    if info is None:
        return None
    value = ctypes.c_uint32(0)
    status = info(ctypes.c_void_p(device.int_ptr), param, ctypes.sizeof(value), ctypes.byref(value), None)
    return int(value.value) if status == 0 else None


def device_info_sizes(device: Any, param: int) -> list[int] | None:
    """A size_t[] device property by its raw enum (CL_DEVICE_SUB_GROUP_SIZES_INTEL); None when the driver does
    not answer it."""
    info = get_device_info()
    if info is None:
        return None
    size = ctypes.c_size_t(0)
    if info(ctypes.c_void_p(device.int_ptr), param, 0, None, ctypes.byref(size)) != 0 or not size.value:
        return None
    values = (ctypes.c_size_t * (size.value // ctypes.sizeof(ctypes.c_size_t)))()
    if info(ctypes.c_void_p(device.int_ptr), param, size.value, values, None) != 0:
        return None
    return [int(v) for v in values]
