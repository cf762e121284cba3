"""Which dispatches of a plan depend on which: the basis for barriers (Vulkan) and event waits (OpenCL).

A buffer is named by a region (block key, start, end); regions that overlap are the same memory. Access per
buffer is "r", "w" or "rw" (Kernel.access).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

Region = tuple[Hashable, int, int]  # (block key, first byte, one past the last byte)


@dataclass(frozen=True)
class Use:
    """One dispatch's buffers: the regions it reads and the ones it writes."""

    reads: tuple[Region, ...]
    writes: tuple[Region, ...]


def uses(regions: Sequence[Region], access: Sequence[str]) -> Use:
    """A Use from a dispatch's buffer regions and its kernel's access modes.

    Missing access metadata, or metadata that claims the kernel writes nothing, counts as "rw" everywhere:
    a wrong "r" would drop a barrier that is needed, an extra "w" only costs one.
    """
    modes = list(access) if len(access) == len(regions) and any("w" in a for a in access) else ["rw"] * len(regions)
    reads = tuple(r for r, m in zip(regions, modes) if "r" in m)
    writes = tuple(r for r, m in zip(regions, modes) if "w" in m)
    return Use(reads, writes)


def _overlaps(a: Region, b: Region) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _touches(region: Region, regions: Sequence[Region]) -> bool:
    return any(_overlaps(region, r) for r in regions)


def barriers(plan: Sequence[Use]) -> list[bool]:
    """For each dispatch, whether a barrier must precede it: it reads or writes what an earlier dispatch not yet
    behind a barrier wrote (read/write-after-write), or writes what such a dispatch read (write-after-read)."""
    out: list[bool] = []
    written: list[Region] = []
    read: list[Region] = []
    for use in plan:
        hazard = any(_touches(r, written) for r in use.reads + use.writes) or any(
            _touches(w, read) for w in use.writes)
        if hazard:
            written, read = [], []
        out.append(hazard)
        written.extend(use.writes)
        read.extend(use.reads)
    return out


def dependencies(plan: Sequence[Use]) -> list[list[int]]:
    """For each dispatch, the earlier dispatches it must wait for (the last writer of what it touches, and the
    readers since then of what it writes); redundant transitive edges are kept out where cheap."""
    # Keyed by region: a plan has few distinct regions however long it is (run_steps repeats one plan), so each
    # dispatch scans those, not every read so far (a constant read by every repeat is never written).
    last_writer: dict[Region, int] = {}
    readers: dict[Region, list[int]] = {}
    out: list[list[int]] = []
    for i, use in enumerate(plan):
        deps: set[int] = set()
        for r in use.reads + use.writes:
            deps.update(j for reg, j in last_writer.items() if _overlaps(r, reg))
        for w in use.writes:
            for reg, js in readers.items():
                if _overlaps(w, reg):
                    deps.update(js)
        out.append(sorted(deps))
        for w in use.writes:
            for reg in [reg for reg in last_writer if _overlaps(w, reg)]:
                del last_writer[reg]
            last_writer[w] = i
            for reg in [reg for reg in readers if _overlaps(w, reg)]:
                del readers[reg]
        for r in use.reads:
            readers.setdefault(r, []).append(i)
    return out
