"""Fold the constant parts of an ONNX graph before import: compile per shape makes every shape a constant.

ONNX function bodies (and models exported from them, the `_expanded` node cases) compute axes, shapes and
index arguments at run time: `Shape -> Size -> Range -> ReduceMean(axes)`, `Shape -> Slice -> Concat ->
Reshape`. ONNX shape inference cannot see through most of those, and torch-mlir needs them constant. Here
`Shape`/`Size` of a value with a static shape become constants, then every node whose inputs are all constants
is evaluated with onnx's reference evaluator, and shape inference runs again, until nothing changes.

Also folded: CastLike of a constant (its second input gives only a type) and any result with no elements (a
constant whatever its inputs). Afterwards constant Slice arguments are brought into range (canonicalize_slices).
Only small results are folded (FOLD_LIMIT elements): large constant tensors stay computed on the device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import numpy as np

from .onnx_weights import NONE as _NONE
from .onnx_weights import value

FOLD_LIMIT = 1 << 16  # elements in one folded value

# Ops whose result differs between runs, or that carry subgraphs: never folded.
_NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial",
            "If", "Loop", "Scan", "SequenceMap", "Dropout"}
_FOLDED_DTYPES = {np.dtype(t) for t in (np.float32, np.float16, np.float64, np.int8, np.uint8, np.int16,
                                        np.int32, np.int64, np.bool_)}
with contextlib.suppress(ImportError):  # onnx reads, writes and evaluates bfloat16 as ml_dtypes arrays (its dependency)
    import ml_dtypes

    _FOLDED_DTYPES.add(np.dtype(ml_dtypes.bfloat16))
_UNFOLDED_TENSORS = {8}  # TensorProto element types never read into numpy here: strings


def _static_shapes(m) -> tuple[dict[str, tuple], dict[str, int]]:
    """({value: static shape}, {value: ONNX element type}) from inferred types and initializers."""
    shapes, dtypes = {}, {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        if vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
            dtypes[vi.name] = vi.type.tensor_type.elem_type
    for init in m.graph.initializer:
        shapes[init.name], dtypes[init.name] = tuple(init.dims), init.data_type
    return shapes, dtypes


def _np_dtype(elem_type: int):
    from onnx import helper

    try:
        t = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:  # noqa: BLE001 - strings, 4-bit and 8-bit floats: not folded
        return None
    return t if t in _FOLDED_DTYPES else None


def _subgraph_uses(graph, into: set[str]) -> None:
    """Names read by nodes of subgraphs (outer-scope references included)."""
    for n in graph.node:
        into.update(n.input)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _subgraph_uses(g, into)


def _shape_value(node, shape: tuple) -> np.ndarray:
    if node.op_type == "Size":
        return np.array(int(np.prod(shape, dtype=np.int64)), np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    r = len(shape)
    start, end = attrs.get("start", 0), attrs.get("end", r)
    start, end = (start + r if start < 0 else start), (end + r if end < 0 else end)
    return np.array(shape[max(0, min(start, r)):max(0, min(end, r))], np.int64)


def _constant(node) -> list | None:
    from onnx import numpy_helper

    for a in node.attribute:
        if a.name == "value" and a.t.data_type not in _UNFOLDED_TENSORS:
            return [numpy_helper.to_array(a.t)]
    return None


def _evaluate(node, values: dict, opsets: dict[str, int]) -> list | None:
    from onnx.reference import ReferenceEvaluator

    try:
        ev = ReferenceEvaluator(node, opsets=opsets)
        outs = ev.run(None, {i: values[i] for i in node.input if i})
    except Exception:  # noqa: BLE001 - an op the reference evaluator lacks or rejects: leave the node be
        return None
    if len(outs) != len([o for o in node.output]):
        return None
    for o in outs:
        if not isinstance(o, np.ndarray) or o.dtype not in _FOLDED_DTYPES or o.size > FOLD_LIMIT:
            return None
    return [np.asarray(o) for o in outs]


def _cast_like(node, value: np.ndarray, elem_type: int, opsets: dict[str, int]) -> list | None:
    from onnx import helper

    cast = helper.make_node("Cast", ["x"], ["y"], to=elem_type,
                            **{a.name: a.i for a in node.attribute if a.name == "saturate"})
    return _evaluate(cast, {"x": value}, opsets)


def _infer_node(node, shapes: dict, dtypes: dict, values: dict, opsets: dict[str, int]) -> None:
    """Static shapes of a node's results from its inputs' (small constant inputs as values), into `shapes` and
    `dtypes`: a Reshape whose target shape was folded earlier in this sweep has a known result at once, so the
    Shape -> Gather -> Div -> Concat -> Reshape chain of the next block folds in the same sweep (a channel shuffle
    per block would otherwise take one whole-model inference round per block)."""
    from onnx import TensorProto, helper, numpy_helper, shape_inference

    inputs, inits = [], []
    for i in dict.fromkeys(i for i in node.input if i):
        if i in values and values[i].size <= FOLD_LIMIT:
            inits.append(numpy_helper.from_array(values[i], i))
        elif i in shapes and i in dtypes:
            inputs.append(helper.make_tensor_value_info(i, dtypes[i], shapes[i]))
        else:
            return
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in node.output if o]
    g = helper.make_graph([node], "node", inputs, outs, initializer=inits)
    one = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    try:
        inferred = shape_inference.infer_shapes(one, strict_mode=True, data_prop=True)
    except Exception:  # noqa: BLE001 - whatever one node's inference rejects, the whole-model inference reports
        return
    for vi in list(inferred.graph.output) + list(inferred.graph.value_info):
        tt = vi.type.tensor_type
        if vi.name in shapes or not tt.elem_type or not tt.HasField("shape"):
            continue
        if all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
            dtypes[vi.name] = tt.elem_type


def fold_once(m, weights: Mapping[str, np.ndarray] = _NONE) -> int:
    """One folding sweep over the top-level graph, in place; returns how many nodes were folded away. `weights`:
    the arrays of initializers `onnx_weights.detach` left as stubs."""
    from onnx import helper, numpy_helper

    opsets = {("" if o.domain in ("", "ai.onnx") else o.domain): o.version for o in m.opset_import}
    shapes, dtypes = _static_shapes(m)
    graph_inputs = {vi.name for vi in m.graph.input}
    values = {i.name: value(i, weights) for i in m.graph.initializer if i.name not in graph_inputs
              and i.data_type not in _UNFOLDED_TENSORS}
    # A tensor with no elements is a constant whatever the input: reductions over it fold to their identity.
    for name, shape in shapes.items():
        if 0 in shape and name not in values:
            np_type = _np_dtype(dtypes[name])
            if np_type is not None:
                values[name] = np.zeros(shape, np_type)
    outputs = {o.name for o in m.graph.output}
    folded: list = []
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx") or n.op_type in _NO_FOLD:
            continue
        if any(a.HasField("g") or a.graphs for a in n.attribute):
            continue
        if n.op_type in ("Shape", "Size") and n.input[0] in shapes:
            res = [_shape_value(n, shapes[n.input[0]])]
        elif n.op_type == "CastLike" and n.input[0] in values and n.input[1] in dtypes:
            res = _cast_like(n, values[n.input[0]], dtypes[n.input[1]], opsets)  # input 1 gives only its type
            if res is None:
                continue
        elif all((not i) or i in values for i in n.input):
            res = _constant(n) if n.op_type == "Constant" else None
            res = res or _evaluate(n, values, opsets)
            if n.op_type == "Constant":  # already a constant: its value is known, the node stays unless dead
                if res is not None:
                    values[n.output[0]] = res[0]
                continue
            if res is None:
                continue
        elif all(o and o in values and values[o].size == 0 for o in n.output):
            res = [values[o] for o in n.output]  # results with no elements: constants whatever the inputs
        else:
            if any(o and o not in shapes for o in n.output):
                _infer_node(n, shapes, dtypes, values, opsets)
            continue
        folded.append(n)
        values.update(zip(n.output, res))
    if not folded:
        return 0
    folded_ids = {id(n) for n in folded}
    kept = [n for n in m.graph.node if id(n) not in folded_ids]
    used: set[str] = set(outputs)
    for n in kept:
        used.update(n.input)
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _subgraph_uses(g, used)
    have = {i.name for i in m.graph.initializer}
    constants = []  # graph outputs computed from constants stay nodes: Constant ones
    for n in folded:
        for o in n.output:
            if o in outputs:
                constants.append(helper.make_node("Constant", [], [o], name=n.name,
                                                  value=numpy_helper.from_array(values[o], o)))
            elif o in used and o not in have:
                m.graph.initializer.append(numpy_helper.from_array(values[o], o))
    kept = [n for n in kept if n.op_type != "Constant" or any(o in used for o in n.output)]  # dead constants
    del m.graph.node[:]
    m.graph.node.extend(constants + kept)
    # Stale value_info of folded values would clash with the initializers: inference recomputes the rest.
    folded_outs = {o for n in folded for o in n.output}
    vis = [vi for vi in m.graph.value_info if vi.name not in folded_outs]
    del m.graph.value_info[:]
    m.graph.value_info.extend(vis)
    return len(folded)


INT64_MIN = -(1 << 63)


def _slice_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int] | None:
    """(start, end) of one sliced axis brought into range, in ONNX's own encoding; None for an empty result."""
    start, end = (start + dim if start < 0 else start), (end + dim if end < 0 else end)
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return (start, end) if start < end else None
    start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
    if start <= end:
        return None
    return start, INT64_MIN if end == -1 else end  # -1 would read as the last index: "before the first" is INT64_MIN


