"""A backend with no driver: it records what a plan asks of a device (dispatches, buffer traffic) and runs nothing.

Compiler tests use it to check plans without lavapipe or PoCL: how many dispatches, their grids against the
device's limits, which buffers each one binds and writes. Buffers hold real bytes (an upload reads back as
written); kernels compute nothing, so outputs stay as they were. Selected as device "null:0" or directly:

    trace = runtime_null.trace(exe, limits=profiles.all_profiles()["nvidia"].limits)
    assert all(d.grid[0] <= 65535 for d in trace.dispatches)
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backend import Backend, DeviceInfo, Recording, Step
from .errors import InvalidArgument, InvalidPlan, OutOfDeviceMemory
from .executable import Executable, Kernel

# A device with the limits every Vulkan 1.1 device guarantees, unless the caller gives its own.
DEFAULT_LIMITS = {"max_workgroup_invocations": 128, "max_workgroup_size": (128, 128, 64),
                  "max_workgroup_count": (65535, 65535, 65535), "max_buffer_bytes": 1 << 30,
                  "max_storage_buffer_range": 1 << 27, "shared_memory_bytes": 16384}
ALIGNMENT = 256


@dataclass
class NullBuffer:
    """A buffer, or a view of one: `block` holds the bytes, the view covers [offset, offset + nbytes)."""

    id: int
    nbytes: int
    block: bytearray
    offset: int = 0

    @property
    def bytes(self) -> memoryview:
        return memoryview(self.block)[self.offset:self.offset + self.nbytes]


@dataclass(frozen=True)
class Binding:
    """One buffer argument of a dispatch: which block, the byte range, and how the kernel accesses it."""

    buffer: int  # id of the underlying block
    offset: int
    nbytes: int
    access: str  # "r", "w", "rw" ("" where the kernel does not say)


@dataclass(frozen=True)
class DispatchRecord:
    kernel: str
    workgroup_size: tuple[int, int, int]
    grid: tuple[int, int, int]
    bindings: tuple[Binding, ...]
    push_constants: tuple[int, ...]


@dataclass
class Trace:
    """Everything a NullBackend was asked to do, in order."""

    dispatches: list[DispatchRecord] = field(default_factory=list)
    uploads: list[tuple[int, int]] = field(default_factory=list)  # (buffer id, bytes)
    downloads: list[tuple[int, int]] = field(default_factory=list)
    copies: list[tuple[int, int, int]] = field(default_factory=list)  # (source id, destination id, bytes)
    allocations: list[tuple[int, int]] = field(default_factory=list)
    kernels_loaded: list[str] = field(default_factory=list)


class _NullRecording(Recording):
    mode = "null"

    def __init__(self, backend: NullBackend, steps: Sequence[Step], uploads, downloads, copies):
        self.backend, self.steps = backend, list(steps)
        self.uploads, self.downloads, self.copies = list(uploads), list(downloads), list(copies)
        self.dispatches = len(self.steps)

    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        for (buf, _), arr in zip(self.uploads, inputs):
            self.backend.upload(buf, arr)
        self.backend.execute([(s.kernel, s.buffers, s.grid, s.push_constants) for s in self.steps])
        for src, dst, n in self.copies:
            dst.bytes[:n] = src.bytes[:n]
            self.backend.trace.copies.append((src.id, dst.id, n))
        fut: Future = Future()
        fut.set_result([self.backend.download(buf, n) for buf, n in self.downloads])
        return fut

    def wait_idle(self) -> None:
        """Nothing runs asynchronously without a driver."""

    def close(self) -> None:
        self.steps = []


class NullBackend(Backend):
    """Records dispatches and buffer traffic; checks each dispatch against the kernel and the device limits."""

    def __init__(self, index: int = 0, limits: dict | Any | None = None, name: str = "null device"):
        lim = dict(DEFAULT_LIMITS)
        if limits is not None:
            given = limits.given() if hasattr(limits, "given") else dict(limits)
            lim.update({k: tuple(v) if isinstance(v, list) else v for k, v in given.items()})
        self.info = DeviceInfo(api="null", index=index, name=name, driver="null", driver_version="0",
                               vendor_id=0, device_id=0, device_type="other", limits=lim)
        self.trace = Trace()
        self._next_id = 0

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def allocate(self, nbytes: int) -> NullBuffer:
        if nbytes <= 0:
            raise InvalidArgument(f"buffer of {nbytes} bytes: allocate at least one byte")
        if nbytes > int(self.info.limits.get("max_buffer_bytes") or nbytes):
            raise OutOfDeviceMemory(f"{nbytes} bytes exceed the null device's largest buffer "
                                    f"({self.info.limits['max_buffer_bytes']}); give NullBackend larger limits")
        buf = NullBuffer(self._new_id(), nbytes, bytearray(nbytes))
        self.trace.allocations.append((buf.id, nbytes))
        return buf

    def free(self, buffer: NullBuffer) -> None:
        """Host memory only: dropped with the last reference."""

    def upload(self, buffer: NullBuffer, data: np.ndarray) -> None:
        raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        buffer.bytes[:raw.size] = raw.tobytes()
        self.trace.uploads.append((buffer.id, raw.size))

    def download(self, buffer: NullBuffer, nbytes: int) -> np.ndarray:
        self.trace.downloads.append((buffer.id, nbytes))
        return np.frombuffer(bytes(buffer.bytes[:nbytes]), dtype=np.uint8).copy()

    def load_kernel(self, kernel: Kernel) -> Kernel:
        self.trace.kernels_loaded.append(kernel.name)
        return kernel

    def execute(self, dispatches: Sequence[tuple[Any, Sequence[Any], tuple[int, int, int], Sequence[int]]]) -> None:
        for kernel, buffers, grid, push in dispatches:
            self._check(kernel, buffers, grid, push)
            access = tuple(kernel.access) or ("",) * len(buffers)
            bindings = tuple(Binding(b.id, b.offset, b.nbytes, a)
                             for b, a in zip(buffers, access))
            self.trace.dispatches.append(DispatchRecord(kernel.name, tuple(kernel.workgroup_size), tuple(grid),
                                                        bindings, tuple(int(p) for p in push)))

    def _check(self, kernel: Kernel, buffers: Sequence[Any], grid: tuple[int, int, int], push: Sequence[int]) -> None:
        lim = self.info.limits
        where = f"kernel {kernel.name!r}"
        if len(buffers) != kernel.num_buffers:
            raise InvalidPlan(f"{where}: {len(buffers)} buffers bound, it takes {kernel.num_buffers}")
        if len(push) != len(kernel.push_constants):
            raise InvalidPlan(f"{where}: {len(push)} push constants, it takes {len(kernel.push_constants)}")
        counts = lim.get("max_workgroup_count") or (65535,) * 3
        if any(g < 1 or g > c for g, c in zip(grid, counts)):
            raise InvalidPlan(f"{where}: grid {tuple(grid)} outside the device's workgroup counts {tuple(counts)}")
        wg = kernel.workgroup_size
        if wg[0] * wg[1] * wg[2] > int(lim.get("max_workgroup_invocations") or 1 << 30):
            raise InvalidPlan(f"{where}: workgroup {tuple(wg)} exceeds {lim['max_workgroup_invocations']} "
                              f"invocations; compile with this device's profile")

    def view(self, block: NullBuffer, offset: int, nbytes: int) -> NullBuffer:
        if offset % ALIGNMENT or offset + nbytes > block.nbytes + block.offset:
            raise InvalidArgument(f"view of {nbytes} bytes at {offset} does not fit a {block.nbytes}-byte block "
                                  f"aligned to {ALIGNMENT}")
        return NullBuffer(block.id, nbytes, block.block, block.offset + offset)

    def buffer_limits(self) -> dict[str, int]:
        lim = self.info.limits
        return {"alignment": ALIGNMENT, "max_block": int(lim["max_buffer_bytes"]),
                "max_range": int(lim.get("max_storage_buffer_range") or lim["max_buffer_bytes"])}

    def record(self, steps: Sequence[Step], uploads: Sequence[tuple[Any, int]],
               downloads: Sequence[tuple[Any, int]], copies: Sequence[tuple[Any, Any, int]] = ()) -> Recording:
        return _NullRecording(self, steps, uploads, downloads, copies)

    def close(self) -> None:
        """No driver objects to release."""


def trace(exe: Executable, limits: dict | Any | None = None) -> Trace:
    """Run an Executable's plan on a fresh NullBackend, one buffer per slot (constants and zeros uploaded first),
    and return what it recorded: the dispatches in plan order with the slot id of each binding."""
    backend = NullBackend(limits=limits)
    buffers = {s.id: backend.allocate(max(s.nbytes, 4)) for s in exe.slots}
    for sid, data in exe.constants.items():
        backend.upload(buffers[sid], data)
    kernels = [backend.load_kernel(k) for k in exe.kernels]
    for d in exe.dispatches:
        bound = []
        for i, sid in enumerate(d.slots):
            off, n = d.binding(i, exe.slots[_slot_index(exe, sid)].nbytes)
            whole = buffers[sid]
            bound.append(NullBuffer(sid, n, whole.block, off))  # the binding's id is its slot id
        backend.execute([(kernels[d.kernel], bound, d.grid, d.push_constants)])
    return backend.trace


def _slot_index(exe: Executable, sid: int) -> int:
    return next(i for i, s in enumerate(exe.slots) if s.id == sid)
