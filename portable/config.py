"""Every environment knob portable reads, in one place, typed."""

from __future__ import annotations

import os
from pathlib import Path

VERSION = "0.1.0"  # the package version (pyproject.toml), read by core files that may not import the public face


def cache_dir() -> Path:
    """Root of on-disk caches (compiled executables, Vulkan pipeline caches, OpenCL program binaries).
    PORTABLE_CACHE_DIR overrides; default ~/.cache/portable."""
    d = os.environ.get("PORTABLE_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "portable"


def dump_dir() -> Path | None:
    """PORTABLE_DUMP=dir writes every compile stage (MLIR per step, SPIR-V disassembly, OpenCL C) there."""
    d = os.environ.get("PORTABLE_DUMP")
    return Path(d) if d else None


def dump_stage(name: str) -> bool:
    """PORTABLE_DUMP_STAGES=a,b (names from compiler/pipeline.py's STAGES): dump the module after those stages only;
    unset, after every stage. Kernels (SPIR-V, OpenCL C) and transform scripts are always written."""
    only = os.environ.get("PORTABLE_DUMP_STAGES")
    return not only or name in {s.strip() for s in only.split(",")}


def progress() -> bool | None:
    """PORTABLE_PROGRESS=1 prints a long compile's progress (stage, kernel k of n) on stderr, =0 never; unset, only
    when stderr is a terminal."""
    v = os.environ.get("PORTABLE_PROGRESS", "").strip()
    return None if v == "" else v != "0"


def vk_validation() -> bool:
    """PORTABLE_VK_VALIDATION=1 enables the Khronos validation layer; any message then raises."""
    return os.environ.get("PORTABLE_VK_VALIDATION", "") not in ("", "0") or vk_gpu_av()


def vk_gpu_av() -> bool:
    """PORTABLE_VK_GPU_AV=1: the validation layer with GPU-assisted validation instead of synchronization validation
    (kernels instrumented: out-of-bounds buffer accesses are reported); implies PORTABLE_VK_VALIDATION."""
    return os.environ.get("PORTABLE_VK_GPU_AV", "") not in ("", "0")


def test_devices() -> list[str] | None:
    """PORTABLE_TEST_DEVICES=vulkan:0,opencl:0 limits the device-parametrized tests."""
    v = os.environ.get("PORTABLE_TEST_DEVICES")
    return [s.strip() for s in v.split(",") if s.strip()] if v else None


def test_fresh_venv() -> bool:
    """PORTABLE_TEST_FRESH_VENV=1 runs the slow test that installs the runtime alone (no MLIR) into a new
    virtual environment and runs a package there (about half a minute; off by default to keep CI fast)."""
    return os.environ.get("PORTABLE_TEST_FRESH_VENV", "") not in ("", "0")


def trusted_key_paths() -> list[Path]:
    """PORTABLE_TRUSTED_KEYS=path[:path...]: public key files (`ed25519 <hex>`, from `portable keygen`) or folders of
    *.pub files whose signatures portable.load accepts (portable.trust)."""
    v = os.environ.get("PORTABLE_TRUSTED_KEYS", "")
    return [Path(p) for p in v.split(os.pathsep) if p.strip()]


POISON_BYTE = 0xFF  # float32/float16 NaN, integers -1: stale values a kernel forgot to overwrite stand out


def debug_poison() -> bool:
    """PORTABLE_DEBUG_POISON=1 fills every device buffer a run gets from the pool (outputs, intermediates) with
    POISON_BYTE before use, so a kernel that leaves part of its output unwritten shows NaN / -1, never the data of
    the executable that used the memory before (debugging aid: one extra upload per buffer)."""
    return os.environ.get("PORTABLE_DEBUG_POISON", "") not in ("", "0")
