"""The logical device: a compute queue and, where the device has a transfer-only queue family, a transfer queue
(each a `Lane`: queue, lock, timeline semaphore, one reusable command buffer and fence for synchronous work),
and `submit_recorded` for command buffers recorded once and replayed. One-shot work (`submit`, `submit_async`)
runs on the compute queue."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from ..errors import DeviceLost, DeviceNotFound, InvalidArgument
from . import features, segments, timeline, tracking
from ._vk import vk
from .errors import guard, is_vulkan_error, to_portable
from .properties import PhysicalDevice, queue_flags_str

_PORTABILITY_SUBSET = "VK_KHR_portability_subset"  # must be enabled when a driver offers it
_serials = itertools.count(1)  # names a Device for ownership checks; unlike id(), never reused
TRANSIENT_BUFFERS = 4  # command buffers for submit_async (chunked transfers in flight at once)
TRANSFER_MODES = ("auto", "off", "shared")


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


def pick_transfer_family(families: tuple[tuple[int, int], ...]) -> tuple[int | None, str]:
    """(family index or None, why): a transfer-only family (TRANSFER without COMPUTE or GRAPHICS: the copy
    engines of discrete GPUs), which runs copies concurrently with the compute queue's kernels."""
    busy = vk.VK_QUEUE_COMPUTE_BIT | vk.VK_QUEUE_GRAPHICS_BIT
    for i, (f, n) in enumerate(families):
        if f & vk.VK_QUEUE_TRANSFER_BIT and not f & busy and n > 0:
            return i, f"queue family {i} ({queue_flags_str(f)}): dedicated transfer"
    return None, "no transfer-only queue family: copies run on the compute queue"


def _check_opt_in(pd: PhysicalDevice, opt_in: tuple[str, ...]) -> None:
    unknown = [n for n in opt_in if n not in features.OPT_IN]
    if unknown:
        raise InvalidArgument(f"opt_in {unknown} unknown; pass some of {sorted(features.OPT_IN)}")
    missing = [f"{n} ({features.OPT_IN[n][3]})" for n in opt_in if not pd.features.get(n)]
    if missing:
        raise DeviceNotFound(f"{pd.info.uri} ({pd.info.name}, {pd.info.driver_version}) does not offer "
                             f"{', '.join(missing)}")


