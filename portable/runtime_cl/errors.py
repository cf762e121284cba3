"""OpenCL status codes turned into portable's errors: the status name plus what the user can do."""

from __future__ import annotations

from ..errors import DriverError, KernelBuildError, OutOfDeviceMemory, PortableError
from .clapi import cl

# What to do about a status; the driver's own message is appended to every error.
_ADVICE = {
    "OUT_OF_RESOURCES": "the driver ran out of resources (registers, local memory, or host memory on CPU "
    "drivers); use smaller tensors or a smaller workgroup. On GPUs it can also mean the kernel accessed "
    "memory out of bounds; the context may then be unusable, so create a new backend",
    "OUT_OF_HOST_MEMORY": "the host ran out of memory; free buffers or use smaller tensors",
    "MEM_OBJECT_ALLOCATION_FAILURE": "the device has no room for the buffer; free buffers or use smaller tensors",
    "INVALID_BUFFER_SIZE": "the buffer size is zero or above the device's max_mem_alloc_size",
    "INVALID_WORK_GROUP_SIZE": "the workgroup size does not fit this kernel on this device; recompile the "
    "graph for this device's profile",
    "INVALID_WORK_ITEM_SIZE": "a workgroup dimension exceeds the device's max_work_item_sizes; recompile the "
    "graph for this device's profile",
    "INVALID_GLOBAL_WORK_SIZE": "the grid is too large for the device; split the dispatch",
    "INVALID_KERNEL_ARGS": "a kernel argument was not set: the plan and the kernel disagree on arguments",
    "INVALID_ARG_SIZE": "an argument does not match the kernel's parameter: the plan and the kernel disagree",
    "INVALID_ARG_VALUE": "an argument does not match the kernel's parameter: the plan and the kernel disagree",
    "INVALID_MEM_OBJECT": "a buffer is not valid here (released, or made on another device)",
    "INVALID_BINARY": "the driver rejected a program binary; delete the OpenCL cache directory",
    "INVALID_BUILD_OPTIONS": "the driver rejected the build options",
    "BUILD_PROGRAM_FAILURE": "the driver could not compile the OpenCL C source",
    "INVALID_KERNEL_NAME": "the program has no kernel of that name",
    "DEVICE_NOT_AVAILABLE": "the device is not available (used exclusively by another process, or being "
    "reset); retry or pick another device",
    "PLATFORM_NOT_FOUND_KHR": "no OpenCL driver (ICD) is registered; install one (e.g. pocl-opencl-icd) or "
    "check /etc/OpenCL/vendors",
    "EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST": "an earlier command in the queue failed; see the first error",
}

_BUILD_STATUSES = {"INVALID_BINARY", "INVALID_BUILD_OPTIONS", "BUILD_PROGRAM_FAILURE", "INVALID_KERNEL_NAME",
                   "INVALID_WORK_GROUP_SIZE", "INVALID_WORK_ITEM_SIZE"}
_MEMORY_STATUSES = {"MEM_OBJECT_ALLOCATION_FAILURE", "OUT_OF_HOST_MEMORY"}


def _names() -> dict[int, str]:
    if cl is None:
        return {}
    return {getattr(cl.status_code, n): n for n in dir(cl.status_code) if n.isupper()}


_STATUS_NAMES = _names()


def status_name(code: int) -> str:
    """`CL_<NAME>` for a status code, so messages match the OpenCL specification and driver docs."""
    name = _STATUS_NAMES.get(code)
    return f"CL_{name}" if name else f"OpenCL status {code}"


def translate(err: Exception, doing: str, *, allocating: bool = False) -> PortableError:
    """The PortableError for a failed OpenCL call; `doing` says which call, for which device."""
    code = getattr(err, "code", None)
    if not isinstance(code, int):  # not a cl.Error (e.g. a TypeError from pyopencl's argument checks)
        return DriverError(f"{doing} failed: {type(err).__name__}: {err}")
    short = _STATUS_NAMES.get(code, "")
    advice = _ADVICE.get(short, "see the driver message")
    message = f"{doing} failed with {status_name(code)} ({code}): {advice}.\nDriver message: {err}"
    if short in _MEMORY_STATUSES or (allocating and short in ("OUT_OF_RESOURCES", "INVALID_BUFFER_SIZE")):
        return OutOfDeviceMemory(message)
    if short in _BUILD_STATUSES:
        return KernelBuildError(message, stage="opencl")
    return DriverError(message)
