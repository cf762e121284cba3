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

Which path each node of a rewritten op took (its rewrite, with the rewrite's `b.note` saying why, or torch-mlir's
lowering) is kept in the model's metadata and put on the imported MLIR module by `annotate`; the compiler writes it
to the PORTABLE_DUMP directory as onnx-decompositions.txt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .onnx_weights import NONE, value

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
        self.note = ""  # why the node was rewritten, for the dump

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
    def input_range(self, name: str, lo: int, hi: int, why: str) -> bool:
        """Record that the values of `name` must lie in [lo, hi] where they come straight from a graph input
        (through ops that pass values on unchanged, integer casts included): the runtime then refuses a call whose
        input breaks it, as onnxruntime does, instead of computing with clamped values. True if recorded."""
        producers = {o: n for n in self.m.graph.node for o in n.output}
        inits = {i.name for i in self.m.graph.initializer}
        inputs = [vi.name for vi in self.m.graph.input if vi.name not in inits]  # in the order callers pass them
        seen = 0
        while name in producers and seen < 64:
            n, seen = producers[name], seen + 1
            if n.op_type == "Cast":
                to = next((a.i for a in n.attribute if a.name == "to"), None)
                if to not in (6, 7) or self._types.get(n.input[0]) not in (2, 3, 4, 5, 6, 7, 12, 13):
                    return False  # from floats or into narrower types: the values change
            elif n.op_type not in _SAME_VALUES or n.domain not in ("", "ai.onnx"):
                return False
            name = n.input[0]
        if name not in inputs:
            return False
        entry = next((p for p in self.m.metadata_props if p.key == RANGES_KEY), None)
        if entry is None:
            entry = self.m.metadata_props.add()
            entry.key = RANGES_KEY
        # By position: a user's input name may hold any character; the reason's tabs and newlines become spaces.
        line = f"{inputs.index(name)}\t{int(lo)}\t{int(hi)}\t{' '.join(why.split())}"
        entry.value = "\n".join(filter(None, [entry.value, line]))
        return True

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


def _known(m, weights: Mapping[str, np.ndarray]) -> tuple[dict, dict, dict]:
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
            consts[init.name] = value(init, weights)
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value" and a.t.data_type != 16:
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
    return shapes, types, consts


PATHS_KEY = "portable.onnx_paths"  # metadata_props entry: one line per node of an op with a rewrite
# metadata_props entry (and module attribute): the values a graph input may hold, one line per constraint
# '<input position>\t<lo>\t<hi>\t<why>': indices a gather reads unchecked come straight from the caller.
RANGES_KEY = "portable.input_ranges"
# Ops that pass index values through unchanged (a subset, a copy or another shape of them).
_SAME_VALUES = {"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Transpose", "Slice", "Tile"}


def decompose(m, infer, _done: frozenset = frozenset(), weights: Mapping[str, np.ndarray] = NONE):
    """Apply the registered rewrites to the top-level graph; returns the (re-inferred) model. `_done`: names of
    nodes already visited (emitted by a rewrite or left to torch-mlir) by an earlier round; `weights`: the arrays
    of initializers `onnx_weights.detach` left as stubs."""
    from ..errors import PortableError, UnsupportedOp
    from . import (  # noqa: F401
        onnx_decomp_grid,
        onnx_decomp_index,
        onnx_decomp_linalg,
        onnx_decomp_norm,
        onnx_decomp_pad,
        onnx_decomp_pool,
        onnx_decomp_signal,
        onnx_decomp_spectral,
        onnx_decomp_topk,
    )
    from .onnx_describe import node_detail

    def candidate(n) -> bool:
        return n.op_type in REWRITES and n.domain in ("", "ai.onnx") and n.name not in _done

    if not any(candidate(n) for n in m.graph.node):
        return m
    shapes, types, consts = _known(m, weights)
    taken = {o for n in m.graph.node for o in list(n.output) + [n.name]} | set(shapes)
    out, changed, reshaped, notes = [], False, False, []
    nodes = list(m.graph.node)
    for k, n in enumerate(nodes):
        if reshaped:  # shapes downstream are stale: the rest waits for the next round
            out.extend(nodes[k:])
            break
        if not candidate(n):
            out.append(n)
            continue
        before = {o: shapes.get(o) for o in n.output}
        b = Builder(m, n, shapes, types, consts, taken)
        try:
            done = REWRITES[n.op_type](n, b)
        except PortableError:
            raise
        except Exception as e:  # a rewrite's numpy or protobuf error on an odd node: name the node, not a traceback
            raise UnsupportedOp(f"{node_detail(n)}: its decomposition failed: {type(e).__name__}: {e}") from e
        if done:
            out.extend(b.nodes)
            m.graph.initializer.extend(b.initializers)
            changed = True
            notes.append(f"{node_detail(n)}: decomposed: {b.note or 'rewritten into ' + _op_list(b.nodes)}")
            _done = _done | {e.name for e in b.nodes}
            reshaped = any(before[o] is not None and shapes.get(o) != before[o] for o in n.output)
            continue
        notes.append(f"{node_detail(n)}: torch-mlir's lowering")
        _done = _done | {n.name}
        out.append(n)
    _add_paths(m, notes)
    if not changed:
        return m
    del m.graph.node[:]
    m.graph.node.extend(out)
    if reshaped:
        # A rewrite computed another shape than ONNX inference had (onnxruntime's, where the two disagree):
        # every inferred shape after it is stale, so all are inferred again from the pinned inputs.
        del m.graph.value_info[:]
        for vi in m.graph.output:
            if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
                for d in vi.type.tensor_type.shape.dim:
                    d.Clear()
        return decompose(infer(m), infer, _done, weights)
    return infer(m)


def _op_list(nodes) -> str:
    return " + ".join(dict.fromkeys(n.op_type for n in nodes)) or "nothing"


def _add_paths(m, notes: list[str]) -> None:
    if not notes:
        return
    entry = next((p for p in m.metadata_props if p.key == PATHS_KEY), None)
    if entry is None:
        entry = m.metadata_props.add()
        entry.key = PATHS_KEY
    entry.value = "\n".join(filter(None, [entry.value] + notes))


def paths(m) -> list[str]:
    """The lines `decompose` recorded for `m`: '<node>: decomposed: <why>' or '<node>: torch-mlir's lowering'."""
    entry = next((p for p in m.metadata_props if p.key == PATHS_KEY), None)
    return entry.value.split("\n") if entry is not None and entry.value else []


def annotate(module, m) -> None:
    """Put the recorded paths on the imported MLIR module (attribute PATHS_KEY, an array of strings), and the
    recorded input ranges (RANGES_KEY: '<input position>\t<lo>\t<hi>\t<why>' per constraint)."""
    from ..ir.mlir import ir

    lines = paths(m)
    if lines:
        module.attributes[PATHS_KEY] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in lines])
    entry = next((p for p in m.metadata_props if p.key == RANGES_KEY), None)
    ranges = entry.value.split("\n") if entry is not None and entry.value else []
    if ranges:
        module.attributes[RANGES_KEY] = ir.ArrayAttr.get([ir.StringAttr.get(s) for s in ranges])


__all__ = ["PATHS_KEY", "RANGES_KEY", "REWRITES", "Builder", "annotate", "decompose", "paths", "rewrite"]
