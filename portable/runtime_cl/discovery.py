"""Every OpenCL device of every platform, as DeviceInfo, without ever raising for one bad driver."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backend import DeviceInfo
from .clapi import IMPORT_ERROR, cl, device_info_sizes, device_info_uint
from .errors import translate

# OpenCL has no limit on workgroup counts per dimension; size_t-sized global sizes in practice. The
# largest signed 32-bit value keeps plans portable to Vulkan-style int32 indexing.
_NO_COUNT_LIMIT = (2**31 - 1,) * 3

# Intel's CL_DEVICE_SUB_GROUP_SIZES_INTEL: pyopencl has no name for it and refuses the raw query (clapi asks).
_SUB_GROUP_SIZES_INTEL = 0x4108
# The PCI device id, where a vendor extension reports it (cl_ext.h): what profiles.match reads first.
_DEVICE_ID_QUERIES = (("cl_amd_device_attribute_query", 0x4034),   # CL_DEVICE_PCIE_ID_AMD
                      ("cl_intel_device_attribute_query", 0x4251))  # CL_DEVICE_ID_INTEL


@dataclass(frozen=True)
class FoundDevice:
    """A DeviceInfo with the live pyopencl objects behind it (what OpenCLBackend opens)."""

    info: DeviceInfo
    device: Any  # pyopencl.Device
    platform_version: str


def _query(device: Any, attr: str, default: Any = None) -> Any:
    """An optional device property; drivers differ in what they answer, and a missing one is not fatal."""
    try:
        return getattr(device, attr)
    except Exception:
        return default


def _subgroup_size(device: Any, extensions: list[str]) -> int | None:
    """The subgroup (warp/wavefront) width where a vendor extension reports it per device."""
    if "cl_nv_device_attribute_query" in extensions:
        return _query(device, "warp_size_nv")
    if "cl_amd_device_attribute_query" in extensions:
        return _query(device, "wavefront_width_amd")
    if "cl_intel_required_subgroup_size" in extensions:
        try:
            sizes = device_info_sizes(device, _SUB_GROUP_SIZES_INTEL)
        except Exception:  # a loader without clGetDeviceInfo through ctypes
            return None
        return max(sizes) if sizes else None
    # cl_khr_subgroups reports sizes per kernel only (clGetKernelSubGroupInfo), not per device.
    return None


def _device_id(device: Any, extensions: list[str]) -> int:
    """The PCI device id (0 where no vendor extension reports it: core OpenCL has no such query)."""
    for ext, param in _DEVICE_ID_QUERIES:
        if ext in extensions:
            try:
                return device_info_uint(device, param) or 0
            except Exception:  # a loader without clGetDeviceInfo through ctypes: the name still matches
                return 0
    return 0


def _device_type(device: Any) -> str:
    kind = int(device.type)
    if kind & cl.device_type.GPU:
        return "gpu"
    if kind & cl.device_type.CPU:
        return "cpu"
    return "other"


def _describe(index: int, platform: Any, device: Any) -> FoundDevice:
    """One device's DeviceInfo; raises only if a mandatory query (name, type) fails."""
    extensions = sorted(set((_query(device, "extensions", "") or "").split()))
    item_sizes = list(_query(device, "max_work_item_sizes", []) or [])
    item_sizes = (item_sizes + [1, 1, 1])[:3]
    info = DeviceInfo(
        api="opencl",
        index=index,
        name=device.name.strip(),
        driver=platform.name.strip(),
        driver_version=f"{_query(device, 'driver_version', '').strip()} ({platform.version.strip()})",
        vendor_id=int(_query(device, "vendor_id", 0) or 0),
        device_id=_device_id(device, extensions),
        device_type=_device_type(device),
        limits={
            "max_workgroup_size": tuple(int(s) for s in item_sizes),
            "max_workgroup_invocations": int(_query(device, "max_work_group_size", 1)),
            "max_workgroup_count": _NO_COUNT_LIMIT,
            "shared_memory_bytes": int(_query(device, "local_mem_size", 0)),
            "subgroup_size": _subgroup_size(device, extensions),
            "max_buffer_bytes": int(_query(device, "max_mem_alloc_size", 0)),
            # A sub-buffer's offset is a multiple of CL_DEVICE_MEM_BASE_ADDR_ALIGN (bits): plans that bind byte
            # ranges align them to it (NVIDIA: 4096 bits).
            "min_storage_buffer_offset_alignment": int(_query(device, "mem_base_addr_align", 1024) or 1024) // 8,
            "global_mem_bytes": int(_query(device, "global_mem_size", 0)),
            "fp16": "cl_khr_fp16" in extensions,
            # SIMD lanes of a float vector (PoCL: 8 with AVX2, 16 with AVX-512).
            "native_float_vector_width": int(_query(device, "native_vector_width_float", 0) or 0),
            # PoCL: the last-level cache (32 MiB on a 2-core EPYC's L3).
            "global_mem_cache_bytes": int(_query(device, "global_mem_cache_size", 0) or 0),
            "int8": True,  # char/uchar are core OpenCL C
            "opencl_c_version": (_query(device, "opencl_c_version", "") or "").strip(),
            "extensions": extensions,
            "command_buffer": "cl_khr_command_buffer" in extensions,
        },
    )
    return FoundDevice(info=info, device=device, platform_version=platform.version.strip())


def discover() -> tuple[list[FoundDevice], list[str]]:
    """Devices in platform order then device order, plus a reason for each platform or device skipped."""
    if cl is None:
        return [], [IMPORT_ERROR or "pyopencl is not available"]
    found: list[FoundDevice] = []
    reasons: list[str] = []
    try:
        platforms = cl.get_platforms()
    except Exception as e:
        return [], [str(translate(e, "listing OpenCL platforms (clGetPlatformIDs)"))]
    for p, platform in enumerate(platforms):
        pname = _query(platform, "name", f"platform {p}")
        try:
            devices = platform.get_devices()
        except Exception as e:
            reasons.append(str(translate(e, f"listing devices of OpenCL platform {pname!r}")))
            continue
        for d, device in enumerate(devices):
            try:
                found.append(_describe(len(found), platform, device))
            except Exception as e:
                reasons.append(f"OpenCL platform {pname!r}, device {d}: cannot be queried ({type(e).__name__}: "
                               f"{e}); skipped")
    return found, reasons


def enumerate_devices() -> tuple[list[DeviceInfo], list[str]]:
    """Every OpenCL device as DeviceInfo (index i is "opencl:i"), and why any driver could not be listed."""
    try:
        found, reasons = discover()
    except Exception as e:  # a driver misbehaving in a way not foreseen above must not break `devices`
        return [], [f"OpenCL discovery failed ({type(e).__name__}: {e})"]
    return [f.info for f in found], reasons
