"""Vulkan runtime tests at the Backend level, what goes wrong: kernels and allocations refused, driver errors,
timeouts and lost devices named, the validation layer proven to catch misuse, and nothing leaked on close
(transfers, kernels and the pipeline cache: test_vk_transfers_and_kernels.py). No MLIR involved.

Every test runs on each Vulkan device (PORTABLE_TEST_DEVICES filters) with the Khronos validation layer,
including synchronization validation, and fails on any validation warning or error.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vk_backend import (
    VALIDATION,
    WG,
    assert_clean,
    backend_fixture,  # noqa: F401 - fixture `backend`
    cache_dir_fixture,  # noqa: F401 - fixture `cache_dir`, autouse
    first_device,
    grid,
    kernel_fixture,  # noqa: F401 - fixture `kernel`
    needs_vulkan,
    open_backend,
    read_f32,
    spirv_fixture,  # noqa: F401 - fixture `spirv`
    to_device,
)

from portable.errors import DeviceLost, DriverError, KernelBuildError, OutOfDeviceMemory
from portable.executable import Kernel

pytestmark = needs_vulkan


# ---- errors ---------------------------------------------------------------------------------------------


def test_garbage_spirv_then_good_kernel(backend, kernel, cache_dir):
    bad = Kernel(name="add_scaled", workgroup_size=(WG, 1, 1), num_buffers=3,
                 spirv=np.random.default_rng(0).integers(0, 256, 400, dtype=np.uint8).tobytes(),
                 push_constants=("n", "k"))
    with pytest.raises(KernelBuildError) as e:
        backend.load_kernel(bad)
    assert "magic" in str(e.value) and e.value.dump_path and Path(e.value.dump_path).is_file()
    with pytest.raises(KernelBuildError, match="not a SPIR-V module"):
        backend.load_kernel(Kernel(name="x", workgroup_size=(1, 1, 1), num_buffers=0, spirv=b"\x03\x02"))
    n = 1000
    A = to_device(backend, np.ones(n, np.float32))
    C = backend.allocate(4 * n)
    backend.execute([(backend.load_kernel(kernel), [A, A, C], grid(n), [n, 4])])
    np.testing.assert_array_equal(read_f32(backend, C, n), np.full(n, 5, np.float32))


def test_kernel_without_spirv(backend):
    k = Kernel(name="add", workgroup_size=(64, 1, 1), num_buffers=3, opencl="__kernel void add() {}")
    with pytest.raises(KernelBuildError, match="no SPIR-V for this kernel"):
        backend.load_kernel(k)


def test_kernel_metadata_must_match_module(backend, spirv):
    wrong_name = Kernel(name="main", workgroup_size=(WG, 1, 1), num_buffers=3, spirv=spirv,
                        push_constants=("n", "k"))
    with pytest.raises(KernelBuildError, match="'add_scaled'"):
        backend.load_kernel(wrong_name)
    wrong_wg = Kernel(name="add_scaled", workgroup_size=(128, 1, 1), num_buffers=3, spirv=spirv,
                      push_constants=("n", "k"))
    with pytest.raises(KernelBuildError, match="LocalSize"):
        backend.load_kernel(wrong_wg)


def test_allocation_over_the_limits(backend):
    lim = backend.info.limits
    with pytest.raises(OutOfDeviceMemory, match="maxStorageBufferRange") as e:
        backend.allocate(lim["max_storage_buffer_range"] + 1)
    assert str(lim["max_storage_buffer_range"]) in str(e.value)
    with pytest.raises(OutOfDeviceMemory, match=str(1 << 50)):
        backend.allocate(1 << 50)
    buf = backend.allocate(16)  # still fine afterwards
    backend.free(buf)


def test_grid_over_the_limit(backend, kernel):
    A = backend.allocate(64)
    too_many = backend.info.limits["max_workgroup_count"][0] + 1
    with pytest.raises(DriverError, match="maxComputeWorkGroupCount"):
        backend.execute([(backend.load_kernel(kernel), [A, A, A], (too_many, 1, 1), [16, 1])])


def test_dispatch_argument_checks(backend, kernel):
    A = backend.allocate(64)
    lk = backend.load_kernel(kernel)
    with pytest.raises(ValueError, match="buffers"):
        backend.execute([(lk, [A, A], (1, 1, 1), [16, 1])])
    with pytest.raises(ValueError, match="push constants"):
        backend.execute([(lk, [A, A, A], (1, 1, 1), [16])])
    backend.free(A)
    with pytest.raises(ValueError, match="freed"):
        backend.execute([(lk, [A, A, A], (1, 1, 1), [16, 1])])


def test_timeout_becomes_device_lost(kernel):
    """A submission that outlives the timeout raises DeviceLost (not a hang); the backend then refuses work
    and still closes cleanly once the device is idle."""
    b = open_backend(first_device(), timeout_s=1e-6)
    n = 100_000
    A = b.allocate(4 * n)
    lk = b.load_kernel(kernel)
    try:
        with pytest.raises(DeviceLost, match="did not finish"):
            b.execute([(lk, [A, A, A], grid(n), [n, 1])] * 200)
        with pytest.raises(DeviceLost):
            b.allocate(16)
    finally:
        b.close()
    assert_clean(b)


def test_driver_refusing_a_pipeline(backend, kernel, monkeypatch):
    """A VkResult from pipeline creation becomes KernelBuildError naming it; nothing created on the way
    leaks (validation reports leaks at close) and the backend goes on working."""
    import vulkan as vk

    def refuse(*args, **kwargs):
        raise vk.VkErrorInitializationFailed()

    with monkeypatch.context() as m:
        m.setattr(vk, "vkCreateComputePipelines", refuse)
        with pytest.raises(KernelBuildError, match="VK_ERROR_INITIALIZATION_FAILED") as e:
            backend.load_kernel(kernel)
    assert e.value.dump_path and Path(e.value.dump_path).read_bytes() == kernel.spirv
    n = 10
    A = to_device(backend, np.ones(n, np.float32))
    backend.execute([(backend.load_kernel(kernel), [A, A, A], grid(n), [n, 1])])
    np.testing.assert_array_equal(read_f32(backend, A, n), np.full(n, 2, np.float32))


def test_driver_out_of_memory(backend, monkeypatch):
    import vulkan as vk

    from portable.runtime_vk.tracking import live_buffers

    before = live_buffers()

    def oom(*args, **kwargs):
        raise vk.VkErrorOutOfDeviceMemory()

    monkeypatch.setattr(vk, "vkAllocateMemory", oom)
    with pytest.raises(OutOfDeviceMemory, match="VK_ERROR_OUT_OF_DEVICE_MEMORY.*free buffers"):
        backend.allocate(1 << 20)
    assert live_buffers() == before


def test_device_lost_on_submit(kernel, monkeypatch):
    import vulkan as vk

    b = open_backend(first_device())
    buf = b.allocate(64)

    def lost(*args, **kwargs):
        raise vk.VkErrorDeviceLost()

    with monkeypatch.context() as m:
        m.setattr(vk, "vkQueueSubmit", lost)
        with pytest.raises(DeviceLost, match="VK_ERROR_DEVICE_LOST.*create a new one"):
            b.upload(buf, np.zeros(64, np.uint8))
    with pytest.raises(DeviceLost, match="lost earlier"):
        b.download(buf, 64)
    b.close()
    assert_clean(b)


def test_vulkan_results_are_named():
    import vulkan as vk

    from portable.runtime_vk.errors import to_portable

    assert isinstance(to_portable(vk.VkErrorDeviceLost(), "x"), DeviceLost)
    assert isinstance(to_portable(vk.VkErrorOutOfDeviceMemory(), "x"), OutOfDeviceMemory)
    e = to_portable(vk.VkErrorInitializationFailed(), "vkCreateDevice")
    assert type(e) is DriverError and "VK_ERROR_INITIALIZATION_FAILED" in str(e) and "vkCreateDevice" in str(e)
    # the package raises KeyError for codes its table gets wrong
    assert "VK_ERROR_OUT_OF_POOL_MEMORY" in str(to_portable(KeyError(-1000069000), "x"))


# ---- validation, lifetime, leaks --------------------------------------------------------------------------


@pytest.mark.skipif(not VALIDATION, reason="VK_LAYER_KHRONOS_validation not installed (vulkan-validationlayers)")
def test_validation_messages_are_collected():
    """Misuse on purpose, to prove an empty validation_messages means something."""
    import vulkan as vk

    b = open_backend(first_device())
    dev = b._own.device.handle
    bad = vk.vkCreateBuffer(dev, vk.VkBufferCreateInfo(size=16, usage=0), None)  # usage must not be 0
    vk.vkDestroyBuffer(dev, bad, None)
    b.close()
    assert any("VUID-VkBufferCreateInfo-usage" in m for m in b.validation_messages)


@pytest.mark.skipif(not VALIDATION, reason="VK_LAYER_KHRONOS_validation not installed (vulkan-validationlayers)")
def test_missing_barrier_would_be_caught(kernel, monkeypatch):
    """Without the barrier between dependent dispatches, synchronization validation reports a hazard: so
    the clean run of test_second_dispatch_reads_first_output really checks the barrier."""
    from portable.runtime_vk import commands

    monkeypatch.setattr(commands, "barrier_between_dispatches", lambda cmd: None)
    b = open_backend(first_device())
    n = 256
    A, C = to_device(b, np.ones(n, np.float32)), b.allocate(4 * n)
    lk = b.load_kernel(kernel)
    b.execute([(lk, [A, A, C], grid(n), [n, 1]), (lk, [C, A, A], grid(n), [n, 1])])
    b.close()
    assert any("SYNC-HAZARD" in m for m in b.validation_messages), b.validation_messages


def test_close_releases_everything(kernel):
    from portable.runtime_vk.tracking import live_buffers, live_objects

    before = live_objects()
    b = open_backend(first_device())
    bufs = [b.allocate(n) for n in (4, 100, 4096)]
    b.free(bufs[0])
    b.free(bufs[0])  # idempotent
    b.load_kernel(kernel)
    b.upload(bufs[1], np.zeros(100, np.uint8))
    assert live_buffers() == before.get("buffer", 0) + 2
    block = b.allocate_block(1 << 16)
    view = b.view(block, 256, 1024)
    b.close()
    b.close()  # idempotent
    assert_clean(b)
    assert live_objects() == before
    assert all(buf.freed for buf in bufs + [block])
    b.free(view)  # a pool's finalizer after close (interpreter exit): nothing left to free, no error
    b.free(bufs[1])
    with pytest.raises(RuntimeError, match="closed"):
        b.allocate(4)


def test_dropped_backend_is_released_by_finalizer():
    import gc

    from portable.runtime_vk.tracking import live_objects

    before = live_objects()
    b = open_backend(first_device())
    b.allocate(64)
    del b
    gc.collect()
    assert live_objects() == before


def test_context_manager():
    with open_backend(first_device()) as b:
        b.allocate(8)
    assert_clean(b)
    with pytest.raises(RuntimeError):
        b.allocate(8)
