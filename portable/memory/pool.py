"""Pooled reuse of device buffers so repeated runs do not allocate afresh."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable


def size_class(nbytes: int) -> int:
    """Round up to a power of two (min 256 B) so freed buffers fit later requests of similar size."""
    n = 256
    while n < nbytes:
        n *= 2
    return n


class BufferPool:
    """Free lists of backend buffers by size class. `allocate`/`free` are the backend's raw calls."""

    def __init__(self, allocate: Callable[[int], Any], free: Callable[[Any], None]):
        self._allocate = allocate
        self._free = free
        self._idle: dict[int, list[Any]] = defaultdict(list)
        self._size: dict[int, int] = {}  # id(buffer) -> size class
        self.allocations = 0  # real device allocations made (tests read it to prove reuse)
        self.live_bytes = 0
        self.peak_bytes = 0

    def acquire(self, nbytes: int) -> Any:
        cls = size_class(nbytes)
        if self._idle[cls]:
            buf = self._idle[cls].pop()
        else:
            buf = self._allocate(cls)
            self.allocations += 1
            self._size[id(buf)] = cls
        self.live_bytes += cls
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return buf

    def release(self, buf: Any) -> None:
        cls = self._size[id(buf)]
        self.live_bytes -= cls
        self._idle[cls].append(buf)

    def clear(self) -> None:
        """Give idle buffers back to the device."""
        for bufs in self._idle.values():
            for b in bufs:
                self._size.pop(id(b), None)
                self._free(b)
        self._idle.clear()
