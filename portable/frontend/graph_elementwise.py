"""Elementwise ops of `Graph` (a mixin): numpy broadcasting, python scalars inlined as body constants.

Each op becomes one elementwise node, i.e. one `linalg.generic` whose body is a small scalar program
(gelu is one generic, not seven). Broadcasting lives in the indexing maps, never in a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import ShapeMismatch, UnsupportedOp
from .graph_ir import DTYPES, FLOAT_ONLY, Instr, Node, Tensor, is_float

Scalar = int | float
Operand = Tensor | int | float
Expr = tuple  # ("arg", k) | ("const", v) | (op, expr, ...) with op in UNARY, BINARY or "cast"


def dtype_name(dtype) -> str:
    """Normalize "float32" / np.float32 / np.dtype("float32") to "float32"; UnsupportedOp otherwise."""
    try:
        name = np.dtype(dtype).name
    except TypeError:
        name = str(dtype)
    if name not in DTYPES:
        raise UnsupportedOp(f"dtype {dtype!r} is not supported; use one of {', '.join(DTYPES)}")
    return name


def broadcast(op: str, tensors: Sequence[Tensor]) -> tuple[int, ...]:
    """numpy broadcasting of the operands' shapes, or ShapeMismatch naming them."""
    rank = max(t.ndim for t in tensors)
    out = []
    for k in range(rank):
        sizes = {t.shape[k - rank + t.ndim] for t in tensors if k - rank + t.ndim >= 0} - {1}
        if len(sizes) > 1:
            raise ShapeMismatch(
                f"{op}: shapes {' and '.join(str(t.shape) for t in tensors)} do not broadcast (dim {k} of the "
                f"result would be one of {sorted(sizes)}); reshape one operand so each dim is equal or 1")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def scalar(op: str, v: Scalar, dtype: str) -> Scalar:
    """A python number as a constant of dtype; ShapeMismatch if dtype cannot hold it."""
    if is_float(dtype):
        return float(v)
    info = np.iinfo(dtype)
    try:
        iv = int(v)
    except (OverflowError, ValueError):  # inf, nan
        iv = None
    if iv is None or iv != v or not info.min <= iv <= info.max:
        raise ShapeMismatch(f"{op}: scalar {v!r} is not an integer in [{info.min}, {info.max}] but the tensor "
                            f"is {dtype}; cast the tensor to float32 or use such an integer")
    return iv


