"""Timing policy: warm up, then at least 10 timed calls (fewer when one call takes more than a second)."""

from __future__ import annotations

import time
from collections.abc import Callable

SLOW_S = 1.0  # one call slower than this: time 3 calls, not 10
VERY_SLOW_S = 10.0  # slower than this: time a single call
MIN_ITERS = 10
MAX_ITERS = 200
MIN_TOTAL_S = 0.3  # fast calls: keep going to at least this much timed work (up to MAX_ITERS)


def measure(fn: Callable[[], object], first_s: float | None = None, iters: int | None = None) -> dict:
    """Time `fn` (already warmed up; each call returns after device-side completion). `first_s`: the duration
    of a previous call, which picks the count; `iters` forces it. Returns ms statistics and the samples."""
    if first_s is None:
        t0 = time.perf_counter()
        fn()
        first_s = time.perf_counter() - t0
    if iters is None:
        n_min = 1 if first_s > VERY_SLOW_S else 3 if first_s > SLOW_S else MIN_ITERS
    else:
        n_min = iters
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < n_min or (iters is None and first_s <= SLOW_S and len(samples) < MAX_ITERS
                                   and time.perf_counter() - start < MIN_TOTAL_S):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    s = sorted(samples)
    mid = len(s) // 2
    median = s[mid] if len(s) % 2 else 0.5 * (s[mid - 1] + s[mid])
    return {"median_ms": median, "min_ms": s[0], "max_ms": s[-1], "n": len(s),
            "samples_ms": [round(v, 4) for v in samples]}
