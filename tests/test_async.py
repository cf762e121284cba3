"""Asynchronous runs through the public API on every device: futures, asyncio, overlapping frames, many
threads submitting to one device, peak device memory, and buffers given back on close."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import portable


def _graph():
    g = portable.Graph("async")
    a, b = g.input((32, 48)), g.input((32, 48))
    w = g.constant(np.linspace(-1, 1, 48, dtype=np.float32))
    h = g.relu(g.add(g.mul(a, b), w))
    g.output(g.add(h, a), g.sum(h, axis=1))
    return g


G = _graph()


def _inputs(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((32, 48), dtype=np.float32), rng.standard_normal((32, 48), dtype=np.float32)


def _check(outs, seed: int) -> None:
    for o, r in zip(outs, G.reference(*_inputs(seed))):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-4)


def test_submit_returns_futures_in_flight_together(device):
    exe = portable.compile(G, device=device)
    futures = [exe.submit(*_inputs(i)) for i in range(8)]
    for i, f in enumerate(futures):
        _check(f.result(timeout=60), i)
    bound = exe._cell[0]
    assert 1 <= len(bound.recordings) <= exe.max_in_flight  # frames reused, never more than allowed
    exe.close()


def test_run_async_with_asyncio(device):
    exe = portable.compile(G, device=device)

    async def main():
        return await asyncio.gather(*(exe.run_async(*_inputs(i)) for i in range(4)))

    for i, outs in enumerate(asyncio.run(main())):
        _check(outs, i)
    exe.close()


def test_inputs_may_change_after_submit(device):
    exe = portable.compile(G, device=device)
    a, b = _inputs(1)
    f = exe.submit(a, b)
    a[:] = 0  # the input was copied at submit: this must not change the result
    _check(f.result(timeout=60), 1)
    exe.close()


def test_many_threads_one_device(device):
    """4 threads x 50 submissions on one compiled graph (and 2 threads on a second one): all results right."""
    exe = portable.compile(G, device=device)
    other = portable.compile(G, device=device)
    errors: list[BaseException] = []

    def worker(t: int, target) -> None:
        try:
            pending = []
            for i in range(50):
                seed = 1000 * t + i % 7
                pending.append((seed, target.submit(*_inputs(seed))))
                if len(pending) > 3:
                    s, f = pending.pop(0)
                    _check(f.result(timeout=120), s)
            for s, f in pending:
                _check(f.result(timeout=120), s)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t, exe)) for t in range(4)]
    threads += [threading.Thread(target=worker, args=(t, other)) for t in range(4, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    exe.close()
    other.close()


def test_peak_device_bytes_and_release(device):
    exe = portable.compile(G, device=device, max_in_flight=1)
    pool = exe.device.pool
    before = pool.live_bytes
    exe(*_inputs(0))
    one_run = exe.run_device_bytes
    # constants (48 floats) + 2 inputs + 2 outputs + planned intermediates, each rounded to the pool alignment
    assert one_run >= (48 + 3 * 32 * 48 + 32) * 4
    assert exe.peak_device_bytes >= one_run
    assert pool.live_bytes - before == exe.peak_device_bytes  # everything it holds is counted
    exe.close()
    assert pool.live_bytes == before
    with pytest.raises(portable.PortableError, match="closed"):
        exe(*_inputs(0))


def test_tensor_over_the_device_limit_names_buffer_and_limit(device):
    """A tensor larger than the largest bindable buffer gives OutOfDeviceMemory naming it and the limit."""
    exe = portable.compile(G, device=device)
    pool = exe.device.pool
    saved = pool.max_range
    pool.max_range = 4096  # pretend the device binds at most 4 KiB (lavapipe's real limit is 128 MiB)
    try:
        with pytest.raises(portable.OutOfDeviceMemory, match=r"input 0 \(32, 48\) float32.*6144 bytes.*4096"):
            exe(*_inputs(0))
    finally:
        pool.max_range = saved
    _check(exe(*_inputs(0)), 0)
    exe.close()
