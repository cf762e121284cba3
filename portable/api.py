"""The public entry points: compile, run, load."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from . import cache
from .devices import LiveDevice, open_device
from .errors import PackageError, PortableError, ShapeMismatch, UnpinnedPackage, UnsupportedOp
from .executable import Executable
from .progress import Progress
from .session import DEFAULT_IN_FLIGHT, BoundExecutable

DEFAULT_DEVICE = "vulkan:0"
MAX_SHAPE_VARIANTS = 8  # shape sets of one ONNX model kept compiled and bound in memory (least recent dropped)


def graph_text(graph: Any, input_shapes: Any = None) -> str:
    """MLIR text for anything `compile` takes: MLIR text, an MLIR module object, a portable.Graph, or an ONNX
    model (a path ending in .onnx, serialized bytes, an onnx.ModelProto) with its dynamic dims pinned to
    `input_shapes` (by input name or position; dims not given take the model's sizes, else 1)."""
    from .frontend.onnx_import import is_onnx  # no onnx or MLIR import until a model is really given

    if is_onnx(graph):
        from .frontend.onnx_source import OnnxSource

        src = OnnxSource(graph)
        given = src.normalize(input_shapes)
        return src.mlir(src.resolve(given), given)
    if input_shapes is not None:
        raise ShapeMismatch("input_shapes applies to ONNX models only: MLIR text and Graphs have static shapes")
    if isinstance(graph, str):
        return graph
    if hasattr(graph, "to_mlir"):
        return graph.to_mlir()
    if hasattr(graph, "operation"):  # an MLIR module from the bindings
        return str(graph)
    raise UnsupportedOp(f"cannot compile a {type(graph).__name__}: pass MLIR text, an MLIR module or a portable.Graph")


def _release(cell: list) -> None:
    """Finalizer of a CompiledGraph: its buffers go back to the device pool (cheap, never to the driver)."""
    bound, cell[0] = cell[0], None
    if bound is not None:
        bound.release()


class CompiledGraph:
    """A graph compiled for one device: call it with numpy arrays, get a tuple of numpy arrays.

    `submit` returns a Future and `run_async` an awaitable; up to `max_in_flight` runs overlap (uploads,
    dispatches and downloads of successive runs). Safe to call from several threads.
    """

    def __init__(self, exe: Executable, device: LiveDevice, max_in_flight: int = DEFAULT_IN_FLIGHT,
                 specialize: Callable[[dict], CompiledGraph] | None = None):
        self.executable = exe
        self.device = device
        self.max_in_flight = max_in_flight
        self.package_target = ""  # "api:profile[limits]" chosen from a .ptpk by load()
        self.trusted_as = ""  # why load() ran this file's kernels: pinned, signed by <key>, built here, trust=any
        self._cell: list[BoundExecutable | None] = [None]
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _release, self._cell)
        # An ONNX model compiles per input shape set: a call with other shapes runs (and keeps) the variant
        # compiled for them. `specialize` maps the call's arrays to that variant.
        self._specialize = specialize
        self._variants: OrderedDict[tuple, CompiledGraph] = OrderedDict()
        self._shapes = tuple(tuple(sig.shape) for sig in exe.inputs)

    @property
    def inputs(self):
        return self.executable.inputs

    @property
    def outputs(self):
        return [sig for _, sig in self.executable.outputs]

    def _bind(self) -> BoundExecutable:
        with self._lock:
            if self._cell[0] is None:
                if not self._finalizer.alive:
                    raise PortableError("this compiled graph is closed; compile or load it again")
                self._cell[0] = BoundExecutable(self.executable, self.device.backend, self.device.pool,
                                                self.max_in_flight)
            return self._cell[0]

    def for_inputs(self, *inputs: Any) -> CompiledGraph:
        """The graph that runs these inputs: this one, or for an ONNX model called with other shapes than it was
        compiled for, the variant compiled for theirs (from the compile cache when it was compiled before)."""
        if self._specialize is None or len(inputs) != len(self.executable.inputs):
            return self
        shapes = tuple(tuple(np.shape(a)) for a in inputs)
        if shapes == self._shapes:
            return self
        with self._lock:
            g = self._variants.get(shapes)
            if g is not None:
                self._variants.move_to_end(shapes)
                return g
        g = self._specialize(dict(enumerate(shapes)))
        with self._lock:
            self._variants[shapes] = g
            while len(self._variants) > MAX_SHAPE_VARIANTS:
                self._variants.popitem(last=False)[1].close()
        return g

    def submit(self, *inputs: Any) -> Future:
        """Start a run and return at once; the Future resolves to the tuple of outputs."""
        return self.for_inputs(*inputs)._bind().submit(*inputs)

    async def run_async(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        """`await exe.run_async(a, b)`: the run does not block the event loop."""
        return await asyncio.wrap_future(self.submit(*inputs))

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        return self.for_inputs(*inputs)._bind().run(*inputs)

    @property
    def peak_device_bytes(self) -> int:
        """The most device memory this graph has held at once (constants + buffers of every run in flight)."""
        bound = self._cell[0]
        return bound.peak_device_bytes if bound is not None else 0

    @property
    def run_device_bytes(self) -> int:
        """Device memory one run needs: constants, inputs, outputs and the planned intermediates."""
        return self._bind().device_bytes

    def save(self, path: str | Path) -> None:
        self.executable.save(path)

    def with_state(self, carry: dict[int, int]) -> StatefulGraph:
        """This graph with outputs fed back to inputs on the device, {output index: input index}: e.g. a decoder
        step's updated KV cache becomes the next step's cache without a round trip through the host."""
        return StatefulGraph(self, carry)

    def close(self) -> None:
        """Wait for runs in flight and give the buffers back to the device pool (idempotent)."""
        with self._lock:
            variants = list(self._variants.values())
            self._variants.clear()
        for g in variants:
            g.close()
        self._finalizer()

    def __enter__(self) -> CompiledGraph:  # noqa: PYI034 - a plain class, never subclassed for this
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StatefulGraph:
    """A compiled graph run step after step with state kept on the device (see CompiledGraph.with_state).

    Call it with the inputs that are not carried; it returns the outputs that are not carried. The state
    starts at zero; `set_state` / `get_state` move it between host and device ({input index: array}).
    Runs are sequential (each needs the last one's state). Holds its own copy of the graph's constants.
    """

    def __init__(self, graph: CompiledGraph, carry: dict[int, int]):
        self.graph = graph
        bound = BoundExecutable(graph.executable, graph.device.backend, graph.device.pool, carry=carry)
        self._cell: list[BoundExecutable | None] = [bound]
        self._finalizer = weakref.finalize(self, _release, self._cell)

    def _bound(self) -> BoundExecutable:
        bound = self._cell[0]
        if bound is None:
            raise PortableError("this stateful graph is closed; call with_state() again")
        return bound

    @property
    def carry(self) -> dict[int, int]:
        return dict(self._bound().carry)

    def submit(self, *inputs: Any) -> Future:
        return self._bound().submit(*inputs)

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        return self._bound().run(*inputs)

    def run_steps(self, n: int) -> list[tuple[np.ndarray, ...]]:
        """`n` runs as one submission when every input is carried: the outputs of each (BoundExecutable.run_steps)."""
        return self._bound().run_steps(n)

    def prepare_steps(self, n: int) -> None:
        """Record run_steps(n) ahead of its first call (BoundExecutable.prepare_steps)."""
        self._bound().prepare_steps(n)

    def set_state(self, arrays: dict[int, Any]) -> None:
        self._bound().set_state(arrays)

    def get_state(self) -> dict[int, np.ndarray]:
        return self._bound().get_state()

    def reset(self) -> None:
        """State back to zero."""
        b = self._bound()
        b.set_state({i: np.zeros(b.exe.inputs[i].shape, b.exe.inputs[i].dtype) for i in b.carry.values()})

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> StatefulGraph:  # noqa: PYI034 - a plain class, never subclassed for this
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _compiled(key_text: str, text: Callable[[], str], live: LiveDevice, targets: tuple[str, ...]) -> Executable:
    """The Executable for this graph from the on-disk cache, else compiled (`text()` is called only then)."""
    k = cache.key(key_text, live.options, targets)
    exe = cache.lookup(k)
    if exe is None:
        from .compiler.pipeline import compile_module  # the only place the public API pulls in MLIR

        progress = Progress(f"compiling for {live.info.uri}")
        progress.step("import")
        exe = compile_module(text(), live.options, targets, progress)
        progress.finish()
        cache.store(k, exe)
    return exe


def _compile_onnx(src: Any, given: dict, live: LiveDevice, targets: tuple[str, ...],
                  max_in_flight: int) -> CompiledGraph:
    """An ONNX model compiled for the shapes `given` (by name; the rest as resolve_shapes says); the result
    compiles other shape sets when called with them."""
    resolved = src.resolve(given)
    exe = _compiled(src.cache_text(resolved), lambda: src.mlir(resolved, given), live, targets)

    def specialize(by_position: dict) -> CompiledGraph:
        return _compile_onnx(src, src.normalize(by_position), live, targets, max_in_flight)

    return CompiledGraph(exe, live, max_in_flight, specialize=specialize)


def compile(graph: Any, device: str = DEFAULT_DEVICE, *, targets: tuple[str, ...] | None = None,
            max_in_flight: int = DEFAULT_IN_FLIGHT, input_shapes: Any = None,
            input_values: dict[str, Any] | None = None) -> CompiledGraph:
    """Compile `graph` for `device` (kernels come from the on-disk cache when this graph was compiled before).

    `targets` defaults to the device's API; pass ("vulkan", "opencl") to carry kernels for both in a saved file.
    ONNX models compile per input shape set: `input_shapes` ({name or position: shape}, or a list of shapes in
    input order) pins the dynamic dims ahead of time (dims not given take the model's sizes, else 1); calling the
    result with other shapes compiles (or fetches from the cache) the variant for those. `input_values`
    ({name: array}) folds inputs whose values decide shapes (a Reshape's target, TopK's k) into constants.
    """
    live = open_device(device)
    targets = tuple(targets) if targets else (live.info.api,)
    from .frontend.onnx_import import is_onnx  # no onnx or MLIR import until a model is really given

    if is_onnx(graph):
        from .frontend.onnx_source import OnnxSource

        src = OnnxSource(graph, input_values)
        return _compile_onnx(src, src.normalize(input_shapes), live, targets, max_in_flight)
    if input_values is not None:
        raise ShapeMismatch("input_values applies to ONNX models only: MLIR text and Graphs have static shapes")
    text = graph_text(graph, input_shapes)
    return CompiledGraph(_compiled(text, lambda: text, live, targets), live, max_in_flight)


def run(graph: Any, *inputs: Any, device: str = DEFAULT_DEVICE) -> tuple[np.ndarray, ...]:
    """Compile (or fetch from cache) and run once; an ONNX model is compiled for the shapes of `inputs`."""
    from .frontend.onnx_import import is_onnx

    if is_onnx(graph):
        return compile(graph, device=device, input_shapes=[np.shape(a) for a in inputs])(*inputs)
    return compile(graph, device=device)(*inputs)


def load(path: str | Path, device: str = DEFAULT_DEVICE, *, max_in_flight: int = DEFAULT_IN_FLIGHT,
         expect_hash: str | None = None, trusted_keys: Any = None, trust: str = "verified") -> CompiledGraph:
    """Load a package (.ptpk: the best target for `device` is picked) or a saved Executable and bind it to
    `device`; needs no MLIR.

    Trust model (portable.trust): a package's content hash detects damage, not tampering, and the kernels run in
    this process, so a file runs only if the caller vouches for it: `expect_hash` pins it (the hash `portable
    compile` printed; for a saved Executable, the sha256 of its file), a signature by one of `trusted_keys` (public
    keys, or files of them, from `portable keygen`; PORTABLE_TRUSTED_KEYS adds more) signs it, this user's portable
    wrote it, or `trust="any"` says the caller checked its origin otherwise. Anything else is UntrustedPackage.
    Every plan is also checked against its kernels and the device's limits, and every entry is size-bounded."""
    from . import archive
    from . import trust as trust_rules
    from .package import Package, is_package

    if trust not in trust_rules.TRUST_MODES:  # before any work, so a typo is not a late surprise
        trust_rules.require(str(path), "", pinned=False, signatures=None, keys=None, trust=trust)
    live = open_device(device)
    api = live.info.api
    if is_package(path):
        pkg = Package(path, expect_hash=expect_hash)
        why = trust_rules.require(str(path), pkg.content_hash, pinned=expect_hash is not None,
                                  signatures=pkg.signatures, keys=trusted_keys, trust=trust)
        try:
            device_profile = live.profile["name"]
        except (RuntimeError, OSError, PortableError):
            device_profile = None  # no profiles on this host (device_profiles/ removed): the package's rules decide
        target = pkg.select(live.info, device_profile)
        compiled = CompiledGraph(pkg.executable(target), live, max_in_flight)
        compiled.package_target = str(target)
        compiled.trusted_as = why
        return compiled
    path = archive.as_path(path)
    if not path.is_file():
        raise PackageError(f"{path}: no such file")
    digest = trust_rules.file_digest(path)
    if expect_hash is not None and digest != expect_hash:
        raise UnpinnedPackage(f"{path}: sha256 {digest} is not the pinned {str(expect_hash)[:64]!r}; this is not the "
                              f"file you pinned (saved again or replaced): check where it came from, then pin its new "
                              f"hash")
    why = trust_rules.require(str(path), digest, pinned=expect_hash is not None, signatures=None,
                              keys=trusted_keys, trust=trust)
    exe = Executable.load(path)
    missing = [k.name for k in exe.kernels if (k.spirv if api == "vulkan" else k.opencl) is None]
    if missing:
        raise PackageError(f"{path} has no {api} kernels (compiled for targets '{exe.target}'); "
                           f"recompile with targets including '{api}'")
    compiled = CompiledGraph(exe, live, max_in_flight)
    compiled.trusted_as = why
    return compiled


__all__ = ["compile", "run", "load", "CompiledGraph", "PortableError"]
