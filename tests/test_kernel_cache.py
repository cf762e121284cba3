"""Loaded kernels (Vulkan pipelines, OpenCL programs) are kept while an executable uses them and among the last
IDLE_KERNELS unused ones after, not for the life of the process: compiling and running many distinct graphs grew
resident memory by ~0.7 MB per graph on lavapipe (benchmarks/compile_rss.py --run)."""

from __future__ import annotations

import numpy as np

import portable
from portable.devices import open_device


def _graph(i: int):
    g = portable.Graph()
    a, b = g.input((4, 8 + i)), g.input((8 + i,))
    g.output(g.relu(g.add(a, b)))
    return g


def _loaded(backend) -> dict:
    return backend._res.kernels if hasattr(backend, "_res") else backend._own.kernels


def test_unused_kernels_are_bounded_and_used_ones_kept(device, monkeypatch):
    backend = open_device(device).backend
    module = __import__(type(backend).__module__, fromlist=["IDLE_KERNELS"])
    monkeypatch.setattr(module, "IDLE_KERNELS", 2)
    rng = np.random.default_rng(0)

    def run(g, i):
        a, b = rng.standard_normal((4, 8 + i), dtype=np.float32), rng.standard_normal(8 + i, dtype=np.float32)
        out, = g(a, b)
        np.testing.assert_allclose(out, np.maximum(a + b, 0), rtol=1e-6)

    kept = portable.compile(_graph(0), device=device)
    run(kept, 0)
    mine = {k.key() for k in kept.executable.kernels}
    before = set(_loaded(backend))
    for i in range(1, 7):
        g = portable.compile(_graph(i), device=device)
        run(g, i)
        g.close()
    added = set(_loaded(backend)) - before
    assert len(added) <= 2, f"{len(added)} unused kernels kept; IDLE_KERNELS is 2"
    assert mine <= set(_loaded(backend))  # still used by `kept`
    run(kept, 0)
    again = portable.compile(_graph(1), device=device)  # its kernels were dropped: built again
    run(again, 1)
    again.close()
    kept.close()
