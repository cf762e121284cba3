"""A plan bound to fixed buffers on OpenCL: kernel objects with their arguments set once, and either one
cl_khr_command_buffer (one enqueue per run) or preset-argument kernels enqueued with event waits only on real
dependencies (out-of-order queue) or in order. Uploads and downloads are non-blocking; a completion thread
waits for the downloads and resolves the Future."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from ..backend import Recording, Step
from ..completion import Completer, Completion
from ..errors import InvalidArgument, InvalidState
from ..memory import dependencies, uses
from .buffers import ClBuffer
from .clapi import cl
from .cmdbuf import CommandBuffer, CommandBufferApi
from .errors import translate

# How long a blocked caller polls its events before the driver's wait. H200, NVIDIA OpenCL, per submission
# (benchmarks/results/h200/session7/opencl_wait_spin.json): dwconv 48-76 -> 43 us, gemv 64 -> 50 us, softmax
# 60-63 -> 53-59 us; a 3.35 ms matmul 1% slower (it polls for 1 ms, then waits).
SPIN_S = 0.001


def int32(value: int) -> Any:
    """A push-constant value as the kernel's 32-bit `int` argument (unsigned values keep their bits)."""
    v = int(value)
    if not -(2**31) <= v < 2**32:
        raise InvalidArgument(f"push-constant value {v} does not fit 32 bits; pass values in [-2**31, 2**32)")
    return np.uint32(v & 0xFFFFFFFF).view(np.int32)


