"""Device discovery and the live device per URI ("vulkan:0", "opencl:1")."""

from __future__ import annotations

import atexit
import functools
import re
import threading
from dataclasses import dataclass

from . import config, profiles
from .backend import Backend, DeviceInfo
from .errors import DeviceNotFound, PortableError
from .memory import BufferPool

APIS = ("vulkan", "opencl")


@dataclass(frozen=True)
class Device:
    """One device as `portable.devices()` lists it."""

    info: DeviceInfo
    profile: str

    @property
    def uri(self) -> str:
        return self.info.uri

    def __str__(self) -> str:
        i = self.info
        # The PCI ids profiles are matched by (device 0000 where the driver reports none).
        return (f"{i.uri:10s} {i.name} | driver {i.driver} {i.driver_version} | {i.device_type} | "
                f"id {i.vendor_id:04x}:{i.device_id:04x} | profile {self.profile}")


def _enumerate(api: str) -> tuple[list[DeviceInfo], list[str]]:
    try:
        if api == "vulkan":
            from .runtime_vk import enumerate_devices
        else:
            from .runtime_cl import enumerate_devices
    except ImportError as e:
        pkg = "vulkan" if api == "vulkan" else "pyopencl"
        return [], [f"{api}: Python package '{pkg}' is not importable ({e}); pip install {pkg}"]
    return enumerate_devices()


def devices() -> tuple[list[Device], list[str]]:
    """Every Vulkan and OpenCL device found, with its matched profile; plus why any driver failed to load."""
    found, failures = [], []
    for api in APIS:
        infos, errs = _enumerate(api)
        failures.extend(errs)
        found.extend(Device(i, _profile_name(i)) for i in infos)
    return found, failures


def _profile_name(info: DeviceInfo) -> str:
    """The matched profile's name; a runtime-only install without device_profiles/ still lists its devices."""
    try:
        return profiles.match(info).name
    except (PortableError, OSError) as e:
        return f"unknown ({e})"


def parse_uri(uri: str) -> tuple[str, int]:
    m = re.fullmatch(r"\s*(vulkan|opencl|null)(?::(\d+))?\s*", uri or "")
    if not m:
        raise DeviceNotFound(f"unknown device {uri!r}: use 'vulkan:N' or 'opencl:N' ('null:0' records dispatches "
                             f"without a driver; run `portable devices` to list them)")
    return m.group(1), int(m.group(2) or 0)


class LiveDevice:
    """A backend plus its buffer pool and matched profile; one per URI per process."""

    def __init__(self, backend: Backend):
        self.backend = backend
        self.pool = BufferPool(backend, f"{backend.info.uri} ({backend.info.name})")
        self.lock = threading.Lock()

    @property
    def info(self) -> DeviceInfo:
        return self.backend.info

    @functools.cached_property
    def profile(self) -> profiles.Profile:
        """The matched profile from device_profiles/ (read on first use: running a package needs none)."""
        return profiles.match(self.backend.info)

    @functools.cached_property
    def options(self) -> dict:
        """Codegen options for compiling on this device: the profile clamped to the device's limits."""
        return profiles.codegen_options(self.profile, self.backend.info)


_live: dict[str, LiveDevice] = {}
_live_lock = threading.Lock()


def open_device(uri: str) -> LiveDevice:
    """The live device for `uri`, created on first use. Raises DeviceNotFound with the list of devices."""
    api, index = parse_uri(uri)
    key = f"{api}:{index}"
    with _live_lock:
        if key in _live:
            return _live[key]
        if api == "null":  # no driver: records what it is asked to run (runtime_null.py)
            from .runtime_null import NullBackend

            _live[key] = LiveDevice(NullBackend(index))
            return _live[key]
        infos, errs = _enumerate(api)
        if index >= len(infos):
            listing = "; ".join(i.uri + " " + i.name for i in infos) or "none"
            why = f" ({'; '.join(errs)})" if errs else ""
            raise DeviceNotFound(f"{key}: there are {len(infos)} {api} device(s): {listing}{why}. "
                                 f"Run `portable devices` to list every device.")
        if api == "vulkan":
            from .runtime_vk import VulkanBackend

            backend: Backend = VulkanBackend(index, validation=config.vk_validation(), gpu_assisted=config.vk_gpu_av())
        else:
            from .runtime_cl import OpenCLBackend

            backend = OpenCLBackend(index)
        _live[key] = LiveDevice(backend)
        return _live[key]


@atexit.register
def close_all() -> None:
    """Close every live device (pool, then backend) before interpreter teardown scrambles the order."""
    with _live_lock:
        for d in _live.values():
            d.backend.close()  # frees every buffer it still owns, pooled ones included
        _live.clear()
