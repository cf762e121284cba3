"""Liveness-based planning: intermediates whose lifetimes do not overlap share one buffer."""

from __future__ import annotations

from collections.abc import Sequence


def plan_buffers(temp_sizes: dict[int, int], uses: Sequence[Sequence[int]]) -> tuple[dict[int, int], list[int]]:
    """Assign each temp slot to a physical buffer.

    temp_sizes: slot id -> bytes, for intermediates only. uses[i]: slot ids dispatch i touches.
    Returns (slot -> buffer index, size of each buffer). Greedy by first use: a slot takes the smallest free
    buffer that holds it (growing one if none does), freed after its last use.
    """
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, slots in enumerate(uses):
        for s in slots:
            if s in temp_sizes:
                first.setdefault(s, i)
                last[s] = i
    assignment: dict[int, int] = {}
    sizes: list[int] = []
    free: list[int] = []
    order = sorted(first, key=lambda s: (first[s], -temp_sizes[s]))
    ends: list[tuple[int, int]] = []  # (last use, buffer)
    for s in order:
        # Release buffers whose slot died before this slot's first use.
        for end, b in list(ends):
            if end < first[s]:
                free.append(b)
                ends.remove((end, b))
        fitting = [b for b in free if sizes[b] >= temp_sizes[s]]
        if fitting:
            b = min(fitting, key=lambda b: sizes[b])
        elif free:
            b = max(free, key=lambda b: sizes[b])
            sizes[b] = temp_sizes[s]
        else:
            b = len(sizes)
            sizes.append(temp_sizes[s])
        if b in free:
            free.remove(b)
        assignment[s] = b
        ends.append((last[s], b))
    for s, n in temp_sizes.items():  # temps no dispatch touches still need a home
        if s not in assignment:
            assignment[s] = len(sizes)
            sizes.append(n)
    return assignment, sizes
