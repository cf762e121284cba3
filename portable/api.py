"""The public entry points: compile, run, load."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np

from . import cache
from .devices import LiveDevice, open_device
from .errors import PackageError, PortableError, UnsupportedOp
from .executable import Executable
from .session import BoundExecutable

DEFAULT_DEVICE = "vulkan:0"


def graph_text(graph: Any) -> str:
    """MLIR text for anything `compile` takes: MLIR text, an MLIR module object, or a portable.Graph."""
    if isinstance(graph, str):
        return graph
    if hasattr(graph, "to_mlir"):
        return graph.to_mlir()
    if hasattr(graph, "operation"):  # an MLIR module from the bindings
        return str(graph)
    raise UnsupportedOp(f"cannot compile a {type(graph).__name__}: pass MLIR text, an MLIR module or a portable.Graph")


class CompiledGraph:
    """A graph compiled for one device: call it with numpy arrays, get a tuple of numpy arrays."""

    def __init__(self, exe: Executable, device: LiveDevice):
        self.executable = exe
        self.device = device
        self._bound: BoundExecutable | None = None
        self._lock = threading.Lock()

    @property
    def inputs(self):
        return self.executable.inputs

    @property
    def outputs(self):
        return [sig for _, sig in self.executable.outputs]

    def _bind(self) -> BoundExecutable:
        if self._bound is None:
            self._bound = BoundExecutable(self.executable, self.device.backend, self.device.pool)
        return self._bound

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        with self.device.lock, self._lock:
            return self._bind()(*inputs)

    def save(self, path: str | Path) -> None:
        self.executable.save(path)

    def close(self) -> None:
        with self._lock:
            if self._bound is not None:
                self._bound.release()
                self._bound = None

    def __del__(self):  # buffers go back to the device pool, never to the driver, so this is cheap and safe
        try:
            self.close()
        except Exception:
            pass


def compile(graph: Any, device: str = DEFAULT_DEVICE, *, targets: tuple[str, ...] | None = None) -> CompiledGraph:
    """Compile `graph` for `device` (kernels come from the on-disk cache when this graph was compiled before).

    `targets` defaults to the device's API; pass ("vulkan", "opencl") to carry kernels for both in a saved file.
    """
    live = open_device(device)
    text = graph_text(graph)
    targets = tuple(targets) if targets else (live.info.api,)
    k = cache.key(text, live.options, targets)
    exe = cache.lookup(k)
    if exe is None:
        from .compiler.pipeline import compile_module  # the only place the public API pulls in MLIR

        exe = compile_module(text, live.options, targets)
        cache.store(k, exe)
    return CompiledGraph(exe, live)


def run(graph: Any, *inputs: Any, device: str = DEFAULT_DEVICE) -> tuple[np.ndarray, ...]:
    """Compile (or fetch from cache) and run once."""
    return compile(graph, device=device)(*inputs)


def load(path: str | Path, device: str = DEFAULT_DEVICE) -> CompiledGraph:
    """Load a saved Executable and bind it to `device`; needs no MLIR."""
    exe = Executable.load(path)
    live = open_device(device)
    api = live.info.api
    missing = [k.name for k in exe.kernels if (k.spirv if api == "vulkan" else k.opencl) is None]
    if missing:
        raise PackageError(f"{path} has no {api} kernels (compiled for targets '{exe.target}'); "
                           f"recompile with targets including '{api}'")
    return CompiledGraph(exe, live)


__all__ = ["compile", "run", "load", "CompiledGraph", "PortableError"]
