"""Shapes of an ONNX model as the compiler needs them: every runtime input static (the caller's shapes, the
model's own sizes, else DEFAULT_DIM), declared output sizes as hints, and onnx's strict shape inference.

Exporters write unknown sizes as a symbol, as nothing, or as -1 / 0 (Paddle2ONNX): all of them are dynamic here.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..errors import CompileError, ShapeMismatch, UnsupportedOp

DEFAULT_DIM = 1  # what an unpinned dynamic dimension (batch, sequence length) becomes


def runtime_inputs(m) -> list:
    """The graph inputs a caller feeds (initializers with the same name are weights, not inputs)."""
    inits = {i.name for i in m.graph.initializer}
    return [vi for vi in m.graph.input if vi.name not in inits]


def _known(d) -> bool:
    """A dimension with a size: exporters write unknown ones as a symbol, as nothing, or as -1 / 0 (Paddle2ONNX)."""
    return d.HasField("dim_value") and d.dim_value > 0


def resolve_shapes(m, input_shapes: dict[str, tuple] | None = None) -> dict[str, tuple]:
    """{runtime input name: the static shape it will be compiled for}, without changing `m`: the shape the caller
    gives, else the model's own sizes, symbolic dims bound by the caller's shapes of other inputs naming the same
    symbol, else DEFAULT_DIM. Raises ShapeMismatch for a given shape that contradicts a size the model fixes."""
    input_shapes = {k: tuple(int(x) for x in v) for k, v in (input_shapes or {}).items()}
    names = [vi.name for vi in runtime_inputs(m)]
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise ShapeMismatch(f"the model has no input(s) {', '.join(map(repr, unknown))}; its inputs are "
                            f"{', '.join(map(repr, names)) or 'none'}")
    symbols: dict[str, int] = {}
    # Symbols bound by an explicit shape first, so "batch" pinned in one input pins it in all of them.
    for vi in runtime_inputs(m):
        if vi.name in input_shapes and vi.type.tensor_type.HasField("shape"):
            dims = vi.type.tensor_type.shape.dim
            if len(dims) == len(input_shapes[vi.name]):
                for d, v in zip(dims, input_shapes[vi.name]):
                    if d.dim_param and not _known(d):
                        symbols.setdefault(d.dim_param, v)
    out: dict[str, tuple] = {}
    for vi in runtime_inputs(m):
        if vi.type.WhichOneof("value") != "tensor_type":
            continue
        tt = vi.type.tensor_type
        want = input_shapes.get(vi.name)
        if want is not None:
            if tt.HasField("shape"):
                dims = tt.shape.dim
                if len(dims) != len(want):
                    raise ShapeMismatch(f"input '{vi.name}' has rank {len(dims)} in the model, got shape {want}")
                for i, (d, v) in enumerate(zip(dims, want)):
                    if _known(d) and d.dim_value != v:
                        raise ShapeMismatch(f"input '{vi.name}' dimension {i} is {d.dim_value} in the model, "
                                            f"got {v} (shape {want})")
            if any(v < 0 for v in want):
                raise ShapeMismatch(f"input '{vi.name}': shape {want} has a negative size")
            out[vi.name] = want
            continue
        if not tt.HasField("shape"):
            raise UnsupportedOp(f"input '{vi.name}' has no shape (unknown rank): pass "
                                f"input_shapes={{'{vi.name}': (...)}}")
        out[vi.name] = tuple(d.dim_value if _known(d) else symbols.setdefault(d.dim_param, DEFAULT_DIM)
                             if d.dim_param else DEFAULT_DIM for d in tt.shape.dim)
    return out


def defaulted_dims(m, input_shapes: dict[str, tuple] | None = None) -> list[str]:
    """'input[i]' (with the symbol, if any) for each dynamic dimension that no given shape pins (it becomes
    DEFAULT_DIM): named in errors, since a size of 1 is where many models fail (a 1x1 image, one token)."""
    given = set(input_shapes or {})
    out = []
    for vi in runtime_inputs(m):
        if vi.name in given or not vi.type.tensor_type.HasField("shape"):
            continue
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if not _known(d):
                out.append(f"{vi.name}[{i}]" + (f" ({d.dim_param})" if d.dim_param else ""))
    return out


def pin_shapes(m, input_shapes: dict[str, tuple] | None = None, input_values: dict[str, Any] | None = None) -> dict:
    """Make every runtime input static in place (see the module docstring and resolve_shapes); returns
    {input name: shape}. `input_values` turns those inputs into initializers (constants), so shapes computed from
    them fold. Declared output and intermediate shapes are hints only: dropped, and computed again by inference."""
    import onnx
    from onnx import numpy_helper

    input_shapes = dict(input_shapes or {})
    input_values = dict(input_values or {})
    names = [vi.name for vi in runtime_inputs(m)]
    unknown = sorted(set(input_values) - set(names))
    if unknown:
        raise ShapeMismatch(f"the model has no input(s) {', '.join(map(repr, unknown))}; its inputs are "
                            f"{', '.join(map(repr, names)) or 'none'}")
    declared = {vi.name: vi.type.tensor_type.elem_type for vi in runtime_inputs(m)}
    values = {name: np.asarray(value) for name, value in input_values.items()}
    pinned = resolve_shapes(m, {**input_shapes, **{k: v.shape for k, v in values.items()}})
    for name, value in values.items():
        arr = np.asarray(value)
        if declared.get(name):  # a Python float or int takes the input's declared dtype
            arr = arr.astype(onnx.helper.tensor_dtype_to_np_dtype(declared[name]), copy=False)
        m.graph.initializer.append(numpy_helper.from_array(arr, name))
    for vi in runtime_inputs(m):
        if vi.name not in pinned:
            continue
        tt = vi.type.tensor_type
        tt.ClearField("shape")
        tt.shape.SetInParent()
        for v in pinned[vi.name]:
            tt.shape.dim.add().dim_value = int(v)
    for name in input_values:
        vi = next(v for v in m.graph.input if v.name == name)
        m.graph.input.remove(vi)
        pinned.pop(name, None)
    # Stale intermediate shapes would contradict the pinned ones: inference computes them again. Outputs keep
    # their rank and their positive sizes (the only source where a size depends on input values); -1 / 0 sizes
    # are unknown, and sizes inference contradicts are dropped there (infer_shapes).
    del m.graph.value_info[:]
    for vi in m.graph.output:
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                if not _known(d):
                    d.Clear()
    return pinned


INFERENCE_STRIP_BYTES = 1 << 12  # initializers this large enter shape inference without their data


def _itemsize(data_type: int) -> int:
    import onnx

    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(data_type)).itemsize
    except (KeyError, TypeError, ValueError):
        return 1  # a type numpy lacks (float8, int4): sized low, so it is rather kept than stripped


def _inference_inputs(m):
    """The model, then (if it declares output sizes) a copy without them: declared output sizes are hints, and
    exporters leave stale ones (a Paddle export's [1, 1, 1]) that strict inference rejects."""
    yield m
    if any(d.HasField("dim_value") for vi in m.graph.output for d in vi.type.tensor_type.shape.dim):
        c = type(m)()
        c.CopyFrom(m)
        for vi in c.graph.output:
            for d in vi.type.tensor_type.shape.dim:
                d.Clear()
        yield c


def infer_shapes(m):
    """onnx shape inference (strict, with data propagation so Shape -> Reshape chains fold to constants).

    Large initializers go in with their types only: inference reads the values of small (shape) tensors alone,
    and serializing a model's weights for each call was most of its cost (17 of 100 s for a 100M-parameter
    decoder). `m` itself gets the inferred types and is returned."""
    import onnx

    shape_types = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)  # what data propagation may need to read
    stripped = {}
    for t in m.graph.initializer:  # sized from the dims: reading raw_data copies it
        if t.data_type not in shape_types and t.HasField("raw_data") and \
                int(np.prod(t.dims, dtype=np.int64)) * _itemsize(t.data_type) >= INFERENCE_STRIP_BYTES:
            stripped[t.name] = t.raw_data
            t.ClearField("raw_data")
    errors: list[Exception] = []
    try:
        for attempt in _inference_inputs(m):
            try:
                out = onnx.shape_inference.infer_shapes(attempt, check_type=True, strict_mode=True, data_prop=True)
            except Exception as e:  # InferenceError, ValidationError, or a C++ exception surfaced as RuntimeError
                errors.append(e)
                continue
            # What inference adds (value types, output types) moves onto the model that holds the weights.
            del m.graph.value_info[:]
            m.graph.value_info.extend(out.graph.value_info)
            del m.graph.output[:]
            m.graph.output.extend(out.graph.output)
            return m
    finally:
        for t in m.graph.initializer:
            if t.name in stripped:
                t.raw_data = stripped[t.name]
    msg = str(errors[0]).strip()  # the model's own error, not the retry's
    node = re.search(r"node name: ([^)]*)\)|Name: ([^\s]+) OpType: (\S+)", msg)
    hint = f" (at {node.group(0)})" if node else ""
    raise CompileError(f"ONNX shape inference rejected the model{hint}: {msg}",
                       stage="onnx-shape-inference") from errors[0]


__all__ = ["DEFAULT_DIM", "runtime_inputs", "resolve_shapes", "defaulted_dims", "pin_shapes", "infer_shapes"]
