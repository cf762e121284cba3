"""Runs an Executable's plan on one live device: buffers bound once, constants uploaded once."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .backend import Backend
from .errors import ShapeMismatch
from .executable import Executable
from .memory import BufferPool, plan_buffers


class BoundExecutable:
    """An Executable whose kernels are loaded and buffers allocated on `backend`; call it with numpy arrays."""

    def __init__(self, exe: Executable, backend: Backend, pool: BufferPool):
        self.exe = exe
        self.backend = backend
        self.pool = pool
        loaded = [backend.load_kernel(k) for k in exe.kernels]
        temps = {s.id: s.nbytes for s in exe.slots if s.kind == "temp"}
        assignment, sizes = plan_buffers(temps, [d.slots for d in exe.dispatches])
        self._owned: list[Any] = []
        shared = [self._acquire(n) for n in sizes]
        self.buffers: dict[int, Any] = {}
        for s in exe.slots:
            self.buffers[s.id] = shared[assignment[s.id]] if s.kind == "temp" else self._acquire(s.nbytes)
        for sid, data in exe.constants.items():
            backend.upload(self.buffers[sid], np.ascontiguousarray(data))
        self.plan = [
            (loaded[d.kernel], [self.buffers[s] for s in d.slots], d.grid, d.push_constants) for d in exe.dispatches
        ]
        self.device_bytes = sum(sizes) + sum(s.nbytes for s in exe.slots if s.kind != "temp")

    def _acquire(self, nbytes: int) -> Any:
        buf = self.pool.acquire(nbytes)
        self._owned.append(buf)
        return buf

    def check_inputs(self, arrays: Sequence[Any]) -> list[np.ndarray]:
        sigs = self.exe.inputs
        if len(arrays) != len(sigs):
            raise ShapeMismatch(f"the graph takes {len(sigs)} input(s) "
                                f"({', '.join(f'{s.shape} {s.dtype}' for s in sigs)}), got {len(arrays)}")
        out = []
        for i, (a, sig) in enumerate(zip(arrays, sigs)):
            arr = np.asarray(a)
            if arr.dtype != np.dtype(sig.dtype):
                raise ShapeMismatch(f"input {i}: expected dtype {sig.dtype}, got {arr.dtype}; "
                                    f"convert it with .astype(np.{sig.dtype})")
            if tuple(arr.shape) != tuple(sig.shape):
                raise ShapeMismatch(f"input {i}: expected shape {tuple(sig.shape)}, got {tuple(arr.shape)}")
            out.append(np.ascontiguousarray(arr))
        return out

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        inputs = self.check_inputs(arrays)
        for sid, arr in zip(self.exe.input_slots, inputs):
            if arr.nbytes:
                self.backend.upload(self.buffers[sid], arr)
        self.backend.execute(self.plan)
        results = []
        for sid, sig in self.exe.outputs:
            raw = self.backend.download(self.buffers[sid], sig.nbytes)
            results.append(np.frombuffer(raw.tobytes(), dtype=sig.dtype).reshape(sig.shape).copy())
        return tuple(results)

    def release(self) -> None:
        for b in self._owned:
            self.pool.release(b)
        self._owned.clear()
