"""A plan recorded once into a Vulkan command buffer and replayed: descriptor sets written once, staging
copies in and out recorded with it, barriers only where one dispatch depends on another.

One submission is one vkQueueSubmit of a prepared VkSubmitInfo (timeline wait on this recording's previous
run, signal of a new value); a completion thread waits for the value and copies the outputs out.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..backend import Recording, Step
from ..completion import Completer
from ..memory import barriers, uses
from ..memory.pool import align_up
from . import commands, tracking
from ._vk import vk
from .buffers import Buffer, HostBuffer
from .device import Device
from .errors import guard
from .timeline import SubmitTemplate

_SHADER_RW = vk.VK_ACCESS_SHADER_READ_BIT | vk.VK_ACCESS_SHADER_WRITE_BIT if vk else 0
_ALIGN = 64


class VulkanRecording(Recording):
    """Command buffer + descriptor pool + staging area for one (plan, bound buffers); one run in flight."""

    mode = "vulkan-replay"

    def __init__(self, device: Device, completer: Completer, steps: Sequence[Step],
                 uploads: Sequence[tuple[Buffer, int]], downloads: Sequence[tuple[Buffer, int]],
                 copies: Sequence[tuple[Buffer, Buffer, int]] = ()):
        self.device = device
        self._copies = [(a, b, int(n)) for a, b, n in copies if n and a is not b]
        self._completer = completer
        self.dispatches = len(steps)
        self._uploads = [(b, int(n)) for b, n in uploads]
        self._downloads = [(b, int(n)) for b, n in downloads]
        self._in: list[tuple[int, int]] = []  # (staging offset, bytes) per upload
        self._out: list[tuple[int, int]] = []
        off = 0
        for _, n in self._uploads:
            self._in.append((off, n))
            off = align_up(off + n, _ALIGN)
        for _, n in self._downloads:
            self._out.append((off, n))
            off = align_up(off + n, _ALIGN)
        self._idle = threading.Event()
        self._idle.set()
        self.last_value = device.last_value  # everything submitted before (constants) is waited for
        self._fence = self._pool = self._desc_pool = self._template = None
        self.staging: HostBuffer | None = None
        try:
            self.staging = HostBuffer(device, off)
            self._build(steps)
        except BaseException:
            self._destroy()
            raise
        tracking.created("recording")

    # ---- recording -------------------------------------------------------------------------------------
    def _build(self, steps: Sequence[Step]) -> None:
        dev = self.device
        with guard(f"creating a command pool on {dev.name}"):
            self._pool = vk.vkCreateCommandPool(dev.handle, vk.VkCommandPoolCreateInfo(
                queueFamilyIndex=dev.family), None)
            self.cmd = vk.vkAllocateCommandBuffers(dev.handle, vk.VkCommandBufferAllocateInfo(
                commandPool=self._pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
            if dev.timeline is None:
                self._fence = vk.vkCreateFence(dev.handle, vk.VkFenceCreateInfo(), None)
        bound = [(s.kernel, list(s.buffers)) for s in steps]
        layouts = [lk.set_layout for lk, _ in bound if lk.set_layout is not None]
        sets: list[Any] = []
        if layouts:
            count = sum(len(b) for lk, b in bound if lk.set_layout is not None)
            sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=count)]
            with guard(f"creating descriptor sets on {dev.name}"):
                self._desc_pool = vk.vkCreateDescriptorPool(dev.handle, vk.VkDescriptorPoolCreateInfo(
                    maxSets=len(layouts), pPoolSizes=sizes), None)
                sets = list(vk.vkAllocateDescriptorSets(dev.handle, vk.VkDescriptorSetAllocateInfo(
                    descriptorPool=self._desc_pool, pSetLayouts=layouts)))
            commands.write_sets(dev, bound, sets)
        self._sets = sets
        plan = [uses([b.region for b in s.buffers], s.kernel.kernel.access) for s in steps]
        before = barriers(plan)
        items = [(s.kernel, tuple(int(g) for g in s.grid),
                  commands.pack_push_constants(s.push_constants) if s.push_constants else None) for s in steps]
        with guard(f"recording a plan of {len(steps)} dispatches on {dev.name}"):
            vk.vkBeginCommandBuffer(self.cmd, vk.VkCommandBufferBeginInfo(flags=0))
            self.barriers = self._record(items, before)
            vk.vkEndCommandBuffer(self.cmd)
        self._template = SubmitTemplate(self.cmd, dev.timeline)

    def _record(self, items: list, before: list[bool]) -> int:
        cmd, host = self.cmd, self.staging.handle
        stage_t, stage_c = vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
        if self.device.timeline is None:  # no semaphore carries the dependency on earlier runs: a barrier does
            commands.barrier_after_earlier_work(cmd)
        for (buf, _), (off, n) in zip(self._uploads, self._in):
            if n:
                vk.vkCmdCopyBuffer(cmd, host, buf.handle, 1, [vk.VkBufferCopy(srcOffset=off, dstOffset=buf.offset,
                                                                              size=n)])
        if any(n for _, n in self._in):
            commands.barrier(cmd, stage_t, vk.VK_ACCESS_TRANSFER_WRITE_BIT, stage_c | stage_t,
                             _SHADER_RW | vk.VK_ACCESS_TRANSFER_READ_BIT)
        count = commands.record_dispatches(cmd, items, self._sets, before, after_earlier_work=False)
        if self._copies:  # carried state: after every dispatch has read the old value and written the new one
            commands.barrier(cmd, stage_c | stage_t, _SHADER_RW | vk.VK_ACCESS_TRANSFER_WRITE_BIT, stage_t,
                             vk.VK_ACCESS_TRANSFER_READ_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT)
            for src, dst, n in self._copies:
                vk.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, [vk.VkBufferCopy(
                    srcOffset=src.offset, dstOffset=dst.offset, size=n)])
        if any(n for _, n in self._out):
            commands.barrier(cmd, stage_c | stage_t, vk.VK_ACCESS_SHADER_WRITE_BIT | vk.VK_ACCESS_TRANSFER_WRITE_BIT,
                             stage_t, vk.VK_ACCESS_TRANSFER_READ_BIT)
            for (buf, _), (off, n) in zip(self._downloads, self._out):
                if n:
                    vk.vkCmdCopyBuffer(cmd, buf.handle, host, 1, [vk.VkBufferCopy(srcOffset=buf.offset,
                                                                                  dstOffset=off, size=n)])
            commands.barrier(cmd, stage_t, vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT,
                             vk.VK_ACCESS_HOST_READ_BIT)
        return count

    # ---- replay ----------------------------------------------------------------------------------------
    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Copy inputs to staging, submit the recorded command buffer, return a Future of the outputs (uint8)."""
        if self._template is None:
            raise RuntimeError("this recording is closed")
        self._idle.wait()
        self._idle.clear()
        try:
            view = self.staging.view
            for arr, (off, n) in zip(inputs, self._in):
                if n:
                    view[off:off + n] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)[:n]
            dev = self.device
            if dev.timeline is not None:
                self._template.set_wait(self.last_value)
            value = dev.submit_recorded(self._template, f"a plan of {self.dispatches} dispatches", self._fence)
        except BaseException:
            self._idle.set()
            raise
        self.last_value = value
        future: Future = Future()
        if value:
            wait = lambda: dev.wait_value(value, f"a plan of {self.dispatches} dispatches")
        else:
            wait = lambda: dev.wait_fence(self._fence, f"a plan of {self.dispatches} dispatches")
        self._completer.add(wait, self._finish, future)
        return future

    def _finish(self) -> list[np.ndarray]:
        try:
            view = self.staging.view
            return [view[off:off + n].copy() for off, n in self._out]
        finally:
            self._idle.set()

    def wait_idle(self) -> None:
        self._idle.wait()

    def close(self) -> None:
        """Wait for the run in flight, then free the command buffer, descriptors and staging (idempotent)."""
        if self._template is None and self.staging is None:
            return
        self._idle.wait(timeout=self.device.timeout_ns / 1e9)
        self._destroy()
        tracking.destroyed("recording")

    def _destroy(self) -> None:
        dev = self.device.handle
        self._template = None
        if self._desc_pool is not None:
            vk.vkDestroyDescriptorPool(dev, self._desc_pool, None)
            self._desc_pool = None
        if self._pool is not None:
            vk.vkDestroyCommandPool(dev, self._pool, None)
            self._pool = None
        if self._fence is not None:
            vk.vkDestroyFence(dev, self._fence, None)
            self._fence = None
        if self.staging is not None:
            self.staging.destroy()
            self.staging = None
