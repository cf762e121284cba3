"""Register-tile arithmetic for the strategies (strategy.py): powers of two, divisors, tiles that divide a
loop, and tiles that leave a kernel threads enough."""

from __future__ import annotations

import math

from ...ir.linalg_info import OpKind


def pow2_at_most(n: int) -> int:
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def pow2_at_least(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


# Columns per thread that a row shared by a workgroup should give each thread: fewer threads per row (down to 32)
# until it does. H200, softmax written by hand with one row per workgroup (session11/short_rows_*.json): rows of
# 256 with 128 threads (2 columns each) 59.5% of 4.8 TB/s, 64 threads 61.6%; rows of 384, 128 threads 66.5%,
# 64 threads 72.0%; rows of 4096 the same with 128 or 256 threads (73.3%).
ROW_COLUMNS_PER_THREAD = 4


def row_threads(reduction_threads: int, cols: int) -> int:
    """Threads sharing one row of `cols` columns (a row chain or a reduction on one workgroup per row): the
    profile's `reduction_threads`, halved down to 32 while a thread would get fewer than ROW_COLUMNS_PER_THREAD
    columns (a decoder's RMSNorm over 384 or its attention softmax over 256 had been one thread per row); 0 when
    32 threads would get fewer than two."""
    t = reduction_threads
    while t > 32 and cols < ROW_COLUMNS_PER_THREAD * t:
        t //= 2
    return t if t and cols >= 2 * t else 0


# serial_rows.py: a workgroup takes several rows only while the grid keeps this many workgroups (H200: 132 SMs x
# 32 resident workgroups, about one wave), so that a decoder's few rows keep one workgroup each.
SERIAL_ROWS_MIN_GRID = 4096


def serial_rows(rows: int, cols: int, min_columns: int, max_grid: int = 0) -> int | None:
    """Rows one workgroup of a row chain takes one after the other (serial_rows.py): the fewest, a power of two
    dividing `rows`, that cover `min_columns` columns together (the profile's `row_workgroup_columns`; 0: one
    row), while rows / that stays at least SERIAL_ROWS_MIN_GRID; and at least enough that the grid of rows / that
    workgroups stays within `max_grid` (the device's workgroup count; 0 if none applies, None if no such power of
    two divides `rows`)."""
    r = 1
    while min_columns and r * cols < min_columns and rows % (2 * r) == 0 and rows // (2 * r) >= SERIAL_ROWS_MIN_GRID:
        r *= 2
    while max_grid and rows // r > max_grid:
        if rows % (2 * r):
            return None
        r *= 2
    return r


def fill_device(kind: OpKind, par: list[int], per_thread: list[int], fill: int, rows_only: bool) -> None:
    """Halve a register tile (its larger side first, or with `rows_only` its rows) while it leaves fewer than
    `fill` threads: a late depthwise layer at batch 1 (MobileNetV2's 7x7x960) is 1920 threads of 8x4 outputs
    each; a matmul too short in K to be split (compiler/graph/split_k.py) gets more threads. A side is halved only
    where that adds threads (a tile's rows over a loop of one stay as they are)."""
    def threads() -> int:
        return math.prod(-(-kind.ranges[d] // per_thread[d]) for d in par)

    def gains(d: int) -> bool:
        return per_thread[d] > 1 and -(-kind.ranges[d] // (per_thread[d] // 2)) > -(-kind.ranges[d] // per_thread[d])

    while fill and threads() < fill:
        sides = [d for d in ((par[-2],) if rows_only else (par[-2], par[-1])) if gains(d)]
        if not sides:
            return
        per_thread[max(sides, key=lambda d: (per_thread[d], d == par[-2]))] //= 2


def largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


def dividing_tiles(kind: OpKind, par: list[int], per_thread: list[int], invocations: int,
                           width: int, max_x: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(per-thread outputs, workgroup tile, threads) per loop for a matmul whose pow2 tiles do not divide its
    loops: per-thread extents that divide (columns: a vector width 4, 2 or 1, or a multiple of the profile's
    wider matmul vector width; rows: the largest divisor up to the profile's), and thread counts that divide
    what is left (not necessarily powers of two; at most `max_x` on the innermost loop, where given)."""
    per = [1] * len(kind.ranges)
    tile = [0] * len(kind.ranges)
    threads = [0] * len(kind.ranges)
    budget = invocations
    for j, d in enumerate(reversed(par[-3:])):
        r = kind.ranges[d]
        if j == 0:
            per[d] = next(v for v in range(max(per_thread[d], 1), 0, -1)
                          if r % v == 0 and (v in (1, 2, 4) or (width > 4 and v % width == 0)))
        elif j == 1:
            per[d] = largest_divisor(r, max(per_thread[d], 1))
        t = largest_divisor(r // per[d], min(budget, max_x) if j == 0 and max_x else budget)
        threads[d], tile[d] = t, t * per[d]
        budget //= t
    return per, tile, threads
