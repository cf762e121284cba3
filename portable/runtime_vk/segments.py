"""What a replayed plan records, as data: segments (one command buffer each, on the compute or the transfer lane)
made of buffer copies, barriers (some carrying queue family ownership transfers) and the plan's dispatches.

`plan` decides, `emit` records a segment into a command buffer. Kept as data so that the ownership transfers of
a two-family device can be checked on a driver that has one family (lavapipe), and read in one place.

Ownership (Vulkan spec, "Queue Family Ownership Transfer"): buffers are VK_SHARING_MODE_EXCLUSIVE, so a range
whose contents must survive a move from one queue family to another is *released* by a barrier on the source
family (srcQueueFamilyIndex -> dstQueueFamilyIndex, the write's stage/access as source, destination access 0)
and *acquired* by a matching barrier (same families, buffer, offset and size) on the destination family
(source access 0, the reader's stage/access as destination), the acquire ordered after the release by a
semaphore. A range whose contents need not survive is simply used by the new family: it takes ownership
implicitly and the contents are undefined. So per run of a plan:
  inputs      written by the transfer lane, released to compute, acquired before the dispatches;
  outputs     overwritten by the dispatches (implicit ownership, old contents not needed), released to the
              transfer family after them, acquired before the copies to staging;
  constants, intermediates, carried state: live on the compute family only, never transferred.
After a run the outputs belong to the transfer family; `TransferOwned` remembers them so that one-shot work on
the compute queue (Backend.download of an output, say) first moves them back (`reclaim`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._vk import vk

if TYPE_CHECKING:
    from .buffers import Buffer
    from .device import Device

if vk:
    TRANSFER, COMPUTE = vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT
    HOST, BOTTOM = vk.VK_PIPELINE_STAGE_HOST_BIT, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT
    T_READ, T_WRITE = vk.VK_ACCESS_TRANSFER_READ_BIT, vk.VK_ACCESS_TRANSFER_WRITE_BIT
    S_READ, S_WRITE = vk.VK_ACCESS_SHADER_READ_BIT, vk.VK_ACCESS_SHADER_WRITE_BIT
    HOST_READ = vk.VK_ACCESS_HOST_READ_BIT
else:  # no Vulkan loader: nothing here is used
    TRANSFER = COMPUTE = HOST = BOTTOM = T_READ = T_WRITE = S_READ = S_WRITE = HOST_READ = 0


@dataclass(frozen=True)
class Span:
    """A buffer range as a barrier names it: VkBuffer, offset, size."""

    handle: Any
    offset: int
    size: int

    @staticmethod
    def of(buf: Buffer) -> Span:
        return Span(buf.handle, buf.offset, buf.size)


@dataclass(frozen=True)
class Ownership:
    """One VkBufferMemoryBarrier moving `span` from `src_family` to `dst_family`: a release when recorded on the
    source family (dst_access 0), an acquire when recorded on the destination family (src_access 0)."""

    span: Span
    src_family: int
    dst_family: int
    src_access: int
    dst_access: int


@dataclass(frozen=True)
class Copy:
    src: Any
    dst: Any
    src_offset: int
    dst_offset: int
    size: int


@dataclass(frozen=True)
class Barrier:
    """vkCmdPipelineBarrier: a global memory barrier (when `memory`) plus buffer barriers for ownership."""

    src_stage: int
    dst_stage: int
    src_access: int = 0
    dst_access: int = 0
    memory: bool = True
    buffers: tuple[Ownership, ...] = ()


@dataclass(frozen=True)
class Dispatches:
    """The plan's dispatches, with barriers only between dependent ones (commands.record_dispatches)."""


@dataclass
class Segment:
    """One command buffer: the lane it is submitted to ("upload", "compute" or "download") and what it records."""

    lane: str
    ops: list[Any] = field(default_factory=list)

    def ownership(self) -> list[Ownership]:
        return [o for op in self.ops if isinstance(op, Barrier) for o in op.buffers]


def _spans(bufs: Iterable[Buffer]) -> list[Span]:
    """Distinct spans in order: a range named twice is released/acquired once."""
    out: list[Span] = []
    for b in bufs:
        s = Span.of(b)
        if s not in out:
            out.append(s)
    return out


