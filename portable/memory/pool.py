"""Pooled sub-allocation: few large device allocations (blocks), many buffers carved out of them.

API-neutral: a backend supplies blocks and views into them (`BlockSource`); the pool decides where each
buffer lives, checks the device's limits, and counts live and peak bytes.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidArgument, OutOfDeviceMemory

_MIB = 1 << 20
DEFAULT_BLOCK_BYTES = 64 * _MIB


class BlockSource(Protocol):
    """What a backend gives the pool: raw blocks, views into them, and its limits."""

    def allocate_block(self, nbytes: int) -> Any: ...

    def free(self, buffer: Any) -> None: ...

    def view(self, block: Any, offset: int, nbytes: int) -> Any: ...

    def buffer_limits(self) -> dict[str, int]:
        """{'alignment': view offset alignment, 'max_block': largest allocation, 'max_range': largest view}."""
        ...


def align_up(n: int, a: int) -> int:
    return -(-n // a) * a


class RangeAllocator:
    """First-fit over [0, size) with coalescing frees; offsets are multiples of `alignment`."""

    def __init__(self, size: int, alignment: int):
        self.size = size
        self.alignment = alignment
        self._free: list[tuple[int, int]] = [(0, size)]  # sorted (offset, length)

    def alloc(self, nbytes: int) -> int | None:
        n = align_up(max(nbytes, 1), self.alignment)
        for i, (off, length) in enumerate(self._free):
            if length >= n:
                if length == n:
                    del self._free[i]
                else:
                    self._free[i] = (off + n, length - n)
                return off
        return None

    def release(self, offset: int, nbytes: int) -> None:
        n = align_up(max(nbytes, 1), self.alignment)
        i = bisect.bisect(self._free, (offset, 0))
        self._free.insert(i, (offset, n))
        # Merge with the neighbours so large requests can reuse the space.
        if i + 1 < len(self._free) and offset + n == self._free[i + 1][0]:
            self._free[i] = (offset, n + self._free[i + 1][1])
            del self._free[i + 1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == offset:
            prev = self._free[i - 1]
            self._free[i - 1] = (prev[0], prev[1] + self._free[i][1])
            del self._free[i]

    @property
    def empty(self) -> bool:
        return self._free == [(0, self.size)]


@dataclass(eq=False)
class _Block:
    handle: Any
    ranges: RangeAllocator
    live: int = 0


@dataclass(eq=False)
class _Lease:
    block: _Block
    offset: int
    nbytes: int
    name: str = field(default="")


class BufferPool:
    """Buffers sub-allocated from device blocks. Thread-safe. `allocations` counts real device allocations
    (tests read it to prove reuse); `live_bytes`/`peak_bytes` count bytes handed out."""

    def __init__(self, source: BlockSource, device_name: str = "the device", block_bytes: int = DEFAULT_BLOCK_BYTES):
        self._source = source
        self._device_name = device_name
        limits = source.buffer_limits()
        self.alignment = max(int(limits.get("alignment") or 1), 4)
        self.max_block = int(limits.get("max_block") or 0)
        self.max_range = int(limits.get("max_range") or 0)
        self.block_bytes = min(block_bytes, self.max_block) if self.max_block else block_bytes
        self._blocks: list[_Block] = []
        self._leases: dict[int, _Lease] = {}  # id(view) -> lease
        self._views: dict[int, _Lease] = {}  # id(view from view()) -> the lease it is a view of
        self._lock = threading.Lock()
        self.allocations = 0
        self.live_bytes = 0
        self.peak_bytes = 0

    @property
    def device_bytes(self) -> int:
        """Bytes of device memory the pool holds (blocks), used or not."""
        return sum(b.ranges.size for b in self._blocks)

    def check_limits(self, nbytes: int, name: str = "", bound: int | None = None) -> None:
        """OutOfDeviceMemory naming the buffer, its size and the limit it exceeds. `bound`: the most bytes of it
        one kernel binds (plans that run a kernel in chunks bind views of a larger buffer); default all."""
        what = f"buffer {name!r}" if name else "a buffer"
        bound = nbytes if bound is None else bound
        for size, limit, label, advice in (
            (bound, self.max_range, "the largest buffer a kernel can bind (Vulkan maxStorageBufferRange)",
             "compile the graph for this device (its kernels then run in chunks where they can), "),
            (nbytes, self.max_block,
             "the largest single allocation (maxMemoryAllocationSize / CL_DEVICE_MAX_MEM_ALLOC_SIZE)", ""),
        ):
            if limit and size > limit:
                part = "" if size == nbytes else f" bound at once (of {nbytes})"
                raise OutOfDeviceMemory(
                    f"{what} needs {size} bytes ({size / _MIB:.1f} MiB){part}, above {label} = {limit} bytes "
                    f"({limit / _MIB:.1f} MiB) of {self._device_name}; {advice}split the tensor (e.g. a smaller "
                    f"batch) or use a device with a larger limit")

    def acquire(self, nbytes: int, name: str = "", bound: int | None = None) -> Any:
        """A buffer of at least `nbytes` bytes; raises OutOfDeviceMemory past the device's limits. `bound`: the
        most bytes of it a kernel binds at once (see check_limits); bind larger buffers through view()."""
        nbytes = max(int(nbytes), 4)
        self.check_limits(nbytes, name, bound)
        with self._lock:
            for block in self._blocks:
                off = block.ranges.alloc(nbytes)
                if off is not None:
                    break
            else:
                size = max(self.block_bytes, align_up(nbytes, self.alignment))
                handle = self._source.allocate_block(size)
                self.allocations += 1
                block = _Block(handle, RangeAllocator(size, self.alignment))
                self._blocks.append(block)
                off = block.ranges.alloc(nbytes)
            block.live += 1
            size = align_up(nbytes, self.alignment)
            self.live_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        try:
            view = self._source.view(block.handle, off, nbytes)
        except BaseException:
            self._give_back(_Lease(block, off, nbytes))
            raise
        with self._lock:
            self._leases[id(view)] = _Lease(block, off, nbytes, name)
        return view

    def view(self, buffer: Any, offset: int, nbytes: int) -> Any:
        """A view of `nbytes` of a buffer from acquire(), at byte `offset` in it: what a dispatch binds when it
        runs on a range of the buffer. Views of one block are made from the block, so the runtimes see their
        real place in it (hazard tracking compares regions of a block). Give it back with release()."""
        with self._lock:
            lease = self._leases[id(buffer)]
        offset, nbytes = int(offset), max(int(nbytes), 4)
        if offset < 0 or offset + nbytes > align_up(lease.nbytes, 4):
            raise InvalidArgument(f"a view of {nbytes} bytes at +{offset} does not fit buffer {lease.name!r} of "
                             f"{lease.nbytes} bytes")
        start = lease.offset + offset
        if start % self.alignment:
            raise OutOfDeviceMemory(
                f"a kernel binds buffer {lease.name!r} at byte {offset}, not a multiple of the {self.alignment}-byte "
                f"binding alignment of {self._device_name}; recompile the graph for this device")
        self.check_limits(lease.nbytes, lease.name, nbytes)
        sub = self._source.view(lease.block.handle, start, nbytes)
        with self._lock:
            self._views[id(sub)] = lease
        return sub

    def release(self, view: Any) -> None:
        """Return a buffer from acquire() (its range can be handed out again at once) or a view from view()."""
        with self._lock:
            is_view = self._views.pop(id(view), None) is not None
            lease = None if is_view else self._leases.pop(id(view))
        self._source.free(view)
        if lease is not None:
            self._give_back(lease)

    def _give_back(self, lease: _Lease) -> None:
        with self._lock:
            lease.block.ranges.release(lease.offset, lease.nbytes)
            lease.block.live -= 1
            self.live_bytes -= align_up(lease.nbytes, self.alignment)

    def clear(self) -> None:
        """Give blocks with no live buffer back to the device."""
        with self._lock:
            keep = []
            for b in self._blocks:
                if b.live:
                    keep.append(b)
                else:
                    self._source.free(b.handle)
            self._blocks = keep
