"""Build an OpenCL C program for one device, through the binary cache; refusals become KernelBuildError."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from ..errors import KernelBuildError
from .clapi import cl, program_binary, program_from_binary, program_from_source
from .discovery import FoundDevice
from .errors import status_name
from .program_cache import ProgramCache, cache_key

# Fixed for every device: the codegen emits OpenCL C 1.2 (what PoCL, NVIDIA, Adreno and Mali all accept),
# and no fast-math flags, so results match the Vulkan path and numpy within normal float tolerances.
BUILD_OPTIONS = "-cl-std=CL1.2"

_log = logging.getLogger(__name__)


def _build_log(program: Any, device: Any) -> str:
    try:
        return str(program.get_build_info(device, cl.program_build_info.LOG)).strip()
    except Exception:
        return ""


def _build(program: Any, device: Any) -> None:
    """clBuildProgram; a successful build's log (NVIDIA always writes one) goes to logging, not to warnings."""
    with warnings.catch_warnings():
        # pyopencl warns "Non-empty compiler output encountered" for any build log, informational ones too.
        warnings.simplefilter("ignore", getattr(cl, "CompilerWarning", Warning))
        program.build(BUILD_OPTIONS.encode(), [device])
    if _log.isEnabledFor(logging.DEBUG):
        log = _build_log(program, device)
        if log:
            _log.debug("OpenCL build log on %s:\n%s", device.name, log)


def build_program(
    context: Any, found: FoundDevice, cache: ProgramCache, source: str, kernel_name: str
) -> tuple[Any, bool]:
    """A built program for `source` on `found`, and whether the driver had to compile it (a cache miss)."""
    device = found.device
    key = cache_key(source, BUILD_OPTIONS, found.info.name, found.info.driver_version, found.platform_version)
    binary = cache.load(key)
    if binary is not None:
        try:
            program = program_from_binary(context, device, binary)
            _build(program, device)
            return program, False
        except Exception as e:  # a driver update that kept its version string, or a foreign binary
            cache.warn(cache.path(key), f"was rejected by the driver ({e})")

    program = program_from_source(context, source)
    try:
        _build(program, device)
    except Exception as e:
        log = _build_log(program, device) or str(e)
        status = status_name(e.code) if isinstance(getattr(e, "code", None), int) else type(e).__name__
        head = (f"{found.info.uri} ({found.info.name}, {found.info.driver}) could not build OpenCL kernel "
                f"{kernel_name!r} ({status}, options {BUILD_OPTIONS!r}). Build log:\n{log}")
        try:
            saved = cache.save_failed(kernel_name, key, source, log)
        except OSError as save_error:
            raise KernelBuildError(f"{head}\n(the source could not be saved: {save_error})", stage="opencl") from e
        error = KernelBuildError(f"{head}\n(the failing source is saved as {saved}, its build log next to it)",
                                 stage="opencl")
        error.dump_path = str(saved)  # set after construction: CompileError would word the path as "IR"
        raise error from e

    try:
        binary = program_binary(program)
    except Exception:
        binary = b""  # a driver without program binaries: nothing to cache, the build still stands
    if binary:
        cache.store(key, binary)
    return program, True
