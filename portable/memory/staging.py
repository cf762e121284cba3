"""A staging ring: host-visible memory handed out front to back for transfers in flight, reclaimed in order.

API-neutral. The backend owns the memory and says when a submission is done (`wait(token)`); the ring hands
out contiguous ranges and, when full, waits for the oldest range to retire instead of allocating more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgument, InvalidState
from .pool import align_up


class StagingRing:
    """Ranges of [0, size): reserve() one, fence() it with the token of the submission that uses it."""

    def __init__(self, size: int, wait: Callable[[Any], None], alignment: int = 64):
        self.size = size
        self.alignment = alignment
        self._wait = wait
        self._head = 0  # next free byte
        self._in_flight: deque[tuple[int, int, Any]] = deque()  # (start, end, token) oldest first
        self._unfenced: list[tuple[int, int]] = []
        self.waits = 0  # how often the ring was full (tests and tuning read it)

    def _tail(self) -> int | None:
        """Start of the oldest range still in use, or None when nothing is."""
        if self._in_flight:
            return self._in_flight[0][0]
        if self._unfenced:
            return self._unfenced[0][0]
        return None

    def _fits(self, start: int, n: int) -> bool:
        tail = self._tail()
        if start + n > self.size:
            return False
        if tail is None:
            return True
        if tail >= self._head:  # used region is [tail, head) wrapped, or [tail, size) + [0, head)
            return start >= self._head and start + n <= tail if tail > self._head else False
        return start + n <= self.size if start >= self._head else start + n <= tail

    def reserve(self, nbytes: int) -> int:
        """Offset of `nbytes` free bytes (nbytes <= size), waiting for old transfers when the ring is full."""
        n = align_up(max(nbytes, 1), self.alignment)
        if n > self.size:
            raise InvalidArgument(f"a staging range of {nbytes} bytes does not fit a ring of {self.size} bytes; "
                                  f"copy in parts of at most that size or make the ring larger")
        while True:
            for start in (self._head, 0):
                if self._fits(start, n):
                    self._head = start + n
                    self._unfenced.append((start, start + n))
                    return start
            if not self._in_flight:
                if self._unfenced:  # only unsubmitted ranges: the caller must fence them first
                    raise InvalidState("staging ring full of ranges never fenced; call fence() after submitting")
                self._head = 0
                continue
            self.waits += 1
            _, _, token = self._in_flight[0]
            self._wait(token)
            self.retire_through(token)

    def fence(self, token: Any) -> None:
        """The ranges reserved since the last fence are in use until `token` is done."""
        for start, end in self._unfenced:
            self._in_flight.append((start, end, token))
        self._unfenced.clear()

    def retire_through(self, token: Any) -> None:
        """Ranges fenced with `token` or earlier tokens are free again (tokens complete in order)."""
        while self._in_flight:
            t = self._in_flight[0][2]
            if t is not token and not (isinstance(t, int) and isinstance(token, int) and t <= token):
                break
            self._in_flight.popleft()
        if not self._in_flight and not self._unfenced:
            self._head = 0
