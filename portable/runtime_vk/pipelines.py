"""Compute pipelines from a Kernel's SPIR-V: checks first (so misuse gets a clear message instead of a
driver crash), then shader module, descriptor set layout, pipeline layout and pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import config
from ..errors import KernelBuildError
from ..executable import Kernel
from . import spirv, tracking
from ._vk import vk
from .device import Device
from .errors import guard
from .pipeline_cache import PipelineCache

_STAGE = "vulkan-pipeline"


@dataclass(eq=False)
class LoadedKernel:
    """A kernel ready to dispatch on one device; returned by load_kernel, passed back to execute."""

    kernel: Kernel
    set_layout: Any  # None when the kernel takes no buffers
    layout: Any
    pipeline: Any
    owner: int  # serial of the Device

    def __repr__(self) -> str:
        return f"<vulkan LoadedKernel {self.kernel.name!r} buffers={self.kernel.num_buffers}>"


def descriptor_type(kernel: Kernel, binding: int) -> int:
    """A storage buffer, or a uniform texel buffer where the kernel fetches texels from it."""
    if binding in kernel.texel_buffers:
        return vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
    return vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER


def _dump(kernel: Kernel) -> str | None:
    """Write the refused SPIR-V where it can be inspected (spirv-dis, spirv-val); path or None."""
    if not kernel.spirv:
        return None
    root = config.dump_dir() or config.cache_dir() / "vulkan" / "failed"
    try:
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{kernel.name}-{kernel.key()}.spv"
        path.write_bytes(kernel.spirv)
        return str(path)
    except OSError:
        return None


def _fail(kernel: Kernel, device: Device, why: str) -> KernelBuildError:
    return KernelBuildError(f"kernel {kernel.name!r} cannot be built for {device.name}: {why}",
                            stage=_STAGE, dump_path=_dump(kernel))


def check_kernel(kernel: Kernel, device: Device) -> None:
    """Reject what the driver would refuse or misrun: no SPIR-V, bad module, wrong entry point, limits."""
    if not kernel.spirv:
        raise KernelBuildError(
            f"kernel {kernel.name!r}: the executable has no SPIR-V for this kernel (it was compiled for OpenCL "
            f"only); compile the graph for a Vulkan device", stage=_STAGE)
    lim = device.pd.info.limits
    try:
        mod = spirv.inspect(kernel.spirv)
    except spirv.SpirvError as e:
        raise _fail(kernel, device, str(e)) from None
    top = spirv.max_spirv_version(device.pd.api_version, device.pd.extensions)
    if mod.version > top:
        raise _fail(kernel, device, f"SPIR-V {mod.version[0]}.{mod.version[1]} module, but the device accepts "
                                    f"up to SPIR-V {top[0]}.{top[1]}; compile for this device's Vulkan version")
    for cap in sorted(mod.capabilities):
        key, feature = spirv.CAPABILITY_NEEDS.get(cap, (None, ""))
        if key and lim.get(key) is False:
            raise _fail(kernel, device, f"the module declares SPIR-V capability {cap}, which needs {feature}; the "
                                        f"device lacks it; compile for this device's profile")
    model = mod.entry_points.get(kernel.name)
    if model != "GLCompute":
        found = ", ".join(f"{n!r} ({m})" for n, m in mod.entry_points.items()) or "none"
        raise _fail(kernel, device, f"no GLCompute entry point named {kernel.name!r} (entry points: {found})")
    wg = tuple(kernel.workgroup_size)
    if len(wg) != 3:
        raise _fail(kernel, device, f"workgroup size {wg} must have three dimensions")
    if kernel.name in mod.local_size and mod.local_size[kernel.name] != wg:
        raise _fail(kernel, device, f"workgroup size {wg} in the executable but LocalSize "
                                    f"{mod.local_size[kernel.name]} in the SPIR-V; the executable is inconsistent")
    too_big = any(w > m for w, m in zip(wg, lim["max_workgroup_size"], strict=True))
    if too_big or wg[0] * wg[1] * wg[2] > lim["max_workgroup_invocations"]:
        raise _fail(kernel, device, f"workgroup size {wg} exceeds the device's maxComputeWorkGroupSize "
                                    f"{lim['max_workgroup_size']} / maxComputeWorkGroupInvocations "
                                    f"{lim['max_workgroup_invocations']}; compile for this device's profile")
    push_bytes = 4 * len(kernel.push_constants)
    if push_bytes > lim["max_push_constants_bytes"]:
        raise _fail(kernel, device, f"{push_bytes} bytes of push constants, the device allows "
                                    f"{lim['max_push_constants_bytes']}")
    texels = kernel.texel_buffers
    if any(not 0 <= b < kernel.num_buffers for b in texels):
        raise _fail(kernel, device, f"texel buffer bindings {list(texels)} outside its {kernel.num_buffers} buffers; "
                                    f"the executable is inconsistent")
    storage = kernel.num_buffers - len(texels)
    if storage > lim["max_storage_buffers_per_stage"]:
        raise _fail(kernel, device, f"{storage} storage buffers, the device allows "
                                    f"{lim['max_storage_buffers_per_stage']} per shader stage; split the dispatch")
    if len(texels) > lim.get("max_sampled_images_per_stage", 16):  # 16: Vulkan's minimum
        raise _fail(kernel, device, f"{len(texels)} uniform texel buffers, the device allows "
                                    f"{lim.get('max_sampled_images_per_stage', 16)} per shader stage; compile for "
                                    f"this device's profile")


def required_subgroup_size(kernel: Kernel, device: Device) -> int:
    """The subgroup width to require of the pipeline (0: none), or KernelBuildError where the kernel is laid over
    a width the device neither runs by default nor can be asked for."""
    n = kernel.subgroup_size
    if not n:
        return 0
    lim = device.pd.info.limits
    invocations = kernel.workgroup_size[0] * kernel.workgroup_size[1] * kernel.workgroup_size[2]
    if lim.get("subgroup_size_control") and lim["min_subgroup_size"] <= n <= lim["max_subgroup_size"] and \
            invocations <= n * lim["max_compute_workgroup_subgroups"]:
        return n
    if lim.get("subgroup_size") == n:
        return 0  # the device's own width (it cannot be asked, and need not be)
    raise _fail(kernel, device, f"the kernel is laid over subgroups of {n} lanes; the device runs "
                                f"{lim.get('subgroup_size')} and cannot be asked for {n} "
                                f"(VK_EXT_subgroup_size_control allows {lim.get('min_subgroup_size', 0)}-"
                                f"{lim.get('max_subgroup_size', 0)}); compile for this device's profile")


def build(kernel: Kernel, device: Device, cache: PipelineCache | None, flags: int = 0) -> LoadedKernel:
    """Create the pipeline objects for `kernel`; KernelBuildError (with the SPIR-V dumped) on failure.
    cache None: no pipeline cache (a tool capturing driver statistics wants a real compile); flags:
    VkPipelineCreateFlags."""
    check_kernel(kernel, device)
    width = required_subgroup_size(kernel, device)
    dev = device.handle
    compute = vk.VK_SHADER_STAGE_COMPUTE_BIT
    made: list[tuple[Any, Any]] = []  # (destroy function, handle), for cleanup on failure
    what = f"building kernel {kernel.name!r} on {device.name}"
    try:
        with guard(what, KernelBuildError):
            code = kernel.spirv  # referenced until vkCreateShaderModule returns
            shader = vk.vkCreateShaderModule(dev, vk.VkShaderModuleCreateInfo(codeSize=len(code), pCode=code), None)
            made.append((vk.vkDestroyShaderModule, shader))
            set_layout = None
            set_layouts = []
            if kernel.num_buffers:
                bindings = [vk.VkDescriptorSetLayoutBinding(
                    binding=b, descriptorType=descriptor_type(kernel, b), descriptorCount=1,
                    stageFlags=compute) for b in range(kernel.num_buffers)]
                set_layout = vk.vkCreateDescriptorSetLayout(
                    dev, vk.VkDescriptorSetLayoutCreateInfo(pBindings=bindings), None)
                made.append((vk.vkDestroyDescriptorSetLayout, set_layout))
                set_layouts = [set_layout]
            ranges = []
            if kernel.push_constants:
                ranges = [vk.VkPushConstantRange(stageFlags=compute, offset=0, size=4 * len(kernel.push_constants))]
            layout = vk.vkCreatePipelineLayout(dev, vk.VkPipelineLayoutCreateInfo(
                pSetLayouts=set_layouts, pPushConstantRanges=ranges), None)
            made.append((vk.vkDestroyPipelineLayout, layout))
            stage_flags, required = 0, None
            if width:
                # The width the kernel's shuffles or matrices assume, in full subgroups where the workgroup is
                # whole subgroups of it (a driver may otherwise start a partial one).
                required = vk.VkPipelineShaderStageRequiredSubgroupSizeCreateInfo(requiredSubgroupSize=width)
                if device.pd.info.limits.get("compute_full_subgroups") and kernel.workgroup_size[0] % width == 0:
                    stage_flags = vk.VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT
            stage = vk.VkPipelineShaderStageCreateInfo(stage=compute, module=shader, pName=kernel.name,
                                                       flags=stage_flags, pNext=required)
            info = vk.VkComputePipelineCreateInfo(flags=flags, stage=stage, layout=layout)
            handle = cache.handle if cache is not None else vk.VK_NULL_HANDLE
            pipeline = vk.vkCreateComputePipelines(dev, handle, 1, [info], None)[0]
        if cache is not None:
            cache.dirty = True
        # The module is only needed while the pipeline is created.
        vk.vkDestroyShaderModule(dev, shader, None)
        made.pop(0)
    except KernelBuildError as e:
        for destroy, handle in reversed(made):
            destroy(dev, handle, None)
        raise KernelBuildError(str(e), stage=_STAGE, dump_path=_dump(kernel)) from e.__cause__
    except BaseException:
        for destroy, handle in reversed(made):
            destroy(dev, handle, None)
        raise
    tracking.created("pipeline")
    return LoadedKernel(kernel=kernel, set_layout=set_layout, layout=layout, pipeline=pipeline, owner=device.serial)


def destroy(device: Device, lk: LoadedKernel) -> None:
    vk.vkDestroyPipeline(device.handle, lk.pipeline, None)
    vk.vkDestroyPipelineLayout(device.handle, lk.layout, None)
    if lk.set_layout is not None:
        vk.vkDestroyDescriptorSetLayout(device.handle, lk.set_layout, None)
    lk.pipeline = lk.layout = lk.set_layout = None
    tracking.destroyed("pipeline")
