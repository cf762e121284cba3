"""One error root for everything portable raises; each subclass says what went wrong and what to do."""

from __future__ import annotations


class PortableError(Exception):
    """Root of every error raised by portable."""


class DeviceNotFound(PortableError):
    """The device string names no device that is present (bad API, index out of range, no driver)."""


class UnsupportedOp(PortableError):
    """The graph uses an op, dtype or shape the compiler cannot turn into kernels yet."""


class CompileError(PortableError):
    """A compile stage failed; `stage` names it and `dump_path` (if set) holds the IR that failed."""

    def __init__(self, message: str, stage: str = "", dump_path: str | None = None):
        if dump_path:
            message = f"{message}\n(IR of the failing stage written to {dump_path})"
        super().__init__(message)
        self.stage = stage
        self.dump_path = dump_path


class KernelBuildError(CompileError):
    """A driver refused a kernel (SPIR-V pipeline creation or OpenCL program build)."""


class ShapeMismatch(PortableError):
    """Inputs given to a compiled graph do not match its signature (count, shape or dtype)."""


class OutOfDeviceMemory(PortableError):
    """A buffer does not fit the device's memory or its per-buffer limits."""


class DeviceLost(PortableError):
    """The driver reported the device lost or a submission failed; recreate the device to go on."""


class DriverError(PortableError):
    """A driver call failed with a status that has no more specific meaning."""


class PackageError(PortableError):
    """A saved Executable file is corrupt, truncated, of another format version, or has no kernels
    for the requested device."""


class InvalidPlan(PackageError):
    """An Executable's plan does not fit its kernels, its own buffers or the device's limits (a damaged or edited
    package, or one compiled for another device): refused before anything runs."""


class UnpinnedPackage(PackageError):
    """A package's content hash is not the one the caller pinned with `expect_hash`."""


class UntrustedPackage(PackageError):
    """A package or saved Executable the caller vouched for in no way (not pinned, not signed by a trusted key, not
    built by this user): its kernels are not run unless the caller passes trust="any" (portable.trust)."""


class InvalidState(PortableError, RuntimeError):
    """A call the object's state does not allow: a closed backend or recording, a staging ring never fenced
    (a RuntimeError too, as callers caught before)."""


class InvalidArgument(PortableError, ValueError):
    """An argument of a public call is out of its range (a ValueError too, as callers caught before)."""


class CompilerMissing(PortableError, ImportError):
    """Compiling needs the MLIR Python bindings (the `compiler` extra), which this install lacks; loading and
    running packages does not."""