class Lane:
    """One VkQueue as this runtime uses it: its family, a lock for host access to the queue (two lanes on
    the same VkQueue share it), a timeline semaphore that every submission to it signals with increasing
    values, and a command pool with one command buffer and a fence for synchronous submissions."""

    def __init__(self, device: Any, name: str, family: int, queue: Any, lock: threading.Lock, use_timeline: bool):
        self.name = name
        self.family = family
        self.queue = queue
        self.lock = lock
        self.last_value = 0  # last value a submission to this lane will signal on `timeline`
        self.timeline: Any = None
        self.pool = self.cmd = self.fence = None
        self._device = device
        try:
            with guard("vkCreateCommandPool"):
                self.pool = vk.vkCreateCommandPool(device, vk.VkCommandPoolCreateInfo(
                    flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, queueFamilyIndex=family), None)
            with guard("vkAllocateCommandBuffers"):
                self.cmd = vk.vkAllocateCommandBuffers(device, vk.VkCommandBufferAllocateInfo(
                    commandPool=self.pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
            with guard("vkCreateFence"):
                self.fence = vk.vkCreateFence(device, vk.VkFenceCreateInfo(), None)
            if use_timeline:
                self.timeline = timeline.create(device)
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> None:
        if self.fence is not None:
            vk.vkDestroyFence(self._device, self.fence, None)
            self.fence = None
        if self.timeline is not None:
            vk.vkDestroySemaphore(self._device, self.timeline, None)
            self.timeline = None
        if self.pool is not None:
            vk.vkDestroyCommandPool(self._device, self.pool, None)  # frees its command buffers too
            self.pool = None


class Device:
    """A VkDevice with a compute lane and, where available, transfer lanes: `transfer` for uploads and
    `transfer_out` for downloads (two queues of the transfer family when it has two, so that one frame's upload
    never queues behind another frame's download that waits for its dispatches; else the same lane).
    `queue_lock` serializes the compute queue; `submit` (one shared command buffer) holds `sync_lock` until its
    work is done. Without timeline semaphores `timeline` is None and there are no transfer lanes.

    transfer_queue: "auto" uses a transfer-only queue family when the device has one; "off" never does; "shared"
    makes a transfer lane on the compute family (a second queue when the family has one, else the compute queue
    itself), so the multi-queue recording runs on drivers with a single family (tests on lavapipe). With equal
    families no queue family ownership transfer is needed, and none is recorded.

    opt_in: names of features.OPT_IN (features for tools) to enable too; DeviceNotFound if the device lacks one.
    """

    def __init__(self, pd: PhysicalDevice, timeout_s: float, use_timeline: bool = True,
                 transfer_queue: str = "auto", opt_in: tuple[str, ...] = ()):
        if transfer_queue not in TRANSFER_MODES:
            raise InvalidArgument(f"transfer_queue must be one of {TRANSFER_MODES}, got {transfer_queue!r}")
        _check_opt_in(pd, opt_in)
        self.pd = pd
        self.serial = next(_serials)
        self.name = f"{pd.info.uri} ({pd.info.name})"
        self.timeout_ns = int(timeout_s * 1e9)
        self.lost = False
        self.allocations = 0  # live VkDeviceMemory objects, against maxMemoryAllocationCount
        self.family, self.family_reason = pick_queue_family(pd.queue_families)
        self.sync_lock = threading.RLock()
        self.compute: Lane | None = None
        self.transfer: Lane | None = None  # uploads
        self.transfer_out: Lane | None = None  # downloads (may be the same lane as `transfer`)
        self.oneshot_value = 0  # compute-timeline value of the newest one-shot submission (submit/submit_async)
        self.transfer_owned = segments.TransferOwned()  # ranges recordings left with the transfer family
        use_timeline = bool(use_timeline and pd.features.get("timelineSemaphore"))

        # Where the transfer lanes go: (family, queue index of uploads, queue index of downloads) or None.
        transfer_at: tuple[int, int, int] | None = None
        self.transfer_reason = "off"
        if not use_timeline:
            self.transfer_reason = "no timeline semaphores: one queue"
        elif transfer_queue == "auto":
            fam, self.transfer_reason = pick_transfer_family(pd.queue_families)
            if fam is not None:
                transfer_at = (fam, 0, 1 if pd.queue_families[fam][1] > 1 else 0)
        elif transfer_queue == "shared":
            count = pd.queue_families[self.family][1]
            transfer_at = (self.family, 1 if count > 1 else 0, 1 if count > 1 else 0)
            self.transfer_reason = (f"shared: queue {transfer_at[1]} of compute family {self.family} (no ownership "
                                    f"transfers between equal families)")

        feats, keep, extensions = features.enable_chain(pd.api_version, pd.extensions, pd.features, opt_in)
        if _PORTABILITY_SUBSET in pd.extensions:
            extensions.append(_PORTABILITY_SUBSET)
        queues = {self.family: 1}
        if transfer_at is not None:
            queues[transfer_at[0]] = max(queues.get(transfer_at[0], 0), transfer_at[1] + 1, transfer_at[2] + 1)
        queue_infos = [vk.VkDeviceQueueCreateInfo(queueFamilyIndex=f, pQueuePriorities=[1.0] * n)
                       for f, n in queues.items()]
        is_v10 = pd.api_version < features.V1_1
        create = vk.VkDeviceCreateInfo(
            pNext=None if is_v10 else feats,
            pQueueCreateInfos=queue_infos,
            ppEnabledExtensionNames=extensions,
            pEnabledFeatures=feats if is_v10 else None,
        )
        with guard(f"vkCreateDevice on {self.name}"):
            self.handle = vk.vkCreateDevice(pd.handle, create, None)
        del keep  # the feature structs may go once vkCreateDevice returned
        tracking.created("device")
        try:
            lock = threading.Lock()
            self.compute = Lane(self.handle, "compute", self.family, vk.vkGetDeviceQueue(self.handle, self.family, 0),
                                lock, use_timeline)
            if transfer_at is not None:
                fam, up, down = transfer_at

                def lane(name: str, index: int) -> Lane:
                    same = (fam, index) == (self.family, 0)
                    return Lane(self.handle, name, fam, vk.vkGetDeviceQueue(self.handle, fam, index),
                                lock if same else threading.Lock(), use_timeline)

                self.transfer = lane("transfer", up)
                self.transfer_out = lane("transfer-out", down) if down != up else self.transfer
            # One-shot commands on the compute lane: its pool, command buffer and fence.
            self.pool, self.cmd, self.fence = self.compute.pool, self.compute.cmd, self.compute.fence
            with guard("vkAllocateCommandBuffers"):  # for submit_async: several transfers in flight
                self._transient = [(c, [0]) for c in vk.vkAllocateCommandBuffers(
                    self.handle, vk.VkCommandBufferAllocateInfo(commandPool=self.pool,
                                                                level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                                                commandBufferCount=TRANSIENT_BUFFERS))]
            self._next_transient = 0
        except BaseException:
            self.destroy()
            raise

    # The compute lane under the names the rest of the runtime uses.
    @property
    def queue(self) -> Any:
        return self.compute.queue

    @property
    def queue_lock(self) -> threading.Lock:
        return self.compute.lock

    @property
    def timeline(self) -> Any:
        return self.compute.timeline if self.compute is not None else None

    @property
    def last_value(self) -> int:
        return self.compute.last_value

    @last_value.setter
    def last_value(self, value: int) -> None:
        self.compute.last_value = value

    def lanes(self) -> list[Lane]:
        """Every distinct lane: compute first."""
        out: list[Lane] = []
        for lane in (getattr(self, "compute", None), getattr(self, "transfer", None),
                     getattr(self, "transfer_out", None)):
            if lane is not None and all(lane is not o for o in out):
                out.append(lane)
        return out

    @property
    def ownership_transfers(self) -> bool:
        """True when recordings move buffer ranges between two queue families (a transfer lane on its own family)."""
        return self.transfer is not None and self.transfer.family != self.family

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

    def submit(self, record: Callable[[Any], None], what: str, lane: Lane | None = None,
               wait: tuple[Lane, int] | None = None) -> int:
        """Record commands with `record(cmd)`, submit them to `lane` (default: compute) and wait for them to
        finish; returns the timeline value the submission signalled (0 without timeline semaphores). `wait`
        = (lane, value): the submission first waits for that lane's timeline to reach `value`.

        The wait has a finite timeout: a kernel that never ends becomes DeviceLost with a message instead
        of a hang. After a timeout or loss the device refuses further work (its fence is still pending).
        """
        lane = lane or self.compute
        with self.sync_lock:
            self.check_usable()
            cmd = lane.cmd
            with guard(f"recording {what} on {self.name}"):
                vk.vkResetCommandBuffer(cmd, 0)
                begin = vk.VkCommandBufferBeginInfo(flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
                vk.vkBeginCommandBuffer(cmd, begin)
                record(cmd)
                vk.vkEndCommandBuffer(cmd)
                vk.vkResetFences(self.handle, 1, [lane.fence])
            try:
                with lane.lock:
                    value = lane.last_value + 1 if lane.timeline is not None else 0
                    if value and wait is not None and wait[1]:
                        signal = vk.VkTimelineSemaphoreSubmitInfo(pWaitSemaphoreValues=[wait[1]],
                                                                  pSignalSemaphoreValues=[value])
                        submit_info = vk.VkSubmitInfo(
                            pNext=signal, pWaitSemaphores=[wait[0].timeline],
                            pWaitDstStageMask=[vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT], pCommandBuffers=[cmd],
                            pSignalSemaphores=[lane.timeline])
                    elif value:
                        signal = vk.VkTimelineSemaphoreSubmitInfo(pSignalSemaphoreValues=[value])
                        submit_info = vk.VkSubmitInfo(pNext=signal, pCommandBuffers=[cmd],
                                                      pSignalSemaphores=[lane.timeline])
                    else:
                        submit_info = vk.VkSubmitInfo(pCommandBuffers=[cmd])
                    with guard(f"vkQueueSubmit of {what} on {self.name}"):
                        vk.vkQueueSubmit(lane.queue, 1, [submit_info], lane.fence)
                    lane.last_value = max(lane.last_value, value)
                    if lane is self.compute:
                        self.oneshot_value = max(self.oneshot_value, value)
                self._wait(what, lane.fence)
            except DeviceLost:
                self.lost = True
                raise
            return value

    def submit_async(self, record: Callable[[Any], None], what: str) -> int:
        """Record into one of a few transient command buffers and submit to the compute queue without waiting;
        returns the timeline value to wait for (wait_value). Needs timeline semaphores; callers hold `sync_lock`."""
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
                    self.oneshot_value = value
            except DeviceLost:
                self.lost = True
                raise
            last[0] = value
            return value

    def submit_recorded(self, info: Any, what: str, fence: Any = None, lane: Lane | None = None) -> int:
        """Submit a prepared timeline.SubmitTemplate to `lane` (default: compute) from any thread; returns the
        timeline value it signals. Without timeline semaphores, `fence` is signalled instead and 0 returned."""
        self.check_usable()
        lane = lane or self.compute
        with lane.lock:
            value = lane.last_value + 1 if lane.timeline is not None else 0
            if value:
                info.set_signal(value)
            try:
                timeline.check(vk.lib.vkQueueSubmit(lane.queue, 1, info.ptr, fence if fence is not None
                                                    else vk.ffi.NULL), f"vkQueueSubmit of {what} on {self.name}")
            except DeviceLost:
                self.lost = True
                raise
            lane.last_value = max(lane.last_value, value)
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

    def wait_value(self, value: int, what: str, lane: Lane | None = None, spin_s: float = 0.0) -> None:
        """Block until the timeline of `lane` (default: compute) reaches `value` (DeviceLost after the timeout),
        polling it for up to `spin_s` first."""
        try:
            timeline.wait(self.handle, (lane or self.compute).timeline, value, self.timeout_ns,
                          f"{what} on {self.name}", spin_s)
        except DeviceLost:
            self.lost = True
            raise

    def completed_value(self, lane: Lane | None = None) -> int:
        lane = lane or self.compute
        return timeline.value(self.handle, lane.timeline) if lane.timeline is not None else 0

    def _wait(self, what: str, fence: Any = None) -> None:
        try:
            vk.vkWaitForFences(self.handle, 1, [fence or self.fence], vk.VK_TRUE, self.timeout_ns)
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
        """vkDeviceWaitIdle, holding every queue's lock (the call touches all queues)."""
        locks: list[threading.Lock] = []
        for lane in self.lanes():
            if all(lane.lock is not k for k in locks):
                locks.append(lane.lock)
        for lock in locks:
            lock.acquire()
        try:
            with guard(f"vkDeviceWaitIdle on {self.name}"):
                vk.vkDeviceWaitIdle(self.handle)
        finally:
            for lock in reversed(locks):
                lock.release()

    def destroy(self) -> None:
        """Destroy the lanes' fences, semaphores and command pools, then the device (after every object made
        from it is gone)."""
        if getattr(self, "handle", None) is None:
            return
        for lane in reversed(self.lanes()):
            lane.destroy()
        self.pool = self.cmd = self.fence = None
        vk.vkDestroyDevice(self.handle, None)
        self.handle = None
        tracking.destroyed("device")
