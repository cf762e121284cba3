"""Checks on an ONNX model before torch-mlir sees it: ops, dtypes, shapes, and the nodes known to hang or
crash torch-mlir's pipelines. Each failure is an UnsupportedOp naming the node, its op type and the reason."""

from __future__ import annotations

from ..errors import ShapeMismatch, UnsupportedOp
from . import onnx_weights
from .onnx_describe import node_detail

# ONNX TensorProto element types the importer and the linalg pipeline carry through (onnx.TensorProto enum).
# Strings, complex numbers, 4-bit and 8-bit floats stop here with a clear message.
IMPORTABLE = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
              10: "float16", 11: "float64", 16: "bfloat16"}


def node_desc(node) -> str:
    dom = f"{node.domain}:" if node.domain and node.domain != "ai.onnx" else ""
    return f"node '{node.name}' (op {dom}{node.op_type})"


def name_nodes(graph, prefix: str = "") -> None:
    """Give every node a unique name (node tests leave them empty) so diagnostics can point at it."""
    seen: set[str] = set()
    for i, n in enumerate(graph.node):
        name = n.name or f"{prefix}{n.op_type}_{i}"
        while name in seen:
            name = f"{name}_{i}"
        seen.add(name)
        n.name = name
        for a in n.attribute:
            if a.g and a.g.node:
                name_nodes(a.g, f"{n.name}/")
            for sub in a.graphs:
                name_nodes(sub, f"{n.name}/")


def iter_nodes(graph):
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.g and a.g.node:
                yield from iter_nodes(a.g)
            for sub in a.graphs:
                yield from iter_nodes(sub)


# torch-mlir's ONNX->torch converters for these ops read every result the schema declares and crash
# (segfault) on a node that omits trailing optional outputs: give them placeholder outputs, which are dead.
_PAD_OUTPUTS = {"Unique": 4}

# Attributes written out with their schema defaults: onnx's strict shape inference of these ops' function bodies
# reads them through ref_attr_name and rejects the model when they are absent (test_mvn).
_DEFAULT_ATTRIBUTES = {"MeanVarianceNormalization": {"axes": [0, 2, 3]},
                       # onnx 1.23 infers STFT shapes with onesided=0 when absent; the schema default is 1.
                       "STFT": {"onesided": 1}}


def pad_outputs(graph) -> None:
    """Node fix-ups before shape inference and import: placeholder outputs (_PAD_OUTPUTS) and explicit default
    attributes (_DEFAULT_ATTRIBUTES)."""
    from onnx import helper

    for n in iter_nodes(graph):
        if n.domain not in ("", "ai.onnx"):
            continue
        want = _PAD_OUTPUTS.get(n.op_type)
        if want:
            while len(n.output) < want:
                n.output.append(f"{n.name}__unused_{len(n.output)}")
        have = {a.name for a in n.attribute}
        for name, value in _DEFAULT_ATTRIBUTES.get(n.op_type, {}).items():
            if name not in have:
                n.attribute.append(helper.make_attribute(name, value))


_LOWERED_DOMAINS = {""}  # ai.onnx; ai.onnx.ml and ai.onnx.preview.training ops have no torch-mlir lowering


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return a.s.decode() if a.type == a.STRING else a.i if a.type == a.INT else default
    return default


