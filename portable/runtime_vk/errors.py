"""Turn what the `vulkan` package raises (or a raw VkResult) into portable's errors, each naming the
VkResult and saying what the user can do about it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import DeviceLost, DriverError, OutOfDeviceMemory, PortableError
from ._vk import RESULT_NAMES, vk


class CacheWarning(UserWarning):
    """An on-disk cache could not be read or written; the run goes on without it."""


_ADVICE = {
    "VK_ERROR_OUT_OF_HOST_MEMORY": "the host ran out of memory; free buffers, use smaller inputs, or close "
    "other programs",
    "VK_ERROR_OUT_OF_DEVICE_MEMORY": "the device ran out of memory; free buffers or use smaller inputs",
    "VK_ERROR_INITIALIZATION_FAILED": "the driver could not initialise; check that `vulkaninfo` works and "
    "that the driver matches the kernel module",
    "VK_ERROR_DEVICE_LOST": "the device was lost (a kernel faulted or ran too long, or the driver reset); "
    "close this backend and create a new one",
    "VK_ERROR_LAYER_NOT_PRESENT": "a requested layer is not installed (validation: install "
    "vulkan-validationlayers)",
    "VK_ERROR_EXTENSION_NOT_PRESENT": "the driver lacks an extension portable requested; update the driver",
    "VK_ERROR_FEATURE_NOT_PRESENT": "the driver lacks a feature portable requested; update the driver",
    "VK_ERROR_INCOMPATIBLE_DRIVER": "the loader found no usable driver (none installed, one that failed to load, "
    "or one too old for the requested Vulkan version); check `vulkaninfo`, rerun with VK_LOADER_DEBUG=error,warn",
    "VK_ERROR_TOO_MANY_OBJECTS": "the driver's limit on objects (e.g. memory allocations) was reached; "
    "free buffers or reuse them",
    "VK_ERROR_OUT_OF_POOL_MEMORY": "a descriptor pool was too small (a portable bug: please report it)",
    "VK_ERROR_FRAGMENTED_POOL": "a descriptor pool is fragmented (a portable bug: please report it)",
    "VK_ERROR_INVALID_SHADER_NV": "the driver rejected the SPIR-V; validate it with spirv-val and report "
    "the kernel",
    "VK_ERROR_UNKNOWN": "the driver gave no reason; rerun with validation=True (PORTABLE_VK_VALIDATION=1) "
    "to find the misuse, or update the driver",
    "VK_TIMEOUT": "the device did not finish in time; the kernel may hang or be far too slow",
}
_DEFAULT_ADVICE = "rerun with validation=True (PORTABLE_VK_VALIDATION=1) to see why, or update the driver"


def result_name(err: BaseException | int) -> str:
    """The VkResult name for an exception of the `vulkan` package (matched by class name) or a raw code."""
    if isinstance(err, int):
        return RESULT_NAMES.get(err, f"VkResult({err})")
    if isinstance(err, KeyError) and err.args and isinstance(err.args[0], int):
        # The package raises KeyError for codes missing from its own table.
        return result_name(err.args[0])
    # VkErrorOutOfDeviceMemory -> VK_ERROR_OUT_OF_DEVICE_MEMORY
    name = type(err).__name__ if isinstance(err, BaseException) else err.__name__
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def advice(name: str) -> str:
    return _ADVICE.get(name, _DEFAULT_ADVICE)


def to_portable(err: BaseException | int, what: str, default: type[PortableError] = DriverError) -> PortableError:
    """The portable error for a failed Vulkan call `what`: DeviceLost, OutOfDeviceMemory, else `default`."""
    name = result_name(err)
    msg = f"{what} failed with {name}: {advice(name)}"
    if name == "VK_ERROR_DEVICE_LOST":
        return DeviceLost(msg)
    if name in ("VK_ERROR_OUT_OF_DEVICE_MEMORY", "VK_ERROR_OUT_OF_HOST_MEMORY"):
        return OutOfDeviceMemory(msg)
    return default(msg)


def is_vulkan_error(e: BaseException) -> bool:
    """True for what the `vulkan` package raises for a non-success VkResult."""
    if vk is None:
        return False
    if isinstance(e, (vk.VkError, vk.VkException)):
        return True
    return isinstance(e, KeyError) and bool(e.args) and isinstance(e.args[0], int)


@contextmanager
def guard(what: str, default: type[PortableError] = DriverError) -> Iterator[None]:
    """Run Vulkan calls; any VkResult failure inside becomes a portable error raised from it."""
    try:
        yield
    except PortableError:
        raise
    except Exception as e:
        if is_vulkan_error(e):
            raise to_portable(e, what, default) from e
        raise


def check(result: int, what: str, default: type[PortableError] = DriverError) -> None:
    """Raise for a raw VkResult from a `vulkan.lib` call the package does not wrap."""
    if result != 0:
        raise to_portable(int(result), what, default)
