"""Bounds of index values: the sizes of private arrays whose memref.alloc has dynamic sizes, and loop trip counts.

Tiling leaves per-thread buffers like `memref.alloc(%17, %29) : memref<?x?xf32>` where %17 is
`max(min(ceil(32 / 8), ...), 0)` of thread and block ids. OpenCL C needs a constant array size, so the
emitter allocates the upper bound found here. Thread ids range over the workgroup size and block ids over
`known_grid_size`; anything this analysis does not know makes the bound unknown (the emitter then raises).

A value computed from a few ids alone is evaluated exactly, at every point of their ranges (up to EXACT_POINTS):
intervals lose the correlation between terms of one id, so a tile's extent `min(28 - 8 * (bx mod 4), 8)` spelled
as `-8 * bx + 32 * (bx / 4) + 28` would range over the whole grid. Other values get interval arithmetic.
"""

from __future__ import annotations

import numpy as np

from .mlir import ir

Interval = tuple[int, int]
EXACT_POINTS = 1 << 20
_EXACT_OPS = {"arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.divui",
              "arith.floordivsi", "arith.ceildivsi", "arith.remsi", "arith.remui", "arith.minsi", "arith.maxsi",
              "arith.select", "arith.cmpi", "arith.andi", "arith.ori", "arith.xori", "arith.index_cast",
              "arith.index_castui", "arith.extsi", "arith.extui"}
_IDS = ("gpu.thread_id", "gpu.block_id", "gpu.block_dim", "gpu.grid_dim")