def check_known_failures(m, weights=onnx_weights.NONE) -> None:
    """Nodes that make torch-mlir's pipelines hang or abort the process (seen in the onnx node suite): refuse them
    here, so a bad model raises instead of taking the caller's process down."""
    shapes = {vi.name: [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
              for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)
              if vi.type.tensor_type.HasField("shape")}
    ranks = {k: len(v) for k, v in shapes.items()}
    ranks.update({i.name: len(i.dims) for i in m.graph.initializer})
    check_axes(m.graph, ranks)
    consts = _Constants(m, weights)
    for n in m.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        if n.op_type == "Pad" and _attr(n, "mode") == "wrap":
            raise UnsupportedOp(f"{node_desc(n)}: mode 'wrap' is not supported (torch-mlir's "
                                f"torch-decompose-complex-ops does not terminate on it)")
        if n.op_type == "Reshape" and any(0 in shapes.get(v, ()) for v in list(n.input[:1]) + list(n.output)):
            raise UnsupportedOp(f"{node_desc(n)}: reshaping a zero-element tensor is not supported (torch-mlir's "
                                f"lowering divides by the zero dimension)")
        if n.op_type == "Einsum" and any(ranks.get(i) == 0 for i in n.input):
            raise UnsupportedOp(f"{node_desc(n)}: Einsum over rank-0 operands is not supported (torch-mlir's "
                                f"torch-decompose-complex-ops aborts on it)")
        why = _wrong_lowering(n, shapes, consts)
        if why:
            raise UnsupportedOp(f"{node_desc(n)}: {why}")


# Ops whose `axis` attribute names a dimension of input 0: valid in [-rank, rank). Flatten's may be rank too, and
# OneHot's counts in its output, one rank more.
_AXIS_OF_INPUT = {"Softmax", "LogSoftmax", "Hardmax", "Gather", "GatherElements", "ArgMax", "ArgMin", "Split",
                  "TopK", "Compress", "Concat", "ScatterElements", "Scatter", "LayerNormalization", "Unique",
                  "QuantizeLinear", "DequantizeLinear", "CumSum", "LpNormalization", "Gelu", "SplitToSequence"}
_AXES_OF_INPUT = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                  "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Squeeze", "MeanVarianceNormalization"}


def _int_attrs(node, name: str) -> list[int] | None:
    for a in node.attribute:
        if a.name == name:
            return [a.i] if a.type == a.INT else list(a.ints) if a.type == a.INTS else None
    return None


def check_axes(graph, ranks: dict[str, int]) -> None:
    """Axis attributes out of their op's range are refused naming the node: torch-mlir's converters normalise an
    axis by adding the rank until it is not negative, which for an axis like -2^40 (one flipped bit) loops for
    hours. Ranks not known here are left to the later checks. ShapeMismatch, not UnsupportedOp: expanding the op
    into its function body (what the importer tries for UnsupportedOp) cannot make a bad axis valid."""
    for n in graph.node:
        if n.domain not in ("", "ai.onnx") or not n.input:
            continue
        rank = ranks.get(n.input[0])
        out_rank = ranks.get(n.output[0]) if n.output else None
        checks = []
        if n.op_type in _AXIS_OF_INPUT or n.op_type == "Flatten":
            checks.append(("axis", rank, 1 if n.op_type == "Flatten" else 0))
        elif n.op_type == "OneHot":
            checks.append(("axis", out_rank, 0))
        elif n.op_type == "Unsqueeze":
            checks.append(("axes", out_rank, 0))
        elif n.op_type == "ReverseSequence":
            checks += [("batch_axis", rank, 0), ("time_axis", rank, 0)]
        if n.op_type in _AXES_OF_INPUT:
            checks.append(("axes", rank, 0))
        for name, r, extra in checks:
            values = _int_attrs(n, name)
            if values is None or r is None:
                continue
            for v in values:
                if not -max(r, 1) <= v < max(r, 1) + extra:
                    hi = max(r, 1) + extra
                    raise ShapeMismatch(f"{node_desc(n)}: {name} {v} is out of range for a rank-{r} tensor (valid: "
                                        f"{-max(r, 1)} to {hi - 1}); fix the model's attribute")


