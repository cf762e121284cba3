"""cl_khr_command_buffer through ctypes (pyopencl does not wrap it): record NDRange commands once with
sync-point dependencies, finalize, and enqueue the whole plan with one call.

Only the entry points whose signatures are the same in every 0.9.x revision of the extension are used.
Anything missing (extension, library, entry point) makes `CommandBufferApi.load` return None and the
runtime enqueues kernels with preset arguments instead.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

from .clapi import cl, get_device_info, opencl_library

EXTENSION = "cl_khr_command_buffer"
_CAPABILITIES = 0x12A9  # CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR
CAP_OUT_OF_ORDER = 1 << 3  # CL_COMMAND_BUFFER_CAPABILITY_OUT_OF_ORDER_KHR
CAP_SIMULTANEOUS_USE = 1 << 2  # CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR
_FLAGS, _SIMULTANEOUS_USE = 0x1293, 1 << 0  # CL_COMMAND_BUFFER_FLAGS_KHR, CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR
_INVALID_OPERATION = -59
# How long an enqueue retries a buffer the driver still holds pending after its run's event completed.
PENDING_RETRY_S = 1.0

_vp, _u32, _i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int32
_size_p = ctypes.POINTER(ctypes.c_size_t)


class CommandBufferError(RuntimeError):
    """A command-buffer call returned a non-zero status; `code` is the CL status."""

    def __init__(self, what: str, code: int):
        super().__init__(f"{what} returned OpenCL status {code}")
        self.code = code


def _check(code: int, what: str) -> None:
    if code:
        raise CommandBufferError(what, code)


class CommandBufferApi:
    """The extension's entry points for one platform, plus the device's command-buffer capabilities."""

    @classmethod
    def load(cls, platform: Any, device: Any) -> CommandBufferApi | None:
        if cl is None or EXTENSION not in (getattr(device, "extensions", "") or "").split():
            return None
        try:
            lib = opencl_library()
            if lib is None:
                return None
            return cls(lib, platform, device)
        except (OSError, AttributeError, CommandBufferError):
            return None

    def __init__(self, lib: ctypes.CDLL, platform: Any, device: Any):
        get = lib.clGetExtensionFunctionAddressForPlatform
        get.restype, get.argtypes = _vp, [_vp, ctypes.c_char_p]

        def fn(name: str, *args: Any) -> Any:
            addr = get(ctypes.c_void_p(platform.int_ptr), name.encode())
            if not addr:
                raise AttributeError(f"{name} is not exported by the driver")
            return ctypes.CFUNCTYPE(_i32 if name != "clCreateCommandBufferKHR" else _vp, *args)(addr)

        self.create = fn("clCreateCommandBufferKHR", _u32, ctypes.POINTER(_vp), _vp, ctypes.POINTER(_i32))
        self.ndrange = fn("clCommandNDRangeKernelKHR", _vp, _vp, _vp, _vp, _u32, _vp, _size_p, _size_p, _u32,
                          ctypes.POINTER(_u32), ctypes.POINTER(_u32), _vp)
        self.finalize = fn("clFinalizeCommandBufferKHR", _vp)
        self.enqueue = fn("clEnqueueCommandBufferKHR", _u32, _vp, _vp, _u32, ctypes.POINTER(_vp),
                          ctypes.POINTER(_vp))
        self.release = fn("clReleaseCommandBufferKHR", _vp)
        info = get_device_info()
        caps = ctypes.c_uint64(0)
        _check(info(ctypes.c_void_p(device.int_ptr), _CAPABILITIES, 8, ctypes.byref(caps), None),
               "clGetDeviceInfo(CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR)")
        self.capabilities = caps.value


class CommandBuffer:
    """One finalized command buffer of NDRange commands on `queue`; enqueue() runs it (one run at a time).

    A driver may mark the buffer executable again only in a callback of its run's completion event, after a wait
    on that event has returned (PoCL 3.1 does), so the next enqueue can find it still pending and fail with
    CL_INVALID_OPERATION (seen once in ~250k runs on a loaded 2-core host). The caller already runs one at a time,
    so the buffer is created for simultaneous use where the device allows it, and otherwise an enqueue that finds
    it pending retries for up to PENDING_RETRY_S."""

    def __init__(self, api: CommandBufferApi, queue: Any):
        self._api = api
        self._queue = queue
        err = _i32(0)
        queues = (_vp * 1)(queue.int_ptr)
        self._simultaneous = bool(api.capabilities & CAP_SIMULTANEOUS_USE)
        self._props = (ctypes.c_uint64 * 3)(_FLAGS, _SIMULTANEOUS_USE, 0) if self._simultaneous else None
        self.handle = api.create(1, queues, ctypes.cast(self._props, _vp) if self._props else None,
                                 ctypes.byref(err))
        _check(err.value, "clCreateCommandBufferKHR")
        self._keep: list[Any] = []  # kernels and argument arrays the recorded commands refer to

    def ndrange(self, kernel: Any, global_size: Sequence[int], local_size: Sequence[int],
                wait: Sequence[int]) -> int:
        """Record one kernel launch after the commands whose sync points are in `wait`; its sync point."""
        dims = len(global_size)
        gs, ls = (ctypes.c_size_t * dims)(*global_size), (ctypes.c_size_t * dims)(*local_size)
        wl = (_u32 * len(wait))(*wait) if wait else None
        point = _u32(0)
        self._keep += [kernel, gs, ls, wl]
        _check(self._api.ndrange(self.handle, None, None, kernel.int_ptr, dims, None, gs, ls, len(wait), wl,
                                 ctypes.byref(point), None), f"clCommandNDRangeKernelKHR ({kernel.function_name})")
        return point.value

    def finalize(self) -> None:
        _check(self._api.finalize(self.handle), "clFinalizeCommandBufferKHR")

    def enqueue(self, wait_for: Sequence[Any]) -> Any:
        """Run the recorded commands after the events `wait_for`; the pyopencl Event of the run."""
        events = (_vp * len(wait_for))(*(e.int_ptr for e in wait_for)) if wait_for else None
        out = _vp(0)
        deadline = None
        while True:
            code = self._api.enqueue(0, None, self.handle, len(wait_for), events, ctypes.byref(out))
            if code != _INVALID_OPERATION or self._simultaneous:
                break
            deadline = deadline or time.monotonic() + PENDING_RETRY_S
            if time.monotonic() > deadline:
                break
            time.sleep(0)
        _check(code, "clEnqueueCommandBufferKHR")
        return cl.Event.from_int_ptr(out.value, retain=False)

    def close(self) -> None:
        if self.handle:
            self._api.release(self.handle)
            self.handle = None
            self._keep.clear()
