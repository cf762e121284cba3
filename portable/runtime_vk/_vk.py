"""The one place that imports the `vulkan` (cffi) package, plus small helpers for raw cffi structs.

Importing `vulkan` dlopens libvulkan at import time; keeping that here (and catching its failure) lets
`import portable.runtime_vk` succeed on hosts without a Vulkan loader, so discovery can say why instead
of crashing.
"""

from __future__ import annotations

from typing import Any

try:
    import vulkan as vk

    LOAD_ERROR: str | None = None
except (ImportError, OSError) as _e:  # no `vulkan` package, or it found no libvulkan.so.1
    vk = None  # type: ignore[assignment]
    LOAD_ERROR = (
        f"the Vulkan loader could not be loaded ({type(_e).__name__}: {_e}); install the `vulkan` Python "
        f"package and a loader (Debian: libvulkan1) plus a driver (e.g. mesa-vulkan-drivers)"
    )

# Every VkResult we may meet, by value. Not taken from the `vulkan` package: its tables give some
# extension codes the wrong sign (e.g. VK_ERROR_OUT_OF_POOL_MEMORY), so a raw result could be misnamed.
RESULT_NAMES: dict[int, str] = {
    0: "VK_SUCCESS",
    1: "VK_NOT_READY",
    2: "VK_TIMEOUT",
    3: "VK_EVENT_SET",
    4: "VK_EVENT_RESET",
    5: "VK_INCOMPLETE",
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -4: "VK_ERROR_DEVICE_LOST",
    -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
    -10: "VK_ERROR_TOO_MANY_OBJECTS",
    -11: "VK_ERROR_FORMAT_NOT_SUPPORTED",
    -12: "VK_ERROR_FRAGMENTED_POOL",
    -13: "VK_ERROR_UNKNOWN",
    -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
    -1000072003: "VK_ERROR_INVALID_EXTERNAL_HANDLE",
    -1000161000: "VK_ERROR_FRAGMENTATION",
    -1000257000: "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS",
    1000297000: "VK_PIPELINE_COMPILE_REQUIRED",
    -1000012000: "VK_ERROR_INVALID_SHADER_NV",
    -1000338000: "VK_ERROR_COMPRESSION_EXHAUSTED_EXT",
}


def new_struct(ctype: str, stype: int, **fields: Any) -> Any:
    """A zeroed `ctype` struct pointer with sType set; raw cffi so pNext chains are under our control."""
    p = vk.ffi.new(ctype + "*")
    p.sType = stype
    for k, v in fields.items():
        setattr(p, k, v)
    return p


def chain(head: Any, *links: Any) -> list[Any]:
    """Link struct pointers head -> links[0] -> ... through pNext; returns them all so the caller keeps
    every struct alive until the Vulkan call that reads the chain has returned."""
    prev = head
    for link in links:
        prev.pNext = link
        prev = link
    return [head, *links]


def version_str(v: int) -> str:
    """A packed Vulkan API version as 'major.minor.patch'."""
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def make_version(major: int, minor: int, patch: int = 0) -> int:
    return (major << 22) | (minor << 12) | patch


def cstr(chars: Any) -> str:
    """A fixed char[] field (deviceName, driverName ...) as str; some wrappers already give a str."""
    if isinstance(chars, str):
        return chars
    return vk.ffi.string(chars).decode("utf-8", errors="replace")
