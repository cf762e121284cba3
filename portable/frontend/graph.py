"""`Graph`: build a tensor graph in Python and get MLIR text (linalg on tensors) or numpy results.

    g = Graph("mlp")
    x = g.input((8, 16)); w = g.constant(np.ones((16, 4), np.float32))
    g.output(g.relu(g.matmul(x, w)))
    text = g.to_mlir()            # for the compiler
    (y,) = g.reference(x_array)   # numpy meaning of the same graph, for tests

Shapes are static and every dim is >= 1. All checks happen here, at build time, and raise
`ShapeMismatch` (shapes, dtypes, axes) or `UnsupportedOp` (an op the dtype does not have).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ShapeMismatch, UnsupportedOp
from .graph_conv import conv2d
from .graph_elementwise import ElementwiseOps, Scalar, dtype_name, scalar
from .graph_emit import emit_module
from .graph_ir import Instr, Node, Tensor
from .graph_reference import evaluate

__all__ = ["Graph", "Tensor"]


class Graph(ElementwiseOps):
    """A builder of one function: inputs, ops, outputs. Ops return `Tensor` handles of this graph.
    Elementwise ops (add ... gelu, cast) come from ElementwiseOps."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self._nodes: list[Node] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []

    # -- signature ------------------------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Tensor, ...]:
        return tuple(Tensor(self, i) for i in self._inputs)

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return tuple(Tensor(self, i) for i in self._outputs)

    def _add(self, kind: str, inputs: Sequence[Tensor], shape, dtype: str, /, **attrs) -> Tensor:
        self._nodes.append(Node(kind, tuple(t.id for t in inputs), tuple(int(d) for d in shape), dtype, attrs))
        return Tensor(self, len(self._nodes) - 1)

    def _check(self, op: str, *ts) -> None:
        for t in ts:
            if not isinstance(t, Tensor) or t.graph is not self:
                raise ShapeMismatch(f"{op}: expected a Tensor of graph {self.name!r}, got {t!r}")

    def input(self, shape: Sequence[int], dtype="float32") -> Tensor:
        """A function argument; arguments are numbered in the order of these calls."""
        shape = tuple(int(d) for d in shape)
        if any(d < 1 for d in shape):
            raise ShapeMismatch(f"input: shape {shape} has a dim < 1; every dim must be a static size >= 1")
        t = self._add("input", [], shape, dtype_name(dtype), index=len(self._inputs))
        self._inputs.append(t.id)
        return t

    def constant(self, value, dtype=None) -> Tensor:
        """A dense constant (weights); float64 arrays need an explicit dtype (or .astype first)."""
        arr = np.asarray(value)
        if dtype is None and arr.dtype == np.float64:
            raise UnsupportedOp("constant: array is float64, which is not supported; pass dtype='float32' "
                                "or value.astype(np.float32)")
        name = dtype_name(dtype if dtype is not None else arr.dtype)
        if 0 in arr.shape:
            raise ShapeMismatch(f"constant: shape {arr.shape} has a zero dim; every dim must be >= 1")
        arr = np.array(arr, dtype=name, order="C")  # a copy; ascontiguousarray would make rank 0 rank 1
        arr.flags.writeable = False
        return self._add("constant", [], arr.shape, name, value=arr)

    def output(self, *tensors: Tensor) -> None:
        """Mark results of the function; repeated calls append, results keep the order given."""
        self._check("output", *tensors)
        self._outputs.extend(t.id for t in tensors)

    # -- reductions -----------------------------------------------------------------------------------
    def _axes(self, op: str, x: Tensor, axis) -> tuple[int, ...]:
        if axis is None:
            return tuple(range(x.ndim))
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        norm = []
        for a in axes:
            if not -x.ndim <= a < x.ndim:
                raise ShapeMismatch(f"{op}: axis {a} is out of range for shape {x.shape} (rank {x.ndim}); "
                                    f"use an axis in [{-x.ndim}, {x.ndim - 1}]")
            norm.append(int(a) % x.ndim)
        if len(set(norm)) != len(norm):
            raise ShapeMismatch(f"{op}: axis {axis} repeats a dim of shape {x.shape}; name each axis once")
        return tuple(sorted(norm))

    def _reduce(self, kind: str, x: Tensor, axis, keepdims: bool) -> Tensor:
        self._check(kind, x)
        axes = self._axes(kind, x, axis)
        if not axes:
            return x
        out = tuple(d for k, d in enumerate(x.shape) if k not in axes)
        r = self._add("reduce", [x], out, x.dtype, kind=kind, axes=axes)
        return self._keep(r, x, axes) if keepdims else r

    def _keep(self, r: Tensor, x: Tensor, axes: tuple[int, ...]) -> Tensor:
        return self.reshape(r, tuple(1 if k in axes else d for k, d in enumerate(x.shape)))

    def sum(self, x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        """Sum over axis (int, tuple or None = all); integers wrap; f16 accumulates in f16 in the IR."""
        return self._reduce("sum", x, axis, keepdims)

    def max(self, x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        """Max over axis; NaN propagates."""
        return self._reduce("max", x, axis, keepdims)

    def min(self, x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        """Min over axis; NaN propagates."""
        return self._reduce("min", x, axis, keepdims)

    def mean(self, x: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        """sum(x, axis) * (1/n), float only."""
        self._float_only("mean", x)
        axes = self._axes("mean", x, axis)
        if not axes:
            return x
        n = int(np.prod([x.shape[a] for a in axes]))
        r = self.mul(self._reduce("sum", x, axes, False), 1.0 / n)
        return self._keep(r, x, axes) if keepdims else r

    def softmax(self, x: Tensor, axis: int = -1) -> Tensor:
        """exp(x - max) / sum(exp(x - max)) along axis, as max-reduce, generic, sum-reduce, generic."""
        self._float_only("softmax", x)
        if not isinstance(axis, (int, np.integer)):
            raise ShapeMismatch(f"softmax: axis={axis!r}; softmax takes one int axis")
        (ax,) = self._axes("softmax", x, axis)
        m = self._add("reduce", [x], x.shape[:ax] + x.shape[ax + 1:], x.dtype, kind="max", axes=(ax,))
        a, b = Instr("arg", (), 0), Instr("arg", (), 1)
        e = self._along(x, m, ax, (a, b, Instr("sub", (0, 1)), Instr("exp", (2,))))
        s = self._add("reduce", [e], m.shape, x.dtype, kind="sum", axes=(ax,))
        return self._along(e, s, ax, (a, b, Instr("div", (0, 1))))

    def _along(self, x: Tensor, r: Tensor, ax: int, prog: tuple[Instr, ...]) -> Tensor:
        """Elementwise node of x and r (x reduced along ax); r is indexed without that dim, no reshape."""
        dims = (tuple(range(x.ndim)), tuple(d for d in range(x.ndim) if d != ax))
        return self._add("elementwise", [x, r], x.shape, x.dtype, prog=prog, dims=dims, src=x.dtype)

    # -- contractions ---------------------------------------------------------------------------------
    def matmul(self, a: Tensor, b: Tensor, out_dtype=None) -> Tensor:
        """(M,K)@(K,N) -> linalg.matmul; (B,M,K)@(B,K,N) -> linalg.batch_matmul; (B,M,K)@(K,N) is
        reshaped to one matmul. `out_dtype` (e.g. "float32" for float16 inputs) sets the accumulator and
        result type: f16 in, f32 accumulate."""
        self._check("matmul", a, b)
        what = f"matmul: a is {a.shape} {a.dtype}, b is {b.shape} {b.dtype}"
        if a.dtype != b.dtype:
            raise ShapeMismatch(f"{what}; dtypes differ, insert g.cast on one operand")
        if (a.ndim, b.ndim) not in ((2, 2), (3, 3), (3, 2)):
            raise UnsupportedOp(f"{what}; supported ranks are 2-D@2-D, 3-D@3-D (equal batch) and 3-D@2-D; "
                                f"reshape to one of these")
        out = a.dtype if out_dtype is None else str(np.dtype(out_dtype))
        if out not in ("float32", "float16", "int32", "int64"):
            raise UnsupportedOp(f"{what}; out_dtype {out} is not supported (float32, float16, int32, int64)")
        if a.shape[-1] != b.shape[-2]:
            raise ShapeMismatch(f"{what}; inner dims differ ({a.shape[-1]} != {b.shape[-2]}), "
                                f"a.shape[-1] must equal b.shape[-2]; transpose or reshape an operand")
        if a.ndim == 3 and b.ndim == 3:
            if a.shape[0] != b.shape[0]:
                raise ShapeMismatch(f"{what}; batch dims differ ({a.shape[0]} != {b.shape[0]}) and are not "
                                    f"broadcast; make them equal")
            return self._add("batch_matmul", [a, b], a.shape[:2] + b.shape[2:], out)
        if a.ndim == 3:
            (bt, m, k), n = a.shape, b.shape[1]
            flat = self._add("matmul", [self.reshape(a, (bt * m, k)), b], (bt * m, n), out)
            return self.reshape(flat, (bt, m, n))
        return self._add("matmul", [a, b], (a.shape[0], b.shape[1]), out)

    def conv2d(self, x: Tensor, w: Tensor, bias: Tensor | None = None, stride=(1, 1), padding=(0, 0),
               dilation=(1, 1), layout: str = "NHWC") -> Tensor:
        """2-D convolution (cross-correlation, no groups). NHWC: x NHWC, w HWCF; NCHW: x NCHW, w FCHW.
        padding: int, (ph, pw), ((top, bottom), (left, right)), "valid" or "same" (extra at the end)."""
        return conv2d(self, x, w, bias, stride, padding, dilation, layout)

    # -- data movement --------------------------------------------------------------------------------
    def pad(self, x: Tensor, pads: Sequence[tuple[int, int]], value: Scalar = 0) -> Tensor:
        """tensor.pad with a constant: pads[k] = (before, after) for dim k."""
        self._check("pad", x)
        pads = [tuple(int(v) for v in p) for p in pads]
        if len(pads) != x.ndim or any(len(p) != 2 or min(p) < 0 for p in pads):
            raise ShapeMismatch(f"pad: pads {pads} must be one (before, after) pair of ints >= 0 per dim of "
                                f"shape {x.shape}")
        if all(p == (0, 0) for p in pads):
            return x
        shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, pads))
        return self._add("pad", [x], shape, x.dtype, low=tuple(p[0] for p in pads),
                         high=tuple(p[1] for p in pads), value=scalar("pad", value, x.dtype))

    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        """Same elements in row-major order, new static shape; one dim may be -1."""
        self._check("reshape", x)
        shape = tuple(int(d) for d in shape)
        size = int(np.prod(x.shape))
        known = int(np.prod([d for d in shape if d != -1]))
        if shape.count(-1) > 1 or any(d < 1 and d != -1 for d in shape):
            raise ShapeMismatch(f"reshape: target {shape} may hold one -1 and otherwise sizes >= 1")
        if -1 in shape:
            if size % known:
                raise ShapeMismatch(f"reshape: {x.shape} ({size} elements) cannot be viewed as {shape}: "
                                    f"{size} is not a multiple of {known}")
            shape = tuple(size // known if d == -1 else d for d in shape)
        elif known != size:
            raise ShapeMismatch(f"reshape: {x.shape} has {size} elements but {shape} has {known}; "
                                f"the sizes must match")
        if shape == x.shape:
            return x
        return self._add("reshape", [x], shape, x.dtype)

    def transpose(self, x: Tensor, perm: Sequence[int] | None = None) -> Tensor:
        """Result dim k is input dim perm[k] (numpy); default reverses the dims."""
        self._check("transpose", x)
        perm = tuple(range(x.ndim))[::-1] if perm is None else tuple(int(p) for p in perm)
        if sorted(perm) != list(range(x.ndim)):
            raise ShapeMismatch(f"transpose: perm {perm} is not a permutation of the {x.ndim} dims of {x.shape}")
        if perm == tuple(range(x.ndim)):
            return x
        return self._add("transpose", [x], tuple(x.shape[p] for p in perm), x.dtype, perm=perm)

    # -- results --------------------------------------------------------------------------------------
    def to_mlir(self) -> str:
        """The module text: one public `func.func @main(inputs...) -> (outputs...)` of linalg / tensor /
        arith / math ops on static tensors; graph_emit's docstring lists exactly which ops and forms."""
        if not self._outputs:
            raise ShapeMismatch(f"graph {self.name!r} has no outputs; call g.output(tensor, ...) first")
        return emit_module(self._nodes, self._inputs, self._outputs, self.name)

    def reference(self, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        """Evaluate the graph with numpy, op by op with the same meaning as the emitted IR."""
        if not self._outputs:
            raise ShapeMismatch(f"graph {self.name!r} has no outputs; call g.output(tensor, ...) first")
        if len(inputs) != len(self._inputs):
            raise ShapeMismatch(f"reference: graph {self.name!r} takes {len(self._inputs)} inputs, got {len(inputs)}")
        arrays = []
        for k, (a, nid) in enumerate(zip(inputs, self._inputs)):
            a, n = np.asarray(a), self._nodes[nid]
            if a.shape != n.shape or a.dtype != np.dtype(n.dtype):
                raise ShapeMismatch(f"reference: input {k} is {a.shape} {a.dtype}, expected {n.shape} {n.dtype}; "
                                    f"pass an array of that shape, e.g. x.astype(np.{n.dtype})")
            arrays.append(a)
        return evaluate(self._nodes, self._inputs, self._outputs, arrays)
