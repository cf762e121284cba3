"""Synchronous uploads and downloads through the staging buffer, used as a ring: a large transfer goes in
chunks with several in flight, so the host's copy into (or out of) staging overlaps the device's copies."""

from __future__ import annotations

import numpy as np

from ..memory import StagingRing
from . import commands
from .buffers import Buffer, Staging
from .device import TRANSIENT_BUFFERS, Device

_ALIGN = 256


def _chunk(size: int, nbytes: int) -> int:
    """Chunk size: the whole transfer if it fits, else a quarter of the ring (so chunks pipeline)."""
    return nbytes if nbytes <= size else max((size // TRANSIENT_BUFFERS) & ~(_ALIGN - 1), _ALIGN)


def upload(dev: Device, staging: Staging, buf: Buffer, src: np.ndarray) -> None:
    """Copy the uint8 array `src` to the start of `buf`; returns when the device has it."""
    size = staging.ensure(src.nbytes)
    if dev.timeline is None:  # one chunk at a time, each waited for
        for off in range(0, src.nbytes, size):
            n = min(size, src.nbytes - off)
            staging.view[:n] = src[off:off + n]
            dev.submit(lambda cmd, off=off, n=n: commands.copy(cmd, staging.handle, buf.handle, 0, buf.offset + off,
                                                               n, False), f"upload of {n} bytes")
        return
    ring = StagingRing(size, lambda v: dev.wait_value(v, "a staged upload"), _ALIGN)
    chunk, last = _chunk(size, src.nbytes), 0
    for off in range(0, src.nbytes, chunk):
        n = min(chunk, src.nbytes - off)
        at = ring.reserve(n)
        staging.view[at:at + n] = src[off:off + n]
        last = dev.submit_async(lambda cmd, at=at, off=off, n=n: commands.copy(
            cmd, staging.handle, buf.handle, at, buf.offset + off, n, False), f"upload of {n} bytes")
        ring.fence(last)
    dev.wait_value(last, f"upload of {src.nbytes} bytes")


def download(dev: Device, staging: Staging, buf: Buffer, out: np.ndarray) -> None:
    """Fill the uint8 array `out` from the start of `buf`."""
    nbytes = out.nbytes
    size = staging.ensure(nbytes)
    if dev.timeline is None:
        for off in range(0, nbytes, size):
            n = min(size, nbytes - off)
            dev.submit(lambda cmd, off=off, n=n: commands.copy(cmd, buf.handle, staging.handle, buf.offset + off, 0,
                                                               n, True), f"download of {n} bytes")
            out[off:off + n] = staging.view[:n]
        return
    ring = StagingRing(size, lambda v: dev.wait_value(v, "a staged download"), _ALIGN)
    chunk = _chunk(size, nbytes)
    for group in range(0, nbytes, chunk * TRANSIENT_BUFFERS):  # a ring's worth of chunks in flight, then drained
        parts, last = [], 0
        for off in range(group, min(group + chunk * TRANSIENT_BUFFERS, nbytes), chunk):
            n = min(chunk, nbytes - off)
            at = ring.reserve(n)
            last = dev.submit_async(lambda cmd, at=at, off=off, n=n: commands.copy(
                cmd, buf.handle, staging.handle, buf.offset + off, at, n, True), f"download of {n} bytes")
            ring.fence(last)
            parts.append((off, at, n))
        dev.wait_value(last, f"download of {nbytes} bytes")
        for off, at, n in parts:
            out[off:off + n] = staging.view[at:at + n]
        ring.retire_through(last)
