"""Rewrite ONNX nodes into simpler ONNX ops before import, where torch-mlir's lowering of the node does not reach
the compiler: no lowering at all (CumProd, DFT, LpPool), or one into `tm_tensor` ops (scan, scatter, sort) that
have no linalg form.

Shapes are static by now (compile per shape) and small shape-like inputs are folded constants, so a rewrite can
build index tables, masks and interpolation matrices with numpy at compile time and leave only dense, parallel
work (Where, MatMul, ReduceSum, Gather) for the device.

    m = decompose(m, infer_shapes)

A rewrite is a function registered with `@rewrite("Op", ...)`; it gets the node and a `Builder` and returns
True when it replaced the node (emitting the replacement through the builder), False to leave it to torch-mlir.
Emitted nodes are named '<node name>/<op>_<i>' so diagnostics still point at the original node.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

REWRITES: dict[str, Callable] = {}


def rewrite(*ops: str):
    def register(fn):
        for op in ops:
            REWRITES[op] = fn
        return fn
    return register


class Builder:
    """What a rewrite sees of the model: static shapes, element types and constant values of the values around
    the node, and helpers that emit nodes and initializers in place of the node being rewritten."""

    def __init__(self, m, node, shapes: dict, elem_types: dict, consts: dict, taken: set):
        self.m, self.node = m, node
        self._shapes, self._types, self._consts, self._taken = shapes, elem_types, consts, taken
        self.nodes: list = []
        self.initializers: list = []

    # -- what is known about values
    def shape(self, name: str) -> tuple | None:
        """Static shape of a value, None when unknown."""
        return self._shapes.get(name)

    def elem_type(self, name: str) -> int | None:
        """ONNX element type (onnx.TensorProto.FLOAT, ...) of a value, None when unknown."""
        return self._types.get(name)

    def np_dtype(self, name: str):
        from onnx import helper

        t = self.elem_type(name)
        return None if t is None else np.dtype(helper.tensor_dtype_to_np_dtype(t))

    def static_shape(self, name: str) -> tuple:
        """Static shape of a value; UnsupportedOp naming the node when it is not known."""
        shape = self.shape(name)
        if shape is None:
            self.fail(f"the shape of '{name}' is not known statically (portable compiles per shape)")
        return tuple(int(d) for d in shape)

    def fail(self, reason: str):
        from ..errors import UnsupportedOp
        from .onnx_checks import node_desc

        raise UnsupportedOp(f"{node_desc(self.node)}: {reason}")

    def const(self, name: str) -> np.ndarray | None:
        """Value of an initializer or Constant output, None when computed at run time."""
        return self._consts.get(name)

    def set_shape(self, name: str, shape: tuple) -> None:
        """Record the static shape of a value the rewrite produces that inference left unknown (a Compress with a
        constant condition), so rewrites of the nodes after it see it; inference runs again after all rewrites."""
        self._shapes[name] = tuple(int(d) for d in shape)

    def attr(self, name: str, default=None):
        from onnx import helper

        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    # -- emitting the replacement
    def fresh(self, hint: str) -> str:
        base = f"{self.node.name or self.node.op_type}/{hint}"
        name, i = base, 0
        while name in self._taken:
            i += 1
            name = f"{base}_{i}"
        self._taken.add(name)
        return name

    def constant(self, value, hint: str = "const") -> str:
        """Name of a new initializer holding `value` (a numpy array, dtype kept)."""
        from onnx import numpy_helper

        name = self.fresh(hint)
        arr = np.asarray(value)
        self.initializers.append(numpy_helper.from_array(arr, name))
        self._consts[name] = arr
        self._shapes[name] = arr.shape
        return name

    def op(self, op_type: str, inputs: list[str], outputs: int | list[str] = 1, **attrs) -> str | list[str]:
        """Emit one node; returns its output name (or the list of names when `outputs` is a list or > 1).
        Pass the rewritten node's own output names as `outputs` for the final node(s)."""
        from onnx import helper

        outs = outputs if isinstance(outputs, list) else [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh(op_type), **attrs))
        return outs if isinstance(outputs, list) or len(outs) > 1 else outs[0]


def _known(m) -> tuple[dict, dict, dict]:
    from onnx import numpy_helper

    shapes, types, consts = {}, {}, {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        tt = vi.type.tensor_type if vi.type.WhichOneof("value") == "tensor_type" else None
        if tt is None:
            continue
        types[vi.name] = tt.elem_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
    inputs = {vi.name for vi in m.graph.input}
    for init in m.graph.initializer:
        shapes[init.name], types[init.name] = tuple(init.dims), init.data_type
        if init.name not in inputs and init.data_type != 16:  # bfloat16 has no numpy dtype
            consts[init.name] = numpy_helper.to_array(init)
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and a.t.data_type != 16:
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
    return shapes, types, consts


def decompose(m, infer):
    """Apply the registered rewrites to the top-level graph; returns the (re-inferred) model."""
    from . import (  # noqa: F401
        onnx_decomp_grid,
        onnx_decomp_index,
        onnx_decomp_linalg,
        onnx_decomp_signal,
        onnx_decomp_spectral,
    )
    if not any(n.op_type in REWRITES and n.domain in ("", "ai.onnx") for n in m.graph.node):
        return m
    shapes, types, consts = _known(m)
    taken = {o for n in m.graph.node for o in list(n.output) + [n.name]} | set(shapes)
    out, changed = [], False
    for n in m.graph.node:
        fn = REWRITES.get(n.op_type) if n.domain in ("", "ai.onnx") else None
        if fn is not None:
            b = Builder(m, n, shapes, types, consts, taken)
            if fn(n, b):
                out.extend(b.nodes)
                m.graph.initializer.extend(b.initializers)
                changed = True
                continue
        out.append(n)
    if not changed:
        return m
    del m.graph.node[:]
    m.graph.node.extend(out)
    return infer(m)


__all__ = ["decompose", "rewrite", "Builder", "REWRITES"]
