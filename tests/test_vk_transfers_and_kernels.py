"""Vulkan runtime tests at the Backend level, what works: transfers, kernels from hand-written SPIR-V, barriers,
push constants and the pipeline cache (errors and leaks: test_vk_errors_and_leaks.py; discovery:
test_vk_discovery.py). No MLIR involved.

Every test runs on each Vulkan device (PORTABLE_TEST_DEVICES filters) with the Khronos validation layer,
including synchronization validation, and fails on any validation warning or error.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from vk_backend import (
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

from portable import config
from portable.errors import KernelBuildError

pytestmark = needs_vulkan


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
