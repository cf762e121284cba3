"""Vulkan device discovery at the runtime level (every device listed with its limits, lavapipe found where it is
installed, bad indices named), and hosts without Vulkan or without MLIR (fresh interpreters). No MLIR involved."""

from __future__ import annotations

import glob
import subprocess
from pathlib import Path

import pytest

from portable.errors import DeviceNotFound
from portable.runtime_vk import VulkanBackend, enumerate_devices

DEVICES, REASONS = enumerate_devices()
pytestmark = pytest.mark.skipif(
    not DEVICES, reason="no Vulkan device: " + ("; ".join(REASONS) or "the loader lists none")
)


# ---- discovery -----------------------------------------------------------------------------------------


def test_discovery_reports_devices_and_limits():
    for d in DEVICES:
        assert d.api == "vulkan" and d.uri == f"vulkan:{d.index}"
        assert d.device_type in ("gpu", "integrated-gpu", "cpu", "other")
        lim = d.limits
        assert len(lim["max_workgroup_size"]) == 3 and len(lim["max_workgroup_count"]) == 3
        assert lim["max_workgroup_invocations"] >= 128 and lim["shared_memory_bytes"] >= 16384
        assert lim["max_storage_buffer_range"] > 0 and lim["max_buffer_bytes"] > 0
        assert lim["max_push_constants_bytes"] >= 128
        assert any("compute" in flags for flags, count in lim["queue_families"])
        for key in ("fp16", "int8", "timeline_semaphore", "cooperative_matrix"):
            assert isinstance(lim[key], bool)


def test_discovery_finds_lavapipe():
    """Where Mesa's CPU driver is installed, it must be the device we see as a 'cpu' (the CI device)."""
    icds = [p for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
            for p in glob.glob(f"{d}/lvp_icd*.json")]
    if not icds:
        pytest.skip("lavapipe (mesa-vulkan-drivers) is not installed on this host")
    lvp = [d for d in DEVICES if d.driver == "llvmpipe"]
    assert lvp, f"lavapipe installed but not listed: {DEVICES} {REASONS}"
    assert lvp[0].device_type == "cpu" and lvp[0].limits["subgroup_size"] > 0
    assert "llvmpipe" in lvp[0].name


def test_discovery_is_cached_and_never_raises():
    again, reasons = enumerate_devices()
    assert [d.name for d in again] == [d.name for d in DEVICES]
    assert isinstance(reasons, list)


def test_bad_index_names_the_devices():
    with pytest.raises(DeviceNotFound) as e:
        VulkanBackend(len(DEVICES) + 3)
    msg = str(e.value)
    assert f"{len(DEVICES)} Vulkan device(s)" in msg
    assert DEVICES[0].name in msg
    with pytest.raises(DeviceNotFound):
        VulkanBackend(-1)


# ---- hosts without Vulkan, and the no-MLIR rule (fresh interpreters) -------------------------------------


def _python(code: str) -> str:
    import sys

    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_runtime_never_imports_mlir():
    out = _python("import sys, portable.runtime_vk; print(sorted(m for m in sys.modules if 'mlir' in m))")
    assert out.strip() == "[]"


def test_no_loader_gives_reasons_not_crashes():
    out = _python(
        "import sys; sys.modules['vulkan'] = None\n"  # as if the package or libvulkan were missing
        "from portable.errors import DeviceNotFound\n"
        "from portable.runtime_vk import VulkanBackend, enumerate_devices\n"
        "devices, reasons = enumerate_devices(); print(devices, reasons)\n"
        "try:\n    VulkanBackend(0)\nexcept DeviceNotFound as e:\n    print('DeviceNotFound', e)\n"
    )
    assert out.startswith("[] ['vulkan: ") and "loader could not be loaded" in out
    assert "DeviceNotFound no Vulkan devices" in out
