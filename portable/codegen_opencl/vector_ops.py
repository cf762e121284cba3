"""vector dialect ops on 1-D vectors -> OpenCL vector expressions (`float4`, lanes `v.s0` ... `v.sf`).

vector.load / vector.store need the memref addressing of the emitter and live there.
"""

from __future__ import annotations

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import helpers
from . import types as T
from .ops import Handler, from_unsigned, to_unsigned

_DYNAMIC = -(1 << 63)  # ShapedType::kDynamic in static_position


def lane(x: str, i: int, t: ir.Type) -> str:
    """Lane i of the C value x of vector type t (a one-lane vector is a C scalar)."""
    return f"{x}.s{i:x}" if T.width(t) else x


def linear_position(position: list[int], shape: list[int]) -> int:
    """Linear index of the first element at a static `position` (a prefix of the indices) in row-major `shape`."""
    if _DYNAMIC in position:
        raise UnsupportedOp("dynamic vector position")
    index = 0
    for d, size in enumerate(shape):
        index = index * size + (position[d] if d < len(position) else 0)
    return index


def _position(op, source: ir.Type) -> int:
    return linear_position(list(op.attributes["static_position"]), list(source.shape))


def _as_lane(t: ir.Type, x: str) -> str:
    """A scalar written into a vector lane: i1 lanes hold -1/0."""
    return f"({x} ? -1 : 0)" if T.is_i1(t) else x


def _from_lane(t: ir.Type, x: str) -> str:
    return f"({x} != 0)" if T.is_i1(t) and T.width(t) else x


def _build(em, t: ir.Type, lanes: list[str]) -> str:
    return f"({em.ct(t)})({', '.join(lanes)})" if T.width(t) else lanes[0]


def _broadcast(em, op) -> str:
    src, dst = op.operands[0].type, op.results[0].type
    x = em.val(op.operands[0])
    if T.lanes(src) == T.lanes(dst):  # f32 -> vector<1xf32>, vector<4xf32> -> vector<1x4xf32>
        return x
    if T.lanes(src) != 1:
        raise UnsupportedOp(f"{op.operation.name} from {src} to {dst}")
    return f"({em.ct(dst)})({_as_lane(src, x)})"


def _shape_cast(em, op) -> str:
    T.width(op.results[0].type)  # raises for shapes with several non-unit dims
    return em.val(op.operands[0])


def _extract(em, op) -> str:
    src, res = op.operands[0].type, op.results[0].type
    if len(op.operands) != 1:
        raise UnsupportedOp("vector.extract with a dynamic position")
    x = em.val(op.operands[0])
    if T.lanes(res) == T.lanes(src):  # drops unit dims only
        return x
    if T.lanes(res) != 1:
        raise UnsupportedOp(f"vector.extract of {res} from {src}")
    return _from_lane(src, lane(x, _position(op, src), src))


def _insert(em, op) -> str:
    if len(op.operands) != 2:
        raise UnsupportedOp("vector.insert with a dynamic position")
    s, v = op.operands
    x, vec = em.val(s), em.val(v)
    if T.lanes(s.type) == T.lanes(v.type):
        return x
    if T.lanes(s.type) != 1:
        raise UnsupportedOp(f"vector.insert of {s.type} into {v.type}")
    pos = _position(op, v.type)
    lanes = [_as_lane(s.type, x) if i == pos else lane(vec, i, v.type) for i in range(T.lanes(v.type))]
    return _build(em, v.type, lanes)


def _shuffle(em, op) -> str:
    a, b = op.operands
    x, y = em.val(a), em.val(b)
    na = T.lanes(a.type)
    lanes = [lane(x, i, a.type) if i < na else lane(y, i - na, b.type) for i in op.attributes["mask"]]
    return _build(em, op.results[0].type, lanes)


def _from_elements(em, op) -> str:
    t = op.results[0].type
    return _build(em, t, [_as_lane(v.type, em.val(v)) if T.width(t) else em.val(v) for v in op.operands])


def _step(em, op) -> str:
    """vector.step: the lanes 0, 1, ..., n-1."""
    t = op.results[0].type
    return _build(em, t, [T.int_literal(i, T.element_type(t)) for i in range(T.lanes(t))])


def _fma(em, op) -> str:
    return f"fma({', '.join(em.val(v) for v in op.operands)})"


# vector.reduction kind -> (infix operator | None, function | None)
_RED_INFIX = {"add": "+", "mul": "*", "and": "&", "or": "|", "xor": "^"}
_RED_CALL = {"minsi": "min", "maxsi": "max", "minui": "min", "maxui": "max", "minnumf": "fmin",
             "maxnumf": "fmax"}


def _reduction(em, op) -> str:
    kind = str(op.attributes["kind"]).removeprefix("#vector.kind<").removesuffix(">")
    v = op.operands[0]
    vt = v.type
    x = em.val(v)
    if T.is_i1(vt):  # lanes are -1/0 masks: add is xor and mul is and, modulo 2
        sym = {"add": "^", "mul": "&"}.get(kind, _RED_INFIX.get(kind))
        if sym is None or len(op.operands) > 1:
            raise UnsupportedOp(f"vector.reduction <{kind}> on i1")
        return f"({f' {sym} '.join(lane(x, i, vt) for i in range(T.lanes(vt)))}) != 0"
    unsigned = kind in ("minui", "maxui")
    if unsigned:  # reinterpret once, then read lanes of the unsigned copy
        tmp = em.fresh("t")
        em.line(f"{em.ct(vt, unsigned=True)} {tmp} = {to_unsigned(em, vt, x)};")
        x = tmp
    terms = [lane(x, i, vt) for i in range(T.lanes(vt))]
    if len(op.operands) > 1:  # accumulator comes first
        acc = em.val(op.operands[1])
        terms.insert(0, to_unsigned(em, op.operands[1].type, acc) if unsigned else acc)
    if kind in _RED_INFIX:
        if T.is_float(vt) and kind not in ("add", "mul"):
            raise UnsupportedOp(f"vector.reduction <{kind}> on floats")
        return f" {_RED_INFIX[kind]} ".join(terms)
    if kind in _RED_CALL:
        fn = _RED_CALL[kind]
    elif kind in ("maximumf", "minimumf"):
        fn = helpers.nan_minmax(em, kind[:3], op.results[0].type)
    else:
        raise UnsupportedOp(f"vector.reduction <{kind}>")
    while len(terms) > 1:  # a balanced tree: min/max are associative, and it nests log2(n) deep
        pairs = [f"{fn}({terms[i]}, {terms[i + 1]})" for i in range(0, len(terms) - 1, 2)]
        terms = pairs + terms[len(pairs) * 2:]
    return from_unsigned(em, op.results[0].type, terms[0]) if unsigned else terms[0]


HANDLERS: dict[str, Handler] = {
    "vector.broadcast": _broadcast,
    "vector.shape_cast": _shape_cast,
    "vector.splat": _broadcast,
    "vector.extract": _extract,
    "vector.insert": _insert,
    "vector.shuffle": _shuffle,
    "vector.from_elements": _from_elements,
    "vector.fma": _fma,
    "vector.step": _step,
    "vector.reduction": _reduction,
}
