"""VulkanBackend: portable's Backend contract on one Vulkan device.

upload/download/execute are synchronous (record, submit, wait), so a buffer handed back to the caller is never
in use by the GPU when the call returns. `record` makes a replayable plan whose runs are asynchronous
(timeline semaphore + completion thread). Safe to use from several threads.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..backend import Backend, DeviceInfo, KernelUses, Step
from ..completion import Completer
from ..errors import DeviceNotFound, DriverError, InvalidArgument, InvalidState, PortableError
from ..executable import Kernel
from ..memory import barriers, uses
from . import buffers, commands, features, pipelines, segments, transfers
from .buffers import Buffer, Staging
from .commands import DescriptorArena
from .device import Device
from .discovery import describe_devices, discovery_instance
from .instance import Instance, require_loader
from .pipeline_cache import PipelineCache
from .pipelines import LoadedKernel
from .replay import VulkanRecording

DEFAULT_TIMEOUT_S = 300.0  # one submission may run this long before it counts as a hung device


# Pipelines kept for reuse after the executables that loaded them are released (a recompiled or reloaded graph
# finds its pipelines built); beyond these, the oldest unused ones are destroyed.
IDLE_KERNELS = 64

class _Owned:
    """Everything a backend owns, released in dependency order. It holds no reference to the backend, so
    weakref.finalize can release it when a backend is dropped without close()."""

    def __init__(self) -> None:
        self.instance: Instance | None = None
        self.own_instance = False
        self.device: Device | None = None
        self.buffers: dict[int, Buffer] = {}
        self.kernels: dict[str, LoadedKernel] = {}
        self.kernel_uses = KernelUses()
        self.staging: Staging | None = None
        self.arena: DescriptorArena | None = None
        self.cache: PipelineCache | None = None
        self.completer: Completer | None = None
        self.recordings: weakref.WeakSet[VulkanRecording] = weakref.WeakSet()
        self.lock = threading.RLock()  # buffers/kernels dictionaries, descriptor arena

    def release(self) -> None:
        if self.completer is not None:
            self.completer.close()
        dev = self.device
        if dev is not None:
            try:
                # Even after a timeout: work still running must finish before its objects go. A really
                # lost device returns VK_ERROR_DEVICE_LOST here at once.
                dev.wait_idle()
            except PortableError:
                dev.lost = True  # go on destroying: a lost device still needs its objects freed
            for rec in list(self.recordings):
                rec._destroy()
            self.recordings = weakref.WeakSet()
            for lk in self.kernels.values():
                pipelines.destroy(dev, lk)
            self.kernels.clear()
            self.kernel_uses.clear()
            if self.arena is not None:
                self.arena.destroy()
            if self.staging is not None:
                self.staging.destroy()
            for buf in list(self.buffers.values()):
                buffers.free(dev, buf)
            self.buffers.clear()
            if self.cache is not None:
                if not dev.lost:
                    self.cache.save()
                self.cache.destroy()
            dev.destroy()
            self.device = None
        if self.own_instance and self.instance is not None:
            self.instance.close()
        self.instance = None


class VulkanBackend(Backend):
    """One Vulkan device ("vulkan:<index>"). validation=True enables the Khronos validation layer and
    collects its warnings and errors in `validation_messages`. transfer_queue: "auto" (a dedicated transfer
    queue where the device has a transfer-only family), "off" (one queue), "shared" (the transfer lane on the
    compute family: the multi-queue recording on single-family drivers, for tests). opt_in: extra features for
    tools, by name (runtime_vk.features.OPT_IN, e.g. "pipelineExecutableInfo"); DeviceNotFound if one is missing."""

    def __init__(self, index: int, validation: bool = False, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 use_timeline: bool = True, transfer_queue: str = "auto", opt_in: Sequence[str] = (),
                 gpu_assisted: bool = False):
        require_loader()
        self._own = _Owned()
        try:
            self._open(index, validation, timeout_s, use_timeline, transfer_queue, tuple(opt_in), gpu_assisted)
        except BaseException:
            self._own.release()
            raise
        # Created after the instance's own finalizer, so at interpreter exit (finalizers run newest first)
        # the device goes before the instance it was made from.
        self._finalizer = weakref.finalize(self, self._own.release)

    def _open(self, index: int, validation: bool, timeout_s: float, use_timeline: bool, transfer_queue: str,
              opt_in: tuple[str, ...], gpu_assisted: bool) -> None:
        own = self._own
        if validation:  # a private instance: the layer is per instance, and so is the message sink
            own.instance, own.own_instance = Instance(validation_enabled=True, gpu_assisted=gpu_assisted), True
        else:
            own.instance = discovery_instance()
        self.validation_messages: list[str] = own.instance.validation_messages if validation else []
        devices, reasons = own.instance.compute_devices()
        if not 0 <= index < len(devices):
            listing = describe_devices([d.info for d in devices])
            extra = "".join(f"\n  ({r})" for r in reasons)
            raise DeviceNotFound(
                f"vulkan:{index}: no such device; {len(devices)} Vulkan device(s) with a compute queue "
                f"exist:\n{listing}{extra}"
            )
        pd = devices[index]
        self.info: DeviceInfo = pd.info
        if own.instance.gpu_assisted and pd.features.get(features.GPU_AV_FEATURE) \
                and features.GPU_AV_FEATURE not in opt_in:
            opt_in += (features.GPU_AV_FEATURE,)  # the layer checks buffer bounds only with it (validation.py)
        own.device = Device(pd, timeout_s, use_timeline, transfer_queue, opt_in)
        own.completer = Completer(own.device.name)
        own.staging = Staging(own.device)
        own.arena = DescriptorArena(own.device)
        own.cache = PipelineCache(own.device.handle, pd)

    # ---- introspection -------------------------------------------------------------------------------
    @property
    def queue_family(self) -> tuple[int, str]:
        """(queue family index in use, why it was chosen)."""
        dev = self._device()
        return dev.family, dev.family_reason

    @property
    def transfer_queue_family(self) -> tuple[int | None, str]:
        """(queue family of the transfer lane or None when copies run on the compute queue, why)."""
        dev = self._device()
        return (dev.transfer.family if dev.transfer is not None else None), dev.transfer_reason

    @property
    def pipeline_cache_path(self) -> str:
        return str(self._own.cache.path) if self._own.cache else ""

    @property
    def pipeline_cache_loaded_bytes(self) -> int:
        """Bytes of driver cache data loaded from disk at start (0: nothing reused)."""
        return self._own.cache.loaded_bytes if self._own.cache else 0

    def __repr__(self) -> str:
        state = "closed" if not self._finalizer.alive else "open"
        return f"<VulkanBackend {self.info.uri if hasattr(self, 'info') else '?'} {state}>"

    # ---- helpers ---------------------------------------------------------------------------------------
    def _device(self) -> Device:
        dev = self._own.device
        if dev is None:
            raise InvalidState("this VulkanBackend is closed; open the device again (portable.devices.open_device)")
        dev.check_usable()
        return dev

    def _buffer(self, buf: Any) -> Buffer:
        dev = self._device()
        if not isinstance(buf, Buffer) or buf.owner != dev.serial:
            raise InvalidArgument(f"{buf!r} is not a buffer of {dev.name}; pass buffers this backend allocated")
        if buf.freed or (buf.parent is not None and buf.parent.freed):
            raise InvalidArgument(f"{buf!r} was freed; allocate a new buffer")
        return buf

    # ---- Backend contract --------------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Buffer:
        """A device-local storage buffer of `nbytes`; OutOfDeviceMemory names the size and the limit."""
        buf = buffers.allocate(self._device(), int(nbytes))
        with self._own.lock:
            self._own.buffers[id(buf)] = buf
        return buf

    def allocate_block(self, nbytes: int) -> Buffer:
        """A block for the pool: may exceed maxStorageBufferRange (only views of it are bound)."""
        buf = buffers.allocate(self._device(), int(nbytes), bindable=False)
        with self._own.lock:
            self._own.buffers[id(buf)] = buf
        return buf

    def view(self, block: Any, offset: int, nbytes: int) -> Buffer:
        return buffers.view(self._buffer(block), int(offset), int(nbytes))

    def buffer_limits(self) -> dict[str, int]:
        lim = self.info.limits
        align = max(int(lim.get(k) or 1) for k in ("min_storage_buffer_offset_alignment",
                                                   "min_texel_buffer_offset_alignment"))
        return {"alignment": max(align, 16),
                "max_block": int(lim["max_buffer_bytes"]), "max_range": int(lim["max_storage_buffer_range"])}

    def free(self, buffer: Any) -> None:
        """Release `buffer` now (idempotent). close() freed whatever was left, so freeing a buffer (or a pool's
        view of a block) after it does nothing: a pool's finalizer may run after the backend closed at exit."""
        if isinstance(buffer, Buffer) and (buffer.freed or self._own.device is None):
            return
        buf = self._buffer(buffer)
        self._own.device.transfer_owned.forget(buf)
        buffers.free(self._own.device, buf)
        with self._own.lock:
            self._own.buffers.pop(id(buf), None)

    def upload(self, buffer: Any, data: np.ndarray) -> None:
        """Copy `data` to the start of `buffer` through the staging buffer, in chunks if large."""
        buf = self._buffer(buffer)
        src = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if src.nbytes > buf.nbytes:
            raise InvalidArgument(f"{src.nbytes} bytes do not fit {buf!r}; allocate a larger buffer or upload less")
        if not src.nbytes:
            return
        dev, staging = self._own.device, self._own.staging
        with dev.sync_lock:  # the staging buffer is shared by every synchronous transfer
            segments.reclaim(dev, [buf])  # a recording's output: back to the compute family first
            transfers.upload(dev, staging, buf, src)

    def download(self, buffer: Any, nbytes: int) -> np.ndarray:
        """The first `nbytes` of `buffer`, as a new uint8 array."""
        buf = self._buffer(buffer)
        nbytes = int(nbytes)
        if not 0 <= nbytes <= buf.nbytes:
            raise InvalidArgument(f"cannot read {nbytes} bytes from {buf!r}; read at most its size")
        out = np.empty(nbytes, dtype=np.uint8)
        if not nbytes:
            return out
        dev, staging = self._own.device, self._own.staging
        with dev.sync_lock:
            segments.reclaim(dev, [buf])
            transfers.download(dev, staging, buf, out)
        return out

    def load_kernel(self, kernel: Kernel) -> LoadedKernel:
        """The pipeline for `kernel`, built once per backend (and through the on-disk pipeline cache) and kept
        while a caller uses it (unload_kernel), then among the last IDLE_KERNELS unused ones."""
        dev = self._device()
        key = kernel.key()
        own = self._own
        with own.lock:
            lk = own.kernels.get(key)
            if lk is None:
                lk = pipelines.build(kernel, dev, own.cache)
                own.kernels[key] = lk
            own.kernel_uses.acquire(key)
        return lk

    def unload_kernel(self, kernel: Kernel) -> None:
        """One load_kernel(kernel) caller is done with it (its runs finished). A pipeline nothing uses stays for a
        later load among the last IDLE_KERNELS such; older ones are destroyed: a process compiling and running
        many distinct graphs would otherwise keep every pipeline (lavapipe: ~0.7 MB each, JIT code) until exit."""
        key = kernel.key()
        own = self._own
        with own.lock:
            if key in own.kernels:
                for old in own.kernel_uses.release(key, IDLE_KERNELS):
                    pipelines.destroy(self._device(), own.kernels.pop(old))

    def _check_dispatch(self, n: int, lk: Any, bufs: Sequence[Any], grid: Sequence[int],
                        push: Sequence[int]) -> tuple[int, int, int]:
        """Refuse a dispatch the driver would misrun, naming it; returns the grid as three ints."""
        dev = self._device()
        max_count = self.info.limits["max_workgroup_count"]
        if not isinstance(lk, LoadedKernel) or lk.owner != dev.serial or lk.pipeline is None:
            raise InvalidArgument(f"dispatch {n}: {lk!r} is not a kernel loaded by this backend (use load_kernel)")
        k = lk.kernel
        if len(bufs) != k.num_buffers:
            raise InvalidArgument(f"dispatch {n} ({k.name}): {len(bufs)} buffers given, the kernel takes "
                             f"{k.num_buffers}")
        grid = tuple(int(g) for g in grid)
        if len(grid) != 3 or min(grid) < 0:
            raise InvalidArgument(f"dispatch {n} ({k.name}): grid {grid} must be three counts >= 0")
        if any(g > m for g, m in zip(grid, max_count, strict=True)):
            raise DriverError(
                f"dispatch {n} ({k.name}): grid {grid} exceeds maxComputeWorkGroupCount {max_count} of "
                f"{dev.name}; the plan must split this dispatch (compile for this device's profile)")
        if len(push) != len(k.push_constants):
            raise InvalidArgument(f"dispatch {n} ({k.name}): {len(push)} push constants given, the kernel "
                             f"takes {len(k.push_constants)} {k.push_constants}")
        if any(not -(1 << 31) <= int(v) < (1 << 32) for v in push):
            raise InvalidArgument(f"dispatch {n} ({k.name}): push constants {list(push)} do not fit 32 bits; pass "
                                  f"values in [-2**31, 2**32)")
        for b in bufs:
            self._buffer(b)
        return grid  # type: ignore[return-value]

    def execute(self, dispatches: Sequence[tuple[Any, Sequence[Any], tuple[int, int, int], Sequence[int]]]) -> None:
        """Record every dispatch into one command buffer (a barrier only before a dispatch that depends on an
        earlier one), submit, wait. Re-records every call: `record` is the replayable form."""
        dev = self._device()
        bound: list[tuple[LoadedKernel, list[Buffer]]] = []
        recorded = []
        for n, (lk, bufs, grid, push) in enumerate(dispatches):
            grid = self._check_dispatch(n, lk, bufs, grid, push)
            bound.append((lk, [self._buffer(b) for b in bufs]))
            recorded.append((lk, grid, commands.pack_push_constants(push) if push else None))
        if not recorded:
            return
        before = barriers([uses([b.region for b in bufs], lk.kernel.access) for lk, bufs in bound])
        layouts = [lk.set_layout for lk, _ in bound if lk.set_layout is not None]
        with dev.sync_lock:  # one descriptor arena, reset per execute
            segments.reclaim(dev, [b for _, bufs in bound for b in bufs])
            sets = self._own.arena.allocate(layouts, sum(len(b) for _, b in bound))
            commands.write_sets(dev, bound, sets)
            dev.submit(lambda cmd: commands.record_dispatches(cmd, recorded, sets, before),
                       f"{len(recorded)} dispatch(es)")

    def record(self, steps: Sequence[Step], uploads: Sequence[tuple[Any, int]],
               downloads: Sequence[tuple[Any, int]], copies: Sequence[tuple[Any, Any, int]] = ()) -> VulkanRecording:
        """The plan recorded once into a command buffer for these buffers, replayed by submit()."""
        dev = self._device()
        for n, s in enumerate(steps):
            self._check_dispatch(n, s.kernel, s.buffers, s.grid, s.push_constants)
        checked = [Step(s.kernel, tuple(self._buffer(b) for b in s.buffers), s.grid, tuple(s.push_constants))
                   for s in steps]
        rec = VulkanRecording(dev, self._own.completer, checked, [(self._buffer(b), n) for b, n in uploads],
                              [(self._buffer(b), n) for b, n in downloads],
                              [(self._buffer(a), self._buffer(b), n) for a, b, n in copies])
        with self._own.lock:
            self._own.recordings.add(rec)
        return rec

    def close(self) -> None:
        """Wait for the device, destroy everything in order, save the pipeline cache. Idempotent."""
        self._finalizer()
