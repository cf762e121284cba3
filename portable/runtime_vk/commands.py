"""What goes into a command buffer: barriers, buffer copies, and a plan's dispatches with their
descriptor sets and push constants."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._vk import vk
from .buffers import Buffer, texel_view
from .device import Device
from .errors import guard
from .pipelines import LoadedKernel, descriptor_type


def _barrier(cmd: Any, src_stage: int, src_access: int, dst_stage: int, dst_access: int) -> None:
    """A global memory barrier: cheaper to record than per-buffer ones and just as precise for compute."""
    mb = vk.VkMemoryBarrier(srcAccessMask=src_access, dstAccessMask=dst_access)
    vk.vkCmdPipelineBarrier(cmd, src_stage, dst_stage, 0, 1, [mb], 0, None, 0, None)


def barrier_after_earlier_work(cmd: Any) -> None:
    """At the start of every command buffer: make earlier submissions' shader and transfer writes visible
    to this one's shaders and copies. A fence wait alone orders execution but not memory visibility."""
    stages = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | vk.VK_PIPELINE_STAGE_TRANSFER_BIT
    _barrier(cmd, stages, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
             stages, vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT
             | vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)


def barrier_between_dispatches(cmd: Any) -> None:
    """Dispatch n+1 sees what dispatch n wrote (read-after-write) and does not overwrite what it still
    reads (write-after-read is covered by the execution dependency)."""
    stage = vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    _barrier(cmd, stage, vk.VK_ACCESS_SHADER_WRITE_BIT,
             stage, vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT)


def copy(cmd: Any, src: Any, dst: Any, src_offset: int, dst_offset: int, size: int, to_host: bool) -> None:
    """Copy `size` bytes between buffers; with to_host, also make the result visible to host reads."""
    barrier_after_earlier_work(cmd)
    region = vk.VkBufferCopy(srcOffset=src_offset, dstOffset=dst_offset, size=size)
    vk.vkCmdCopyBuffer(cmd, src, dst, 1, [region])
    if to_host:
        _barrier(cmd, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                 vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_ACCESS_HOST_READ_BIT)


def pool_sizes(count: int) -> list[Any]:
    """Room for `count` descriptors of each kind a kernel binds (storage buffers, uniform texel buffers)."""
    return [vk.VkDescriptorPoolSize(type=t, descriptorCount=count)
            for t in (vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)]


class DescriptorArena:
    """A descriptor pool reset at every execute (all sets of the previous one are done by then) and
    regrown when a plan needs more: no per-set bookkeeping, no fragmentation."""

    def __init__(self, device: Device):
        self.device = device
        self.pool = None
        self.max_sets = 0
        self.max_descriptors = 0

    def allocate(self, layouts: list[Any], descriptors: int) -> list[Any]:
        """Fresh descriptor sets for `layouts` (the previous ones become invalid)."""
        dev = self.device.handle
        if len(layouts) > self.max_sets or descriptors > self.max_descriptors:
            self.destroy()
            self.max_sets = max(64, 2 * len(layouts))
            self.max_descriptors = max(256, 2 * descriptors)
            sizes = pool_sizes(self.max_descriptors)
            with guard(f"vkCreateDescriptorPool on {self.device.name}"):
                self.pool = vk.vkCreateDescriptorPool(
                    dev, vk.VkDescriptorPoolCreateInfo(maxSets=self.max_sets, pPoolSizes=sizes), None)
        elif self.pool is not None:
            with guard("vkResetDescriptorPool"):
                vk.vkResetDescriptorPool(dev, self.pool, 0)
        if not layouts:
            return []
        info = vk.VkDescriptorSetAllocateInfo(descriptorPool=self.pool, pSetLayouts=layouts)
        with guard(f"vkAllocateDescriptorSets on {self.device.name}"):
            return list(vk.vkAllocateDescriptorSets(dev, info))

    def destroy(self) -> None:
        if self.pool is not None:
            vk.vkDestroyDescriptorPool(self.device.handle, self.pool, None)
            self.pool = None
            self.max_sets = self.max_descriptors = 0


def write_sets(device: Device, items: Sequence[tuple[LoadedKernel, Sequence[Buffer]]], sets: list[Any]) -> None:
    """Point each dispatch's set at its buffers (binding i = buffer i, whole buffer)."""
    writes, keep = [], []
    it = iter(sets)
    for lk, bufs in items:
        if lk.set_layout is None:
            continue
        ds = next(it)
        for binding, buf in enumerate(bufs):
            kind = descriptor_type(lk.kernel, binding)
            if kind == vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER:
                views = [texel_view(device, buf)]
                keep.append(views)
                writes.append(vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=binding, descriptorType=kind,
                                                      pTexelBufferView=views))
                continue
            info = [vk.VkDescriptorBufferInfo(buffer=buf.handle, offset=buf.offset, range=buf.size)]
            keep.append(info)
            writes.append(vk.VkWriteDescriptorSet(dstSet=ds, dstBinding=binding, descriptorType=kind,
                                                  pBufferInfo=info))
    if writes:
        vk.vkUpdateDescriptorSets(device.handle, len(writes), writes, 0, None)


def pack_push_constants(values: Sequence[int]) -> Any:
    """32-bit words for vkCmdPushConstants; values in [2**31, 2**32) are taken as unsigned bit patterns."""
    return vk.ffi.new("uint32_t[]", [int(v) & 0xFFFFFFFF for v in values])


def record_dispatches(cmd: Any, items: Sequence[tuple[LoadedKernel, tuple[int, int, int], Any]],
                      sets: list[Any], barrier_before: Sequence[bool] | None = None, *,
                      after_earlier_work: bool = True) -> int:
    """Bind, push constants and dispatch each item in order. `barrier_before[n]` says whether dispatch n
    needs a barrier (memory.barriers() over the kernels' access modes); None puts one between every pair.
    Returns the number of barriers recorded between dispatches."""
    if after_earlier_work:
        barrier_after_earlier_work(cmd)
    bind = vk.VK_PIPELINE_BIND_POINT_COMPUTE
    it = iter(sets)
    count = 0
    for n, (lk, grid, push) in enumerate(items):
        if n and (barrier_before is None or barrier_before[n]):
            barrier_between_dispatches(cmd)
            count += 1
        vk.vkCmdBindPipeline(cmd, bind, lk.pipeline)
        if lk.set_layout is not None:
            vk.vkCmdBindDescriptorSets(cmd, bind, lk.layout, 0, 1, [next(it)], 0, None)
        if push is not None:
            vk.vkCmdPushConstants(cmd, lk.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4 * len(push), push)
        vk.vkCmdDispatch(cmd, *grid)
    return count