class Bounds:
    def __init__(self, block_size: tuple[int, int, int], grid_size: tuple[int, int, int] | None):
        self.block_size = block_size
        self.grid_size = grid_size
        self._memo: dict[ir.Value, Interval | None] = {}
        self._exact_memo: dict[ir.Value, Interval | None] = {}

    def upper(self, value: ir.Value) -> int | None:
        r = self.of(value)
        return None if r is None else r[1]

    def of(self, value: ir.Value) -> Interval | None:
        if value not in self._exact_memo:
            self._exact_memo[value] = self._exact(value) or self._interval(value)
        return self._exact_memo[value]

    def _interval(self, value: ir.Value) -> Interval | None:
        if value not in self._memo:
            self._memo[value] = None  # cycles (loop-carried values) stay unknown
            self._memo[value] = self._compute(value)
        return self._memo[value]

    def _exact(self, value: ir.Value) -> Interval | None:
        """(min, max) of `value` evaluated at every point of the ids it depends on; None where it depends on
        anything else (loop variables, loads), on an op not modelled here, or on more than EXACT_POINTS points."""
        ids: dict[tuple[str, int], int] = {}
        seen: set = set()
        stack = [value]
        while stack:
            v = stack.pop()
            if v in seen:
                continue
            seen.add(v)
            if isinstance(v, ir.BlockArgument):
                return None
            op = v.owner.operation
            if op.name in _IDS:
                d = "xyz".index(str(op.attributes["dimension"])[-2])
                r = self._gpu_id(op.name, str(op.attributes["dimension"]))
                if r is None:
                    return None
                ids[(op.name, d)] = r[1] - r[0] + 1
            elif op.name in _EXACT_OPS:
                stack.extend(op.operands)
            else:
                return None
        if not ids or int(np.prod(list(ids.values()), dtype=np.int64)) > EXACT_POINTS:
            return None
        axes = {k: i for i, k in enumerate(sorted(ids))}
        values: dict = {}
        try:
            with np.errstate(all="raise"):
                r = self._evaluate(value, axes, values)
        except (ArithmeticError, FloatingPointError, _Unknown):
            return None
        return int(np.min(r)), int(np.max(r))

    def _evaluate(self, value: ir.Value, axes: dict, values: dict) -> np.ndarray:
        if value in values:
            return values[value]
        op = value.owner.operation
        name = op.name
        if name in _IDS:
            d = "xyz".index(str(op.attributes["dimension"])[-2])
            lo, hi = self._gpu_id(name, str(op.attributes["dimension"]))
            shape = [1] * len(axes)
            shape[axes[(name, d)]] = hi - lo + 1
            r = np.arange(lo, hi + 1, dtype=np.int64).reshape(shape)
        elif name == "arith.constant":
            attr = op.attributes["value"]
            if not isinstance(attr, (ir.IntegerAttr, ir.BoolAttr)):
                raise _Unknown
            r = np.array(int(attr.value), dtype=np.int64)
        else:
            a = [self._evaluate(v, axes, values) for v in op.operands]
            r = _apply(op, a)
        if isinstance(value.type, ir.IntegerType) and value.type.width == 1:
            r = (r != 0).astype(np.int64)  # an i1 true is 1 (its attribute may read -1)
        values[value] = r
        return r

    def _compute(self, value: ir.Value) -> Interval | None:
        if isinstance(value, ir.BlockArgument):
            return self._block_argument(value)
        op = value.owner.operation
        name = op.name
        args = [self._interval(v) for v in op.operands]
        if name == "arith.constant":
            attr = op.attributes["value"]
            return (attr.value, attr.value) if isinstance(attr, ir.IntegerAttr) else None
        if name in ("gpu.thread_id", "gpu.block_dim", "gpu.block_id", "gpu.grid_dim"):
            return self._gpu_id(name, str(op.attributes["dimension"]))
        if name == "arith.select":
            args = args[1:]  # the condition's range does not matter
        if any(a is None for a in args):
            return None
        if name in ("arith.index_cast", "arith.index_castui", "arith.extsi"):
            return args[0]
        if name == "arith.select":
            (a0, a1), (b0, b1) = args
            return min(a0, b0), max(a1, b1)
        if len(args) != 2:
            return None
        (a0, a1), (b0, b1) = args
        if name == "arith.addi":
            return a0 + b0, a1 + b1
        if name == "arith.subi":
            return a0 - b1, a1 - b0
        if name == "arith.minsi":
            return min(a0, b0), min(a1, b1)
        if name == "arith.maxsi":
            return max(a0, b0), max(a1, b1)
        if name == "arith.muli":
            return _corners(lambda x, y: x * y, args)
        if b0 <= 0 <= b1:
            return None  # division by a range containing zero
        if name == "arith.divsi":
            return _corners(lambda x, y: abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1), args)
        if name == "arith.floordivsi":
            return _corners(lambda x, y: x // y, args)
        if name == "arith.ceildivsi":
            return _corners(lambda x, y: -(-x // y), args)
        if name == "arith.remsi":
            m = max(abs(b0), abs(b1)) - 1
            return (0 if a0 >= 0 else -m), (0 if a1 <= 0 else m)
        return None

    def _gpu_id(self, name: str, dimension: str) -> Interval | None:
        d = "xyz".index(dimension[-2])  # "#gpu<dim x>"
        if name == "gpu.thread_id":
            return 0, self.block_size[d] - 1
        if name == "gpu.block_dim":
            return self.block_size[d], self.block_size[d]
        if self.grid_size is None:
            return None
        if name == "gpu.block_id":
            return 0, self.grid_size[d] - 1
        return self.grid_size[d], self.grid_size[d]

    def _block_argument(self, arg: ir.BlockArgument) -> Interval | None:
        parent = arg.owner.owner.operation
        if parent.name == "scf.for" and arg.arg_number == 0:
            lb, ub = self.of(parent.operands[0]), self.of(parent.operands[1])
            if lb is None or ub is None:
                return None
            return lb[0], max(lb[0], ub[1] - 1)
        return None


def _corners(fn, args: list[Interval]) -> Interval:
    (a0, a1), (b0, b1) = args
    values = [fn(x, y) for x in (a0, a1) for y in (b0, b1)]
    return min(values), max(values)


class _Unknown(Exception):
    """An op or operand _evaluate does not model."""


_CMP = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal}


def _apply(op: ir.Operation, a: list[np.ndarray]) -> np.ndarray:
    """`op` (an arith op of _EXACT_OPS) on int64 arrays, with MLIR's semantics; raises _Unknown or
    ArithmeticError where those are not what numpy would compute (division by zero, unsigned compares of
    negative values)."""
    name = op.name
    if name in ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui"):
        return a[0]
    if name == "arith.select":
        return np.where(a[0] != 0, a[1], a[2])
    x, y = a
    if name == "arith.addi":
        return x + y
    if name == "arith.subi":
        return x - y
    if name == "arith.muli":
        return x * y
    if name == "arith.minsi":
        return np.minimum(x, y)
    if name == "arith.maxsi":
        return np.maximum(x, y)
    if name in ("arith.andi", "arith.ori", "arith.xori"):
        return {"arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor}[name](x, y)
    if name == "arith.cmpi":
        pred = ir.IntegerAttr(op.attributes["predicate"]).value
        if pred >= 6:  # unsigned: the same as signed where both sides are non-negative
            if np.min(x) < 0 or np.min(y) < 0:
                raise _Unknown
            pred -= 4
        return _CMP[pred](x, y).astype(np.int64)
    if np.any(y == 0):
        raise ZeroDivisionError
    if name in ("arith.divui", "arith.remui") and (np.min(x) < 0 or np.min(y) < 0):
        raise _Unknown
    if name in ("arith.divsi", "arith.divui"):  # toward zero
        q = np.abs(x) // np.abs(y)
        return np.where((x < 0) != (y < 0), -q, q)
    if name == "arith.floordivsi":
        return np.floor_divide(x, y)
    if name == "arith.ceildivsi":
        return -np.floor_divide(-x, y)
    if name in ("arith.remsi", "arith.remui"):  # the dividend's sign
        return np.fmod(x, y)
    raise _Unknown
