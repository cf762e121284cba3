"""What the Vulkan Backend tests (test_vk_transfers_and_kernels.py, test_vk_errors_and_leaks.py) share: the
devices they run on (`needs_vulkan` skips a module without one), backends opened with the Khronos validation layer
and checked clean afterwards, the add_scaled kernel assembled from data/vk/add_scaled.spvasm, and small transfer
helpers. The fixtures are named `cache_dir` (autouse: a private cache dir per test), `backend`, `spirv` and
`kernel`; a test module imports their functions (the *_fixture names) to use them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from portable import config
from portable.errors import DriverError
from portable.executable import Kernel
from portable.runtime_vk import VulkanBackend, enumerate_devices

DATA = Path(__file__).parent / "data" / "vk"
WG = 64

DEVICES, REASONS = enumerate_devices()
needs_vulkan = pytest.mark.skipif(
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


@pytest.fixture(autouse=True, name="cache_dir")
def cache_dir_fixture(tmp_path, monkeypatch) -> Path:
    """A private cache dir per test, so pipeline-cache files never leak between tests or into ~/.cache."""
    d = tmp_path / "cache"
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(d))
    return d


def open_backend(index: int, **kw) -> VulkanBackend:
    return VulkanBackend(index, validation=VALIDATION, **kw)


def assert_clean(backend: VulkanBackend) -> None:
    assert backend.validation_messages == [], "\n".join(backend.validation_messages)


@pytest.fixture(params=_selected(), ids=lambda i: f"vulkan:{i}", name="backend")
def backend_fixture(request):
    """An open backend with validation; closed afterwards, and the layer must have said nothing at all
    (destruction included: leaked objects are reported there)."""
    b = open_backend(request.param)
    yield b
    b.close()
    assert_clean(b)


# ---- the kernel: SPIR-V assembly -> binary with spirv-as, checked with spirv-val -----------------------


@pytest.fixture(scope="session", name="spirv")
def spirv_fixture(tmp_path_factory) -> bytes:
    spirv_as, spirv_val = shutil.which("spirv-as"), shutil.which("spirv-val")
    if not spirv_as or not spirv_val:
        pytest.skip("spirv-as/spirv-val not found: install spirv-tools")
    out = tmp_path_factory.mktemp("spv") / "add_scaled.spv"
    subprocess.run([spirv_as, "--target-env", "vulkan1.1", str(DATA / "add_scaled.spvasm"), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    subprocess.run([spirv_val, "--target-env", "vulkan1.1", str(out)], check=True, capture_output=True, text=True)
    return out.read_bytes()


@pytest.fixture(name="kernel")
def kernel_fixture(spirv) -> Kernel:
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
