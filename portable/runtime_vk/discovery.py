"""enumerate_devices(): every Vulkan device with a compute queue, and why anything else was left out.
Never raises: a host with no loader or a broken driver gets reasons, not a crash."""

from __future__ import annotations

from ..backend import DeviceInfo
from ..errors import PortableError
from .instance import Instance

# One instance for discovery, created on first use; instance creation loads every ICD, so listing
# devices repeatedly should not pay it again. Its finalizer destroys it at interpreter exit.
_discovery: Instance | None = None


def discovery_instance() -> Instance:
    """The cached non-validation instance (created on first call)."""
    global _discovery
    if _discovery is None or _discovery.closed:
        _discovery = Instance(validation_enabled=False)
    return _discovery


def enumerate_devices() -> tuple[list[DeviceInfo], list[str]]:
    """(devices with a compute queue as DeviceInfo, human-readable reasons for whatever failed)."""
    try:
        devices, reasons = discovery_instance().compute_devices()
    except PortableError as e:
        return [], [f"vulkan: {e}"]
    except Exception as e:  # noqa: BLE001 - discovery must never take the caller down
        return [], [f"vulkan: device discovery failed ({type(e).__name__}: {e})"]
    return [d.info for d in devices], reasons


def describe_devices(devices: list[DeviceInfo]) -> str:
    """One line per device, for error messages that list what exists."""
    if not devices:
        return "  (none)"
    return "\n".join(f"  {d.uri}: {d.name} ({d.device_type}, driver {d.driver} {d.driver_version})"
                     for d in devices)
