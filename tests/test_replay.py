"""Command-buffer replay at the Backend level, on every device: a plan recorded once (descriptor sets, kernel
arguments, copies) and replayed with new inputs; barriers (Vulkan) or event edges (OpenCL) only on real
dependencies, checked by Vulkan synchronization validation; OpenCL with and without cl_khr_command_buffer."""

from __future__ import annotations

import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from portable.backend import Step
from portable.devices import open_device
from portable.executable import Kernel
from portable.memory import BufferPool

DATA = Path(__file__).parent / "data"
N = 1000
WG = 64


@pytest.fixture(scope="session")
def spirv(tmp_path_factory) -> bytes:
    spirv_as = shutil.which("spirv-as")
    if not spirv_as:
        pytest.skip("spirv-as not found: install spirv-tools")
    out = tmp_path_factory.mktemp("spv") / "add_scaled.spv"
    subprocess.run([spirv_as, "--target-env", "vulkan1.1", str(DATA / "vk" / "add_scaled.spvasm"), "-o", str(out)],
                   check=True, capture_output=True)
    return out.read_bytes()


def axpy(spirv: bytes) -> Kernel:
    """c[i] = a[i] + b[i] * k for i < n: buffers (a, b, c), push constants (n, k)."""
    return Kernel(name="add_scaled", workgroup_size=(WG, 1, 1), num_buffers=3, spirv=spirv,
                  opencl=(DATA / "cl" / "axpy.cl").read_text().replace("axpy", "add_scaled"),
                  push_constants=("n", "k"), access=("r", "r", "w"))


