"""The VkInstance: created with or without validation, owning its debug messenger; and the list of
physical devices portable can use (those with a compute queue), in a stable order."""

from __future__ import annotations

import weakref
from typing import Any

from ..errors import DeviceNotFound
from . import tracking, validation
from ._vk import LOAD_ERROR, chain, cstr, make_version, vk
from .errors import guard
from .properties import PhysicalDevice, describe, has_compute, queue_families

_WANTED_API = make_version(1, 3)  # newest version whose structs this runtime reads
_PORTABILITY = "VK_KHR_portability_enumeration"  # lets MoltenVK-style drivers be listed


def require_loader() -> None:
    """Raise DeviceNotFound when the `vulkan` package or libvulkan cannot be loaded."""
    if LOAD_ERROR is not None:
        raise DeviceNotFound(f"no Vulkan devices: {LOAD_ERROR}")


def instance_api_version() -> int:
    """The loader's instance version, capped to what this runtime knows; 1.0 loaders lack the query."""
    try:
        return min(vk.vkEnumerateInstanceVersion(), _WANTED_API)
    except (AttributeError, vk.ProcedureNotFoundError):
        return make_version(1, 0)


def _destroy(handle: Any, messenger: Any, sink_handle: Any) -> None:
    """Finalizer: no reference to the Instance object, so it can run after that is gone."""
    if messenger is not None:
        validation.destroy_messenger(handle, messenger)
    vk.vkDestroyInstance(handle, None)  # messages from here still reach the sink via the pNext messenger
    del sink_handle  # only now may the sink's cffi handle go
    tracking.destroyed("instance")


class Instance:
    """A VkInstance. With validation=True, WARNING/ERROR messages land in `validation_messages`."""

    def __init__(self, validation_enabled: bool = False, gpu_assisted: bool = False):
        require_loader()
        self.validation_messages: list[str] = []
        self.api_version = instance_api_version()
        with guard("vkEnumerateInstanceExtensionProperties"):
            available = {e.extensionName for e in vk.vkEnumerateInstanceExtensionProperties(None)}
        layers: list[str] = []
        extensions: list[str] = []
        flags = 0
        msg_info = sink_handle = _sync_keep = None
        instance_next: Any = None  # pNext of VkInstanceCreateInfo
        if validation_enabled:
            validation.require_layer()
            layers.append(validation.LAYER)
            extensions.append(validation.EXTENSION)  # also provided by the layer itself
            sink_handle = vk.ffi.new_handle(self.validation_messages)
            msg_info = instance_next = validation.messenger_create_info(sink_handle)
            if validation.FEATURES_EXTENSION in validation.layer_extensions():
                extensions.append(validation.FEATURES_EXTENSION)
                instance_next, _sync_keep = validation.features_info(gpu_assisted)
                chain(instance_next, msg_info)  # msg_info keeps a NULL pNext: it is reused for the messenger
        if _PORTABILITY in available:
            extensions.append(_PORTABILITY)
            flags |= vk.VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR
        app = vk.VkApplicationInfo(
            pApplicationName="portable", applicationVersion=1, pEngineName="portable", engineVersion=1,
            apiVersion=self.api_version,
        )
        create = vk.VkInstanceCreateInfo(
            pNext=instance_next, flags=flags, pApplicationInfo=app,
            ppEnabledLayerNames=layers, ppEnabledExtensionNames=extensions,
        )
        with guard("vkCreateInstance"):
            self.handle = vk.vkCreateInstance(create, None)
        tracking.created("instance")
        messenger = None
        if validation_enabled:
            try:
                messenger = validation.create_messenger(self.handle, msg_info)
            except BaseException:
                vk.vkDestroyInstance(self.handle, None)
                tracking.destroyed("instance")
                raise
        self.validation = validation_enabled
        self.gpu_assisted = bool(validation_enabled and gpu_assisted and _sync_keep is not None)
        self._finalizer = weakref.finalize(self, _destroy, self.handle, messenger, sink_handle)

    def compute_devices(self) -> tuple[list[PhysicalDevice], list[str]]:
        """Physical devices with a compute queue, indexed in loader order; reasons for the others."""
        with guard("vkEnumeratePhysicalDevices"):
            handles = list(vk.vkEnumeratePhysicalDevices(self.handle))
        devices: list[PhysicalDevice] = []
        reasons: list[str] = []
        if not handles:
            reasons.append("vulkan: the loader found no physical device; install a driver (a GPU vendor's, or "
                           "mesa-vulkan-drivers for the CPU driver lavapipe)")
        for h in handles:
            try:
                if not has_compute(queue_families(h)):
                    name = cstr(vk.vkGetPhysicalDeviceProperties(h).deviceName)
                    reasons.append(f"vulkan: {name} has no compute queue; skipped")
                    continue
                devices.append(describe(h, len(devices), self.api_version))
            except Exception as e:  # noqa: BLE001 - one odd driver must not hide the others
                reasons.append(f"vulkan: a physical device could not be queried ({type(e).__name__}: {e})")
        return devices, reasons

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Destroy the instance (idempotent); every device made from it must be destroyed first."""
        self._finalizer()