class _Constants:
    """Initializer and Constant-node values by name, read into numpy only when asked for (weights are large)."""

    def __init__(self, m, weights):
        self.weights = weights  # the arrays of stubs left by onnx_weights.detach
        self.protos = {i.name: i for i in m.graph.initializer}
        for n in m.graph.node:
            if n.op_type == "Constant" and n.output and len(n.attribute) == 1 and n.attribute[0].name == "value":
                self.protos[n.output[0]] = n.attribute[0].t

    def __contains__(self, name: str) -> bool:
        return name in self.protos

    def dims(self, name: str) -> list[int]:
        return list(self.protos[name].dims)

    def get(self, name: str):
        return onnx_weights.value(self.protos[name], self.weights) if name in self.protos else None


def _wrong_lowering(n, shapes: dict, consts: _Constants) -> str | None:
    """Why torch-mlir's lowering of node `n` computes wrong values, or None. Ops with an ONNX function body are
    then expanded into it by the importer's retry (the error names the node); the others stop here."""
    def given(i: int) -> bool:
        return len(n.input) > i and bool(n.input[i])

    def dims(name: str) -> list[int] | None:
        return consts.dims(name) if name in consts else shapes.get(name)

    if n.op_type == "Gelu" and _attr(n, "approximate") == "tanh":
        return ("approximate='tanh' is lowered with sqrt(2/pi) rounded to 0.797724 (relative error 2e-4), which "
                "the tails of the result amplify; expanded into its ONNX function body instead")
    if n.op_type == "CenterCropPad":
        return ("torch-mlir's lowering computes the crop offsets at run time even from constants (dynamic slices) "
                "and pads with tensor.insert_slice; expanded into its ONNX function body (Pad and Slice) instead")
    if n.op_type == "SpaceToDepth" and _attr(n, "mode") == "CRD":
        return "mode 'CRD' is lowered as 'DCR' (the attribute is ignored); expanded into its ONNX function body instead"
    if n.op_type == "LSTM" and given(7):
        p = consts.get(n.input[7])
        if p is None or p.any():
            return "peephole weights (input P) are ignored by torch-mlir's lowering, giving wrong values"
    if n.op_type == "LSTM" and given(4):
        lens, x = consts.get(n.input[4]), dims(n.input[0])
        steps = x[1 if _attr(n, "layout", 0) == 1 else 0] if x else None
        if lens is None or steps is None or (lens != steps).any():
            return ("sequence_lens is ignored by torch-mlir's lowering (every sequence runs all time steps); "
                    "only lengths equal to the sequence dimension, given as constants, are supported")
    return None


def check_inferred(m) -> None:
    """Every value a node produces needs a known rank: torch-mlir's importer would take an unknown one for a
    scalar and its converters then crash. Compile-per-shape needs the shapes anyway. A shape that is not static
    because a shape argument (Reshape's shape, Slice's starts, Pad's pads...) is computed at run time from graph
    inputs is reported as a data-dependent shape, naming those inputs (they can be folded with input_values=)."""
    static: dict[str, bool] = {}
    for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input):
        if vi.type.WhichOneof("value") != "tensor_type":
            static[vi.name] = True
        elif vi.type.tensor_type.HasField("shape"):
            static[vi.name] = all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)
    static.update({i.name: True for i in m.graph.initializer})
    dynamic = _DynamicShapes(m, static)
    for n in m.graph.node:
        for o in n.output:
            if o and not static.get(o, False):
                why = dynamic.cause(n)
                if why:
                    raise UnsupportedOp(why)
            if o and o not in static:
                raise UnsupportedOp(f"{node_desc(n)}: ONNX shape inference could not determine the shape of its "
                                    f"output '{o}' (portable compiles per shape: every shape must be known)")


# Inputs (by position) that decide the shape of an op's result: computed at run time, they make it data-dependent.
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
           "ReduceLogSumExp", "ReduceSumSquare")
_SHAPE_ARGS = {"Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3),
               "ConstantOfShape": (0,), "Range": (0, 1, 2), "TopK": (1,), "Resize": (2, 3), "Upsample": (1,),
               "OneHot": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "CenterCropPad": (1, 2),
               "NonZero": (0,), "Compress": (1,), "Loop": (0, 1), "If": (0,), **{r: (1,) for r in _REDUCE}}


