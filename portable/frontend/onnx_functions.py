"""Expand ONNX nodes into their schema function bodies, for ops torch-mlir cannot lower.

Many newer ONNX ops (Attention, RMSNormalization, RotaryEmbedding, Swish, the loss functions, ...) are defined
in the ONNX schema as *functions*: a body of simpler ONNX ops, fixed or built from the node's attributes and
input types (a context-dependent body). Where torch-mlir has no lowering for such an op, the node is replaced by
its body, the way runtimes without a kernel for an op do; the body's ops then take their own lowerings.

    expanded = expand_nodes(m, lambda node: node.op_type == "Attention")

Inlined nodes are named '<node name>/<op>_<i>', so diagnostics about them still point at the original node.
"""

from __future__ import annotations

from collections.abc import Callable

_DOMAIN = "portable.expand"  # domain of the temporary model-local functions the inliner consumes


def _schema(domain: str, op: str, opsets: dict[str, int]):
    import onnx

    dom = "" if domain in ("", "ai.onnx") else domain
    if dom not in opsets:
        return None
    try:
        return onnx.defs.get_schema(op, opsets[dom], dom)
    except Exception:  # noqa: BLE001 - SchemaError: no such op at this opset; nothing to expand
        return None


def _pick(versions, opset: int) -> int | None:
    """The function-body version to use at `opset`: the newest not newer than it (else the oldest there is)."""
    versions = sorted(versions)
    if not versions:
        return None
    older = [v for v in versions if v <= opset]
    return older[-1] if older else versions[0]


def has_function_body(domain: str, op: str, opsets: dict[str, int]) -> bool:
    """True when the op has a schema function body (plain or context-dependent) at the model's opset."""
    s = _schema(domain, op, opsets)
    return s is not None and (s.has_function or s.has_context_dependent_function)


def opsets_of(m) -> dict[str, int]:
    return {("" if o.domain in ("", "ai.onnx") else o.domain): o.version for o in m.opset_import}


def _value_types(m) -> dict:
    import onnx

    types = {vi.name: vi.type for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)
             if vi.type.WhichOneof("value")}
    for init in m.graph.initializer:
        if init.name not in types:
            t = onnx.TypeProto()
            t.tensor_type.elem_type = init.data_type
            t.tensor_type.shape.SetInParent()
            for d in init.dims:
                t.tensor_type.shape.dim.add().dim_value = d
            types[init.name] = t
    return types


def _referenced_attributes(nodes, into: set[str]) -> set[str]:
    """Names of the node attributes a function body reads by reference (ref_attr_name), subgraphs included."""
    for n in nodes:
        for a in n.attribute:
            if a.ref_attr_name:
                into.add(a.ref_attr_name)
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                _referenced_attributes(g.node, into)
    return into


def _write_defaults(node, schema, body) -> None:
    """Attributes the body reads by reference that the node leaves at their schema defaults, written out: onnx's
    inliner drops a reference to an absent attribute, which leaves, for instance, Swish's `Constant <value_float =
    @alpha>` with no value at all (SwiGLU's body uses Swish without alpha)."""
    import onnx

    have = {a.name for a in node.attribute}
    for name in sorted(_referenced_attributes(body.node, set()) - have):
        a = schema.attributes.get(name)
        if a is not None and a.default_value.type != onnx.AttributeProto.UNDEFINED:
            c = onnx.AttributeProto()
            c.CopyFrom(a.default_value)
            c.name = name
            node.attribute.append(c)


def _body(node, schema, opset: int, types: dict):
    """The node's function body as a FunctionProto, or None when it cannot be built (unknown input types)."""
    import onnx

    if schema.has_context_dependent_function:
        ver = _pick(schema.context_dependent_function_opset_versions, opset)
        if ver is None:
            return None
        arg_types = []
        for name in node.input:
            if not name:  # an omitted optional input
                arg_types.append(onnx.TypeProto().SerializeToString())
            elif name in types:
                arg_types.append(types[name].SerializeToString())
            else:
                return None  # the body depends on input types that shape inference did not find
        data = schema.get_context_dependent_function_with_opset_version(ver, node.SerializeToString(), arg_types)
    else:
        ver = _pick(schema.function_opset_versions, opset)
        if ver is None:
            return None
        data = schema.get_function_with_opset_version(ver)
    f = onnx.FunctionProto.FromString(data)
    return f if len(f.node) else None


def expand_nodes(m, select: Callable, rounds: int = 4) -> list[str]:
    """Replace, in place, every top-level node that `select(node)` picks and that has a schema function body, by
    that body; repeated on the inlined nodes (bodies may use function ops too). Returns the expanded node names.
    The model needs inferred types (value_info) for context-dependent bodies, whose nodes are built from them."""
    import onnx
    import onnx.inliner
    from onnx import helper

    done: list[str] = []
    for _ in range(rounds):
        opsets = opsets_of(m)
        types = _value_types(m)
        picked = []  # (node, its domain, its op type, its body)
        for i, node in enumerate(m.graph.node):
            if not select(node):
                continue
            schema = _schema(node.domain, node.op_type, opsets)
            if schema is None or not (schema.has_function or schema.has_context_dependent_function):
                continue
            dom = "" if node.domain in ("", "ai.onnx") else node.domain
            f = _body(node, schema, opsets[dom], types)
            if f is None:
                continue
            _write_defaults(node, schema, f)
            f.domain, f.name = _DOMAIN, f"{node.op_type}.{i}"
            for j, b in enumerate(f.node):
                b.name = f"{node.name}/{b.op_type}_{j}"
            picked.append((node, node.domain, node.op_type, f))
            node.domain, node.op_type = _DOMAIN, f.name
        if not picked:
            break
        own = list(m.functions)  # the model's own local functions stay as they are
        del m.functions[:]
        m.functions.extend(f for *_, f in picked)
        m.opset_import.append(helper.make_opsetid(_DOMAIN, 1))
        # The version converter wants a type for every value, initializers included.
        typed = {vi.name for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output)}
        extra = [helper.make_value_info(i.name, types[i.name]) for i in m.graph.initializer if i.name not in typed]
        m.graph.value_info.extend(extra)
        try:
            # convert_version: bodies written for another opset are converted to the model's.
            inlined = onnx.inliner.inline_local_functions(m, convert_version=True)
        except Exception:  # noqa: BLE001 - a body the converter cannot bring to the model's opset
            inlined = None
            for node, dom, op, _ in picked:
                node.domain, node.op_type = dom, op
        if inlined is not None:
            m.CopyFrom(inlined)
            done += [node_name for node_name in (p[3].node[0].name.rsplit("/", 1)[0] for p in picked)]
        del m.functions[:]
        m.functions.extend(own)
        added = {vi.name for vi in extra}
        vis = [vi for vi in m.graph.value_info if vi.name not in added]
        del m.graph.value_info[:]
        m.graph.value_info.extend(vis)
        keep = [o for o in m.opset_import if o.domain != _DOMAIN]
        del m.opset_import[:]
        m.opset_import.extend(keep)
        if inlined is None:
            break
        # Types of the new intermediate values: context-dependent bodies of the next round need them.
        try:
            m.CopyFrom(onnx.shape_inference.infer_shapes(m, data_prop=True))
        except Exception:  # noqa: BLE001 - strict inference later reports what is wrong, by node
            break
    return done


__all__ = ["expand_nodes", "has_function_body", "opsets_of"]
