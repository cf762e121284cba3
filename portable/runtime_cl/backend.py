"""OpenCLBackend: one device, one context; an in-order queue for synchronous transfers and `execute`, and a
queue for recorded plans whose runs are asynchronous: cl_khr_command_buffer recordings where the driver offers them
(on an out-of-order queue where it has one), else kernels enqueued in order (see OpenCLBackend.__init__)."""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import Backend, KernelUses, Step
from ..completion import Completer
from ..config import cache_dir
from ..errors import DeviceNotFound, InvalidArgument, KernelBuildError, OutOfDeviceMemory
from ..executable import Kernel
from .buffers import ClBuffer
from .clapi import cl
from .cmdbuf import CAP_OUT_OF_ORDER, CommandBufferApi
from .discovery import FoundDevice, discover
from .errors import translate
from .program_cache import ProgramCache
from .programs import build_program
from .replay import OpenCLRecording, int32

# Programs kept for reuse after the executables that loaded them are released; beyond these, the oldest unused ones
# are dropped (a process running many distinct graphs would otherwise keep every built program until exit).
IDLE_KERNELS = 64


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel ready to enqueue, with what execute needs to launch it (workgroup size, argument counts)."""

    kernel: Any  # pyopencl.Kernel
    name: str
    workgroup_size: tuple[int, int, int]
    num_buffers: int
    num_push_constants: int
    owner: int  # token of the backend that loaded it
    program: Any = None  # the built program: recordings make their own kernel objects from it
    access: tuple[str, ...] = ()  # per buffer "r" / "w" / "rw" (Kernel.access)


# Tokens name backends in buffer and kernel handles; unlike id() they are never reused after a backend dies.
_tokens = itertools.count(1)


class _Resources:
    """Everything the driver holds for one backend, released exactly once (by close() or at collection)."""

    def __init__(self, context: Any, queue: Any, async_queue: Any, name: str):
        self.token = next(_tokens)
        self.context = context
        self.queue = queue
        self.async_queue = async_queue
        self.buffers: dict[int, ClBuffer] = {}
        self.kernels: dict[str, LoadedKernel] = {}  # Kernel.key() -> loaded
        self.kernel_uses = KernelUses()
        self.recordings: weakref.WeakSet[OpenCLRecording] = weakref.WeakSet()
        self.completer = Completer(name)
        self.lock = threading.RLock()  # kernel arguments of `execute`, the dictionaries above
        self.closed = False

    def release(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.completer.close()
        for rec in list(self.recordings):
            try:
                rec.close()
            except Exception:
                pass  # release the rest regardless
        try:
            self.async_queue.finish()
        except Exception:
            pass
        try:
            self.queue.finish()  # nothing may still be using a buffer we are about to release
        except Exception:
            pass  # a failed queue has nothing left to wait for; release what we can
        for buf in self.buffers.values():
            try:
                buf.release()
            except Exception:
                pass  # keep releasing the rest; the handle is already marked freed and uncounted
        self.buffers.clear()
        self.kernels.clear()
        self.kernel_uses.clear()
        self.queue = self.async_queue = None
        self.context = None


def _not_found(index: int, found: list[FoundDevice], reasons: list[str]) -> str:
    if found:
        listing = "; ".join(f"{f.info.uri} = {f.info.name} ({f.info.driver})" for f in found)
        message = f"opencl:{index} does not exist; {len(found)} OpenCL device(s) found: {listing}"
    else:
        message = f"opencl:{index} does not exist; no OpenCL device was found"
    if reasons:
        message += "\nOpenCL drivers that could not be listed:\n  " + "\n  ".join(reasons)
    return message


class OpenCLBackend(Backend):
    """The OpenCL device `opencl:<index>` (index into enumerate_devices()), implementing portable's Backend."""

    def __init__(self, index: int, *, out_of_order: bool | None = None, command_buffer: bool = True):
        """`out_of_order`: None (default) takes an out-of-order queue for recordings only where they are command
        buffers (PoCL). Kernels enqueued one by one then carry their dependencies as event waits, which NVIDIA's
        driver runs slower, not more concurrently (measured on the H200's decoder step; see CHANGELOG.md). True
        or False forces it (where the device offers out-of-order queues)."""
        found, reasons = discover()
        if not 0 <= index < len(found):
            raise DeviceNotFound(_not_found(index, found, reasons))
        self._found = found[index]
        self.info = self._found.info
        self.builds = 0  # real driver compiles (binary cache misses); tests use it to prove caching
        self._cache = ProgramCache(cache_dir() / "opencl")
        device = self._found.device
        self._cmdbuf = CommandBufferApi.load(device.platform, device) if command_buffer else None
        ooo_flag = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
        if out_of_order is None:
            out_of_order = self._cmdbuf is not None
        self.out_of_order = bool(out_of_order and int(device.queue_properties) & ooo_flag)
        if self._cmdbuf is not None and self.out_of_order and not self._cmdbuf.capabilities & CAP_OUT_OF_ORDER:
            self.out_of_order = False  # the command buffer must live on the recordings' queue
        try:
            context = cl.Context([device])
            queue = cl.CommandQueue(context, device)  # in-order: each dispatch sees the last
            async_queue = cl.CommandQueue(context, device, properties=ooo_flag if self.out_of_order else 0)
        except Exception as e:
            raise translate(e, f"{self._where}: creating a context and queues") from e
        self._res = _Resources(context, queue, async_queue, self._where)
        self._finalizer = weakref.finalize(self, _Resources.release, self._res)

    @property
    def _where(self) -> str:
        return f"{self.info.uri} ({self.info.name})"

    def __repr__(self) -> str:
        state = "closed" if self._res.closed else "open"
        return f"<OpenCLBackend {self._where}, {state}>"

    @property
    def command_buffers(self) -> bool:
        """Whether recorded plans run as cl_khr_command_buffer (else as preset-argument kernels)."""
        return self._cmdbuf is not None

    # ---- checks that turn misuse into a clear message instead of a driver crash ----
    def _live(self) -> _Resources:
        if self._res.closed:
            raise InvalidArgument(f"{self._where}: the backend is closed; create a new OpenCLBackend")
        return self._res

    def _own(self, buffer: Any) -> ClBuffer:
        res = self._live()
        if not isinstance(buffer, ClBuffer) or buffer.owner != res.token:
            raise InvalidArgument(f"{self._where}: {buffer!r} is not a buffer of this backend; "
                                  "pass buffers it allocated")
        if buffer.mem is None or (buffer.parent is not None and buffer.parent.mem is None):
            raise InvalidArgument(f"{self._where}: {buffer!r} was already freed; allocate a new buffer")
        return buffer

    # ---- memory ----
    def allocate(self, nbytes: int) -> ClBuffer:
        """A READ_WRITE device buffer of `nbytes`; OutOfDeviceMemory past the device's per-buffer limit."""
        res = self._live()
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise InvalidArgument(f"buffer size must be positive, got {nbytes}; allocate at least one byte")
        limit = self.info.limits.get("max_buffer_bytes") or 0
        if limit and nbytes > limit:
            raise OutOfDeviceMemory(
                f"{self._where}: a buffer of {nbytes} bytes ({nbytes / 2**20:.1f} MiB) exceeds the largest single "
                f"buffer the device allows, max_mem_alloc_size = {limit} bytes ({limit / 2**20:.1f} MiB); split "
                f"the tensor or use a smaller batch"
            )
        try:
            mem = cl.Buffer(res.context, cl.mem_flags.READ_WRITE, size=nbytes)
        except Exception as e:
            raise translate(e, f"{self._where}: allocating {nbytes} bytes", allocating=True) from e
        buf = ClBuffer(mem, nbytes, res.token)
        with res.lock:
            res.buffers[id(buf)] = buf
        return buf

    def view(self, block: Any, offset: int, nbytes: int) -> ClBuffer:
        """A sub-buffer of `block` (offset aligned to CL_DEVICE_MEM_BASE_ADDR_ALIGN)."""
        parent = self._own(block)
        offset, nbytes = int(offset), int(nbytes)
        if offset < 0 or offset + nbytes > parent.nbytes:
            raise InvalidArgument(f"{self._where}: {nbytes} bytes at +{offset} do not fit {parent!r}; view within it")
        try:
            mem = parent.mem.get_sub_region(offset, nbytes)
        except Exception as e:
            raise translate(e, f"{self._where}: a sub-buffer of {nbytes} bytes at +{offset}", allocating=True) from e
        buf = ClBuffer(mem, nbytes, self._res.token, offset, parent)
        with self._res.lock:
            self._res.buffers[id(buf)] = buf
        return buf

    def buffer_limits(self) -> dict[str, int]:
        align_bits = int(getattr(self._found.device, "mem_base_addr_align", 1024) or 1024)
        limit = int(self.info.limits.get("max_buffer_bytes") or 0)
        return {"alignment": max(align_bits // 8, 4), "max_block": limit, "max_range": limit}

    def free(self, buffer: Any) -> None:
        """Release a buffer now (close() releases any that are left, so freeing one after it does nothing: a
        pool's finalizer may run after the backend closed at interpreter exit)."""
        if self._res.closed and isinstance(buffer, ClBuffer) and buffer.owner == self._res.token:
            return
        buf = self._own(buffer)
        with self._res.lock:
            self._res.buffers.pop(id(buf), None)
        try:
            buf.release()
        except Exception as e:
            raise translate(e, f"{self._where}: freeing a buffer of {buf.nbytes} bytes") from e

    def upload(self, buffer: Any, data: np.ndarray) -> None:
        """Copy `data` into the start of `buffer`; returns when the copy is done, so `data` may change after."""
        buf = self._own(buffer)
        host = np.ascontiguousarray(data)
        if host.nbytes > buf.nbytes:
            raise InvalidArgument(f"{self._where}: {host.nbytes} bytes do not fit a buffer of {buf.nbytes} bytes")
        if host.nbytes == 0:
            return  # OpenCL rejects zero-byte copies
        try:
            cl.enqueue_copy(self._res.queue, buf.mem, host, is_blocking=True)
        except Exception as e:
            raise translate(e, f"{self._where}: uploading {host.nbytes} bytes") from e

    def download(self, buffer: Any, nbytes: int) -> np.ndarray:
        """The first `nbytes` of `buffer` as uint8, after every dispatch enqueued before (in-order queue)."""
        buf = self._own(buffer)
        nbytes = int(nbytes)
        if not 0 <= nbytes <= buf.nbytes:
            raise InvalidArgument(f"{self._where}: cannot read {nbytes} bytes from a buffer of {buf.nbytes} bytes")
        out = np.empty(nbytes, dtype=np.uint8)
        if nbytes:
            try:
                cl.enqueue_copy(self._res.queue, out, buf.mem, is_blocking=True)
            except Exception as e:
                raise translate(e, f"{self._where}: downloading {nbytes} bytes") from e
        return out

    # ---- kernels ----
    def load_kernel(self, kernel: Kernel) -> LoadedKernel:
        """Build `kernel.opencl` (or reload its cached binary) once per backend; KernelBuildError if refused."""
        res = self._live()
        key = kernel.key()
        loaded = res.kernels.get(key)
        if loaded is not None:
            res.kernel_uses.acquire(key)
            return loaded
        if kernel.opencl is None:
            raise KernelBuildError(
                f"kernel {kernel.name!r} has no OpenCL C source: the executable was compiled without OpenCL C "
                f"(Vulkan/SPIR-V only); compile the graph for target 'opencl' to run it on {self._where}",
                stage="opencl",
            )
        self._check_workgroup(kernel)
        self._check_extensions(kernel)
        program, built = build_program(res.context, self._found, self._cache, kernel.opencl, kernel.name)
        if built:
            self.builds += 1
        clk = self._create_kernel(program, kernel)
        loaded = LoadedKernel(clk, kernel.name, tuple(kernel.workgroup_size), kernel.num_buffers,
                              len(kernel.push_constants), res.token, program, tuple(kernel.access))
        res.kernels[key] = loaded
        res.kernel_uses.acquire(key)
        return loaded

    def unload_kernel(self, kernel: Kernel) -> None:
        """One load_kernel(kernel) caller is done with it. A program nothing uses stays for a later load among the
        last IDLE_KERNELS such; older ones are dropped (OpenCL keeps a kernel an enqueued command still needs)."""
        res = self._res
        if res is None or res.closed:
            return
        key = kernel.key()
        if key in res.kernels:
            for old in res.kernel_uses.release(key, IDLE_KERNELS):
                del res.kernels[old]

    def _check_workgroup(self, kernel: Kernel) -> None:
        """Refuse a workgroup the device cannot run before compiling, naming the sizes."""
        wg = tuple(int(w) for w in kernel.workgroup_size)
        limits = self.info.limits
        total = int(np.prod(wg))
        per_dim = limits["max_workgroup_size"]
        if len(wg) != 3 or min(wg) < 1 or any(w > m for w, m in zip(wg, per_dim)) or (
            total > limits["max_workgroup_invocations"]
        ):
            raise KernelBuildError(
                f"kernel {kernel.name!r}: workgroup size {wg} ({total} work-items) does not fit {self._where}: "
                f"at most {tuple(per_dim)} per dimension and {limits['max_workgroup_invocations']} in all; "
                f"recompile the graph for this device's profile",
                stage="opencl",
            )

    def _check_extensions(self, kernel: Kernel) -> None:
        """Refuse, before the driver's compiler does with a build log, a kernel whose OpenCL C needs subgroup
        functions (a package compiled ahead of time for a profile that assumed them) on a device without them."""
        have = set(self.info.limits.get("extensions") or ())
        if "#pragma OPENCL EXTENSION cl_khr_subgroups" in kernel.opencl and \
                not {"cl_khr_subgroups", "cl_intel_subgroups"} & have:
            raise KernelBuildError(
                f"kernel {kernel.name!r} uses OpenCL subgroup functions (cl_khr_subgroups), which {self._where} "
                f"does not list (nor cl_intel_subgroups); recompile the graph for this device (its profile then "
                f"keeps reductions in local memory)",
                stage="opencl",
            )

    def _create_kernel(self, program: Any, kernel: Kernel) -> Any:
        """The cl.Kernel for `kernel.name`, checked against the Kernel record (arguments, workgroup size)."""
        device = self._found.device
        try:
            clk = cl.Kernel(program, kernel.name)
            num_args = clk.num_args
            wg_info = cl.kernel_work_group_info
            kernel_max = int(clk.get_work_group_info(wg_info.WORK_GROUP_SIZE, device))
            required = tuple(int(w) for w in clk.get_work_group_info(wg_info.COMPILE_WORK_GROUP_SIZE, device))
        except Exception as e:
            if getattr(e, "code", None) == getattr(cl.status_code, "INVALID_KERNEL_NAME", None):
                try:
                    names = program.get_info(cl.program_info.KERNEL_NAMES)
                except Exception:
                    names = "?"
                raise KernelBuildError(
                    f"the OpenCL program has no kernel named {kernel.name!r} (it defines: {names}); the "
                    f"Kernel record and its source disagree", stage="opencl") from e
            raise translate(e, f"{self._where}: creating kernel {kernel.name!r}") from e
        expected = kernel.num_buffers + len(kernel.push_constants)
        if num_args != expected:
            raise KernelBuildError(
                f"kernel {kernel.name!r} takes {num_args} arguments but its record says {kernel.num_buffers} "
                f"buffers + {len(kernel.push_constants)} push constants {kernel.push_constants}", stage="opencl")
        wg = tuple(int(w) for w in kernel.workgroup_size)
        total = int(np.prod(wg))
        if total > kernel_max:
            # Per-kernel limit (registers, local memory) can be below the device's max_work_group_size.
            raise KernelBuildError(
                f"kernel {kernel.name!r}: workgroup size {wg} ({total} work-items) is above this kernel's limit "
                f"of {kernel_max} on {self._where}; recompile with a smaller workgroup", stage="opencl")
        if any(required) and required != wg:
            raise KernelBuildError(
                f"kernel {kernel.name!r} declares reqd_work_group_size{required} but its record says {wg}",
                stage="opencl")
        return clk

    # ---- running ----
    def _check_dispatch(self, n: int, loaded: Any, buffers: Sequence[Any], grid: Sequence[int],
                        push: Sequence[int]) -> tuple[int, int, int]:
        """Refuse a dispatch the driver would misrun, naming it; returns the grid as three ints."""
        res = self._live()
        if not isinstance(loaded, LoadedKernel) or loaded.owner != res.token:
            raise InvalidArgument(f"dispatch {n}: {loaded!r} was not loaded by this backend (use load_kernel)")
        if len(buffers) != loaded.num_buffers or len(push) != loaded.num_push_constants:
            raise InvalidArgument(
                f"dispatch {n} (kernel {loaded.name!r}): got {len(buffers)} buffers and {len(push)} push "
                f"constants, the kernel takes {loaded.num_buffers} and {loaded.num_push_constants}")
        grid = tuple(int(g) for g in grid)
        if len(grid) != 3 or min(grid) < 0:
            raise InvalidArgument(f"dispatch {n} (kernel {loaded.name!r}): grid {grid} must be 3 counts >= 0")
        for b in buffers:
            self._own(b)
        for v in push:
            int32(v)
        return grid  # type: ignore[return-value]

    def execute(self, dispatches: Sequence[tuple[Any, Sequence[Any], tuple[int, int, int], Sequence[int]]]) -> None:
        """Enqueue each (loaded kernel, buffers, grid, push constants) in order, then wait for all of them.
        Sets arguments on every call: `record` is the replayable form."""
        res = self._live()
        queue = res.queue
        dispatches = list(dispatches)
        with res.lock:  # kernel objects are shared: their arguments are set under the lock
            for n, (loaded, buffers, grid, push) in enumerate(dispatches):
                grid = self._check_dispatch(n, loaded, buffers, grid, push)
                if 0 in grid:
                    continue  # nothing to run, and OpenCL rejects a zero global size
                mems = [self._own(b).mem for b in buffers]
                values = [int32(v) for v in push]
                global_size = tuple(g * w for g, w in zip(grid, loaded.workgroup_size))
                try:
                    for i, mem in enumerate(mems):
                        loaded.kernel.set_arg(i, mem)
                    for j, value in enumerate(values):
                        loaded.kernel.set_arg(len(mems) + j, value)
                    # The driver copies the arguments at enqueue, so the next dispatch may reset them.
                    cl.enqueue_nd_range_kernel(queue, loaded.kernel, global_size, loaded.workgroup_size)
                except Exception as e:
                    self._drain(queue)
                    raise translate(e, f"{self._where}: dispatch {n} (kernel {loaded.name!r}, grid {grid}, "
                                       f"workgroup {loaded.workgroup_size}, global size {global_size})") from e
        try:
            queue.finish()
        except Exception as e:
            raise translate(e, f"{self._where}: running {len(dispatches)} dispatches") from e

    def record(self, steps: Sequence[Step], uploads: Sequence[tuple[Any, int]],
               downloads: Sequence[tuple[Any, int]], copies: Sequence[tuple[Any, Any, int]] = ()) -> OpenCLRecording:
        """Kernels with preset arguments (and a command buffer where the driver has one) for these buffers."""
        res = self._live()
        checked = [Step(s.kernel, tuple(self._own(b) for b in s.buffers),
                        self._check_dispatch(n, s.kernel, s.buffers, s.grid, s.push_constants), tuple(s.push_constants))
                   for n, s in enumerate(steps)]
        try:
            rec = OpenCLRecording(res.async_queue, self.out_of_order, self._cmdbuf, res.completer, checked,
                                  [(self._own(b), n) for b, n in uploads], [(self._own(b), n) for b, n in downloads],
                                  self._where, [(self._own(a), self._own(b), n) for a, b, n in copies])
        except Exception as e:
            if isinstance(e, cl.Error):
                raise translate(e, f"{self._where}: recording a plan of {len(steps)} dispatches") from e
            raise
        with res.lock:
            res.recordings.add(rec)
        return rec

    @staticmethod
    def _drain(queue: Any) -> None:
        """Let already-enqueued work finish so buffers can be freed safely after an error."""
        try:
            queue.finish()
        except Exception:
            pass  # the original error is the one worth reporting

    def close(self) -> None:
        """Release buffers, kernels, queue and context; safe to call more than once."""
        self._finalizer()