def plan(staging: Any, uploads: Sequence[tuple[Buffer, int, int]], downloads: Sequence[tuple[Buffer, int, int]],
         copies: Sequence[tuple[Buffer, Buffer, int]], compute_family: int, transfer_family: int | None,
         after_earlier_work: bool = False) -> list[Segment]:
    """The segments of one run. uploads/downloads: (buffer, staging offset, bytes); copies: (src, dst, bytes) of
    carried state. transfer_family None: one segment on the compute lane. Otherwise up to three, chained by
    semaphores: copies in on the transfer lane, the dispatches on the compute lane, copies out on the transfer
    lane; ownership transfers only when the two families differ (within one family the semaphores alone
    order and make visible)."""
    ins = [(b, off, n) for b, off, n in uploads if n]
    outs = [(b, off, n) for b, off, n in downloads if n]
    copy_in = [Copy(staging, b.handle, off, b.offset, n) for b, off, n in ins]
    copy_out = [Copy(b.handle, staging, b.offset, off, n) for b, off, n in outs]
    # Before the dispatches: transfer writes earlier on the compute queue (this run's uploads in the one-lane
    # form, one-shot uploads such as constants or set_state in either) become visible to shaders and copies.
    to_compute = Barrier(TRANSFER, COMPUTE | TRANSFER, T_WRITE, S_READ | S_WRITE | T_READ)
    carried: list[Any] = []
    if copies:  # carried state: after every dispatch has read the old value and written the new one
        carried.append(Barrier(COMPUTE | TRANSFER, TRANSFER, S_READ | S_WRITE | T_WRITE, T_READ | T_WRITE))
        carried += [Copy(s.handle, d.handle, s.offset, d.offset, n) for s, d, n in copies]
    to_host = Barrier(TRANSFER, HOST, T_WRITE, HOST_READ)

    if transfer_family is None:
        ops: list[Any] = []
        if after_earlier_work:  # no semaphore carries the dependency on earlier runs: a barrier does
            both = COMPUTE | TRANSFER
            ops.append(Barrier(both, both, S_WRITE | T_WRITE, S_READ | S_WRITE | T_READ | T_WRITE))
        ops += copy_in + [to_compute, Dispatches(), *carried]
        if outs:
            ops += [Barrier(COMPUTE | TRANSFER, TRANSFER, S_WRITE | T_WRITE, T_READ), *copy_out, to_host]
        return [Segment("compute", ops)]

    moves = transfer_family != compute_family
    t, c = transfer_family, compute_family
    in_spans, out_spans = _spans(b for b, _, _ in ins), _spans(b for b, _, _ in outs)
    segments = []
    if ins:
        seg = Segment("upload", list(copy_in))
        if moves:  # release: the copies' writes, destination access 0
            seg.ops.append(Barrier(TRANSFER, BOTTOM, memory=False,
                                   buffers=tuple(Ownership(s, t, c, T_WRITE, 0) for s in in_spans)))
        segments.append(seg)
    acquire = tuple(Ownership(s, t, c, 0, S_READ | S_WRITE | T_READ) for s in in_spans) if moves else ()
    seg = Segment("compute", [Barrier(TRANSFER, COMPUTE | TRANSFER, T_WRITE, S_READ | S_WRITE | T_READ,
                                      buffers=acquire), Dispatches(), *carried])
    if outs and moves:  # release: the dispatches' (and carried copies') writes, destination access 0
        seg.ops.append(Barrier(COMPUTE | TRANSFER, BOTTOM, memory=False,
                               buffers=tuple(Ownership(s, c, t, S_WRITE | T_WRITE, 0) for s in out_spans)))
    segments.append(seg)
    if outs:
        seg = Segment("download")
        if moves:  # acquire: source access 0, read by the copies
            seg.ops.append(Barrier(TRANSFER, TRANSFER, memory=False,
                                   buffers=tuple(Ownership(s, c, t, 0, T_READ) for s in out_spans)))
        seg.ops += [*copy_out, to_host]
        segments.append(seg)
    return segments


