"""portable.memory without a device: sub-allocation, limits, the staging ring, dependency analysis; and the
pool on every device (many buffers, few device allocations)."""

from __future__ import annotations

import numpy as np
import pytest

from portable.devices import open_device
from portable.errors import OutOfDeviceMemory
from portable.memory import BufferPool, RangeAllocator, StagingRing, barriers, dependencies, uses


class FakeSource:
    """Blocks are ints; views are (block, offset, nbytes) tuples."""

    def __init__(self, max_block: int = 1 << 30, max_range: int = 1 << 27):
        self.blocks: list[int] = []
        self.freed: list = []
        self.limits = {"alignment": 256, "max_block": max_block, "max_range": max_range}

    def allocate_block(self, nbytes: int) -> int:
        self.blocks.append(nbytes)
        return len(self.blocks) - 1

    def free(self, buffer) -> None:
        self.freed.append(buffer)

    def view(self, block: int, offset: int, nbytes: int):
        return [block, offset, nbytes]  # a list: distinct identity per view

    def buffer_limits(self) -> dict[str, int]:
        return self.limits


def test_range_allocator_first_fit_and_coalescing():
    r = RangeAllocator(4096, 256)
    a, b, c = r.alloc(100), r.alloc(256), r.alloc(1000)
    assert (a, b, c) == (0, 256, 512)
    r.release(b, 256)
    assert r.alloc(200) == 256  # the hole is reused
    r.release(256, 200)
    r.release(a, 100)
    r.release(c, 1000)
    assert r.empty and r.alloc(4096) == 0


def test_pool_many_buffers_few_allocations():
    src = FakeSource()
    pool = BufferPool(src, "fake", block_bytes=1 << 20)
    views = [pool.acquire(1000, f"b{i}") for i in range(500)]
    assert len(src.blocks) == 1 and pool.allocations == 1  # 500 buffers of 1 KiB share one 1 MiB block
    assert len({(v[0], v[1]) for v in views}) == 500  # none overlap
    big = pool.acquire(5 << 20, "big")  # larger than a block: a dedicated one
    assert src.blocks[-1] == 5 << 20 and pool.allocations == 2
    assert pool.peak_bytes == pool.live_bytes == 500 * 1024 + (5 << 20)
    for v in views + [big]:
        pool.release(v)
    assert pool.live_bytes == 0
    again = pool.acquire(4 << 20)  # fits the freed dedicated block: no new allocation
    assert pool.allocations == 2
    pool.release(again)
    pool.clear()
    assert sorted(src.freed[-2:]) == [0, 1]


def test_pool_limits_name_the_buffer():
    pool = BufferPool(FakeSource(max_block=1 << 30, max_range=1 << 27), "vulkan:9 (fake)")
    with pytest.raises(OutOfDeviceMemory, match=r"buffer 'input 0 \(8192, 8192\) float32' needs 268435456 bytes.*"
                                                r"maxStorageBufferRange\) = 134217728 bytes .* of vulkan:9"):
        pool.acquire(8192 * 8192 * 4, "input 0 (8192, 8192) float32")
    with pytest.raises(OutOfDeviceMemory, match="largest single allocation"):
        BufferPool(FakeSource(max_block=1 << 20, max_range=1 << 30)).acquire(2 << 20, "w")


def test_staging_ring_waits_for_the_oldest():
    waited: list[int] = []
    ring = StagingRing(1024, waited.append, alignment=64)
    offsets = []
    for token in range(1, 7):  # 6 x 300 bytes (320 aligned) through 1024 bytes: wraps, waits in order
        offsets.append(ring.reserve(300))
        ring.fence(token)
    assert offsets == [0, 320, 640, 0, 320, 640]
    assert waited == [1, 2, 3] and ring.waits == 3
    with pytest.raises(ValueError):
        ring.reserve(2048)


def test_barriers_and_dependencies():
    X, Y, T1, T2, T3 = ((k, 0, 64) for k in "XYABC")
    plan = [uses([X, Y, T1], "rrw"), uses([X, Y, T2], "rrw"), uses([T1, T2, T3], "rrw"), uses([Y, X, T2], "rrw")]
    assert barriers(plan) == [False, False, True, True]  # the last rewrites T2, which the join read (WAR)
    assert dependencies(plan) == [[], [], [0, 1], [1, 2]]  # WAW on T2 with 1, WAR with 2
    assert barriers([uses([X, X], "rw")] * 2) == [False, True]
    assert barriers([uses([X, Y], ("r", "r"))] * 2) == [False, True]  # "writes nothing" is not trusted
    half = [("X", 0, 32), ("X", 32, 64)]  # disjoint ranges of one block do not conflict
    assert barriers([uses([half[0]], ["w"]), uses([half[1]], ["w"])]) == [False, False]


def test_device_pool_sub_allocates(device):
    live = open_device(device)
    pool = live.pool
    before = pool.allocations
    bufs = [pool.acquire(4096, f"t{i}") for i in range(64)]
    assert pool.allocations - before <= 1
    b = live.backend
    for i, buf in enumerate(bufs[:8]):
        b.upload(buf, np.full(1024, i, np.float32))
    for i, buf in enumerate(bufs[:8]):  # neighbours in one block do not overwrite each other
        np.testing.assert_array_equal(b.download(buf, 4096).view(np.float32), np.full(1024, i, np.float32))
    for buf in bufs:
        pool.release(buf)
