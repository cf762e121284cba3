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


def _recurrence():
    """a' = relu(b), b' = a + b, y = b' * a: every input carried, y read from a carried output of the same run."""
    g = portable.Graph("recurrence")
    a, b = g.input((8, 40)), g.input((8, 40))
    s = g.add(a, b)
    g.output(g.mul(s, a), g.relu(b), s)
    return g


def _reference(a, b, n):
    ys = []
    for _ in range(n):
        s = a + b
        ys.append(s * a)
        a, b = np.maximum(b, 0), s
    return ys, a, b


def test_run_steps_is_n_runs_in_one_submission(device):
    """run_steps(n) gives each run's outputs as n separate runs would, for odd and even n (the state ends where
    the next run reads it either way), mixed with single runs."""
    exe = portable.compile(_recurrence(), device=device)
    rng = np.random.default_rng(3)
    a = rng.uniform(0.1, 0.5, (8, 40)).astype(np.float32)
    b = rng.uniform(0.1, 0.5, (8, 40)).astype(np.float32)
    with exe.with_state({1: 0, 2: 1}) as step:
        step.set_state({0: a, 1: b})
        for n in (3, 1, 4, 2):
            got = step.run_steps(n) if n != 1 else [step()]
            want, a, b = _reference(a, b, n)
            assert len(got) == n
            for r, (outs, y) in enumerate(zip(got, want)):
                assert len(outs) == 1
                np.testing.assert_allclose(outs[0], y, rtol=1e-5, atol=1e-6, err_msg=f"run {r + 1} of {n}")
            state = step.get_state()
            np.testing.assert_allclose(state[0], a, rtol=1e-5)
            np.testing.assert_allclose(state[1], b, rtol=1e-5)
        with pytest.raises(ValueError, match="at least 1"):
            step.run_steps(0)
        np.testing.assert_allclose(step.run_steps(1)[0][0], _reference(a, b, 1)[0][0], rtol=1e-5, atol=1e-6)
    exe.close()


def test_run_steps_needs_every_input_carried(device):
    exe = portable.compile(G, device=device)
    with exe.with_state({1: 1}) as step:
        with pytest.raises(ShapeMismatch, match="every input carried"):
            step.run_steps(2)
        x = np.ones((16, 24), np.float32)
        np.testing.assert_array_equal(step(x)[0], np.zeros((16, 24), np.float32))  # still usable
    exe.close()


def test_state_alternates_between_buffers_across_single_runs_and_run_steps(device):
    """The state lives in the carried input's or the carried output's buffer, whichever the last run wrote (no copy
    back): single runs and run_steps interleave in any parity, get_state/set_state follow it."""
    g = portable.Graph("counter")
    acc = g.input((4,))
    g.output(g.mul(acc, g.constant(np.full((4,), 2.0, np.float32))),
             g.add(acc, g.constant(np.ones((4,), np.float32))))
    exe = portable.compile(g, device=device)
    with exe.with_state({1: 0}) as step:
        assert step._bound().ping_pong
        seen = [float(step()[0][0]) for _ in range(3)]  # state 0, 1, 2 -> outputs 0, 2, 4; state now 3
        seen += [float(outs[0][0]) for outs in step.run_steps(3)]  # starts in the outputs' buffer: 6, 8, 10
        assert seen == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
        np.testing.assert_array_equal(step.get_state()[0], np.full((4,), 6.0, np.float32))
        step()  # parity flips again
        step.set_state({0: np.full((4,), 10.0, np.float32)})
        assert float(step()[0][0]) == 20.0
        assert [float(o[0][0]) for o in step.run_steps(2)] == [22.0, 24.0]
        np.testing.assert_array_equal(step.get_state()[0], np.full((4,), 13.0, np.float32))
    exe.close()
