"""What a physical device says about itself, turned into portable's DeviceInfo (plus the raw facts the
runtime needs later: API version, extensions, UUIDs, memory types, queue families)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backend import DeviceInfo
from . import features
from ._vk import chain, cstr, make_version, new_struct, version_str, vk

_DEVICE_TYPES = {1: "integrated-gpu", 2: "gpu", 3: "other", 4: "cpu"}  # 0 other, 3 virtual gpu
_QUEUE_BITS = [(0x1, "graphics"), (0x2, "compute"), (0x4, "transfer"), (0x8, "sparse"), (0x10, "protected"),
               (0x20, "video-decode"), (0x40, "video-encode"), (0x100, "optical-flow")]
_NVIDIA, _INTEL = 0x10DE, 0x8086


@dataclass(frozen=True)
class PhysicalDevice:
    """A physical device with everything the runtime reads from it once, at discovery."""

    handle: Any
    info: DeviceInfo
    api_version: int  # min(device, instance): what may be used
    extensions: frozenset[str]
    device_uuid: bytes
    cache_uuid: bytes  # pipelineCacheUUID: names the on-disk pipeline cache
    driver_version_raw: int
    queue_families: tuple[tuple[int, int], ...]  # (VkQueueFlags, queueCount) per family
    memory: Any  # VkPhysicalDeviceMemoryProperties
    features: dict[str, bool]
    max_allocation_count: int


def queue_flags_str(flags: int) -> str:
    return "|".join(name for bit, name in _QUEUE_BITS if flags & bit) or "none"


def decode_driver_version(vendor_id: int, v: int) -> str:
    """driverVersion is vendor-encoded; NVIDIA and Intel (Windows) differ from the Vulkan packing."""
    if vendor_id == _NVIDIA:
        return f"{v >> 22}.{(v >> 14) & 0xFF}.{(v >> 6) & 0xFF}"
    if vendor_id == _INTEL:
        return f"{v >> 14}.{v & 0x3FFF}"
    return version_str(v)


def queue_families(handle: Any) -> tuple[tuple[int, int], ...]:
    return tuple((q.queueFlags, q.queueCount) for q in vk.vkGetPhysicalDeviceQueueFamilyProperties(handle))


def has_compute(families: tuple[tuple[int, int], ...]) -> bool:
    return any(flags & vk.VK_QUEUE_COMPUTE_BIT and count for flags, count in families)


def describe(handle: Any, index: int, instance_api: int) -> PhysicalDevice:
    """Query properties, features and memory of one physical device (valid only for 1.1+ structs on
    devices that have them, so the validation layer stays quiet)."""
    base = vk.vkGetPhysicalDeviceProperties(handle)
    api = min(base.apiVersion, instance_api)
    exts = frozenset(e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(handle, None))

    def usable(since: tuple[int, int], ext: str = "") -> bool:
        return api >= make_version(*since) or (bool(ext) and ext in exts)

    driver = subgroup = maint3 = maint4 = ident = size_control = None
    if api >= make_version(1, 1):
        head = new_struct("VkPhysicalDeviceProperties2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2)
        links = []
        subgroup = new_struct("VkPhysicalDeviceSubgroupProperties",
                              vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
        maint3 = new_struct("VkPhysicalDeviceMaintenance3Properties",
                            vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES)
        ident = new_struct("VkPhysicalDeviceIDProperties", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES)
        links += [subgroup, maint3, ident]
        if usable((1, 2), "VK_KHR_driver_properties"):
            driver = new_struct("VkPhysicalDeviceDriverProperties",
                                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES)
            links.append(driver)
        if usable((1, 3), "VK_EXT_subgroup_size_control"):
            size_control = new_struct("VkPhysicalDeviceSubgroupSizeControlProperties",
                                      vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES)
            links.append(size_control)
        if usable((1, 3), "VK_KHR_maintenance4"):
            maint4 = new_struct("VkPhysicalDeviceMaintenance4Properties",
                                vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES)
            links.append(maint4)
        chain(head, *links)  # `links` keeps the structs alive across the call
        vk.lib.vkGetPhysicalDeviceProperties2(handle, head)

    feats = features.query(handle, api, exts)
    memory = vk.vkGetPhysicalDeviceMemoryProperties(handle)
    families = queue_families(handle)
    lim = base.limits

    local_heaps = [memory.memoryHeaps[i].size for i in range(memory.memoryHeapCount)
                   if memory.memoryHeaps[i].flags & vk.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT]
    max_buffer = max(local_heaps or [memory.memoryHeaps[i].size for i in range(memory.memoryHeapCount)])
    if maint3 is not None and maint3.maxMemoryAllocationSize:
        max_buffer = min(max_buffer, maint3.maxMemoryAllocationSize)
    if maint4 is not None and maint4.maxBufferSize:
        max_buffer = min(max_buffer, maint4.maxBufferSize)

    name = cstr(base.deviceName)
    driver_name = cstr(driver.driverName) if driver is not None else ""
    driver_info = cstr(driver.driverInfo) if driver is not None else ""
    info = DeviceInfo(
        api="vulkan",
        index=index,
        name=name,
        driver=driver_name or name,
        driver_version=driver_info or decode_driver_version(base.vendorID, base.driverVersion),
        vendor_id=base.vendorID,
        device_id=base.deviceID,
        device_type=_DEVICE_TYPES.get(base.deviceType, "other"),
        limits={
            "max_workgroup_size": tuple(lim.maxComputeWorkGroupSize),
            "max_workgroup_invocations": lim.maxComputeWorkGroupInvocations,
            "max_workgroup_count": tuple(lim.maxComputeWorkGroupCount),
            "shared_memory_bytes": lim.maxComputeSharedMemorySize,
            "subgroup_size": subgroup.subgroupSize if subgroup is not None else 0,
            # Subgroup reductions (GroupNonUniformArithmetic) in compute shaders (compiler/schedule/subgroup_reduce.py).
            "subgroup_arithmetic": subgroup is not None and bool(
                subgroup.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT
                and subgroup.supportedOperations & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT),
            "max_storage_buffer_range": lim.maxStorageBufferRange,
            "max_buffer_bytes": max_buffer,
            "max_push_constants_bytes": lim.maxPushConstantsSize,
            "max_storage_buffers_per_stage": lim.maxPerStageDescriptorStorageBuffers,
            "min_storage_buffer_offset_alignment": lim.minStorageBufferOffsetAlignment,
            # Uniform texel buffers (codegen_spirv/texel_reads.py) count against the sampled-image limit.
            "max_sampled_images_per_stage": lim.maxPerStageDescriptorSampledImages,
            "max_texel_buffer_elements": lim.maxTexelBufferElements,
            "min_texel_buffer_offset_alignment": lim.minTexelBufferOffsetAlignment,
            "fp16": feats["shaderFloat16"],
            "int8": feats["shaderInt8"],
            "int16": feats["shaderInt16"],
            "int64": feats["shaderInt64"],
            "fp64": feats["shaderFloat64"],
            "storage_buffer_16bit": feats["storageBuffer16BitAccess"],
            "storage_buffer_8bit": feats["storageBuffer8BitAccess"],
            "timeline_semaphore": feats["timelineSemaphore"],
            "cooperative_matrix": "VK_KHR_cooperative_matrix" in exts,
            "vulkan_memory_model": feats["vulkanMemoryModel"],
            # Subgroup widths a compute pipeline may require (VK_EXT_subgroup_size_control; pipelines.build).
            "subgroup_size_control": bool(size_control is not None and feats["subgroupSizeControl"]
                                          and size_control.requiredSubgroupSizeStages & vk.VK_SHADER_STAGE_COMPUTE_BIT),
            "min_subgroup_size": size_control.minSubgroupSize if size_control is not None else 0,
            "max_subgroup_size": size_control.maxSubgroupSize if size_control is not None else 0,
            "max_compute_workgroup_subgroups": size_control.maxComputeWorkgroupSubgroups
            if size_control is not None else 0,
            "compute_full_subgroups": bool(feats["computeFullSubgroups"]),
            "queue_families": [(queue_flags_str(f), c) for f, c in families],
            "api_version": version_str(base.apiVersion),
        },
    )
    return PhysicalDevice(
        handle=handle,
        info=info,
        api_version=api,
        extensions=exts,
        device_uuid=bytes(list(ident.deviceUUID)) if ident is not None else b"",
        cache_uuid=bytes(list(base.pipelineCacheUUID)),
        driver_version_raw=base.driverVersion,
        queue_families=families,
        memory=memory,
        features=feats,
        max_allocation_count=lim.maxMemoryAllocationCount,
    )
