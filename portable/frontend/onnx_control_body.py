"""Plumbing for unrolling ONNX control flow (onnx_control.py): copies of a subgraph's nodes with its values renamed
per iteration, the constants and static shapes known before a sweep, and the helper nodes (Slice, Squeeze,
Unsqueeze, Concat) written in the model's opset."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import UnsupportedOp
from .onnx_checks import node_desc
from .onnx_weights import NONE, value

MAX_ITERATIONS = 1024  # iterations unrolled for one Scan or Loop node
MAX_UNROLLED_NODES = 20000  # nodes unrolling may add to one model


class Pending(Exception):
    """A control node that cannot be unrolled yet: a shape or a constant it needs is not known (a later sweep,
    after inference and folding, may know it)."""


def attr(node, name: str, default=None):
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def subgraphs(node):
    for a in node.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def constant_value(node):
    """The value of a Constant node (numpy), or None for kinds not folded (sparse, strings)."""
    from onnx import numpy_helper

    for a in node.attribute:
        if a.name == "value" and a.t.data_type != 8:
            return numpy_helper.to_array(a.t)
        if a.name in ("value_float", "value_floats"):
            return np.array(a.f if a.name == "value_float" else list(a.floats), np.float32)
        if a.name in ("value_int", "value_ints"):
            return np.array(a.i if a.name == "value_int" else list(a.ints), np.int64)
    return None


def _defined_names(graph, into: set[str]) -> set[str]:
    """Every value name a graph defines, nested subgraphs included."""
    into.update(vi.name for vi in graph.input)
    into.update(t.name for t in graph.initializer)
    into.update(t.values.name for t in graph.sparse_initializer)
    for n in graph.node:
        into.update(o for o in n.output if o)
        for g in subgraphs(n):
            _defined_names(g, into)
    return into


def _count_nodes(graph) -> int:
    return sum(1 + sum(_count_nodes(g) for g in subgraphs(n)) for n in graph.node)


def _rename_node(n, mapping: dict[str, str], node_name) -> None:
    for i, v in enumerate(n.input):
        n.input[i] = mapping.get(v, v) if v else v
    for i, v in enumerate(n.output):
        n.output[i] = mapping.get(v, v) if v else v
    n.name = node_name(n)
    for g in subgraphs(n):
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            vi.name = mapping.get(vi.name, vi.name)
        for t in g.initializer:
            t.name = mapping.get(t.name, t.name)
        for sub in g.node:
            _rename_node(sub, mapping, node_name)


class _Constants(Mapping):
    """Values of initializers and Constant nodes by name, read into numpy only when asked for (weights stay put)."""

    def __init__(self, m, weights: Mapping[str, np.ndarray] = NONE):
        graph_inputs = {vi.name for vi in m.graph.input}
        self._weights = weights
        self._protos = {t.name: t for t in m.graph.initializer if t.name not in graph_inputs and t.data_type != 8}
        self._protos.update({n.output[0]: n for n in m.graph.node
                             if n.op_type == "Constant" and n.domain in ("", "ai.onnx")})
        self._values: dict[str, np.ndarray | None] = {}

    def _value(self, name: str):
        if name not in self._values:
            p = self._protos.get(name)
            self._values[name] = None if p is None else constant_value(p) if hasattr(p, "op_type") \
                else value(p, self._weights)
        return self._values[name]

    def __getitem__(self, name: str) -> np.ndarray:
        v = self._value(name)
        if v is None:
            raise KeyError(name)
        return v

    def __contains__(self, name) -> bool:
        return self._value(name) is not None

    def __iter__(self):
        return (k for k in self._protos if k in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Sweep:
    """One pass over the top-level graph: names, static shapes and constants known at its start, and the helpers
    that emit nodes."""

    def __init__(self, m, budget: list[int], weights: Mapping[str, np.ndarray] = NONE):
        self.m, self.budget = m, budget
        self.opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.names = _defined_names(m.graph, set())
        self.shapes: dict[str, tuple] = {}
        for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
            if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
                self.shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else None
                                             for d in vi.type.tensor_type.shape.dim)
        for t in m.graph.initializer:
            self.shapes[t.name] = tuple(t.dims)
        self.consts = _Constants(m, weights)
        self._const_names: dict[tuple, str] = {}
        self.selects: list[tuple] = []  # (If node, then value, else value): same shape, checked after inference

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return name

    def const(self, value: np.ndarray, base: str = "const") -> str:
        """An initializer holding `value` (one per distinct value)."""
        from onnx import numpy_helper

        key = (value.dtype.str, value.shape, value.tobytes())
        if key not in self._const_names:
            name = self.fresh(base)
            self.m.graph.initializer.append(numpy_helper.from_array(value, name))
            self._const_names[key] = name
        return self._const_names[key]

    def static_shape(self, name: str, node, what: str) -> tuple:
        shape = self.shapes.get(name)
        if shape is None or None in shape:
            raise Pending(f"{what} '{name}' has no static shape")
        return shape

    def spend(self, n: int, node) -> None:
        self.budget[0] += n
        if self.budget[0] > MAX_UNROLLED_NODES:
            raise UnsupportedOp(f"{node_desc(node)}: unrolling control flow would add more than {MAX_UNROLLED_NODES} "
                                f"nodes to the model (portable unrolls If/Scan/Loop before import)")

    def hoist_initializers(self, node, body) -> dict[str, str]:
        """The body's own initializers, copied once to the top level under fresh names."""
        mapping = {}
        if len(body.sparse_initializer):
            raise UnsupportedOp(f"{node_desc(node)}: its body has sparse initializers, which are not supported")
        for t in body.initializer:
            c = type(t)()
            c.CopyFrom(t)
            c.name = mapping[t.name] = self.fresh(f"{node.name}/{t.name}")
            self.m.graph.initializer.append(c)
        return mapping

    def instantiate(self, node, body, bind: dict[str, str], tag: str, shared: dict[str, str]):
        """Copies of the body's nodes with its inputs bound to `bind` and every value it defines renamed; returns
        (nodes, the names of its outputs). Names it does not define are outer-scope values and stay as they are."""
        from onnx import NodeProto

        mapping = dict(shared)
        for name in sorted(_defined_names(body, set()) - set(bind) - set(shared)):
            mapping[name] = self.fresh(f"{node.name}/{tag}{name}")
        mapping.update(bind)
        own = node.name + "/"

        def node_name(n):
            suffix = n.name[len(own):] if n.name.startswith(own) else (n.name or n.op_type)
            return f"{node.name}/{tag}{suffix}"

        nodes = []
        for n in body.node:
            c = NodeProto()
            c.CopyFrom(n)
            _rename_node(c, mapping, node_name)
            nodes.append(c)
        self.spend(_count_nodes(body), node)
        return nodes, [mapping.get(o.name, o.name) for o in body.output]


