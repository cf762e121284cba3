"""Optional device features kernels may need (fp16/int8 arithmetic and storage, int64, timeline
semaphores, the Vulkan memory model, subgroup size control, cooperative matrices): which a device has, and the
chain that enables them.

Each comes from a Vulkan version or, before it, from a KHR extension; one table serves both the query
(discovery) and the enable (device creation), so the two can never disagree.
"""

from __future__ import annotations

from typing import Any

from ._vk import chain, make_version, new_struct, vk

EXTENSION_ONLY = make_version(1023, 0)  # "core since" of features no Vulkan version has made core

# (struct, sType constant name, core since, extension before that, fields)
_STRUCTS: list[tuple[str, str, int, str, tuple[str, ...]]] = [
    ("VkPhysicalDevice16BitStorageFeatures", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES",
     make_version(1, 1), "VK_KHR_16bit_storage", ("storageBuffer16BitAccess",)),
    ("VkPhysicalDevice8BitStorageFeatures", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES",
     make_version(1, 2), "VK_KHR_8bit_storage", ("storageBuffer8BitAccess",)),
    ("VkPhysicalDeviceShaderFloat16Int8Features", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES",
     make_version(1, 2), "VK_KHR_shader_float16_int8", ("shaderFloat16", "shaderInt8")),
    ("VkPhysicalDeviceTimelineSemaphoreFeatures", "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES",
     make_version(1, 2), "VK_KHR_timeline_semaphore", ("timelineSemaphore",)),
    ("VkPhysicalDeviceVulkanMemoryModelFeatures",
     "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES",
     make_version(1, 2), "VK_KHR_vulkan_memory_model", ("vulkanMemoryModel", "vulkanMemoryModelDeviceScope")),
    # A kernel laid over a fixed subgroup width (shuffles, cooperative matrices) asks for it at pipeline creation
    # (pipelines.build): drivers that pick a width per pipeline (RADV wave32/64, Intel SIMD8/16/32) then run it so.
    ("VkPhysicalDeviceSubgroupSizeControlFeatures",
     "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES",
     make_version(1, 3), "VK_EXT_subgroup_size_control", ("subgroupSizeControl", "computeFullSubgroups")),
    # Matmuls on matrix units (compiler/schedule/coop_matrix.py): OpCooperativeMatrix*KHR in SPIR-V 1.6.
    ("VkPhysicalDeviceCooperativeMatrixFeaturesKHR",
     "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR",
     EXTENSION_ONLY, "VK_KHR_cooperative_matrix", ("cooperativeMatrix",)),
]
# Features only a tool turns on, by name (VulkanBackend(opt_in=...)): they may make the driver keep more per
# pipeline, so ordinary runs never enable them. Queried like the rest, so pd.features says whether they exist.
OPT_IN: dict[str, tuple[str, str, int, str, tuple[str, ...]]] = {
    # Driver statistics per pipeline (registers, spills, shared memory): benchmarks/pipeline_stats.py.
    "pipelineExecutableInfo": ("VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR",
                               "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR",
                               EXTENSION_ONLY, "VK_KHR_pipeline_executable_properties", ("pipelineExecutableInfo",)),
    # GPU-assisted validation (PORTABLE_VK_GPU_AV) checks storage-buffer bounds only on a device with a
    # descriptor-indexing feature enabled (runtime_vk/validation.py).
    "runtimeDescriptorArray": ("VkPhysicalDeviceDescriptorIndexingFeatures",
                               "VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES",
                               make_version(1, 2), "VK_EXT_descriptor_indexing", ("runtimeDescriptorArray",)),
}
GPU_AV_FEATURE = "runtimeDescriptorArray"
_CORE_FIELDS = ("shaderInt64", "shaderInt16", "shaderFloat64")
V1_1 = make_version(1, 1)


def _usable(api: int, extensions: frozenset[str], since: int, ext: str) -> str | None:
    """'' if core at `api`, the extension name if only the extension offers it, None if unavailable."""
    if api >= since:
        return ""
    return ext if ext in extensions else None


def query(handle: Any, api: int, extensions: frozenset[str]) -> dict[str, bool]:
    """Every feature of the table (plus a few core ones) -> whether the device supports it."""
    out = {f: False for *_, fields in (*_STRUCTS, *OPT_IN.values()) for f in fields}
    if api < V1_1:  # no vkGetPhysicalDeviceFeatures2 in core 1.0: report core features only
        core = vk.vkGetPhysicalDeviceFeatures(handle)
        out.update({f: bool(getattr(core, f)) for f in _CORE_FIELDS})
        return out
    head = new_struct("VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
    links = []
    for ctype, stype, since, ext, fields in (*_STRUCTS, *OPT_IN.values()):
        if _usable(api, extensions, since, ext) is not None:
            links.append((new_struct(ctype, getattr(vk, stype)), fields))
    chain(head, *(s for s, _ in links))  # `links` keeps the structs alive across the call
    vk.lib.vkGetPhysicalDeviceFeatures2(handle, head)
    for s, fields in links:
        out.update({f: bool(getattr(s, f)) for f in fields})
    out.update({f: bool(getattr(head.features, f)) for f in _CORE_FIELDS})
    return out


def enable_chain(api: int, extensions: frozenset[str], supported: dict[str, bool],
                 opt_in: tuple[str, ...] = ()) -> tuple[Any, list[Any], list[str]]:
    """(VkPhysicalDeviceFeatures2 to chain into VkDeviceCreateInfo.pNext, structs to keep alive,
    device extensions to enable) turning on every supported feature of the table, plus the OPT_IN ones named.

    Enabling a feature costs nothing at run time; not enabling one makes a kernel that uses it invalid.
    For a 1.0 device the first item is a plain VkPhysicalDeviceFeatures for pEnabledFeatures instead.
    """
    if api < V1_1:
        core = vk.ffi.new("VkPhysicalDeviceFeatures*")
        for f in _CORE_FIELDS:
            setattr(core, f, int(supported.get(f, False)))
        return core, [core], []
    head = new_struct("VkPhysicalDeviceFeatures2", vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2)
    for f in _CORE_FIELDS:
        setattr(head.features, f, int(supported.get(f, False)))
    links, exts = [], []
    for ctype, stype, since, ext, fields in (*_STRUCTS, *(OPT_IN[n] for n in opt_in)):
        how = _usable(api, extensions, since, ext)
        wanted = [f for f in fields if supported.get(f)]
        if how is None or not wanted:
            continue
        s = new_struct(ctype, getattr(vk, stype))
        for f in wanted:
            setattr(s, f, 1)
        links.append(s)
        if how:
            exts.append(how)
    return head, chain(head, *links), exts