def canonicalize_slices(m) -> int:
    """Slice nodes with constant starts/ends/axes/steps get them in range (non-negative axes, starts and ends
    clamped to the data's static shape), in place; returns how many changed. torch-mlir's lowering of a start past
    the end with a negative step produces a negative offset the compiler reads as dynamic."""
    from onnx import numpy_helper

    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 1)
    if opset < 10:
        return 0
    shapes, _ = _static_shapes(m)
    graph_inputs = {vi.name for vi in m.graph.input}
    values = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer if i.name not in graph_inputs
              and i.data_type in (6, 7)}
    changed = 0
    for n in m.graph.node:
        if n.op_type != "Slice" or n.domain not in ("", "ai.onnx") or n.input[0] not in shapes:
            continue
        args = [n.input[i] if i < len(n.input) else "" for i in range(1, 5)]
        if not all(a in values for a in args[:2]) or not all(a in values for a in args[2:] if a):
            continue
        shape = shapes[n.input[0]]
        starts, ends = values[args[0]].astype(np.int64).tolist(), values[args[1]].astype(np.int64).tolist()
        axes = values[args[2]].astype(np.int64).tolist() if args[2] else list(range(len(starts)))
        steps = values[args[3]].astype(np.int64).tolist() if args[3] else [1] * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps \
                or not all(-len(shape) <= a < len(shape) for a in axes):
            continue  # malformed: shape inference reports it
        bounds = [_slice_bounds(s, e, t, shape[a]) for s, e, t, a in zip(starts, ends, steps, axes)]
        if None in bounds:
            continue  # an empty result: folded to a constant instead
        new = ([b[0] for b in bounds], [b[1] for b in bounds], [a % len(shape) for a in axes], steps)
        if [list(v) for v in new] == [starts, ends, axes, steps]:
            continue
        for i, (role, v) in enumerate(zip(("starts", "ends", "axes", "steps"), new)):
            name = _fresh_initializer(m, f"{n.name}/{role}", np.array(v, np.int64))
            if i + 1 < len(n.input):
                n.input[i + 1] = name
            else:
                n.input.append(name)
        changed += 1
    return changed


def _fresh_initializer(m, base: str, value: np.ndarray) -> str:
    from onnx import numpy_helper

    taken = {i.name for i in m.graph.initializer} | {o for n in m.graph.node for o in n.output} \
        | {vi.name for vi in m.graph.input}
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    m.graph.initializer.append(numpy_helper.from_array(value, name))
    return name


def fold_constants(m, infer, rounds: int = 6, weights: Mapping[str, np.ndarray] = _NONE):
    """Fold until nothing changes (shape inference between sweeps finds more static shapes), then bring constant
    Slice arguments into range; returns the model. `infer(m)` is the caller's shape inference (it returns a new
    model)."""
    for _ in range(rounds):
        if not fold_once(m, weights):
            break
        m = infer(m)
    if canonicalize_slices(m):
        m = infer(m)
    return m


__all__ = ["FOLD_LIMIT", "canonicalize_slices", "fold_constants", "fold_once"]
