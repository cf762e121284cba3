"""N-D vectors (vector<8x4xf32>: more than one dimension above 1) as one C vector per innermost row.

Vectorized tiles keep 2-D vectors after `vector.lower_transfer`; OpenCL C has 1-D vectors only. An N-D value
is a list of row slots (`em.rows[value]`), each a C vector variable of the innermost dimension (`float4`).
Elementwise ops run once per row through the 1-D handlers; extract, insert, broadcast, shape_cast, transpose and
from_elements/to_elements only regroup lanes, so most of them alias existing rows and print nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import types as T
from .vector_ops import lane, linear_position

_NOT_ELEMENTWISE = {"arith.constant", "ub.poison"}


def is_multi(t: ir.Type) -> bool:
    """More than one C vector: two non-unit dims, or one wider than OpenCL's widest vector (16 lanes)."""
    if not isinstance(t, ir.VectorType):
        return False
    dims = [d for d in t.shape if d != 1]
    return len(dims) >= 2 or (len(dims) == 1 and dims[0] > _WIDEST)


_WIDEST = max(T.VECTOR_WIDTHS)


def row_type(t: ir.Type) -> ir.Type:
    """The 1-D type of one slot of an N-D vector type: its innermost non-unit dimension, or past 16 lanes the
    widest C vector width that divides it (a register tile row of 32 floats is two float16 slots)."""
    inner = [d for d in t.shape if d != 1][-1]
    if inner > _WIDEST:
        inner = next((w for w in sorted(T.VECTOR_WIDTHS, reverse=True) if inner % w == 0), inner)
    rt = ir.VectorType.get([inner], t.element_type, loc=ir.Location.unknown(t.context))
    T.width(rt)  # raises for rows that are not OpenCL vector widths
    return rt


def num_slots(t: ir.Type) -> int:
    return T.lanes(t) // T.lanes(row_type(t)) if is_multi(t) else 1


def involves(op) -> bool:
    return any(is_multi(v.type) for v in (*op.operands, *op.results))


@dataclass(frozen=True)
class RowValue:
    """One row of an N-D operand, passed to a 1-D handler in place of an ir.Value (em.val returns expr)."""

    type: ir.Type
    expr: str


class _RowOp:
    """An op seen through one row: what the 1-D handlers of ops.py/vector_ops.py read from an op."""

    def __init__(self, op, operands: list, result_type: ir.Type):
        self.operation = self
        self.name = op.operation.name
        self.attributes = op.operation.attributes
        self.operands = operands
        self.results = [RowValue(result_type, "")]


def emit(em, op, expressions: dict) -> None:
    name = op.operation.name
    if name in _REGROUP:
        _REGROUP[name](em, op)
    elif name in ("arith.constant", "ub.poison"):
        _constant(em, op)
    elif name == "vector.fma" or (name in expressions and name not in _NOT_ELEMENTWISE
                                  and not name.startswith("vector.") and len(op.results) == 1):
        _per_row(em, op, expressions[name])
    else:
        raise UnsupportedOp(f"`{name}` on N-D vectors ({', '.join(str(v.type) for v in op.results)})")


def _per_row(em, op, handler) -> None:
    result = op.results[0]
    rt = row_type(result.type)
    operand_rows = [em.slots(v) if is_multi(v.type) else None for v in op.operands]
    made: dict[str, tuple[str, str | None]] = {}
    out, wide = [], []
    for r in range(num_slots(result.type)):
        operands = [RowValue(row_type(v.type), rows[r]) if rows else v for v, rows in zip(op.operands, operand_rows)]
        expr = handler(em, _RowOp(op, operands, rt))
        if expr not in made:  # rows of splat operands give the same expression: compute it once
            made[expr] = em.computed(op.operation.name, rt, expr)
        out.append(made[expr][0])
        wide.append(made[expr][1])
    em.rows[result] = out
    if wide[0] is not None:
        em.wide[result] = wide


# -- lanes ------------------------------------------------------------------------------------------------
def lanes_of(em, v: ir.Value) -> list[str]:
    """Every lane of v as a C expression, row-major; i1 lanes in mask form (-1/0)."""
    t = v.type
    if is_multi(t):
        rt = row_type(t)
        return [lane(r, i, rt) for r in em.slots(v) for i in range(T.lanes(rt))]
    x = em.val(v)
    if T.width(t) == 0:
        return [f"({x} ? -1 : 0)" if T.is_i1(t) else x]
    return [lane(x, i, t) for i in range(T.lanes(t))]


def _scalar_of_lane(t: ir.Type, x: str) -> str:
    if not T.is_i1(t):
        return x
    if x.startswith("(") and x.endswith(" ? -1 : 0)"):
        return x[1:-len(" ? -1 : 0)")]
    return f"({x} != 0)"


