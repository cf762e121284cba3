"""An ONNX model as a user gives it to `compile` / `run`: loaded once (a file's external data too), named for the
compile cache by its graph and weights, and imported per set of input shapes (the compiler takes static shapes only).

    src = OnnxSource("model.onnx")
    shapes = src.shapes_of(arrays)            # or src.normalize({"input": (8, 3, 224, 224)}) / {0: (...)}
    key = src.cache_text(shapes)              # identity for cache.key: no import needed on a cache hit
    text = src.mlir(shapes)                   # linalg on tensors for exactly these shapes

No MLIR is imported here; onnx is imported when a model is loaded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

import numpy as np

from ..errors import PortableError, ShapeMismatch


def _versions() -> str:
    """Versions of what turns the model into MLIR (the compiler's own source is in cache.key already)."""
    out = []
    for dist in ("onnx", "torch-mlir"):
        try:
            out.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            out.append(f"{dist}=none")
    return ",".join(out)


class OnnxSource:
    """One ONNX model (path, bytes or onnx.ModelProto), with `input_values` folded in as constants."""

    def __init__(self, model: Any, input_values: Mapping[str, Any] | None = None):
        from .onnx_import import load_model
        from .onnx_shapes import runtime_inputs

        # A copy whose weights stay here once (a file's external data mapped): every import (one per shape set)
        # copies the graph only. Errors for a missing or malformed file come from here.
        self.model, self.weights = load_model(model)
        # Named by what was loaded (a file's external data included), graph and weights hashed apart: a model past
        # protobuf's 2 GB cannot be serialized whole.
        h = hashlib.sha256(self.model.SerializeToString(deterministic=True))
        for name in sorted(self.weights):
            h.update(f"{name}\0".encode("utf-8", "surrogatepass"))
            h.update(memoryview(np.ascontiguousarray(self.weights[name])).cast("B"))
        self.values = {k: np.asarray(v) for k, v in (input_values or {}).items()}
        for k in sorted(self.values):
            v = self.values[k]
            h.update(f"{k}\0{v.dtype.str}\0{v.shape}\0".encode("utf-8", "surrogatepass"))
            h.update(np.ascontiguousarray(v).tobytes())
        self.digest = h.hexdigest()
        # The inputs a caller passes, in call order (inputs given values are constants now).
        self.inputs = [vi.name for vi in runtime_inputs(self.model) if vi.name not in self.values]

    def normalize(self, input_shapes: Mapping[Any, Sequence[int]] | Sequence[Sequence[int]] | None) -> dict:
        """{input name: shape} from shapes keyed by input name or position, or a list of shapes in input order."""
        if input_shapes is None:
            return {}
        items = input_shapes.items() if isinstance(input_shapes, Mapping) else enumerate(input_shapes)
        out: dict[str, tuple[int, ...]] = {}
        for k, shape in items:
            if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
                if not 0 <= int(k) < len(self.inputs):
                    raise ShapeMismatch(f"input_shapes: position {k} is out of range: the model takes "
                                        f"{len(self.inputs)} input(s): {', '.join(map(repr, self.inputs))}")
                name = self.inputs[int(k)]
            elif isinstance(k, str):
                name = k
            else:
                raise ShapeMismatch(f"input_shapes: key {k!r} is neither an input name nor a position")
            try:
                dims = tuple(int(d) for d in shape)
            except (TypeError, ValueError) as e:
                raise ShapeMismatch(f"input_shapes[{k!r}] = {shape!r} is not a sequence of integers") from e
            if name in out and out[name] != dims:
                raise ShapeMismatch(f"input_shapes gives input '{name}' two shapes: {out[name]} and {dims}")
            out[name] = dims
        return out

    def shapes_of(self, arrays: Sequence[Any]) -> dict:
        """{input name: shape} of the arrays a call passes, in input order (a count mismatch is left to the call's
        own check, which names what the graph takes)."""
        return {name: tuple(np.shape(a)) for name, a in zip(self.inputs, arrays)}

    def resolve(self, shapes: Mapping[str, tuple]) -> dict:
        """The full shape set these (possibly partial) shapes compile to: the cache's identity of a variant."""
        from .onnx_shapes import resolve_shapes

        given = {k: v for k, v in shapes.items() if k not in self.values}
        unknown = sorted(set(given) - set(self.inputs))
        if unknown:
            raise ShapeMismatch(f"the model has no input(s) {', '.join(map(repr, unknown))}; its inputs are "
                                f"{', '.join(map(repr, self.inputs)) or 'none'}")
        resolved = resolve_shapes(self.model, given)
        return {k: v for k, v in resolved.items() if k not in self.values}

    def cache_text(self, resolved: Mapping[str, tuple]) -> str:
        """What identifies the MLIR these shapes import to, for cache.key (model bytes, values, shapes, versions)."""
        shapes = ";".join(f"{resolved[n]}" for n in self.inputs if n in resolved)
        return f"onnx-model {self.digest} shapes {shapes} via {_versions()}"

    def mlir(self, resolved: Mapping[str, tuple], given: Mapping[str, tuple] = ()) -> str:
        """MLIR text for exactly the `resolved` shapes; an error names the dynamic dims the caller did not give
        (`given`: the shapes the caller passed), which were compiled as DEFAULT_DIM."""
        from .onnx_import import onnx_to_mlir
        from .onnx_shapes import defaulted_dims

        try:
            return onnx_to_mlir(self.model, dict(resolved), input_values=self.values or None, weights=self.weights)
        except PortableError as e:
            dims = defaulted_dims(self.model, {**dict(given), **self.values})
            if not dims:
                raise
            raise _with_note(e, dims) from e


def _with_note(e: PortableError, dims: list[str]) -> PortableError:
    from ..errors import CompileError
    from .onnx_shapes import DEFAULT_DIM

    note = (f"\n(dynamic dimension(s) {', '.join(dims)} were compiled as {DEFAULT_DIM}; pass the real sizes: "
            f"portable.compile(model, input_shapes={{...}}), or run the model with arrays of the shape you need)")
    if isinstance(e, CompileError):
        return type(e)(str(e) + note, stage=e.stage)
    return type(e)(str(e) + note)


__all__ = ["OnnxSource"]