def emit(cmd: Any, ops: Sequence[Any], dispatches: Callable[[], int] | None = None) -> int:
    """Record `ops` into `cmd`; returns what `dispatches()` returned (barriers between dispatches), or 0."""
    count = 0
    for op in ops:
        if isinstance(op, Copy):
            vk.vkCmdCopyBuffer(cmd, op.src, op.dst, 1, [vk.VkBufferCopy(srcOffset=op.src_offset,
                                                                       dstOffset=op.dst_offset, size=op.size)])
        elif isinstance(op, Barrier):
            mem = [vk.VkMemoryBarrier(srcAccessMask=op.src_access, dstAccessMask=op.dst_access)] if op.memory else []
            bufs = [vk.VkBufferMemoryBarrier(srcAccessMask=o.src_access, dstAccessMask=o.dst_access,
                                             srcQueueFamilyIndex=o.src_family, dstQueueFamilyIndex=o.dst_family,
                                             buffer=o.span.handle, offset=o.span.offset, size=o.span.size)
                    for o in op.buffers]
            vk.vkCmdPipelineBarrier(cmd, op.src_stage, op.dst_stage, 0, len(mem), mem or None, len(bufs),
                                    bufs or None, 0, None)
        elif isinstance(op, Dispatches):
            if dispatches is None:
                raise ValueError("a segment with dispatches needs the dispatch recorder")
            count = dispatches()
        else:
            raise TypeError(f"unknown segment op {op!r}")
    return count


class TransferOwned:
    """Buffer ranges the transfer family owns now (outputs of recorded runs after their download), keyed by
    (block, start, end) like Buffer.region; anything else belongs to the compute family."""

    def __init__(self) -> None:
        self._spans: dict[tuple[int, int, int], Span] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._spans)

    @staticmethod
    def _overlaps(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
        return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    def after_run(self, on_compute: Iterable[Buffer], outputs: Iterable[Buffer]) -> None:
        """A run was submitted: what it used on the compute family is the compute family's, then its outputs are
        the transfer family's."""
        self.after_run_regions(list({b.region for b in on_compute}), [(b.region, Span.of(b)) for b in outputs])

    def after_run_regions(self, used: Sequence[tuple[int, int, int]],
                          outputs: Sequence[tuple[tuple[int, int, int], Span]]) -> None:
        """after_run with the regions precomputed (a recording does this once, not per run)."""
        with self._lock:
            if self._spans:
                for key in [k for k in self._spans if any(self._overlaps(k, r) for r in used)]:
                    del self._spans[key]
            self._spans.update(outputs)

    def take(self, bufs: Iterable[Buffer]) -> list[Span]:
        """Remove and return the transfer-owned spans that overlap `bufs` (they are about to move back)."""
        regions = [b.region for b in bufs]
        with self._lock:
            keys = [k for k in self._spans if any(self._overlaps(k, r) for r in regions)]
            return [self._spans.pop(k) for k in keys]

    def forget(self, buf: Buffer) -> None:
        """`buf` was freed: whoever uses its memory next takes ownership without a transfer."""
        with self._lock:
            for key in [k for k in self._spans if self._overlaps(k, buf.region)
                        or (buf.parent is None and k[0] == buf.region[0])]:
                del self._spans[key]


def reclaim(dev: Device, bufs: Iterable[Buffer]) -> int:
    """Before one-shot work on the compute queue: move the ranges of `bufs` that the transfer family owns back
    to the compute family with their contents (release on the transfer lane, acquire on the compute lane after
    it by a semaphore wait). Returns how many ranges moved. Callers hold dev.sync_lock."""
    if not dev.ownership_transfers:
        return 0
    spans = dev.transfer_owned.take(bufs)
    if not spans:
        return 0
    t, c = dev.transfer_out, dev.compute  # released where the outputs were last used: the download queue
    all_rw = S_READ | S_WRITE | T_READ | T_WRITE
    release = Barrier(TRANSFER, BOTTOM, memory=False,
                      buffers=tuple(Ownership(s, t.family, c.family, 0, 0) for s in spans))
    acquire = Barrier(TRANSFER, COMPUTE | TRANSFER, memory=False,
                      buffers=tuple(Ownership(s, t.family, c.family, 0, all_rw) for s in spans))
    value = dev.submit(lambda cmd: emit(cmd, [release]), f"release of {len(spans)} range(s) to compute", lane=t)
    dev.submit(lambda cmd: emit(cmd, [acquire]), f"acquire of {len(spans)} range(s) from transfer", wait=(t, value))
    return len(spans)
