"""Khronos validation layer plumbing: a debug-utils messenger that appends WARNING and ERROR messages to
a Python list, so tests can assert the runtime uses Vulkan correctly."""

from __future__ import annotations

import contextlib
from typing import Any

from ..errors import DriverError
from ._vk import new_struct, vk
from .errors import guard

LAYER = "VK_LAYER_KHRONOS_validation"
EXTENSION = "VK_EXT_debug_utils"
FEATURES_EXTENSION = "VK_EXT_validation_features"  # offered by the layer; turns on sync or GPU-assisted checks

_SEVERITY = {0x100: "WARNING", 0x1000: "ERROR"}
_callback: Any = None  # one cffi callback for the process; pUserData says which list gets the message


def _on_message(severity: int, types: int, data: Any, user_data: Any) -> int:
    """Called by the layer, possibly from inside any Vulkan call; must never raise."""
    with contextlib.suppress(Exception):  # never unwind a Python exception through the driver
        sink: list[str] = vk.ffi.from_handle(user_data)
        text = vk.ffi.string(data.pMessage).decode("utf-8", "replace") if data.pMessage else ""
        sink.append(f"{_SEVERITY.get(severity, hex(severity))}: {text}")
    return 0  # VK_FALSE: let the call proceed, as the spec asks of application callbacks


def require_layer() -> None:
    """Raise DriverError unless the validation layer and debug-utils are installed."""
    with guard("vkEnumerateInstanceLayerProperties"):
        layers = {p.layerName for p in vk.vkEnumerateInstanceLayerProperties()}
    if LAYER not in layers:
        raise DriverError(
            f"Vulkan validation was requested but {LAYER} is not installed; install the "
            f"`vulkan-validationlayers` package (Debian/Ubuntu) or the Vulkan SDK, or run without validation"
        )


def layer_extensions() -> set[str]:
    """Instance extensions the validation layer itself provides."""
    with guard("vkEnumerateInstanceExtensionProperties"):
        return {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(LAYER)}


def features_info(gpu_assisted: bool = False) -> tuple[Any, Any]:
    """(VkValidationFeaturesEXT, its array to keep alive): synchronization validation, or with `gpu_assisted`
    GPU-assisted validation instead.

    Core validation checks API usage only; synchronization validation also reports missing or wrong
    barriers (read-after-write hazards between dispatches and copies), which is what a runtime gets wrong.
    GPU-assisted validation instruments each kernel so that its out-of-bounds buffer accesses are reported (the
    layer checks storage-buffer bounds where the device enables a descriptor-indexing feature: the backend turns
    one on, features.GPU_AV_FEATURE).
    """
    names = (["VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT",
              "VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_RESERVE_BINDING_SLOT_EXT"] if gpu_assisted
             else ["VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT"])
    enabled = vk.ffi.new("VkValidationFeatureEnableEXT[]", [getattr(vk, n) for n in names])
    info = new_struct("VkValidationFeaturesEXT", vk.VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                      enabledValidationFeatureCount=len(names), pEnabledValidationFeatures=enabled)
    return info, enabled


def messenger_create_info(sink_handle: Any) -> Any:
    """The create-info for a messenger that appends to the list behind `sink_handle` (ffi.new_handle).

    Also chained into VkInstanceCreateInfo.pNext, so messages from instance creation and destruction
    (e.g. leaked objects) are caught too.
    """
    global _callback
    if _callback is None:
        _callback = vk.ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT", _on_message, error=0)
    return new_struct(
        "VkDebugUtilsMessengerCreateInfoEXT",
        vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        messageSeverity=vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        messageType=vk.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT
        | vk.VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        pfnUserCallback=_callback,
        pUserData=sink_handle,
    )


def create_messenger(instance: Any, info: Any) -> Any:
    """vkCreateDebugUtilsMessengerEXT (an extension function, so fetched through vkGetInstanceProcAddr)."""
    try:
        fn = vk.vkGetInstanceProcAddr(instance, "vkCreateDebugUtilsMessengerEXT")
    except (vk.ProcedureNotFoundError, vk.ExtensionNotSupportedError) as e:
        raise DriverError(f"{EXTENSION} is enabled but vkCreateDebugUtilsMessengerEXT is missing; "
                          f"reinstall vulkan-validationlayers") from e
    with guard("vkCreateDebugUtilsMessengerEXT"):
        return fn(instance, info, None)


def destroy_messenger(instance: Any, messenger: Any) -> None:
    fn = vk.vkGetInstanceProcAddr(instance, "vkDestroyDebugUtilsMessengerEXT")
    fn(instance, messenger, None)