class _DynamicShapes:
    """Finds, upstream of a node with a non-static result, the node whose shape argument is computed at run time
    from graph inputs."""

    def __init__(self, m, static: dict[str, bool]):
        self.static = static
        self.producer = {o: n for n in m.graph.node for o in n.output if o}
        inits = {i.name for i in m.graph.initializer}
        self.runtime = [vi.name for vi in m.graph.input if vi.name not in inits]

    def cause(self, node) -> str | None:
        seen, stack = set(), [node]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if n.domain in ("", "ai.onnx") and any(not self.static.get(o, False) for o in n.output if o):
                for i in _SHAPE_ARGS.get(n.op_type, ()):
                    arg = n.input[i] if i < len(n.input) else ""
                    sources = self._sources(arg) if arg else []
                    if sources:
                        return (f"{node_desc(n)}: its input '{arg}' decides the shape of its result and is computed "
                                f"at run time from input(s) {', '.join(map(repr, sources))} (a data-dependent shape; "
                                f"portable compiles per shape: pass them in input_values= to fold them)")
            stack += [self.producer[i] for i in n.input if i in self.producer]
        return None

    def _sources(self, name: str) -> list[str]:
        """The runtime graph inputs `name` is computed from."""
        found, seen, stack = [], set(), [name]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if v in self.runtime:
                found.append(v)
            elif v in self.producer:
                stack += [i for i in self.producer[v].input if i]
        return sorted(found)


def check_ops(m, expandable=lambda node: False) -> None:
    """Unknown ops (no schema in any imported domain, no local function) are rejected by name up front; so are ops
    of domains torch-mlir does not lower, unless `expandable(node)` (it has an ONNX function body to expand)."""
    import onnx

    from ..errors import CompileError

    for i, n in enumerate(iter_nodes(m.graph)):
        # protobuf hands back bytes for a string field that is not valid UTF-8 (a damaged file)
        if not all(isinstance(t, str) for t in (n.op_type, n.domain, n.name, *n.input, *n.output)):
            raise CompileError(f"node {i} of the model has an op type, domain or value name that is not UTF-8 text "
                               f"({n.op_type!r}); the model is damaged, export it again", stage="onnx-load")
    opsets = {(o.domain or ""): o.version for o in m.opset_import}
    local = {(f.domain, f.name) for f in m.functions}
    for n in iter_nodes(m.graph):
        dom = "" if n.domain in ("", "ai.onnx") else n.domain
        if (n.domain, n.op_type) in local:
            continue
        if dom not in opsets:
            raise UnsupportedOp(f"{node_detail(n)}: its domain '{dom}' is not among the model's opset imports")
        if not onnx.defs.has(n.op_type, dom):
            raise UnsupportedOp(f"{node_detail(n)}: unknown op: no ONNX schema for '{n.op_type}' in domain "
                                f"'{dom or 'ai.onnx'}'")
        if dom not in _LOWERED_DOMAINS and not expandable(n):
            raise UnsupportedOp(f"{node_detail(n)}: ops of domain '{dom}' have no lowering (torch-mlir lowers the "
                                f"default ONNX domain only)")


def _dtype_name(elem_type: int) -> str:
    import onnx

    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"#{elem_type}"


def _check_value_type(vi, role: str, users: dict[str, list]) -> None:
    t = vi.type
    kind = t.WhichOneof("value")
    who = users.get(vi.name, [])
    where = f" (used by {node_desc(who[0])})" if who else ""
    if kind is None:
        return
    if kind != "tensor_type":
        raise UnsupportedOp(f"{role} '{vi.name}'{where} is a {kind.replace('_type', '')}: only tensors are supported")
    et = t.tensor_type.elem_type
    if et not in IMPORTABLE:
        raise UnsupportedOp(f"{role} '{vi.name}'{where} has dtype {_dtype_name(et)}, which portable does not "
                            f"support (supported: {', '.join(sorted(set(IMPORTABLE.values())))})")