def chain(backend, pool: BufferPool, kernel: Kernel):
    """Six dispatches over pooled buffers: two independent, one joining them, one independent, one dependent,
    one rewriting a buffer read earlier. Returns (recording, buffers to free)."""
    lk = backend.load_kernel(kernel)
    names = ["X", "Y", "T1", "T2", "T3", "OUT1", "OUT2"]
    b = {n: pool.acquire(4 * N, n) for n in names}
    grid = (-(-N // WG), 1, 1)
    plan = [("X", "Y", "T1", 1), ("X", "Y", "T2", 2), ("T1", "T2", "T3", 1), ("Y", "X", "OUT2", 3),
            ("T3", "X", "OUT1", -1), ("X", "Y", "T1", 5)]
    steps = [Step(lk, (b[x], b[y], b[z]), grid, (N, k)) for x, y, z, k in plan]
    rec = backend.record(steps, [(b["X"], 4 * N), (b["Y"], 4 * N)],
                         [(b["OUT1"], 4 * N), (b["OUT2"], 4 * N), (b["T1"], 4 * N)])
    return rec, list(b.values())


def check_runs(rec, runs: int = 5) -> None:
    rng = np.random.default_rng(0)
    futures = []
    for _ in range(runs):
        x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
        futures.append((x, y, rec.submit([x, y])))
    for x, y, f in futures:
        out1, out2, t1 = (r.view(np.float32) for r in f.result(timeout=60))
        np.testing.assert_allclose(out1, x + 3 * y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out2, y + 3 * x, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(t1, x + 5 * y, rtol=1e-5, atol=1e-5)


def test_replay_with_barriers_only_on_dependencies(device, spirv):
    live = open_device(device)
    rec, bufs = chain(live.backend, live.pool, axpy(spirv))
    try:
        check_runs(rec)
        assert rec.dispatches == 6
        if device.startswith("vulkan"):
            assert rec.mode == "vulkan-replay" and rec.barriers == 2  # before the join and before its user
        else:
            assert rec.mode in ("opencl-command-buffer", "opencl-kernels") and rec.barriers == 5  # dependency edges
    finally:
        rec.close()
        for b in bufs:
            live.pool.release(b)


def _vk_index(device: str) -> int:
    if not device.startswith("vulkan"):
        pytest.skip("Vulkan only")
    return int(device.split(":")[1])


def test_vulkan_missing_barrier_would_be_caught(device, spirv, monkeypatch):
    """Drop every barrier of the replayed plan: synchronization validation must report a hazard, so the clean
    run above really checks where the barriers go."""
    from portable import config
    from portable.runtime_vk import VulkanBackend, replay

    if not config.vk_validation():
        pytest.skip("validation is off")
    monkeypatch.setattr(replay, "barriers", lambda plan: [False] * len(plan))
    with VulkanBackend(_vk_index(device), validation=True) as b:
        pool = BufferPool(b)
        rec, _ = chain(b, pool, axpy(spirv))
        rec.submit([np.ones(N, np.float32)] * 2).result()
        rec.close()
    assert any("SYNC-HAZARD" in m for m in b.validation_messages), b.validation_messages


def test_vulkan_without_timeline_semaphores(device, spirv):
    """Devices without timeline semaphores replay with a fence per recording and a barrier at the start."""
    from portable import config
    from portable.runtime_vk import VulkanBackend

    with VulkanBackend(_vk_index(device), validation=config.vk_validation(), use_timeline=False) as b:
        pool = BufferPool(b)
        rec, _ = chain(b, pool, axpy(spirv))
        check_runs(rec, runs=3)
        rec.close()
    assert b.validation_messages == [], b.validation_messages


@pytest.mark.parametrize("caller_waits", [False, True])
def test_vulkan_recording_after_a_timeout_fails_instead_of_hanging(device, spirv, caller_waits):
    """A recorded run that outlives the timeout raises DeviceLost, through the blocking run (waiting in the
    caller, forced here) or the completion thread; the next run raises DeviceLost at once instead of waiting for
    the lost run to finish."""
    from portable import config
    from portable.errors import DeviceLost
    from portable.runtime_vk import VulkanBackend

    n = 100_000
    with VulkanBackend(_vk_index(device), validation=config.vk_validation(), timeout_s=1e-6) as b:
        a = b.allocate(4 * n)
        lk = b.load_kernel(axpy(spirv))
        rec = b.record([Step(lk, (a, a, a), (-(-n // WG), 1, 1), (n, 1))] * 200, [], [])
        rec.caller_waits = caller_waits
        try:
            with pytest.raises(DeviceLost, match="did not finish"):
                rec.run([])
            with pytest.raises(DeviceLost, match="lost earlier"):
                rec.run([])
        finally:
            rec.close()
    assert b.validation_messages == [], b.validation_messages


@pytest.mark.parametrize("command_buffer,out_of_order", [(True, True), (False, True), (False, False)],
                         ids=["command-buffer", "kernels-out-of-order", "kernels-in-order"])
def test_opencl_modes(device, spirv, command_buffer, out_of_order):
    from portable.runtime_cl import OpenCLBackend

    if not device.startswith("opencl"):
        pytest.skip("OpenCL only")
    with OpenCLBackend(int(device.split(":")[1]), command_buffer=command_buffer, out_of_order=out_of_order) as b:
        if command_buffer and not b.command_buffers:
            pytest.skip(f"{b.info.name} has no cl_khr_command_buffer")
        pool = BufferPool(b)
        rec, bufs = chain(b, pool, axpy(spirv))
        assert rec.mode == ("opencl-command-buffer" if command_buffer else "opencl-kernels")
        check_runs(rec)
        rec.close()
        for buf in bufs:
            pool.release(buf)
        pool.clear()


def test_legacy_execute_places_barriers_by_access(device, spirv):
    """`execute` (re-recorded every call) uses the same dependency analysis: validation stays clean."""
    live = open_device(device)
    b = live.backend
    lk = b.load_kernel(axpy(spirv))
    bufs = [live.pool.acquire(4 * N) for _ in range(4)]
    b.upload(bufs[0], np.ones(N, np.float32))
    b.upload(bufs[1], np.full(N, 2, np.float32))
    grid = (-(-N // WG), 1, 1)
    b.execute([(lk, bufs[:3], grid, (N, 1)), (lk, [bufs[0], bufs[1], bufs[3]], grid, (N, 1)),
               (lk, [bufs[2], bufs[3], bufs[0]], grid, (N, 1))])
    np.testing.assert_array_equal(b.download(bufs[0], 4 * N).view(np.float32), np.full(N, 6, np.float32))
    for buf in bufs:
        live.pool.release(buf)


def _expect(outs, x, y) -> None:
    out1, out2, t1 = (r.view(np.float32) for r in outs)
    np.testing.assert_allclose(out1, x + 3 * y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out2, y + 3 * x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t1, x + 5 * y, rtol=1e-5, atol=1e-5)


@contextmanager
def forced_chain(device: str, spirv: bytes, caller_waits: bool):
    """The chain's recording on `device` with `caller_waits` forced; closed and its buffers released after."""
    live = open_device(device)
    rec, bufs = chain(live.backend, live.pool, axpy(spirv))
    rec.caller_waits = caller_waits
    try:
        yield rec
    finally:
        rec.close()
        for b in bufs:
            live.pool.release(b)


@pytest.mark.parametrize("caller_waits", [False, True])
def test_blocked_caller_resolves_its_own_run(device, spirv, caller_waits):
    """GPU drivers: a caller blocked in result() waits for the device and finishes the run itself (no hand-off
    from the completion thread); CPU drivers keep the hand-off. Both forced here, with runs in flight."""
    rng = np.random.default_rng(1)
    with forced_chain(device, spirv, caller_waits) as rec:
        for _ in range(3):
            runs = []
            for _ in range(4):
                x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
                runs.append((x, y, rec.submit([x, y])))
            for x, y, f in reversed(runs):  # the last first: earlier ones are finished by the completion thread
                _expect(f.result(), x, y)


@pytest.mark.parametrize("caller_waits", [False, True])
def test_blocking_run_waits_in_the_caller(device, spirv, caller_waits):
    """Recording.run: submit and wait in the calling thread, polling first (GPU drivers) or sleeping in the
    driver's wait (CPU drivers), both forced here, with a submit in flight before it."""
    rng = np.random.default_rng(2)
    with forced_chain(device, spirv, caller_waits) as rec:
        for _ in range(3):
            x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
            before = rec.submit([x, y])
            x2, y2 = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
            _expect(rec.run([x2, y2]), x2, y2)
            _expect(before.result(timeout=60), x, y)


def test_blocking_run_interrupted_leaves_the_recording_usable(device, spirv, monkeypatch):
    """Ctrl-C while run() waits: the exception reaches the caller, the completion thread finishes the run, and the
    next run works (nothing hangs, no run is lost half way)."""
    with forced_chain(device, spirv, True) as rec:
        _interrupt_once(device, rec, monkeypatch)


def _interrupt_once(device: str, rec, monkeypatch) -> None:
    owner = rec.device if device.startswith("vulkan") else rec
    name = "wait_value" if device.startswith("vulkan") else "_wait"
    real = getattr(owner, name)
    calls = []

    def interrupted(*args, **kwargs):
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(N, dtype=np.float32), rng.standard_normal(N, dtype=np.float32)
    monkeypatch.setattr(owner, name, interrupted)
    with pytest.raises(KeyboardInterrupt):
        rec.run([x, y])
    monkeypatch.setattr(owner, name, real)
    rec.wait_idle()
    _expect(rec.run([y, x]), y, x)
