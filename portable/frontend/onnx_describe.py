"""How errors and dumps name an ONNX node: its name, op type and attributes, on one short line.

    node_detail(node) -> "node 'pool1' (op MaxPool, kernel_shape=[3, 3], ceil_mode=1, pads=[0, 0, 1, 1])"
"""

from __future__ import annotations

MAX_ATTR_CHARS = 200  # beyond this the attribute list is cut: the first line of an error stays readable


def _value(a) -> str:
    from onnx import AttributeProto as A

    def short(xs, fmt=str) -> str:
        xs = list(xs)
        body = ", ".join(fmt(x) for x in xs[:8])
        return f"[{body}{', ...' if len(xs) > 8 else ''}]"

    if a.type == A.INT:
        return str(a.i)
    if a.type == A.FLOAT:
        return f"{a.f:g}"
    if a.type == A.STRING:
        return repr(a.s.decode(errors="replace"))
    if a.type == A.INTS:
        return short(a.ints)
    if a.type == A.FLOATS:
        return short(a.floats, lambda f: f"{f:g}")
    if a.type == A.STRINGS:
        return short(a.strings, lambda s: repr(s.decode(errors="replace")))
    if a.type == A.TENSOR:
        return f"<tensor {list(a.t.dims)}>"
    if a.type == A.SPARSE_TENSOR:
        return f"<sparse tensor {list(a.sparse_tensor.dims)}>"
    if a.type in (A.GRAPH, A.GRAPHS):
        return "<graph>"
    return "<...>"


def attributes_text(node) -> str:
    """'k=v, ...' of the node's attributes in the model's order, cut at MAX_ATTR_CHARS."""
    text = ", ".join(f"{a.name}={_value(a)}" for a in node.attribute)
    return text if len(text) <= MAX_ATTR_CHARS else text[:MAX_ATTR_CHARS] + "..."


def node_detail(node) -> str:
    """The node's name, op type (domain-qualified outside the default domain) and attributes."""
    dom = f"{node.domain}:" if node.domain and node.domain != "ai.onnx" else ""
    attrs = attributes_text(node)
    return f"node '{node.name}' (op {dom}{node.op_type}{', ' + attrs if attrs else ''})"


__all__ = ["attributes_text", "node_detail"]
