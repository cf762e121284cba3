"""Device-local storage buffers (one VkDeviceMemory each: portable/memory's pool makes few large ones and
carves views out of them), views into them (offset + size, no Vulkan object of their own), and host-visible
staging memory that transfers go through."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import InvalidArgument, OutOfDeviceMemory
from . import tracking
from ._vk import vk
from .device import Device
from .errors import guard

_MIB = 1 << 20
STAGING_MAX = 64 * _MIB  # larger transfers go in chunks: no need to pin gigabytes of host memory


@dataclass(eq=False)
class Buffer:
    """A device-local storage buffer; opaque to callers, who only pass it back to its backend."""

    nbytes: int  # what was asked for
    size: int  # the VkBuffer's size: nbytes rounded up to 4, since shaders address 32-bit words
    handle: Any
    memory: Any
    owner: int  # serial of the Device that made it
    freed: bool = False
    offset: int = 0  # where the buffer starts in `handle` (non-zero for views)
    parent: Buffer | None = None  # the block a view lives in; None for a real allocation
    # VkBufferViews of a real allocation by (offset, texels): how kernels read it as a uniform texel buffer.
    texel_views: dict[tuple[int, int], Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        state = "freed" if self.freed else "live"
        where = f" at +{self.offset} of a {self.parent.size}-byte block" if self.parent is not None else ""
        return f"<vulkan Buffer {self.nbytes} bytes{where}, {state}>"

    @property
    def region(self) -> tuple[int, int, int]:
        """(block key, first byte, end) for dependency analysis: views of one block may overlap."""
        root = self.parent if self.parent is not None else self
        return (id(root), self.offset, self.offset + self.size)


def _create(device: Device, size: int, usage: int, required: int, preferred: int, what: str) -> tuple[Any, Any]:
    """(VkBuffer, VkDeviceMemory) bound together; nothing is left behind when any step fails."""
    dev = device.handle
    with guard(f"vkCreateBuffer ({what}, {size} bytes) on {device.name}"):
        handle = vk.vkCreateBuffer(dev, vk.VkBufferCreateInfo(
            size=size, usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
    memory = None
    try:
        reqs = vk.vkGetBufferMemoryRequirements(dev, handle)
        index = device.find_memory_type(reqs.memoryTypeBits, required, preferred)
        if index is None and required & vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT:
            # No device-local type for this buffer (rare): any allowed type still works, just slower.
            index = device.find_memory_type(reqs.memoryTypeBits, required & ~vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        if index is None:
            raise OutOfDeviceMemory(f"{device.name} has no memory type usable for {what}")
        alloc = vk.VkMemoryAllocateInfo(allocationSize=reqs.size, memoryTypeIndex=index)
        with guard(f"vkAllocateMemory of {reqs.size} bytes ({what}) on {device.name}", OutOfDeviceMemory):
            memory = vk.vkAllocateMemory(dev, alloc, None)
        device.allocations += 1
        with guard(f"vkBindBufferMemory ({what}) on {device.name}"):
            vk.vkBindBufferMemory(dev, handle, memory, 0)
    except BaseException:
        if memory is not None:
            _destroy(device, handle, memory)
        else:
            vk.vkDestroyBuffer(dev, handle, None)
        raise
    return handle, memory


def _destroy(device: Device, handle: Any, memory: Any) -> None:
    vk.vkDestroyBuffer(device.handle, handle, None)
    vk.vkFreeMemory(device.handle, memory, None)
    device.allocations -= 1


def allocate(device: Device, nbytes: int, bindable: bool = True) -> Buffer:
    """A device-local STORAGE | TRANSFER_SRC | TRANSFER_DST buffer of `nbytes`, checked against limits
    first so an impossible size gives a clear error rather than a driver failure. A block for views
    (bindable=False) may exceed maxStorageBufferRange: only its views are bound."""
    if nbytes <= 0:
        raise InvalidArgument(f"buffer size must be > 0, got {nbytes}; allocate at least one byte")
    size = (nbytes + 3) & ~3
    lim = device.pd.info.limits
    checks = [("max_buffer_bytes", "the largest single allocation (maxMemoryAllocationSize / heap size)",
               "split the tensor or use a smaller batch")]
    if bindable:
        checks.insert(0, ("max_storage_buffer_range", "maxStorageBufferRange", "split the tensor or bind it in ranges"))
    for key, vk_name, advice in checks:
        if size > lim[key]:
            raise OutOfDeviceMemory(
                f"a buffer of {nbytes} bytes exceeds {vk_name} = {lim[key]} bytes of {device.name}; {advice}"
            )
    if device.allocations >= device.pd.max_allocation_count:
        raise OutOfDeviceMemory(
            f"{device.name} allows {device.pd.max_allocation_count} memory allocations "
            f"(maxMemoryAllocationCount) and all are in use; free buffers"
        )
    usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT
             | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
    handle, memory = _create(device, size, usage, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0,
                             f"a storage buffer of {nbytes} bytes")
    tracking.created("buffer")
    return Buffer(nbytes=nbytes, size=size, handle=handle, memory=memory, owner=device.serial)


def view(block: Buffer, offset: int, nbytes: int) -> Buffer:
    """`nbytes` of `block` from `offset` (which the caller aligned to minStorageBufferOffsetAlignment)."""
    size = (nbytes + 3) & ~3
    if offset < 0 or offset + size > block.size:
        raise InvalidArgument(f"a view of {nbytes} bytes at +{offset} does not fit {block!r}; view within the block")
    return Buffer(nbytes=nbytes, size=size, handle=block.handle, memory=None, owner=block.owner, offset=offset,
                  parent=block)


TEXEL_FORMAT_BYTES = 16  # R32G32B32A32_UINT: the texels codegen_spirv/texel_reads.py fetches


def texel_view(device: Device, buf: Buffer) -> Any:
    """A VkBufferView of `buf` as R32G32B32A32_UINT texels, made once per range of its allocation and destroyed
    with it (a pooled view reused for another tensor of the same range reuses it too)."""
    root = buf.parent if buf.parent is not None else buf
    # Whole texels: a kernel's array of texels fits the buffer it is given, which may be longer (a slot holding
    # a tensor of another shape, a view rounded to 4 bytes).
    texels = buf.size // TEXEL_FORMAT_BYTES
    key = (buf.offset, texels)
    view = root.texel_views.get(key)
    if view is not None:
        return view
    lim = device.pd.info.limits
    align = int(lim.get("min_texel_buffer_offset_alignment") or 1)
    why = None
    if buf.offset % align:
        why = f"it starts at byte {buf.offset}, not a multiple of minTexelBufferOffsetAlignment {align}"
    elif not texels:
        why = f"its {buf.size} bytes are less than one {TEXEL_FORMAT_BYTES}-byte texel"
    elif texels > int(lim.get("max_texel_buffer_elements") or 65536):
        why = f"its {texels} texels exceed maxTexelBufferElements {lim.get('max_texel_buffer_elements')}"
    if why:
        raise OutOfDeviceMemory(f"a kernel reads {buf!r} as a uniform texel buffer on {device.name}, but {why}; "
                                f"compile for this device's profile")
    info = vk.VkBufferViewCreateInfo(buffer=buf.handle, format=vk.VK_FORMAT_R32G32B32A32_UINT, offset=buf.offset,
                                     range=texels * TEXEL_FORMAT_BYTES)
    with guard(f"vkCreateBufferView ({texels} texels) on {device.name}"):
        view = vk.vkCreateBufferView(device.handle, info, None)
    root.texel_views[key] = view
    return view


def free(device: Device, buf: Buffer) -> None:
    """Destroy `buf` (idempotent; a view is only marked freed). The caller guarantees the device no longer
    uses it."""
    if buf.freed:
        return
    if buf.parent is not None:
        buf.freed = True
        return
    for view in buf.texel_views.values():
        vk.vkDestroyBufferView(device.handle, view, None)
    buf.texel_views.clear()
    _destroy(device, buf.handle, buf.memory)
    buf.freed = True
    buf.handle = buf.memory = None
    tracking.destroyed("buffer")


class Staging:
    """One persistently mapped, host-visible, coherent buffer, grown on demand up to STAGING_MAX.

    Coherent memory needs no flush/invalidate calls; host-cached is preferred because reading back from
    uncached (write-combined) memory is an order of magnitude slower on discrete GPUs.
    """

    def __init__(self, device: Device):
        self.device = device
        self.size = 0
        self.handle = self.memory = None
        self.view: np.ndarray | None = None  # uint8 view of the mapping

    def ensure(self, nbytes: int) -> int:
        """Make room for min(nbytes, STAGING_MAX) bytes; returns the chunk size transfers should use."""
        want = min(max(nbytes, 1), STAGING_MAX)
        if want <= self.size:
            return self.size
        self.destroy()
        size = min(max(_MIB, 1 << (want - 1).bit_length()), STAGING_MAX)  # powers of two: few regrowths
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        self.handle, self.memory = _create(self.device, size, usage, host, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                           "the staging buffer")
        tracking.created("staging")
        try:
            with guard(f"vkMapMemory of the staging buffer on {self.device.name}"):
                mapped = vk.vkMapMemory(self.device.handle, self.memory, 0, size, 0)
        except BaseException:
            _destroy(self.device, self.handle, self.memory)
            self.handle = self.memory = None
            tracking.destroyed("staging")
            raise
        self.view = np.frombuffer(mapped, dtype=np.uint8, count=size)
        self.size = size
        return size

    def destroy(self) -> None:
        if self.handle is None:
            return
        self.view = None  # drop the numpy view before the mapping disappears
        vk.vkUnmapMemory(self.device.handle, self.memory)
        _destroy(self.device, self.handle, self.memory)
        self.handle = self.memory = None
        self.size = 0
        tracking.destroyed("staging")


class HostBuffer:
    """A persistently mapped host-visible, coherent buffer of fixed size (a replayed plan's staging area)."""

    def __init__(self, device: Device, size: int):
        self.device = device
        self.size = max(int(size), 4)
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        self.handle, self.memory = _create(device, self.size, usage, host, vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                                           f"a staging area of {self.size} bytes")
        tracking.created("staging")
        try:
            with guard(f"vkMapMemory of a staging area on {device.name}"):
                mapped = vk.vkMapMemory(device.handle, self.memory, 0, self.size, 0)
        except BaseException:
            _destroy(device, self.handle, self.memory)
            tracking.destroyed("staging")
            raise
        self.view: np.ndarray | None = np.frombuffer(mapped, dtype=np.uint8, count=self.size)

    def destroy(self) -> None:
        if self.handle is None:
            return
        self.view = None
        vk.vkUnmapMemory(self.device.handle, self.memory)
        _destroy(self.device, self.handle, self.memory)
        self.handle = self.memory = None
        tracking.destroyed("staging")
