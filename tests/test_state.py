"""State carried on the device between runs (CompiledGraph.with_state): an output fed back as the next run's
input without a host round trip, as a decoder's KV cache is. On every device."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.errors import ShapeMismatch


def _accumulator():
    """y = relu(acc) * x ; acc' = acc + x  (inputs x, acc; outputs y, acc')."""
    g = portable.Graph("accumulate")
    x, acc = g.input((16, 24)), g.input((16, 24))
    g.output(g.mul(g.relu(acc), x), g.add(acc, x))
    return g


G = _accumulator()


def test_state_stays_on_device_and_accumulates(device):
    exe = portable.compile(G, device=device)
    rng = np.random.default_rng(0)
    with exe.with_state({1: 1}) as step:
        assert step.carry == {1: 1}
        acc = np.zeros((16, 24), np.float32)
        for _ in range(6):
            x = rng.standard_normal((16, 24), dtype=np.float32)
            outs = step(x)
            assert len(outs) == 1  # the carried output is not returned
            np.testing.assert_allclose(outs[0], np.maximum(acc, 0) * x, rtol=1e-6, atol=1e-6)
            acc = acc + x
        np.testing.assert_allclose(step.get_state()[1], acc, rtol=1e-5, atol=1e-5)
        rec, = step._bound().recordings
        assert rec.dispatches >= 1
    exe.close()


def test_set_get_and_reset_state(device):
    exe = portable.compile(G, device=device)
    step = exe.with_state({1: 1})
    start = np.full((16, 24), 2.0, np.float32)
    step.set_state({1: start})
    x = np.ones((16, 24), np.float32)
    y, = step(x)
    np.testing.assert_allclose(y, 2.0 * x)
    np.testing.assert_allclose(step.get_state()[1], start + x)
    step.reset()
    np.testing.assert_array_equal(step.get_state()[1], np.zeros((16, 24), np.float32))
    y, = step(x)
    np.testing.assert_array_equal(y, np.zeros((16, 24), np.float32))
    step.close()
    with pytest.raises(portable.PortableError, match="closed"):
        step(x)
    exe.close()


def test_bad_carry_and_inputs_are_named(device):
    g = portable.Graph("mismatch")
    a, b = g.input((4,)), g.input((3,))
    g.output(g.add(a, a), g.add(b, b))
    exe = portable.compile(g, device=device)
    with pytest.raises(ShapeMismatch, match=r"output 0 is \(4,\) float32 but input 1 is \(3,\)"):
        exe.with_state({0: 1})
    with pytest.raises(ShapeMismatch, match="has 2 output"):
        exe.with_state({5: 0})
    step = exe.with_state({0: 0})
    with pytest.raises(ShapeMismatch, match="besides the 1 carried as state"):
        step(np.zeros(4, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ShapeMismatch, match="input 1 is not carried"):
        step.set_state({1: np.zeros(3, np.float32)})
    out, = step(np.arange(3, dtype=np.float32))  # the process goes on after the errors
    np.testing.assert_array_equal(out, 2 * np.arange(3, dtype=np.float32))
    step.close()
    exe.close()
