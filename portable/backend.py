"""The contract every runtime fills in (one small class per API), and what a device says about itself.

The runtimes (`runtime_vk`, `runtime_cl`) implement `Backend`; `portable.session` runs an Executable's plan
through it. Nothing here imports MLIR.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from .executable import Kernel


@dataclass(frozen=True)
class DeviceInfo:
    """What the driver reports, enough to pick a profile from `devices/` and to respect limits."""

    api: str  # "vulkan" | "opencl"
    index: int  # position in portable's list for this API ("vulkan:<index>")
    name: str
    driver: str  # driver name, e.g. "llvmpipe", "NVIDIA", "Portable Computing Language"
    driver_version: str
    vendor_id: int  # PCI vendor id where known (0 otherwise)
    device_id: int
    device_type: str  # "gpu" | "integrated-gpu" | "cpu" | "other"
    limits: dict[str, Any] = field(default_factory=dict)
    # Common limit keys: max_workgroup_size (x,y,z), max_workgroup_invocations, max_workgroup_count (x,y,z),
    # shared_memory_bytes, subgroup_size, max_buffer_bytes (largest single buffer), fp16, int8.

    @property
    def uri(self) -> str:
        return f"{self.api}:{self.index}"


class Backend(ABC):
    """A live device of one API. Buffers are opaque handles owned by the backend."""

    info: DeviceInfo

    @abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """A device-local buffer of at least `nbytes` (> 0). Raises OutOfDeviceMemory when it cannot."""

    @abstractmethod
    def free(self, buffer: Any) -> None: ...

    @abstractmethod
    def upload(self, buffer: Any, data: np.ndarray) -> None:
        """Copy a C-contiguous array into the start of `buffer` (through staging where needed)."""

    @abstractmethod
    def download(self, buffer: Any, nbytes: int) -> np.ndarray:
        """The first `nbytes` of `buffer` as a uint8 array."""

    @abstractmethod
    def load_kernel(self, kernel: Kernel) -> Any:
        """Build (or fetch from the caches) the pipeline/program for `kernel`; raises KernelBuildError."""

    @abstractmethod
    def execute(self, dispatches: Sequence[tuple[Any, Sequence[Any], tuple[int, int, int], Sequence[int]]]) -> None:
        """Run (loaded kernel, buffers, grid, push-constant values) in order, each seeing the writes of the
        ones before it, and wait for completion."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
