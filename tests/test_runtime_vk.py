"""Vulkan runtime tests at the Backend level: transfers, kernels from hand-written SPIR-V, barriers, push
constants, the pipeline cache, errors and leaks (discovery: test_vk_discovery.py). No MLIR involved.

Every test runs on each Vulkan device (PORTABLE_TEST_DEVICES filters) with the Khronos validation layer,
including synchronization validation, and fails on any validation warning or error.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from portable import config
from portable.errors import DeviceLost, DriverError, KernelBuildError, OutOfDeviceMemory
from portable.executable import Kernel
from portable.runtime_vk import VulkanBackend, enumerate_devices

DATA = Path(__file__).parent / "data" / "vk"
WG = 64

DEVICES, REASONS = enumerate_devices()
pytestmark = pytest.mark.skipif(
    not DEVICES, reason="no Vulkan device: " + ("; ".join(REASONS) or "the loader lists none")
)


def _selected() -> list[int]:
    wanted = config.test_devices()
    return [d.index for d in DEVICES if wanted is None or d.uri in wanted]


def first_device() -> int:
    """Index of the first selected device, for tests that manage their own backends."""
    selected = _selected()
    if not selected:
        pytest.skip("PORTABLE_TEST_DEVICES selects no Vulkan device")
    return selected[0]


def _validation_available() -> bool:
    from portable.runtime_vk import validation

    try:
        validation.require_layer()
    except DriverError:
        return False
    return True


VALIDATION = bool(DEVICES) and _validation_available()


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A private cache dir per test, so pipeline-cache files never leak between tests or into ~/.cache."""
    d = tmp_path / "cache"
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(d))
    return d


def open_backend(index: int, **kw) -> VulkanBackend:
    return VulkanBackend(index, validation=VALIDATION, **kw)


def assert_clean(backend: VulkanBackend) -> None:
    assert backend.validation_messages == [], "\n".join(backend.validation_messages)


@pytest.fixture(params=_selected(), ids=lambda i: f"vulkan:{i}")
def backend(request):
    """An open backend with validation; closed afterwards, and the layer must have said nothing at all
    (destruction included: leaked objects are reported there)."""
    b = open_backend(request.param)
    yield b
    b.close()
    assert_clean(b)


# ---- the kernel: SPIR-V assembly -> binary with spirv-as, checked with spirv-val -----------------------