# TensorProto element type -> (bytes per element in raw_data, the typed field that holds it otherwise).
_STORAGE = {1: (4, "float_data"), 2: (1, "int32_data"), 3: (1, "int32_data"), 5: (2, "int32_data"),
            6: (4, "int32_data"), 7: (8, "int64_data"), 9: (1, "int32_data"), 10: (2, "int32_data"),
            11: (8, "double_data"), 16: (2, "int32_data")}


def check_tensor_data(t, what: str) -> None:
    """A tensor's data holds exactly its dims' elements (a damaged model's raw_data may not: numpy's reshape then
    fails far from the cause)."""
    from ..errors import CompileError

    if t.data_location == t.EXTERNAL or t.data_type not in _STORAGE:
        return
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise CompileError(f"{what} has negative dims {dims}; the model is damaged", stage="onnx-load")
    n = 1
    for d in dims:
        n *= d
    size, field = _STORAGE[t.data_type]
    have = len(t.raw_data) // size if t.HasField("raw_data") else len(getattr(t, field))
    exact = not t.HasField("raw_data") or len(t.raw_data) % size == 0
    if have != n or not exact:
        stored = f"{len(t.raw_data)} bytes" if t.HasField("raw_data") else f"{have} values"
        raise CompileError(f"{what} has dims {dims} ({n} elements of {_dtype_name(t.data_type)}) but holds {stored}; "
                           f"the model is damaged or truncated, export it again", stage="onnx-load")


def check_dtypes(m) -> None:
    """Graph inputs, outputs, initializers and every typed value must have a dtype we carry through, and every
    initializer and Constant tensor as many elements as its dims say."""
    users: dict[str, list] = {}
    for n in iter_nodes(m.graph):
        for i in n.input:
            users.setdefault(i, []).append(n)
    producers = {o: n for n in iter_nodes(m.graph) for o in n.output}
    for init in m.graph.initializer:
        if init.data_type not in IMPORTABLE:
            who = users.get(init.name, [])
            where = f" (used by {node_desc(who[0])})" if who else ""
            raise UnsupportedOp(f"initializer '{init.name}'{where} has dtype {_dtype_name(init.data_type)}, which "
                                f"portable does not support")
        check_tensor_data(init, f"initializer '{init.name}'")
    for vi in m.graph.input:
        _check_value_type(vi, "input", users)
    for vi in m.graph.output:
        _check_value_type(vi, "output", users)
    for vi in m.graph.value_info:
        p = producers.get(vi.name)
        if p is not None and vi.type.WhichOneof("value") == "tensor_type" \
                and vi.type.tensor_type.elem_type not in IMPORTABLE:
            raise UnsupportedOp(f"{node_desc(p)} produces '{vi.name}' of dtype "
                                f"{_dtype_name(vi.type.tensor_type.elem_type)}, which portable does not support")
        if p is not None and vi.type.WhichOneof("value") not in (None, "tensor_type"):
            kind = vi.type.WhichOneof("value").replace("_type", "")
            raise UnsupportedOp(f"{node_desc(p)} produces '{vi.name}', a {kind}: only tensors are supported")
    for n in iter_nodes(m.graph):
        for a in n.attribute:
            if a.type == a.TENSOR and a.t.data_type not in IMPORTABLE:
                raise UnsupportedOp(f"{node_desc(n)}: attribute '{a.name}' is a tensor of dtype "
                                    f"{_dtype_name(a.t.data_type)}, which portable does not support")
            if a.type == a.TENSOR:
                check_tensor_data(a.t, f"{node_desc(n)}: attribute '{a.name}'")


__all__ = [
    "IMPORTABLE",
    "check_axes",
    "check_dtypes",
    "check_inferred",
    "check_known_failures",
    "check_ops",
    "iter_nodes",
    "name_nodes",
    "node_desc",
    "pad_outputs",
]
