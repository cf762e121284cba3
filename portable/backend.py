"""The contract every runtime fills in (one small class per API), and what a device says about itself.

The runtimes (`runtime_vk`, `runtime_cl`) implement `Backend`; `portable.session` runs an Executable's plan
through it: buffers come from `portable.memory`'s pool (blocks + views), and a plan bound to its buffers is
recorded once (`Backend.record`) and replayed asynchronously (`Recording.submit`). Nothing here imports MLIR.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .executable import Kernel


class KernelUses:
    """Which loaded kernels callers hold (load_kernel calls not yet unloaded), and which nothing holds, oldest first:
    a backend keeps the last few of those for a later load and drops older ones (their driver objects)."""

    def __init__(self) -> None:
        self.uses: dict[str, int] = {}  # Kernel.key() -> holders
        self.idle: OrderedDict[str, None] = OrderedDict()

    def acquire(self, key: str) -> None:
        self.uses[key] = self.uses.get(key, 0) + 1
        self.idle.pop(key, None)

    def release(self, key: str, keep: int) -> list[str]:
        """One holder of `key` is done; the keys of idle kernels past the newest `keep`, to drop."""
        n = self.uses.get(key, 0)
        if n <= 0:
            return []
        if n > 1:
            self.uses[key] = n - 1
            return []
        del self.uses[key]
        self.idle[key] = None
        drop = []
        while len(self.idle) > keep:
            drop.append(self.idle.popitem(last=False)[0])
        return drop

    def clear(self) -> None:
        self.uses.clear()
        self.idle.clear()


@dataclass(frozen=True)
class DeviceInfo:
    """What the driver reports, enough to pick a profile from `device_profiles/` and to respect limits."""

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


@dataclass(frozen=True)
class Step:
    """One dispatch of a plan bound to buffers: a loaded kernel, its buffers, workgroup counts, push constants."""

    kernel: Any
    buffers: tuple[Any, ...]
    grid: tuple[int, int, int]
    push_constants: tuple[int, ...] = ()


class Recording(ABC):
    """A plan recorded for fixed buffers: copies in, dispatches, copies out. At most one run in flight;
    `submit` waits for the previous one when needed."""

    mode: str = ""  # how it replays, e.g. "vulkan-replay", "opencl-command-buffer", "opencl-kernels"
    dispatches: int = 0
    barriers: int = 0  # barriers (Vulkan) or dependency edges (OpenCL) recorded between dispatches

    @abstractmethod
    def submit(self, inputs: Sequence[np.ndarray]) -> Future:
        """Copy `inputs` (one per upload, already checked) in, run, and return a Future of the downloads as
        uint8 arrays. The arrays may be reused as soon as submit returns."""

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """`submit` and block until the downloads are there. A backend whose caller can wait by itself overrides
        this to skip the Future and the completion thread."""
        return self.submit(inputs).result()

    @abstractmethod
    def wait_idle(self) -> None:
        """Block until the run in flight (if any) has finished and its outputs were copied out."""

    @abstractmethod
    def close(self) -> None: ...


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

    def unload_kernel(self, kernel: Kernel) -> None:
        """The caller of one load_kernel(kernel) no longer runs it; a backend may free it once no caller does (this
        default keeps every kernel)."""
        return

    @abstractmethod
    def execute(self, dispatches: Sequence[tuple[Any, Sequence[Any], tuple[int, int, int], Sequence[int]]]) -> None:
        """Run (loaded kernel, buffers, grid, push-constant values) in order, each seeing the writes of the
        ones before it, and wait for completion."""

    def allocate_block(self, nbytes: int) -> Any:
        """A buffer that pools carve views from; may exceed the bindable range where the API allows."""
        return self.allocate(nbytes)

    @abstractmethod
    def view(self, block: Any, offset: int, nbytes: int) -> Any:
        """A buffer handle for `nbytes` of `block` at `offset` (aligned to buffer_limits()["alignment"]);
        free() releases the view only."""

    @abstractmethod
    def buffer_limits(self) -> dict[str, int]:
        """{"alignment": view offset alignment, "max_block": largest allocation, "max_range": largest view}."""

    @abstractmethod
    def record(self, steps: Sequence[Step], uploads: Sequence[tuple[Any, int]],
               downloads: Sequence[tuple[Any, int]], copies: Sequence[tuple[Any, Any, int]] = ()) -> Recording:
        """Record a plan once for these buffers: (buffer, bytes) uploaded per input, dispatches, (buffer, bytes)
        downloaded per output. Barriers or event waits only where a dispatch depends on an earlier one.
        `copies` (source, destination, bytes) run on the device after the dispatches: state carried from one
        run's outputs into the next run's inputs without leaving the device."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
