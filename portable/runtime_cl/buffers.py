"""Buffer handles of the OpenCL backend and a live-buffer count that leak tests read."""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_live = 0


def live_buffers() -> int:
    """How many buffers are allocated and not yet freed, over every OpenCLBackend in this process."""
    return _live


def _count(delta: int) -> None:
    global _live
    with _lock:
        _live += delta


class ClBuffer:
    """An opaque handle: the cl.Buffer, its size, and the backend that owns it."""

    __slots__ = ("__weakref__", "mem", "nbytes", "offset", "owner", "parent")

    def __init__(self, mem: Any, nbytes: int, owner: int, offset: int = 0, parent: ClBuffer | None = None):
        self.mem = mem
        self.nbytes = nbytes
        self.owner = owner  # token of the owning backend, to refuse another backend's buffers
        self.offset = offset  # within `parent` for a sub-buffer (a pool view)
        self.parent = parent
        _count(+1)

    @property
    def region(self) -> tuple[int, int, int]:
        """(block key, first byte, end) for dependency analysis: sub-buffers of one block may overlap."""
        root = self.parent if self.parent is not None else self
        return (id(root), self.offset, self.offset + self.nbytes)

    def release(self) -> None:
        """Give the memory back to the driver; the handle is unusable afterwards."""
        if self.mem is not None:
            mem, self.mem = self.mem, None
            _count(-1)
            mem.release()

    def __repr__(self) -> str:
        state = "freed" if self.mem is None else "live"
        return f"<ClBuffer {self.nbytes} bytes, {state}>"
