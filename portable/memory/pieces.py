"""A buffer larger than one device allocation held as several pool buffers ("pieces").

Where every kernel binds a large slot by byte ranges (a kernel run in chunks), the slot need not live in one
allocation: it can be cut between the ranges, each range inside one piece. OpenCL caps a buffer at
CL_DEVICE_MAX_MEM_ALLOC_SIZE (about 1 GB on Adreno); this is how a larger tensor still runs there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument


def plan_pieces(nbytes: int, ranges: Iterable[tuple[int, int]], max_piece: int,
                alignment: int) -> list[tuple[int, int]] | None:
    """Cut [0, nbytes) into consecutive pieces [start, end), each at most `max_piece` bytes, whose boundaries
    are multiples of `alignment` and fall between the byte ranges (offset, size) that kernels bind, so that
    every range lies inside one piece. Greedy: each piece takes as many consecutive ranges as fit.
    None where no such cut exists (a range, or overlapping ranges together, above `max_piece`)."""
    if max_piece <= 0 or nbytes <= max_piece:
        return [(0, nbytes)]
    # Overlapping (or touching-inside) ranges must share a piece: merge them into clusters.
    clusters: list[list[int]] = []
    for off, size in sorted((int(o), int(s)) for o, s in ranges):
        if size <= 0:
            continue
        start, end = max(off, 0), min(off + size, nbytes)
        if clusters and start < clusters[-1][1]:
            clusters[-1][1] = max(clusters[-1][1], end)
        else:
            clusters.append([start, end])
    pieces: list[tuple[int, int]] = []
    start, i = 0, 0
    while nbytes - start > max_piece:
        limit = start + max_piece
        used = start  # end of the last range this piece holds
        while i < len(clusters) and clusters[i][1] <= limit:
            used = max(used, clusters[i][1])
            i += 1
        nxt = clusters[i][0] if i < len(clusters) else nbytes
        cut = min(nxt, limit) // alignment * alignment
        if cut < used or cut <= start:
            return None  # a range (or a run of overlapping ones) crosses every possible cut
        pieces.append((start, cut))
        start = cut
    pieces.append((start, nbytes))
    return pieces


@dataclass(eq=False)
class Pieces:
    """One slot's buffer held as several pool buffers: `buffers[k]` holds bytes [ranges[k][0], ranges[k][1])."""

    ranges: Sequence[tuple[int, int]]
    buffers: list[Any]

    def locate(self, offset: int, nbytes: int) -> tuple[int, int]:
        """(piece index, offset in that piece) of the byte range (offset, nbytes); ValueError where it crosses
        a boundary (the plan cut between ranges, so a range the plan saw never does)."""
        for k, (start, end) in enumerate(self.ranges):
            if start <= offset < end or (offset == end == self.ranges[-1][1]):
                if offset + nbytes > end:
                    raise InvalidArgument(f"bytes [{offset}, {offset + nbytes}) cross the end of piece {k} at {end}; "
                                          f"bind ranges within one piece")
                return k, offset - start
        raise InvalidArgument(f"byte {offset} is outside the buffer's {self.ranges[-1][1]} bytes")

    def parts(self, nbytes: int) -> list[tuple[Any, int, int]]:
        """(piece buffer, start, end) covering the first `nbytes` bytes: one upload or download per piece."""
        return [(b, s, min(e, nbytes)) for b, (s, e) in zip(self.buffers, self.ranges) if s < nbytes]