class Emit:
    """Helper nodes for one control node, in the model's opset (attributes before opset 10/13, inputs after)."""

    def __init__(self, st: Sweep, node):
        self.st, self.node, self.nodes = st, node, []

    def op(self, op_type: str, inputs: list[str], base: str, out: str | None = None, **attrs) -> str:
        from onnx import helper

        out = out or self.st.fresh(f"{self.node.name}/{base}")
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def _ints(self, values) -> str:
        return self.st.const(np.array(values, np.int64))

    def take(self, x: str, axis: int, index: int, base: str) -> str:
        """x[..., index, ...] along `axis` (a non-negative axis), the axis removed."""
        if self.st.opset >= 10:
            s = self.op("Slice", [x, self._ints([index]), self._ints([index + 1]), self._ints([axis])], base + "_slice")
        else:
            s = self.op("Slice", [x], base + "_slice", starts=[index], ends=[index + 1], axes=[axis])
        return self.squeeze(s, axis, base)

    def squeeze(self, x: str, axis: int, base: str) -> str:
        if self.st.opset >= 13:
            return self.op("Squeeze", [x, self._ints([axis])], base)
        return self.op("Squeeze", [x], base, axes=[axis])

    def unsqueeze(self, x: str, axis: int, base: str) -> str:
        if self.st.opset >= 13:
            return self.op("Unsqueeze", [x, self._ints([axis])], base)
        return self.op("Unsqueeze", [x], base, axes=[axis])

    def stack(self, items: list[str], axis: int, base: str, out: str | None = None) -> str:
        """The items stacked along a new `axis` (negative: counted from the end of the stacked rank)."""
        parts = [self.unsqueeze(v, axis, f"{base}_{i}") for i, v in enumerate(items)]
        return self.op("Concat", parts, base, out=out, axis=axis)

    def identity(self, x: str, out: str) -> None:
        self.op("Identity", [x], out, out=out)


def check_count(node, iterations: int) -> None:
    if iterations > MAX_ITERATIONS:
        raise UnsupportedOp(f"{node_desc(node)}: {iterations} iterations: portable unrolls Scan/Loop before import "
                            f"and stops at {MAX_ITERATIONS} iterations")


def stack_results(e: Emit, node, states: list[str], per_step: list[list[str]], axes, dirs) -> None:
    """The node's outputs: final states as they are, per-iteration scan outputs stacked along their axes (reversed
    where their direction is 1)."""
    n_state = len(states)
    for o, v in zip(node.output, states):
        if o:
            e.identity(v, o)
    for k, items in enumerate(per_step):
        o = node.output[n_state + k]
        if not o:
            continue
        if not items:
            raise UnsupportedOp(f"{node_desc(node)}: zero iterations: its scan output '{o}' would be empty, which "
                                f"is not supported")
        e.stack(items[::-1] if dirs[k] else items, axes[k], f"scan_out{k}", out=o)


__all__ = ["MAX_ITERATIONS", "MAX_UNROLLED_NODES", "Pending", "Sweep", "Emit", "attr", "subgraphs", "check_count",
           "stack_results", "constant_value"]
