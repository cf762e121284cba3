"""Timeline semaphores through raw cffi: creation, host waits, and a prepared VkSubmitInfo whose wait and
signal values are patched in place, so a replayed submission costs one driver call and no struct building."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..errors import DeviceLost
from ._vk import new_struct, vk
from .errors import check as check_result
from .errors import guard

_TIMEOUT = 2  # VK_TIMEOUT
WAIT_SLICE_NS = 200_000  # after polling, the longest a host wait blocks in the driver before it looks again


def check(result: int, what: str) -> None:
    check_result(int(result), what)


def create(device: Any) -> Any:
    """A timeline semaphore starting at 0."""
    type_info = new_struct("VkSemaphoreTypeCreateInfo", vk.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                           semaphoreType=vk.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
    info = new_struct("VkSemaphoreCreateInfo", vk.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, pNext=type_info)
    with guard("vkCreateSemaphore (timeline)"):
        return vk.vkCreateSemaphore(device, info, None)


def value(device: Any, semaphore: Any) -> int:
    """The value the device has reached."""
    out = vk.ffi.new("uint64_t*")
    check(vk.lib.vkGetSemaphoreCounterValue(device, semaphore, out), "vkGetSemaphoreCounterValue")
    return int(out[0])


def wait(device: Any, semaphore: Any, target: int, timeout_ns: int, what: str, spin_s: float = 0.0) -> None:
    """Block until `semaphore` reaches `target`; DeviceLost after `timeout_ns`. `spin_s`: poll the counter this
    long first (a driver's blocking wait may wake well after the device is done)."""
    if spin_s:
        out = vk.ffi.new("uint64_t*")
        end = time.perf_counter() + spin_s
        while time.perf_counter() < end:
            check(vk.lib.vkGetSemaphoreCounterValue(device, semaphore, out), "vkGetSemaphoreCounterValue")
            if out[0] >= target:
                return
    sems = vk.ffi.new("VkSemaphore[1]", [semaphore])
    values = vk.ffi.new("uint64_t[1]", [target])
    info = new_struct("VkSemaphoreWaitInfo", vk.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, semaphoreCount=1,
                      pSemaphores=sems, pValues=values)
    # A caller that polled first (GPU drivers) then waits in slices: a wait that times out returns on time, one
    # left to the device's completion may not (H200, NVIDIA 580, a 3.7 ms matmul per submission: 11.2 ms in one
    # pass of 30 runs, 3.6 ms in slices; benchmarks/results/h200/session7/vulkan_wait_slices.json). CPU drivers
    # keep one wait: a thread waking every slice takes time from their kernels' cores.
    step = WAIT_SLICE_NS if spin_s else timeout_ns
    deadline = time.perf_counter_ns() + timeout_ns
    while True:
        left = deadline - time.perf_counter_ns()
        result = vk.lib.vkWaitSemaphores(device, info, max(0, min(left, step)))
        if result != _TIMEOUT or left <= step:
            break
    if result == _TIMEOUT:
        raise DeviceLost(f"{what} did not finish within {timeout_ns / 1e9:g} s; the kernel may hang or be far too "
                         f"slow for this device. Close this backend and create a new one (pass a larger timeout_s "
                         f"for legitimately long work)")
    check(result, f"waiting for {what}")


class SubmitTemplate:
    """One VkSubmitInfo for a recorded command buffer: waits on timeline semaphores (`waits`, by default
    `semaphore` itself) for values set per run with set_wait (memory made available by those submissions
    becomes visible to this one), signals `semaphore` with the value given at submit time. With `semaphore`
    None (no timeline support) it only carries the command buffer."""

    def __init__(self, cmd: Any, semaphore: Any, waits: Sequence[Any] | None = None):
        self._cmds = vk.ffi.new("VkCommandBuffer[1]", [cmd])
        self.ptr = new_struct("VkSubmitInfo", vk.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                              pCommandBuffers=self._cmds)
        if semaphore is None:
            return
        waits = [semaphore] if waits is None else list(waits)
        n = len(waits)
        self._signal_sem = vk.ffi.new("VkSemaphore[1]", [semaphore])
        self._wait_sems = vk.ffi.new("VkSemaphore[]", waits or [semaphore])
        self._stages = vk.ffi.new("VkPipelineStageFlags[]", [vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT] * max(n, 1))
        self._wait = vk.ffi.new("uint64_t[]", max(n, 1))
        self._signal = vk.ffi.new("uint64_t[1]", [0])
        self._tl = new_struct("VkTimelineSemaphoreSubmitInfo", vk.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                              waitSemaphoreValueCount=n, pWaitSemaphoreValues=self._wait,
                              signalSemaphoreValueCount=1, pSignalSemaphoreValues=self._signal)
        self.ptr.pNext = self._tl
        self.ptr.waitSemaphoreCount = n
        self.ptr.pWaitSemaphores = self._wait_sems
        self.ptr.pWaitDstStageMask = self._stages
        self.ptr.signalSemaphoreCount = 1
        self.ptr.pSignalSemaphores = self._signal_sem

    def set_wait(self, value: int, index: int = 0) -> None:
        self._wait[index] = value

    def set_signal(self, value: int) -> None:
        self._signal[0] = value
