"""The logical device: one compute queue (guarded by a lock, so any thread may submit), a timeline semaphore
that every submission signals, a command pool with one reusable command buffer and a fence for synchronous
`submit`, and `submit_recorded` for command buffers recorded once and replayed."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from ..errors import DeviceLost
from . import features, timeline, tracking
from ._vk import vk
from .errors import guard, is_vulkan_error, to_portable
from .properties import PhysicalDevice, queue_flags_str

_PORTABILITY_SUBSET = "VK_KHR_portability_subset"  # must be enabled when a driver offers it
_serials = itertools.count(1)  # names a Device for ownership checks; unlike id(), never reused
TRANSIENT_BUFFERS = 4  # command buffers for submit_async (chunked transfers in flight at once)


def pick_queue_family(families: tuple[tuple[int, int], ...]) -> tuple[int, str]:
    """(family index, why): a compute family without graphics first (NVIDIA/AMD async-compute families
    do not share with the graphics work of a desktop), else the first family that has compute."""
    compute = vk.VK_QUEUE_COMPUTE_BIT
    candidates = [(i, f) for i, (f, n) in enumerate(families) if f & compute and n > 0]
    for i, f in candidates:
        if not f & vk.VK_QUEUE_GRAPHICS_BIT:
            return i, f"queue family {i} ({queue_flags_str(f)}): dedicated compute"
    i, f = candidates[0]  # has_compute() at discovery guarantees one
    return i, f"queue family {i} ({queue_flags_str(f)}): only compute-capable family"


class Device:
    """A VkDevice with one queue. `queue_lock` serializes queue access; `submit` (one shared command buffer)
    holds `sync_lock` until its work is done. Without timeline semaphores `timeline` is None."""

    def __init__(self, pd: PhysicalDevice, timeout_s: float, use_timeline: bool = True):
        self.pd = pd
        self.serial = next(_serials)
        self.name = f"{pd.info.uri} ({pd.info.name})"
        self.timeout_ns = int(timeout_s * 1e9)
        self.lost = False
        self.allocations = 0  # live VkDeviceMemory objects, against maxMemoryAllocationCount
        self.family, self.family_reason = pick_queue_family(pd.queue_families)
        self.queue_lock = threading.Lock()
        self.sync_lock = threading.RLock()
        self.timeline: Any = None
        self.last_value = 0  # last value a submission will signal on `timeline`

        feats, keep, extensions = features.enable_chain(pd.api_version, pd.extensions, pd.features)
        if _PORTABILITY_SUBSET in pd.extensions:
            extensions.append(_PORTABILITY_SUBSET)
        queue_info = vk.VkDeviceQueueCreateInfo(queueFamilyIndex=self.family, pQueuePriorities=[1.0])
        is_v10 = pd.api_version < features.V1_1
        create = vk.VkDeviceCreateInfo(
            pNext=None if is_v10 else feats,
            pQueueCreateInfos=[queue_info],
            ppEnabledExtensionNames=extensions,
            pEnabledFeatures=feats if is_v10 else None,
        )
        with guard(f"vkCreateDevice on {self.name}"):
            self.handle = vk.vkCreateDevice(pd.handle, create, None)
        del keep  # the feature structs may go once vkCreateDevice returned
        tracking.created("device")
        try:
            self.queue = vk.vkGetDeviceQueue(self.handle, self.family, 0)
            with guard("vkCreateCommandPool"):
                self.pool = vk.vkCreateCommandPool(self.handle, vk.VkCommandPoolCreateInfo(
                    flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=self.family), None)
            with guard("vkAllocateCommandBuffers"):
                self.cmd = vk.vkAllocateCommandBuffers(self.handle, vk.VkCommandBufferAllocateInfo(
                    commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
            with guard("vkCreateFence"):
                self.fence = vk.vkCreateFence(self.handle, vk.VkFenceCreateInfo(), None)
            with guard("vkAllocateCommandBuffers"):  # for submit_async: several transfers in flight
                self._transient = [(c, [0]) for c in vk.vkAllocateCommandBuffers(
                    self.handle, vk.VkCommandBufferAllocateInfo(commandPool=self.pool,
                                                                level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                                commandBufferCount=TRANSIENT_BUFFERS))]
            self._next_transient = 0
            if use_timeline and pd.features.get("timelineSemaphore"):
                self.timeline = timeline.create(self.handle)
        except BaseException:
            self.destroy()
            raise

    def find_memory_type(self, type_bits: int, required: int, preferred: int = 0) -> int | None:
        """First memory type allowed by `type_bits` with all `required` flags, one with `preferred` too if
        any. Drivers order types best-first, so the first match is the one to use."""
        mem = self.pd.memory
        fallback = None
        for i in range(mem.memoryTypeCount):
            flags = mem.memoryTypes[i].propertyFlags
            if not (type_bits >> i) & 1 or flags & required != required:
                continue
            if flags & preferred == preferred:
                return i
            if fallback is None:
                fallback = i
        return fallback

    def check_usable(self) -> None:
        if self.lost:
            raise DeviceLost(f"{self.name} was lost earlier; close this backend and create a new one")

    def submit(self, record: Callable[[Any], None], what: str) -> int:
        """Record commands with `record(cmd)`, submit them and wait for them to finish; returns the timeline
        value the submission signalled (0 without timeline semaphores).

        The wait has a finite timeout: a kernel that never ends becomes DeviceLost with a message instead
        of a hang. After a timeout or loss the device refuses further work (its fence is still pending).
        """
        with self.sync_lock:
            self.check_usable()
            cmd = self.cmd
            with guard(f"recording {what} on {self.name}"):
                vk.vkResetCommandBuffer(cmd, 0)
                begin = vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
                vk.vkBeginCommandBuffer(cmd, begin)
                record(cmd)
                vk.vkEndCommandBuffer(cmd)
                vk.vkResetFences(self.handle, 1, [self.fence])
            try:
                with self.queue_lock:
                    value = self.last_value + 1 if self.timeline is not None else 0
                    if value:
                        signal = vk.VkTimelineSemaphoreSubmitInfo(pSignalSemaphoreValues=[value])
                        submit_info = vk.VkSubmitInfo(pNext=signal, pCommandBuffers=[cmd],
                                                      pSignalSemaphores=[self.timeline])
                    else:
                        submit_info = vk.VkSubmitInfo(pCommandBuffers=[cmd])
                    with guard(f"vkQueueSubmit of {what} on {self.name}"):
                        vk.vkQueueSubmit(self.queue, 1, [submit_info], self.fence)
                    self.last_value = max(self.last_value, value)
                self._wait(what)
            except DeviceLost:
                self.lost = True
                raise
            return value

    def submit_async(self, record: Callable[[Any], None], what: str) -> int:
        """Record into one of a few transient command buffers and submit without waiting; returns the
        timeline value to wait for (wait_value). Needs timeline semaphores; callers hold `sync_lock`."""
        with self.sync_lock:
            self.check_usable()
            cmd, last = self._transient[self._next_transient % TRANSIENT_BUFFERS]
            self._next_transient += 1
            if last[0]:
                self.wait_value(last[0], what)  # the buffer's previous submission must be done to re-record it
            with guard(f"recording {what} on {self.name}"):
                vk.vkResetCommandBuffer(cmd, 0)
                vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
                    flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
                record(cmd)
                vk.vkEndCommandBuffer(cmd)
            try:
                with self.queue_lock:
                    value = self.last_value + 1
                    signal = vk.VkTimelineSemaphoreSubmitInfo(pSignalSemaphoreValues=[value])
                    info = vk.VkSubmitInfo(pNext=signal, pCommandBuffers=[cmd], pSignalSemaphores=[self.timeline])
                    with guard(f"vkQueueSubmit of {what} on {self.name}"):
                        vk.vkQueueSubmit(self.queue, 1, [info], vk.VK_NULL_HANDLE)
                    self.last_value = value
            except DeviceLost:
                self.lost = True
                raise
            last[0] = value
            return value

    def submit_recorded(self, info: Any, what: str, fence: Any = None) -> int:
        """Submit a prepared timeline.SubmitTemplate from any thread; returns the timeline value it signals.
        Without timeline semaphores, `fence` is signalled instead and 0 returned."""
        self.check_usable()
        with self.queue_lock:
            value = self.last_value + 1 if self.timeline is not None else 0
            if value:
                info.set_signal(value)
            try:
                timeline.check(vk.lib.vkQueueSubmit(self.queue, 1, info.ptr, fence if fence is not None
                                                    else vk.ffi.NULL), f"vkQueueSubmit of {what} on {self.name}")
            except DeviceLost:
                self.lost = True
                raise
            self.last_value = max(self.last_value, value)
        return value

    def wait_fence(self, fence: Any, what: str) -> None:
        """Block until `fence` is signalled (DeviceLost after the timeout), then reset it."""
        result = vk.lib.vkWaitForFences(self.handle, 1, vk.ffi.new("VkFence[1]", [fence]), 1, self.timeout_ns)
        if result == 2:
            self.lost = True
            raise DeviceLost(f"{what} on {self.name} did not finish within {self.timeout_ns / 1e9:g} s; close this "
                             f"backend and create a new one")
        timeline.check(result, f"waiting for {what} on {self.name}")
        timeline.check(vk.lib.vkResetFences(self.handle, 1, vk.ffi.new("VkFence[1]", [fence])), "vkResetFences")

    def wait_value(self, value: int, what: str) -> None:
        """Block until the timeline reaches `value` (DeviceLost after the timeout)."""
        try:
            timeline.wait(self.handle, self.timeline, value, self.timeout_ns, f"{what} on {self.name}")
        except DeviceLost:
            self.lost = True
            raise

    def completed_value(self) -> int:
        return timeline.value(self.handle, self.timeline) if self.timeline is not None else 0

    def _wait(self, what: str) -> None:
        try:
            vk.vkWaitForFences(self.handle, 1, [self.fence], vk.VK_TRUE, self.timeout_ns)
        except vk.VkTimeout as e:
            raise DeviceLost(
                f"{what} on {self.name} did not finish within {self.timeout_ns / 1e9:g} s; the kernel may hang "
                f"or be far too slow for this device. Close this backend and create a new one (pass a larger "
                f"timeout_s for legitimately long work)"
            ) from e
        except Exception as e:
            if is_vulkan_error(e):
                raise to_portable(e, f"waiting for {what} on {self.name}") from e
            raise

    def wait_idle(self) -> None:
        with self.queue_lock, guard(f"vkDeviceWaitIdle on {self.name}"):
            vk.vkDeviceWaitIdle(self.handle)

    def destroy(self) -> None:
        """Destroy fence, command pool and device (after every object made from it is gone)."""
        if getattr(self, "handle", None) is None:
            return
        if getattr(self, "fence", None) is not None:
            vk.vkDestroyFence(self.handle, self.fence, None)
            self.fence = None
        if getattr(self, "timeline", None) is not None:
            vk.vkDestroySemaphore(self.handle, self.timeline, None)
            self.timeline = None
        if getattr(self, "pool", None) is not None:
            vk.vkDestroyCommandPool(self.handle, self.pool, None)  # frees its command buffer too
            self.pool = None
        vk.vkDestroyDevice(self.handle, None)
        self.handle = None
        tracking.destroyed("device")
