"""A plan recorded once into Vulkan command buffers and replayed: descriptor sets written once, staging
copies in and out recorded with it, barriers only where one dispatch depends on another.

With one queue, or copies too small to be worth a second one (TRANSFER_LANE_MIN_BYTES), a run is one command
buffer. With a transfer lane (device.transfer), it is up to three,
chained by timeline semaphores: copies in on the transfer queue, dispatches on the compute queue, copies out
on the transfer queue, with queue family ownership transfers between them (segments.py says which ranges and
why). A run's first command buffer waits for the previous run's last one (staging and buffers are reused), so
one recording has one run in flight and successive runs of *different* recordings (frames) overlap: one frame's
upload on the transfer queue while another computes. A completion thread waits for the last value and copies
the outputs out.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..backend import Recording, Step
from ..completion import Completer, Completion
from ..errors import InvalidState, PortableError
from ..memory import barriers, uses
from ..memory.pool import align_up
from . import commands, segments, tracking
from ._vk import vk
from .buffers import Buffer, HostBuffer
from .device import Device, Lane
from .errors import guard
from .timeline import SubmitTemplate

SPIN_S = 0.001  # how long a blocked caller polls the timeline before the driver's wait
# A run that moves less than this (inputs in + outputs out) stays one command buffer on the compute queue even
# where the device has a transfer lane: the semaphore hand-offs between queues cost more than the copies. H200,
# y = relu(x), one blocking run (benchmarks/results/h200/session15/transfer_lanes.json): 4 KiB each way 54-56 ->
# 39 us, 256 KiB 101-105 -> 74-78 us, 1 MiB 280-286 -> 260-263 us, 4 MiB even (922-941 against 894-938 us); a
# decode step (16 bytes in, 8 KiB of logits out) 3763-3922 -> 4134-4212 tokens/s.
TRANSFER_LANE_MIN_BYTES = 8 << 20

_ALIGN = 64


class _Part:
    """One segment as recorded: its lane, command buffer, prepared submission, and the lanes it waits on."""

    def __init__(self, lane: Lane, cmd: Any, template: SubmitTemplate, waits: list[Lane], after: Lane):
        self.lane, self.cmd, self.template, self.waits, self.after = lane, cmd, template, waits, after


class VulkanRecording(Recording):
    """Command buffers + descriptor pool + staging area for one (plan, bound buffers); one run in flight."""

    mode = "vulkan-replay"

    def __init__(self, device: Device, completer: Completer, steps: Sequence[Step],
                 uploads: Sequence[tuple[Buffer, int]], downloads: Sequence[tuple[Buffer, int]],
                 copies: Sequence[tuple[Buffer, Buffer, int]] = ()):
        self.device = device
        self._copies = [(a, b, int(n)) for a, b, n in copies if n and a is not b]
        self._completer = completer
        # A caller blocked on a result waits itself (completion.Completion), except on a CPU driver, whose kernels
        # run on the cores that a second waiter would take.
        self.caller_waits = device.pd.info.device_type != "cpu"
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
        # Buffers the compute family uses in a run, and the outputs it hands to the transfer family.
        on_compute = [b for b, _ in self._uploads] + [b for s in steps for b in s.buffers] + \
            [b for c in self._copies for b in c[:2]]
        self._on_compute = list(dict.fromkeys(b.region for b in on_compute))
        self._handed_over = [(b.region, segments.Span.of(b)) for b, n in self._downloads if n]
        self._idle = threading.Event()
        self._idle.set()
        # The value the previous run's last command buffer signalled; the first run waits for everything
        # submitted to the compute queue before (constants).
        self.last_value = device.last_value
        self._fence = self._desc_pool = None
        self._pools: dict[str, Any] = {}
        self._parts: list[_Part] = []
        self.segments: list[segments.Segment] = []
        self.staging: HostBuffer | None = None
        try:
            self.staging = HostBuffer(device, off)
            self._build(steps)
        except BaseException:
            self._destroy()
            raise
        tracking.created("recording")

    @property
    def lanes(self) -> list[str]:
        """What each command buffer of a run is, in order: ["compute"] with one queue or small copies, else
        ["upload", "compute", "download"] (either transfer part left out when there is nothing to copy)."""
        return [seg.lane for seg in self.segments] if self._parts else []

    # ---- recording -------------------------------------------------------------------------------------
    def _build(self, steps: Sequence[Step]) -> None:
        dev = self.device
        if dev.timeline is None:
            with guard(f"creating a fence on {dev.name}"):
                self._fence = vk.vkCreateFence(dev.handle, vk.VkFenceCreateInfo(), None)
        # Dispatches of one kernel over the same buffers share a descriptor set: a plan recorded n times over
        # (run_steps) repeats its own every second run.
        unique: dict[tuple, int] = {}
        bound: list[tuple[Any, list[Buffer]]] = []
        which: list[int] = []  # per dispatch with a set layout: its set in `bound` order
        for s in steps:
            if s.kernel.set_layout is None:
                continue
            key = (id(s.kernel), tuple((b.handle, b.offset, b.size) for b in s.buffers))
            if key not in unique:
                unique[key] = len(bound)
                bound.append((s.kernel, list(s.buffers)))
            which.append(unique[key])
        sets: list[Any] = []
        if bound:
            count = sum(len(b) for _, b in bound)
            sizes = commands.pool_sizes(count)
            with guard(f"creating descriptor sets on {dev.name}"):
                self._desc_pool = vk.vkCreateDescriptorPool(dev.handle, vk.VkDescriptorPoolCreateInfo(
                    maxSets=len(bound), pPoolSizes=sizes), None)
                sets = list(vk.vkAllocateDescriptorSets(dev.handle, vk.VkDescriptorSetAllocateInfo(
                    descriptorPool=self._desc_pool, pSetLayouts=[lk.set_layout for lk, _ in bound])))
            commands.write_sets(dev, bound, sets)
            sets = [sets[i] for i in which]
        self._sets = sets
        plan = [uses([b.region for b in s.buffers], s.kernel.kernel.access) for s in steps]
        before = barriers(plan)
        items = [(s.kernel, tuple(int(g) for g in s.grid),
                  commands.pack_push_constants(s.push_constants) if s.push_constants else None) for s in steps]
        moved = sum(n for _, n in self._uploads) + sum(n for _, n in self._downloads)
        transfer = dev.transfer if moved >= TRANSFER_LANE_MIN_BYTES else None
        if transfer is None:
            self._handed_over = []  # the outputs stay with the compute family
        self.segments = segments.plan(
            self.staging.handle, [(b, off, n) for (b, n), (off, _) in zip(self._uploads, self._in)],
            [(b, off, n) for (b, n), (off, _) in zip(self._downloads, self._out)], self._copies, dev.family,
            transfer.family if transfer is not None else None, after_earlier_work=dev.timeline is None)
        by_name = {"compute": dev.compute, "upload": transfer, "download": dev.transfer_out}
        lanes = [by_name[seg.lane] for seg in self.segments]
        for i, (seg, lane) in enumerate(zip(self.segments, lanes)):
            cmd = self._command_buffer(lane)  # pools per lane: a pool's buffers are used by one thread
            with guard(f"recording a plan of {len(steps)} dispatches ({lane.name} part) on {dev.name}"):
                vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(flags=0))
                count = segments.emit(cmd, seg.ops, lambda cmd=cmd: commands.record_dispatches(
                    cmd, items, sets, before, after_earlier_work=False))
                vk.vkEndCommandBuffer(cmd)
            if any(isinstance(op, segments.Dispatches) for op in seg.ops):
                self.barriers = count
            # Waits: the previous part of this run, or for the first part the last part of the previous run;
            # an upload on the transfer queue also waits for one-shot work on the compute queue (it may have
            # used the same buffers: set_state, constants, a direct Backend.upload).
            after = lanes[i - 1] if i else lanes[-1]
            waits = [after]
            if i == 0 and lane is not dev.compute and after is not dev.compute:
                waits.append(dev.compute)
            template = SubmitTemplate(cmd, lane.timeline, [w.timeline for w in waits]) \
                if lane.timeline is not None else SubmitTemplate(cmd, None)
            self._parts.append(_Part(lane, cmd, template, waits, after))
        if lanes and lanes[-1] is not dev.compute:
            self.last_value = 0  # a transfer-timeline value from now on (the compute one above means nothing there)

    def _command_buffer(self, lane: Lane) -> Any:
        """A primary command buffer from this recording's pool for `lane`'s family."""
        dev = self.device
        with guard(f"creating a command pool on {dev.name}"):
            pool = self._pools.get(lane.name)
            if pool is None:
                pool = self._pools[lane.name] = vk.vkCreateCommandPool(dev.handle, vk.VkCommandPoolCreateInfo(
                    queueFamilyIndex=lane.family), None)
            return vk.vkAllocateCommandBuffers(dev.handle, vk.VkCommandBufferAllocateInfo(
                commandPool=pool, level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]

    # ---- replay ----------------------------------------------------------------------------------------
    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Copy inputs to staging, submit the recorded command buffers, return a Future of the outputs (uint8)."""
        value, what, last = self._launch(inputs)
        dev = self.device
        if not value:
            return self._completer.submit(Completion(lambda: dev.wait_fence(self._fence, what), self._finish))
        # A caller blocked on the result waits itself, polling the timeline before sleeping in the driver: NVIDIA's
        # blocking wait wakes ~20 us after the device is done (benchmarks/results/h200/session6/latency.json).
        fast = (lambda: dev.wait_value(value, what, last, spin_s=SPIN_S)) if self.caller_waits else None
        return self._completer.submit(Completion(lambda: dev.wait_value(value, what, last), self._finish, fast))

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Submit and wait in this thread, with no Future and no completion thread: on the H200 a plan took 26-31 us
        per run this way against 63-76 us through submit().result(), where the completion thread's wait and the
        caller's took turns (benchmarks/results/h200/session9/sync_runs.json); lavapipe saves the hand-off too
        (a bias-GELU-residual 1024x1024: 1.82 vs 2.08 ms). GPU drivers poll the timeline first; CPU drivers
        sleep in the driver's wait (a polling caller would take a core from their kernels). Without timeline
        semaphores (a fence) it goes through the completion thread."""
        if self.device.timeline is None:
            return super().run(inputs)
        value, what, last = self._launch(inputs)
        try:
            self.device.wait_value(value, what, last, spin_s=SPIN_S if self.caller_waits else 0.0)
        except BaseException:
            # Interrupted or lost: the completion thread marks the recording idle once the run is over.
            self._completer.submit(Completion(lambda: self.device.wait_value(value, what, last), self._finish))
            raise
        return self._finish()

    def _launch(self, inputs: Sequence[np.ndarray]) -> tuple[int, str, Lane]:
        """Copy inputs to staging and submit the recorded command buffers once the previous run is over;
        (the timeline value that marks this run done (0: the fence does), its description, its last lane)."""
        if not self._parts:
            raise InvalidState("this recording is closed; record the plan again (Backend.record)")
        self.device.check_usable()  # a lost device's last run never finishes: fail here instead of waiting for it
        self._idle.wait()
        self._idle.clear()
        what = f"a plan of {self.dispatches} dispatches"
        dev = self.device
        try:
            view = self.staging.view
            for arr, (off, n) in zip(inputs, self._in):
                if n:
                    view[off:off + n] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)[:n]
            value = self.last_value
            for i, part in enumerate(self._parts):
                if dev.timeline is not None:
                    for j, lane in enumerate(part.waits):
                        wait = value if lane is part.after else 0
                        if i == 0 and lane is dev.compute and part.lane is not dev.compute:
                            wait = max(wait, dev.oneshot_value)
                        part.template.set_wait(wait, j)
                value = dev.submit_recorded(part.template, what, self._fence, part.lane)
            if dev.ownership_transfers:
                dev.transfer_owned.after_run_regions(self._on_compute, self._handed_over)
        except BaseException:
            self._idle.set()
            raise
        self.last_value = value
        return value, what, self._parts[-1].lane

    def _finish(self) -> list[np.ndarray]:
        try:
            view = self.staging.view
            return [view[off:off + n].copy() for off, n in self._out]
        finally:
            self._idle.set()

    def wait_idle(self) -> None:
        self._idle.wait()

    def close(self) -> None:
        """Wait for the run in flight, then free the command buffers, descriptors and staging (idempotent)."""
        if not self._parts and self.staging is None:
            return
        if not self._idle.wait(timeout=self.device.timeout_ns / 1e9):
            # A run past the timeout (DeviceLost) may still execute: its command buffers must outlive it. A
            # really lost device returns at once.
            try:
                self.device.wait_idle()
            except PortableError:
                self.device.lost = True
        self._destroy()
        tracking.destroyed("recording")

    def _destroy(self) -> None:
        dev = self.device.handle
        self._parts = []
        if self._desc_pool is not None:
            vk.vkDestroyDescriptorPool(dev, self._desc_pool, None)
            self._desc_pool = None
        for pool in self._pools.values():
            vk.vkDestroyCommandPool(dev, pool, None)
        self._pools = {}
        if self._fence is not None:
            vk.vkDestroyFence(dev, self._fence, None)
            self._fence = None
        if self.staging is not None:
            self.staging.destroy()
            self.staging = None
