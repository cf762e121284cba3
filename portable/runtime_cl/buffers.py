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

    __slots__ = ("mem", "nbytes", "owner", "__weakref__")

    def __init__(self, mem: Any, nbytes: int, owner: int):
        self.mem = mem
        self.nbytes = nbytes
        self.owner = owner  # token of the owning backend, to refuse another backend's buffers
        _count(+1)

    def release(self) -> None:
        """Give the memory back to the driver; the handle is unusable afterwards."""
        if self.mem is not None:
            mem, self.mem = self.mem, None
            _count(-1)
            mem.release()

    def __repr__(self) -> str:
        state = "freed" if self.mem is None else "live"
        return f"<ClBuffer {self.nbytes} bytes, {state}>"
