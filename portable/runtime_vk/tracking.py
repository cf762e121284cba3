"""Counts of live Vulkan objects made by this runtime, so tests can prove close()/free() release them."""

from __future__ import annotations

from collections import Counter

# Process-wide on purpose: a leak test must see objects of every backend, including ones never closed.
_LIVE: Counter[str] = Counter()


def created(kind: str) -> None:
    _LIVE[kind] += 1


def destroyed(kind: str) -> None:
    _LIVE[kind] -= 1


def live_objects() -> dict[str, int]:
    """Live object count per kind ("instance", "device", "buffer", "pipeline", ...), zeros left out."""
    return {k: v for k, v in _LIVE.items() if v}


def live_buffers() -> int:
    """Buffers allocated and not yet freed, over every backend."""
    return _LIVE["buffer"]
