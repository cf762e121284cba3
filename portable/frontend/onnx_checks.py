"""Checks on an ONNX model before torch-mlir sees it: ops, dtypes, shapes, and the nodes known to hang or
crash torch-mlir's pipelines. Each failure is an UnsupportedOp naming the node, its op type and the reason."""

from __future__ import annotations

from ..errors import UnsupportedOp

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


def pad_outputs(graph) -> None:
    for n in iter_nodes(graph):
        want = _PAD_OUTPUTS.get(n.op_type) if n.domain in ("", "ai.onnx") else None
        if want:
            while len(n.output) < want:
                n.output.append(f"{n.name}__unused_{len(n.output)}")


_LOWERED_DOMAINS = {""}  # ai.onnx; ai.onnx.ml and ai.onnx.preview.training ops have no torch-mlir lowering


def _attr(node, name: str, default=None):
    for a in node.attribute:
        if a.name == name:
            return a.s.decode() if a.type == a.STRING else a.i if a.type == a.INT else default
    return default


def check_known_failures(m) -> None:
    """Nodes that make torch-mlir's pipelines hang or abort the process (seen in the onnx node suite): refuse them
    here, so a bad model raises instead of taking the caller's process down."""
    shapes = {vi.name: [d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim]
              for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)
              if vi.type.tensor_type.HasField("shape")}
    ranks = {k: len(v) for k, v in shapes.items()}
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


def check_inferred(m) -> None:
    """Every value a node produces needs a known rank: torch-mlir's importer would take an unknown one for a
    scalar and its converters then crash. Compile-per-shape needs the shapes anyway."""
    known = {vi.name for vi in list(m.graph.value_info) + list(m.graph.output) + list(m.graph.input)
             if vi.type.WhichOneof("value") != "tensor_type" or vi.type.tensor_type.HasField("shape")}
    known |= {i.name for i in m.graph.initializer}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in known:
                raise UnsupportedOp(f"{node_desc(n)}: ONNX shape inference could not determine the shape of its "
                                    f"output '{o}' (portable compiles per shape: every shape must be known)")


def check_ops(m, expandable=lambda node: False) -> None:
    """Unknown ops (no schema in any imported domain, no local function) are rejected by name up front; so are ops
    of domains torch-mlir does not lower, unless `expandable(node)` (it has an ONNX function body to expand)."""
    import onnx

    opsets = {(o.domain or ""): o.version for o in m.opset_import}
    local = {(f.domain, f.name) for f in m.functions}
    for n in iter_nodes(m.graph):
        dom = "" if n.domain in ("", "ai.onnx") else n.domain
        if (n.domain, n.op_type) in local:
            continue
        if dom not in opsets:
            raise UnsupportedOp(f"{node_desc(n)}: its domain '{dom}' is not among the model's opset imports")
        if not onnx.defs.has(n.op_type, dom):
            raise UnsupportedOp(f"{node_desc(n)}: unknown op: no ONNX schema for '{n.op_type}' in domain "
                                f"'{dom or 'ai.onnx'}'")
        if dom not in _LOWERED_DOMAINS and not expandable(n):
            raise UnsupportedOp(f"{node_desc(n)}: ops of domain '{dom}' have no lowering (torch-mlir lowers the "
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


def check_dtypes(m) -> None:
    """Graph inputs, outputs, initializers and every typed value must have a dtype we carry through."""
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


__all__ = ["check_ops", "check_dtypes", "check_inferred", "check_known_failures", "name_nodes", "pad_outputs",
           "iter_nodes", "node_desc", "IMPORTABLE"]