def bind_lanes(em, v: ir.Value, lanes: list[str]) -> None:
    """Give v (any vector or scalar type) the value made of `lanes`, declaring only rows that are new."""
    t = v.type
    rt = row_type(t) if is_multi(t) else t
    n = T.lanes(rt)
    made: dict[str, str] = {}
    slots = []
    for k in range(0, len(lanes), n):
        group = lanes[k:k + n]
        if T.width(rt) == 0:
            expr = _scalar_of_lane(rt, group[0])
        else:
            base = group[0].rsplit(".s", 1)[0]
            if em.var_types.get(base) == em.ct(rt) and group == [lane(base, i, rt) for i in range(n)]:
                expr = base  # exactly an existing row
            elif all(g == group[0] for g in group):
                expr = f"({em.ct(rt)})({group[0]})"
            else:
                expr = f"({em.ct(rt)})({', '.join(_whole_vectors(em, group))})"
        if expr not in made:
            made[expr] = em.declare(em.ct(rt), expr)
        slots.append(made[expr])
    em.bind(v, slots)


def _whole_vectors(em, lanes: list[str]) -> list[str]:
    """Replace runs of lanes that are all of an existing C vector by the vector: (float8)(v1, v2)."""
    out, i = [], 0
    while i < len(lanes):
        base = lanes[i].removesuffix(".s0")
        n = int(em.var_types.get(base, "x").lstrip("abcdefghijklmnopqrstuvwxyz") or 0) if base != lanes[i] else 0
        if n and lanes[i:i + n] == [f"{base}.s{k:x}" for k in range(n)]:
            out.append(base)
            i += n
        else:
            out.append(lanes[i])
            i += 1
    return out


# -- regrouping ops ---------------------------------------------------------------------------------------
def _extract(em, op) -> None:
    if len(op.operands) != 1:
        raise UnsupportedOp("vector.extract with a dynamic position")
    src = op.operands[0]
    start = linear_position(list(op.attributes["static_position"]), list(src.type.shape))
    bind_lanes(em, op.results[0], lanes_of(em, src)[start:start + T.lanes(op.results[0].type)])


def _insert(em, op) -> None:
    if len(op.operands) != 2:
        raise UnsupportedOp("vector.insert with a dynamic position")
    value, dest = op.operands
    start = linear_position(list(op.attributes["static_position"]), list(dest.type.shape))
    lanes = lanes_of(em, dest)
    new = lanes_of(em, value)
    lanes[start:start + len(new)] = new
    bind_lanes(em, op.results[0], lanes)


def _broadcast(em, op) -> None:
    src, dst = op.operands[0].type, op.results[0].type
    lanes = lanes_of(em, op.operands[0])
    sshape, dshape = [1] * (len(dst.shape) - len(getattr(src, "shape", []))) + list(getattr(src, "shape", [])), \
        list(dst.shape)
    out = []
    for e in range(T.lanes(dst)):  # numpy-style: a source dim of 1 repeats
        index, rest = [], e
        for size in reversed(dshape):
            index.append(rest % size)
            rest //= size
        index.reverse()
        out.append(lanes[linear_position([i if s != 1 else 0 for i, s in zip(index, sshape)], sshape)])
    bind_lanes(em, op.results[0], out)


def _same_lanes(em, op) -> None:  # shape_cast: the same lanes in another shape
    bind_lanes(em, op.results[0], lanes_of(em, op.operands[0]))


def _transpose(em, op) -> None:
    """Output dim i is source dim perm[i] (a matmul tile of B read as rows of n, transposed to rows of k)."""
    src = op.operands[0]
    perm = list(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
    sshape = list(src.type.shape)
    dshape = [sshape[p] for p in perm]
    lanes = lanes_of(em, src)
    out = []
    for e in range(T.lanes(op.results[0].type)):
        index, rest = [], e
        for size in reversed(dshape):
            index.append(rest % size)
            rest //= size
        index.reverse()
        at = [0] * len(sshape)
        for i, p in enumerate(perm):
            at[p] = index[i]
        out.append(lanes[linear_position(at, sshape)])
    bind_lanes(em, op.results[0], out)


def _from_elements(em, op) -> None:
    bind_lanes(em, op.results[0], [lanes_of(em, v)[0] for v in op.operands])


def to_elements(em, op) -> None:
    """vector.to_elements (any vector): one declared scalar per lane, since a lane of a loop-carried row must
    not be read after the row is reassigned."""
    t = op.operands[0].type
    for result, x in zip(op.results, lanes_of(em, op.operands[0]), strict=True):
        em.define(result, _scalar_of_lane(t, x))


def _constant(em, op) -> None:
    t = op.results[0].type
    e = t.element_type
    if op.operation.name == "ub.poison":
        values = [0] * T.lanes(t)
    else:
        values = T.dense_values(op.attributes["value"], e)
        if len(values) == 1:  # a splat
            values *= T.lanes(t)
    if T.is_i1(e):
        lanes = ["-1" if v else "0" for v in values]
    elif T.is_float(e):
        lanes = [T.float_literal(float(v), e, em.half) for v in values]
    else:
        lanes = [T.int_literal(int(v), e) for v in values]
    bind_lanes(em, op.results[0], lanes)


_REGROUP = {"vector.extract": _extract, "vector.insert": _insert, "vector.broadcast": _broadcast,
            "vector.splat": _broadcast, "vector.shape_cast": _same_lanes, "vector.from_elements": _from_elements,
            "vector.transpose": _transpose}