@pytest.fixture(scope="session")
def spirv(tmp_path_factory) -> bytes:
    spirv_as, spirv_val = shutil.which("spirv-as"), shutil.which("spirv-val")
    if not spirv_as or not spirv_val:
        pytest.skip("spirv-as/spirv-val not found: install spirv-tools")
    out = tmp_path_factory.mktemp("spv") / "add_scaled.spv"
    subprocess.run([spirv_as, "--target-env", "vulkan1.1", str(DATA / "add_scaled.spvasm"), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    subprocess.run([spirv_val, "--target-env", "vulkan1.1", str(out)], check=True, capture_output=True, text=True)
    return out.read_bytes()


@pytest.fixture
def kernel(spirv) -> Kernel:
    """c[i] = a[i] + b[i] * k for i < n; buffers (a, b, c); push constants (n, k)."""
    return Kernel(name="add_scaled", workgroup_size=(WG, 1, 1), num_buffers=3, spirv=spirv,
                  push_constants=("n", "k"), access=("r", "r", "w"))


def grid(n: int) -> tuple[int, int, int]:
    return (-(-n // WG), 1, 1)


def to_device(b: VulkanBackend, arr: np.ndarray):
    buf = b.allocate(arr.nbytes)
    b.upload(buf, arr)
    return buf


def read_f32(b: VulkanBackend, buf, n: int) -> np.ndarray:
    return b.download(buf, 4 * n).view(np.float32)


# ---- transfers -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("nbytes", [1, 13, 1_000_003])
def test_upload_download_round_trip(backend, nbytes):
    data = np.random.default_rng(nbytes).integers(0, 256, nbytes, dtype=np.uint8)
    buf = to_device(backend, data)
    np.testing.assert_array_equal(backend.download(buf, nbytes), data)
    np.testing.assert_array_equal(backend.download(buf, nbytes // 2), data[: nbytes // 2])
    backend.free(buf)


def test_transfers_in_chunks(backend, monkeypatch):
    """Transfers larger than the staging buffer go through it in pieces."""
    from portable.runtime_vk import buffers

    monkeypatch.setattr(buffers, "STAGING_MAX", 65536)
    backend._own.staging.destroy()  # regrow under the smaller cap
    data = np.random.default_rng(7).integers(0, 256, 300_001, dtype=np.uint8)
    buf = to_device(backend, data)
    np.testing.assert_array_equal(backend.download(buf, data.nbytes), data)


def test_upload_into_larger_buffer_and_typed_arrays(backend):
    arr = np.arange(10, dtype=np.float64).reshape(2, 5)
    buf = backend.allocate(1000)
    backend.upload(buf, arr)
    np.testing.assert_array_equal(backend.download(buf, arr.nbytes).view(np.float64).reshape(2, 5), arr)
    with pytest.raises(ValueError):
        backend.upload(buf, np.zeros(1001, np.uint8))


# ---- kernels -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 1000, 100_000])
def test_kernel_matches_numpy(backend, kernel, n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    A, B, C = to_device(backend, a), to_device(backend, b), backend.allocate(4 * n)
    backend.execute([(backend.load_kernel(kernel), [A, B, C], grid(n), [n, 3])])
    np.testing.assert_allclose(read_f32(backend, C, n), a + b * np.float32(3), rtol=1e-6, atol=1e-6)


def test_required_subgroup_size(backend, kernel):
    """A kernel laid over a subgroup width (Kernel.subgroup_size: shuffles, cooperative matrices) gets that width
    required of its pipeline where the device allows it (VK_EXT_subgroup_size_control; the validation layer checks
    the request) and runs; a width the device neither runs nor can be asked for is refused before the driver sees
    it, with the widths it allows."""
    from portable.runtime_vk.pipelines import required_subgroup_size

    lim = backend.info.limits
    own = dataclasses.replace(kernel, subgroup_size=lim["subgroup_size"])
    expected = lim["subgroup_size"] if lim["subgroup_size_control"] else 0
    assert required_subgroup_size(own, backend._device()) == expected
    n = 1000
    a, b = np.arange(n, dtype=np.float32), np.ones(n, dtype=np.float32)
    A, B, C = to_device(backend, a), to_device(backend, b), backend.allocate(4 * n)
    backend.execute([(backend.load_kernel(own), [A, B, C], grid(n), [n, 2])])
    np.testing.assert_allclose(read_f32(backend, C, n), a + 2)
    too_wide = dataclasses.replace(kernel, subgroup_size=2 * max(lim["max_subgroup_size"], lim["subgroup_size"]))
    with pytest.raises(KernelBuildError, match=rf"subgroups of {too_wide.subgroup_size} lanes; the device runs"):
        backend.load_kernel(too_wide)


def test_kernel_needing_a_missing_feature_is_refused(backend, kernel):
    """A module declaring a capability the device lacks (a package compiled for another profile) is refused before
    the driver sees it, naming the capability and the feature; the backend stays usable."""
    import struct

    from portable.runtime_vk import spirv as spv

    missing = [(cap, feature) for cap, (key, feature) in spv.CAPABILITY_NEEDS.items()
               if backend.info.limits.get(key) is False]
    if not missing:
        pytest.skip(f"{backend.info.name} has every optional feature portable's kernels declare")
    cap, feature = missing[0]
    # OpCapability <cap> inserted after the module's first instruction (an OpCapability itself).
    words = list(struct.unpack(f"<{len(kernel.spirv) // 4}I", kernel.spirv))
    words[7:7] = [(2 << 16) | 17, cap]
    bad = dataclasses.replace(kernel, spirv=struct.pack(f"<{len(words)}I", *words))
    with pytest.raises(KernelBuildError, match=rf"capability {cap}, which needs {re.escape(feature)}"):
        backend.load_kernel(bad)
    n = 10
    A, B, C = to_device(backend, np.ones(n, np.float32)), to_device(backend, np.ones(n, np.float32)), \
        backend.allocate(4 * n)
    backend.execute([(backend.load_kernel(kernel), [A, B, C], grid(n), [n, 1])])
    np.testing.assert_allclose(read_f32(backend, C, n), 2.0)


def test_second_dispatch_reads_first_output(backend, kernel):
    """Two dispatches in one command buffer: the barrier between them must make c visible to the second.
    lavapipe runs dispatches in order anyway; synchronization validation is what catches a missing
    barrier there."""
    n = 10_000
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    A, B = to_device(backend, a), to_device(backend, b)
    C, D = backend.allocate(4 * n), backend.allocate(4 * n)
    lk = backend.load_kernel(kernel)
    backend.execute([(lk, [A, B, C], grid(n), [n, 2]), (lk, [C, A, D], grid(n), [n, -1])])
    c = a + b * np.float32(2)
    np.testing.assert_allclose(read_f32(backend, D, n), c - a, rtol=1e-5, atol=1e-5)


def test_push_constants_and_bounds(backend, kernel):
    """k scales, n bounds: elements past n keep their old contents even though the grid covers them."""
    n, used = 256, 100
    a = np.ones(n, np.float32)
    b = np.arange(n, dtype=np.float32)
    sentinel = np.full(n, 42.0, np.float32)
    A, B, C = to_device(backend, a), to_device(backend, b), to_device(backend, sentinel)
    lk = backend.load_kernel(kernel)
    for k in (0, 5, -7):
        backend.execute([(lk, [A, B, C], grid(n), [used, k])])
        out = read_f32(backend, C, n)
        np.testing.assert_array_equal(out[:used], a[:used] + b[:used] * k)
        np.testing.assert_array_equal(out[used:], sentinel[used:])


def test_load_kernel_is_cached_per_backend(backend, kernel):
    assert backend.load_kernel(kernel) is backend.load_kernel(kernel)


def test_many_dispatches_and_executes(backend, kernel):
    """More descriptor sets than the first pool holds, and repeated executes reusing the pool."""
    n = 64
    A = to_device(backend, np.ones(n, np.float32))
    B = to_device(backend, np.ones(n, np.float32))
    C = backend.allocate(4 * n)
    lk = backend.load_kernel(kernel)
    for _ in range(2):
        backend.execute([(lk, [A, B, C], grid(n), [n, 1]), (lk, [C, B, A], grid(n), [n, 1])] * 50)
    # each pair adds 2 to A: 100 pairs over two executes
    np.testing.assert_array_equal(read_f32(backend, A, n), np.full(n, 201, np.float32))


# ---- pipeline cache ----------------------------------------------------------------------------------------


def test_pipeline_cache_written_and_reused(kernel, cache_dir):
    index = first_device()
    first = open_backend(index)
    first.load_kernel(kernel)
    path = Path(first.pipeline_cache_path)
    assert path.parent == config.cache_dir() / "vulkan" and path.suffix == ".bin"
    assert first.pipeline_cache_loaded_bytes == 0
    first.close()
    assert_clean(first)
    assert path.is_file() and path.stat().st_size > 0
    assert not list(path.parent.glob("*.tmp"))  # atomic write left no temp file

    second = open_backend(index)
    assert second.pipeline_cache_path == str(path)
    assert second.pipeline_cache_loaded_bytes > 0
    n = 100
    A = to_device(second, np.ones(n, np.float32))
    C = second.allocate(4 * n)
    second.execute([(second.load_kernel(kernel), [A, A, C], grid(n), [n, 1])])
    np.testing.assert_array_equal(read_f32(second, C, n), np.full(n, 2, np.float32))
    second.close()
    assert_clean(second)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_pipeline_cache_warns_and_is_ignored(kernel, damage):
    from portable.runtime_vk.errors import CacheWarning

    index = first_device()
    b = open_backend(index)
    b.load_kernel(kernel)
    b.close()
    path = Path(b.pipeline_cache_path)
    raw = path.read_bytes()
    path.write_bytes({"garbage": b"\x00garbage" * 50, "truncated": raw[: len(raw) - 7], "empty": b""}[damage])
    with pytest.warns(CacheWarning):
        b2 = open_backend(index)
    assert b2.pipeline_cache_loaded_bytes == 0
    b2.load_kernel(kernel)
    b2.close()
    assert_clean(b2)
    assert path.read_bytes()[:8] == raw[:8]  # rewritten whole


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