class OpenCLRecording(Recording):
    """Preset kernels (+ command buffer where available) for one (plan, bound buffers); one run in flight."""

    def __init__(self, queue: Any, out_of_order: bool, api: CommandBufferApi | None, completer: Completer,
                 steps: Sequence[Step], uploads: Sequence[tuple[ClBuffer, int]],
                 downloads: Sequence[tuple[ClBuffer, int]], where: str,
                 copies: Sequence[tuple[ClBuffer, ClBuffer, int]] = ()):
        self._queue = queue
        # A caller blocked on a result waits on the events itself (completion.Completion), except on a CPU
        # device, whose kernels run on the cores that a second waiter would take.
        self.caller_waits = not queue.device.type & cl.device_type.CPU
        self._copies = [(a, b, int(n)) for a, b, n in copies if n and a is not b]
        self._ooo = out_of_order
        self._completer = completer
        self._where = where
        self._uploads = [(b, int(n)) for b, n in uploads]
        self._downloads = [(b, int(n)) for b, n in downloads]
        self._stage = [np.empty(n, np.uint8) for _, n in self._uploads]
        self._idle = threading.Event()
        self._idle.set()
        live = [s for s in steps if 0 not in tuple(int(g) for g in s.grid)]  # OpenCL rejects empty launches
        self.dispatches = len(live)
        self._launches: list[tuple[Any, tuple[int, ...], tuple[int, ...]]] = []
        # Launches with the same kernel and arguments share one kernel object (an enqueue captures the arguments):
        # a plan recorded n times over (run_steps) repeats its own every second run.
        preset: dict[tuple, Any] = {}
        for s in live:
            lk = s.kernel
            key = (id(lk), tuple(id(b.mem) for b in s.buffers), tuple(s.push_constants))
            k = preset.get(key)
            if k is None:
                k = preset[key] = cl.Kernel(lk.program, lk.name)
                for i, b in enumerate(s.buffers):
                    k.set_arg(i, b.mem)
                for j, v in enumerate(s.push_constants):
                    k.set_arg(len(s.buffers) + j, int32(v))
            gs = tuple(int(g) * w for g, w in zip(s.grid, lk.workgroup_size))
            self._launches.append((k, gs, tuple(lk.workgroup_size)))
        self._deps = dependencies([uses([b.region for b in s.buffers], s.kernel.access) for s in live])
        self.barriers = sum(len(d) for d in self._deps)
        depended = {j for d in self._deps for j in d}
        self._sinks = [i for i in range(len(live)) if i not in depended]
        self._cmdbuf: CommandBuffer | None = None
        if api is not None and self._launches:
            self._cmdbuf = CommandBuffer(api, queue)
            try:
                points: list[int] = []
                for (k, gs, ls), deps in zip(self._launches, self._deps):
                    points.append(self._cmdbuf.ndrange(k, gs, ls, [points[j] for j in deps]))
                self._cmdbuf.finalize()
            except BaseException:
                self._cmdbuf.close()
                raise
        self.mode = "opencl-command-buffer" if self._cmdbuf is not None else "opencl-kernels"

    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Upload, run, download without blocking; the Future resolves to the downloads (uint8 arrays)."""
        pending, outs = self._launch(inputs)
        fast = (lambda: self._wait(pending, SPIN_S)) if self.caller_waits else None
        return self._completer.submit(Completion(lambda: self._wait(pending), lambda: self._finish(outs), fast))

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Upload, run, download and wait in this thread, with no Future and no completion thread (PoCL, a
        bias-GELU-residual 1024x1024: 0.62 vs 0.67 ms per run through submit().result()). GPU drivers poll the
        events first; CPU drivers block in clWaitForEvents (a polling caller would take a core from them)."""
        pending, outs = self._launch(inputs)
        try:
            self._wait(pending, SPIN_S if self.caller_waits else 0.0)
        except BaseException:
            # Interrupted or failed: the completion thread marks the recording idle once the run is over.
            self._completer.submit(Completion(lambda: self._wait(pending), lambda: self._finish(outs)))
            raise
        return self._finish(outs)

    def _launch(self, inputs: Sequence[np.ndarray]) -> tuple[list[Any], list[np.ndarray]]:
        """Enqueue a run once the previous one is over: (the events that mark it done, the download arrays)."""
        if self._queue is None:
            raise InvalidState("this recording is closed; record the plan again (Backend.record)")
        self._idle.wait()
        self._idle.clear()
        try:
            return self._enqueue(inputs)
        except BaseException as e:
            self._drain()
            self._idle.set()
            if isinstance(e, cl.Error):
                raise translate(e, f"{self._where}: running a plan of {self.dispatches} dispatches") from e
            raise

    def _enqueue(self, inputs: Sequence[np.ndarray]) -> tuple[list[Any], list[np.ndarray]]:
        q = self._queue
        ups = []
        for arr, stage, (buf, n) in zip(inputs, self._stage, self._uploads):
            if n:
                stage[:] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)[:n]
                ups.append(cl.enqueue_copy(q, buf.mem, stage, is_blocking=False))
        if self._cmdbuf is not None:
            last = [self._cmdbuf.enqueue(ups if self._ooo else [])]
        else:
            events: list[Any] = []
            for (k, gs, ls), deps in zip(self._launches, self._deps):
                wait = (ups + [events[j] for j in deps]) if self._ooo else None
                events.append(cl.enqueue_nd_range_kernel(q, k, gs, ls, wait_for=wait or None))
            last = [events[i] for i in self._sinks]
        if self._copies:  # carried state: after every dispatch has read the old value and written the new one
            wait = (last + ups) if self._ooo else None
            last = [cl.enqueue_copy(q, dst.mem, src.mem, byte_count=n, wait_for=wait or None)
                    for src, dst, n in self._copies]
        wait_out = (last + ups) if self._ooo else None
        outs = [np.empty(n, np.uint8) for _, n in self._downloads]
        downs = [cl.enqueue_copy(q, out, buf.mem, is_blocking=False, wait_for=wait_out or None)
                 for out, (buf, n) in zip(outs, self._downloads) if n]
        q.flush()
        return downs or last or ups, outs

    def _wait(self, events: list[Any], spin_s: float = 0.0) -> None:
        """Wait for `events`, polling their status for up to `spin_s` first (a caller blocked on the result)."""
        try:
            end = time.perf_counter() + spin_s
            while events and time.perf_counter() < end:
                if all(e.command_execution_status <= cl.command_execution_status.COMPLETE for e in events):
                    break  # complete, or failed: clWaitForEvents reports which
            if events:
                cl.wait_for_events(events)
        except cl.Error as e:
            self._idle.set()
            raise translate(e, f"{self._where}: a plan of {self.dispatches} dispatches") from e

    def _finish(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        self._idle.set()
        return outs

    def _drain(self) -> None:
        try:
            self._queue.finish()
        except Exception:  # noqa: BLE001 - the original error is the one worth reporting
            pass

    def wait_idle(self) -> None:
        self._idle.wait()

    def close(self) -> None:
        """Wait for the run in flight, then release the command buffer and kernels (idempotent)."""
        if self._queue is None:
            return
        self._idle.wait()
        if self._cmdbuf is not None:
            self._cmdbuf.close()
            self._cmdbuf = None
        self._launches.clear()
        self._queue = None