class ElementwiseOps:
    """The elementwise part of Graph's API; Graph supplies _check and _add."""

    _nodes: list[Node]
    _check: Callable[..., None]
    _add: Callable[..., Tensor]

    def _ew(self, op: str, operands: Sequence[Operand], build: Callable[..., Expr],
            out_dtype: str | None = None) -> Tensor:
        """One elementwise node: build(leaf, ...) returns the body as an expression over the operands."""
        tensors = [t for t in operands if not isinstance(t, (int, float, np.number))]
        self._check(op, *tensors)
        if not tensors:
            raise ShapeMismatch(f"{op}: at least one operand must be a Tensor")
        dtype = tensors[0].dtype
        if any(t.dtype != dtype for t in tensors):
            raise ShapeMismatch(f"{op}: dtypes differ ({', '.join(f'{t.shape} {t.dtype}' for t in tensors)}); "
                                f"insert g.cast(x, {dtype!r}) on one operand")
        if op in FLOAT_ONLY and not is_float(dtype):
            raise UnsupportedOp(f"{op}: not defined for {dtype}; cast the operand to float32 first")
        shape = broadcast(op, tensors)
        uniq: list[int] = []  # node ids of the distinct tensor operands, in order
        leaves = []
        for x in operands:
            if isinstance(x, Tensor):
                if x.id not in uniq:
                    uniq.append(x.id)
                leaves.append(("arg", uniq.index(x.id)))
            else:
                leaves.append(("const", scalar(op, x, dtype)))
        dims = []
        for nid in uniq:
            s = self._nodes[nid].shape
            off = len(shape) - len(s)
            dims.append(tuple(None if (d == 1 and shape[off + k] != 1) else off + k for k, d in enumerate(s)))
        prog: list[Instr] = []
        memo: dict[tuple, int] = {}

        def flat(e: Expr) -> int:  # post-order, common subexpressions once
            if e[0] in ("arg", "const"):
                key, ins = (e[0], repr(e[1])), Instr(e[0], (), e[1])  # repr keeps -0.0 apart from 0.0
            else:
                args = tuple(flat(a) for a in e[1:])
                key, ins = (e[0], args), Instr(e[0], args)
            if key not in memo:
                prog.append(ins)
                memo[key] = len(prog) - 1
            return memo[key]

        flat(build(*leaves))
        return self._add("elementwise", [Tensor(self, nid) for nid in uniq], shape, out_dtype or dtype,
                         prog=tuple(prog), dims=tuple(dims), src=dtype)

    def _float_only(self, op: str, x: Tensor) -> None:
        self._check(op, x)
        if not is_float(x.dtype):
            raise UnsupportedOp(f"{op}: not defined for {x.dtype}; cast the operand to float32 first")

    def _binary(self, op: str, a: Operand, b: Operand) -> Tensor:
        return self._ew(op, [a, b], lambda x, y: (op, x, y))

    def _unary(self, op: str, x: Tensor) -> Tensor:
        return self._ew(op, [x], lambda a: (op, a))

    # -- binary: tensors broadcast like numpy; either operand may be a python number -------------------
    def add(self, a: Operand, b: Operand) -> Tensor:
        """a + b; integers wrap."""
        return self._binary("add", a, b)

    def sub(self, a: Operand, b: Operand) -> Tensor:
        """a - b; integers wrap."""
        return self._binary("sub", a, b)

    def mul(self, a: Operand, b: Operand) -> Tensor:
        """a * b; integers wrap."""
        return self._binary("mul", a, b)

    def div(self, a: Operand, b: Operand) -> Tensor:
        """a / b; on integers it rounds toward zero (C, arith.divsi), unlike numpy's //."""
        return self._binary("div", a, b)

    def maximum(self, a: Operand, b: Operand) -> Tensor:
        """Elementwise max; NaN propagates (arith.maximumf, like np.maximum)."""
        return self._binary("max", a, b)

    def minimum(self, a: Operand, b: Operand) -> Tensor:
        """Elementwise min; NaN propagates."""
        return self._binary("min", a, b)

    def pow(self, a: Operand, b: Operand) -> Tensor:
        """a ** b, float only (math.powf: C pow, so a negative base with an integral exponent is defined)."""
        return self._binary("pow", a, b)

    # -- unary ------------------------------------------------------------------------------------------
    def neg(self, x: Tensor) -> Tensor:
        """-x; integers wrap."""
        return self._unary("neg", x)

    def abs(self, x: Tensor) -> Tensor:
        """|x|; abs(INT_MIN) is INT_MIN."""
        return self._unary("abs", x)

    def exp(self, x: Tensor) -> Tensor:
        """e ** x, float only."""
        return self._unary("exp", x)

    def log(self, x: Tensor) -> Tensor:
        """Natural log, float only."""
        return self._unary("log", x)

    def tanh(self, x: Tensor) -> Tensor:
        """tanh, float only."""
        return self._unary("tanh", x)

    def sqrt(self, x: Tensor) -> Tensor:
        """Square root, float only."""
        return self._unary("sqrt", x)

    def rsqrt(self, x: Tensor) -> Tensor:
        """1 / sqrt(x), float only (math.rsqrt)."""
        return self._unary("rsqrt", x)

    def erf(self, x: Tensor) -> Tensor:
        """Error function, float only (math.erf)."""
        return self._unary("erf", x)

    def relu(self, x: Tensor) -> Tensor:
        """max(x, 0); NaN stays NaN."""
        return self._ew("relu", [x, 0], lambda a, z: ("max", a, z))

    def clip(self, x: Tensor, lo: Scalar | None = None, hi: Scalar | None = None) -> Tensor:
        """min(max(x, lo), hi); either bound may be None."""
        if lo is None and hi is None:
            self._check("clip", x)
            return x

        def build(a, *bounds):
            it = iter(bounds)
            e = a if lo is None else ("max", a, next(it))
            return e if hi is None else ("min", e, next(it))
        return self._ew("clip", [x, *(b for b in (lo, hi) if b is not None)], build)

    def sigmoid(self, x: Tensor) -> Tensor:
        """1 / (1 + exp(-x))."""
        self._float_only("sigmoid", x)
        return self._ew("sigmoid", [x, 1.0], lambda a, one: ("div", one, ("add", one, ("exp", ("neg", a)))))

    def silu(self, x: Tensor) -> Tensor:
        """x * sigmoid(x)."""
        self._float_only("silu", x)
        return self._ew("silu", [x, 1.0],
                        lambda a, one: ("mul", a, ("div", one, ("add", one, ("exp", ("neg", a))))))

    def gelu(self, x: Tensor, approximate: str = "tanh") -> Tensor:
        """"tanh": 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))); "none": 0.5x(1 + erf(x / sqrt 2))."""
        self._float_only("gelu", x)
        if approximate == "tanh":
            return self._ew("gelu", [x, 0.5, 1.0, float(np.sqrt(2 / np.pi)), 0.044715],
                            lambda a, half, one, c, k: ("mul", ("mul", half, a), ("add", one, ("tanh", (
                                "mul", c, ("add", a, ("mul", k, ("mul", a, ("mul", a, a)))))))))
        if approximate == "none":
            return self._ew("gelu", [x, 0.5, 1.0, float(np.sqrt(0.5))],
                            lambda a, half, one, c: ("mul", ("mul", half, a), ("add", one, ("erf", ("mul", a, c)))))
        raise UnsupportedOp(f"gelu: approximate={approximate!r}; use 'tanh' or 'none'")

    def cast(self, x: Tensor, dtype) -> Tensor:
        """Convert the element type. float->int rounds toward zero (NaN/out of range: undefined);
        f32->f16 rounds to nearest even; int64->int32 wraps."""
        dtype = dtype_name(dtype)
        self._check("cast", x)
        if dtype == x.dtype:
            return x
        return self._ew("cast", [x], lambda a: ("cast", a), out_dtype=dtype)
