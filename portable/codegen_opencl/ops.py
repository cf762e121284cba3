"""arith and math ops -> one OpenCL C expression each, for scalars and 1-D vectors alike.

Every handler takes the emitter and the op and returns the C expression of the op's single result; the
emitter declares the result variable. Operations MLIR defines on unsigned values reinterpret their operands
as unsigned C types (a cast for scalars, `as_uintN` for vectors) and reinterpret the result back.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import bf16, helpers
from . import types as T

Handler = Callable[["object", ir.Operation], str]

# Ops whose C form is an infix operator, the same for scalars and vectors.
_INFIX = {
    "arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/",
    "arith.addi": "+", "arith.subi": "-", "arith.muli": "*", "arith.divsi": "/", "arith.remsi": "%",
    "arith.andi": "&", "arith.ori": "|", "arith.xori": "^",
}
# On i1, add/sub are xor and mul is and (arithmetic modulo 2); C would promote bools to int.
_I1_INFIX = {"arith.addi": "^", "arith.subi": "^", "arith.muli": "&", "arith.andi": "&", "arith.ori": "|",
             "arith.xori": "^"}

# Ops whose C form is an OpenCL built-in of the same arity and operand order.
_CALL = {
    "arith.remf": "fmod", "arith.maxnumf": "fmax", "arith.minnumf": "fmin",
    "arith.maxsi": "max", "arith.minsi": "min",
    "math.exp": "exp", "math.exp2": "exp2", "math.expm1": "expm1", "math.log": "log", "math.log2": "log2",
    "math.log10": "log10", "math.log1p": "log1p", "math.sqrt": "sqrt", "math.rsqrt": "rsqrt",
    "math.cbrt": "cbrt", "math.tanh": "tanh", "math.sinh": "sinh", "math.cosh": "cosh", "math.sin": "sin",
    "math.cos": "cos", "math.tan": "tan", "math.asin": "asin", "math.acos": "acos", "math.atan": "atan",
    "math.asinh": "asinh", "math.acosh": "acosh", "math.atanh": "atanh", "math.atan2": "atan2",
    "math.powf": "pow", "math.absf": "fabs", "math.floor": "floor", "math.ceil": "ceil",
    "math.round": "round", "math.roundeven": "rint", "math.trunc": "trunc", "math.erf": "erf",
    "math.erfc": "erfc", "math.fma": "fma", "math.copysign": "copysign",
    "math.ctlz": "clz", "math.ctpop": "popcount",
}
# Predicates returning i1 (a mask for vectors).
_MATH_TESTS = {"math.isnan": "isnan", "math.isinf": "isinf", "math.isfinite": "isfinite",
               "math.isnormal": "isnormal"}

_CMPI = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")  # eq ne slt sle sgt sge ult ule ugt uge
# cmpf: false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true
_CMPF = (None, "{a} == {b}", "{a} > {b}", "{a} >= {b}", "{a} < {b}", "{a} <= {b}", "islessgreater({a}, {b})",
         "isordered({a}, {b})", "!islessgreater({a}, {b})", "!({a} <= {b})", "!({a} < {b})", "!({a} >= {b})",
         "!({a} > {b})", "{a} != {b}", "isunordered({a}, {b})", None)

# Unsigned ops: an expression over unsigned operands, reinterpreted back to the signless type.
_UNSIGNED = {"arith.divui": "{a} / {b}", "arith.remui": "{a} % {b}",
             "arith.minui": "min({a}, {b})", "arith.maxui": "max({a}, {b})"}


def _operands(em, op) -> list[str]:
    return [em.val(v) for v in op.operands]


def as_mask(em, expr: str, operand_type: ir.Type) -> str:
    """A relational result as an i1 value: `bool` for scalars, an `intN` -1/0 mask for vectors
    (OpenCL gives vector comparisons the operands' lane width)."""
    n = T.width(operand_type)
    if n and T.lane_bits(operand_type, em.half) != 32:
        return f"convert_int{n}({expr})"
    return expr


def to_unsigned(em, t: ir.Type, x: str) -> str:
    u = em.ct(t, unsigned=True)
    return f"as_{u}({x})" if T.width(t) else f"({u}){x}"


def from_unsigned(em, t: ir.Type, x: str) -> str:
    s = em.ct(t)
    return f"as_{s}({x})" if T.width(t) else f"({s})({x})"


def convert(em, t: ir.Type, x: str, source_ctype: str = "") -> str:
    """Value conversion to `t`: a C cast for scalars, `convert_T` for vectors; none if the C type is the same."""
    ct = em.ct(t)
    if ct == source_ctype:
        return x
    return f"convert_{ct}({x})" if T.width(t) else f"({ct}){x}"


def _wraps(op, t: ir.Type) -> bool:
    """Whether a signed C operator could overflow (undefined in C) where MLIR wraps: i32/i64 add, sub and mul
    without `overflow<nsw>`, and every left shift (C leaves shifting negative values undefined). `index`
    arithmetic is assumed not to overflow 32 bits, as on the SPIR-V path."""
    name = op.operation.name
    if name == "arith.shli":
        return True
    if name not in ("arith.addi", "arith.subi", "arith.muli") or T.is_index(t) or T.bits(t) < 32:
        return False
    return "nsw" not in str(op.attributes["overflowFlags"]) if "overflowFlags" in op.attributes else True


def _infix(em, op) -> str:
    name = op.operation.name
    t = op.results[0].type
    a, b = _operands(em, op)
    if T.is_i1(t):
        if name not in _I1_INFIX:
            raise UnsupportedOp(f"{name} on i1")
        return f"{a} {_I1_INFIX[name]} {b}"
    if _wraps(op, t):
        return from_unsigned(em, t, f"{to_unsigned(em, t, a)} {_INFIX[name]} {to_unsigned(em, t, b)}")
    return f"{a} {_INFIX[name]} {b}"


def _call(em, op) -> str:
    name = op.operation.name
    if T.is_i1(op.operands[0].type):
        raise UnsupportedOp(f"{name} on i1")
    return f"{_CALL[name]}({', '.join(_operands(em, op))})"


def _unsigned(em, op) -> str:
    t = op.results[0].type
    if T.is_i1(t):
        raise UnsupportedOp(f"{op.operation.name} on i1")
    a, b = (to_unsigned(em, t, x) for x in _operands(em, op))
    return from_unsigned(em, t, _UNSIGNED[op.operation.name].format(a=a, b=b))


def _constant_below(v, w: int) -> bool:
    """Whether v is an integer constant (or splat) in [0, w)."""
    owner = v.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    if isinstance(attr, ir.DenseIntElementsAttr):
        if not attr.is_splat:
            return False
        attr = attr.get_splat_value()
    return isinstance(attr, ir.IntegerAttr) and 0 <= attr.value < w


def _shift(em, op) -> str:
    """Shifts by amounts of the bit width or more (negative ones read unsigned) shift every bit out, as ONNX
    BitShift expects (MLIR leaves them poison, C undefined): the amount u goes as min(u, W-1) and then
    min(u, W) - min(u, W-1) more, both in range; shrsi fills with the sign. (C promotes char/short to int
    in between; the low W bits come out the same.)"""
    name = op.operation.name
    t = op.results[0].type
    if T.is_i1(t):
        raise UnsupportedOp(f"{name} on i1")
    a, b = _operands(em, op)
    w = T.bits(t)
    if _constant_below(op.operands[1], w):  # the plain C shift, as for any in-range amount
        if name == "arith.shrsi":
            return f"{a} >> {b}"
        c_op = "<<" if name == "arith.shli" else ">>"
        return from_unsigned(em, t, f"{to_unsigned(em, t, a)} {c_op} {to_unsigned(em, t, b)}")
    ub = to_unsigned(em, t, b)
    s1 = f"min({ub}, ({T.scalar_name(t, unsigned=True)}){w - 1})"
    s2 = f"(min({ub}, ({T.scalar_name(t, unsigned=True)}){w}) - {s1})"
    if name == "arith.shrsi":
        if T.width(t):  # vector shifts take amounts of the value's own type
            s1, s2 = from_unsigned(em, t, s1), from_unsigned(em, t, s2)
        return f"({a} >> {s1}) >> {s2}"
    c_op = "<<" if name == "arith.shli" else ">>"
    return from_unsigned(em, t, f"({to_unsigned(em, t, a)} {c_op} {s1}) {c_op} {s2}")


def _negf(em, op) -> str:
    return f"-{em.val(op.operands[0])}"


def _nan_minmax(em, op) -> str:
    kind = "max" if op.operation.name == "arith.maximumf" else "min"
    fn = helpers.nan_minmax(em, kind, op.results[0].type)
    return f"{fn}({', '.join(_operands(em, op))})"


def _rounded_div(em, op) -> str:
    t = op.results[0].type
    name = op.operation.name
    if T.is_i1(t):
        raise UnsupportedOp(f"{name} on i1")
    if name == "arith.ceildivui":
        fn = helpers.ceildivui(em, t)
    else:
        fn = helpers.rounded_divsi(em, "ceil" if name == "arith.ceildivsi" else "floor", t)
    return f"{fn}({', '.join(_operands(em, op))})"


def _cmpi(em, op) -> str:
    p = op.attributes["predicate"].value
    t = op.operands[0].type
    a, b = _operands(em, op)
    scalar_bool = T.is_i1(t) and T.width(t) == 0
    if p >= 6 and not scalar_bool:
        a, b = to_unsigned(em, t, a), to_unsigned(em, t, b)
    elif 2 <= p < 6 and scalar_bool:
        a, b = b, a  # signed i1: true is -1, so a < b (signed) iff b < a (as 0/1 bools)
    return as_mask(em, f"{a} {_CMPI[p]} {b}", t)


def _cmpf(em, op) -> str:
    p = op.attributes["predicate"].value
    t = op.operands[0].type
    a, b = _operands(em, op)
    n = T.width(t)
    if _CMPF[p] is None:  # always false / always true
        if n:
            return f"(int{n})({'-1' if p else '0'})"
        return "true" if p else "false"
    return as_mask(em, _CMPF[p].format(a=a, b=b), t)


def _select(em, op) -> str:
    c, a, _ = op.operands
    cond, x, y = _operands(em, op)
    if T.width(c.type) == 0:
        return f"{cond} ? {x} : {y}"
    n, lane = T.width(a.type), T.lane_bits(a.type, em.half)
    if lane != 32:  # select wants a mask of the operands' lane width
        cond = f"convert_{T.INT_NAMES[lane]}{n}({cond})"
    return f"select({y}, {x}, {cond})"


def _math_test(em, op) -> str:
    t = op.operands[0].type
    return as_mask(em, f"{_MATH_TESTS[op.operation.name]}({em.val(op.operands[0])})", t)


def _absi(em, op) -> str:
    t = op.results[0].type
    x = em.val(op.operands[0])
    return from_unsigned(em, t, f"abs({x})")  # OpenCL's abs returns the unsigned type


def _fpowi(em, op) -> str:
    x, n = _operands(em, op)
    nt = op.operands[1].type
    if T.bits(nt) != 32:  # pown takes int exponents
        n = f"convert_int{T.width(nt)}({n})" if T.width(nt) else f"(int){n}"
    return f"pown({x}, {n})"


def _cast(em, op) -> str:
    name = op.operation.name
    src, dst = op.operands[0].type, op.results[0].type
    x = em.val(op.operands[0])
    vec = T.width(dst) > 0
    if T.is_i1(src) and name not in ("arith.extui", "arith.extsi", "arith.uitofp"):
        raise UnsupportedOp(f"{name} from i1")
    if T.is_i1(dst) and name != "arith.trunci":
        raise UnsupportedOp(f"{name} to i1")
    if name in ("arith.truncf", "arith.sitofp", "arith.uitofp") and T.is_bf16(dst) and not T.is_i1(src):
        if "roundingmode" in op.attributes and ir.IntegerAttr(op.attributes["roundingmode"]).value != 0:
            raise UnsupportedOp(f"{name} to bf16 with rounding mode {op.attributes['roundingmode']}: only to "
                                "nearest even")
        unsigned = name == "arith.uitofp"
        return bf16.convert(em, src, to_unsigned(em, src, x) if unsigned else x, unsigned)
    if name == "arith.fptosi" and T.bits(dst) < 32:
        # Through int, as on the SPIR-V path: ONNX uint8 results arrive as fptosi to i8, and a float out of the
        # narrow type's range converts differently by host (PoCL: 200 became 127 with AVX2, 200 with AVX-512).
        i32 = ir.IntegerType.get_signless(32)
        wide = ir.VectorType.get([T.width(src)], i32) if vec else i32
        return convert(em, dst, convert(em, wide, x, em.ct(src)), em.ct(wide))
    if name in ("arith.extf", "arith.truncf", "arith.sitofp", "arith.fptosi", "arith.index_cast"):
        return convert(em, dst, x, em.ct(src))
    if name == "arith.extsi":
        if T.is_i1(src) and not vec:
            return f"{x} ? ({em.ct(dst)})(-1) : ({em.ct(dst)})0"
        return convert(em, dst, x, em.ct(src))  # vector i1 masks already hold -1
    if name == "arith.trunci":
        if T.is_i1(dst):
            return as_mask(em, f"({x} & 1) != 0", src)
        return convert(em, dst, x)
    if name in ("arith.extui", "arith.uitofp", "arith.index_castui"):
        if T.is_i1(src):
            return convert(em, dst, f"-{x}", em.ct(src)) if vec else convert(em, dst, x)
        if name == "arith.index_castui" and T.bits(src) >= T.bits(dst):
            return convert(em, dst, x)
        return convert(em, dst, to_unsigned(em, src, x))
    if name == "arith.fptoui":
        u = em.ct(dst, unsigned=True)
        return f"as_{em.ct(dst)}(convert_{u}({x}))" if vec else f"({em.ct(dst)})({u}){x}"
    if name == "arith.bitcast":
        if T.is_i1(src) or src == dst:
            return x
        if T.is_bf16(src) or T.is_bf16(dst):
            return _bf16_bitcast(em, src, dst, x)
        if em.half == "float" and 16 in (T.bits(src), T.bits(dst)) and (T.is_float(src) or T.is_float(dst)):
            raise UnsupportedOp("arith.bitcast of f16 without cl_khr_fp16")
        return f"as_{em.ct(dst)}({x})"
    raise UnsupportedOp(name)


def _bf16_bitcast(em, src: ir.Type, dst: ir.Type, x: str) -> str:
    """arith.bitcast between bf16 (a float in C) and i16 through the bf16 bits (ushort)."""
    n = T.width(dst)
    if T.is_bf16(src) and not T.is_float(dst):
        return f"as_{em.ct(dst)}({bf16.bits(n, x)})"
    if T.is_bf16(dst) and not T.is_float(src):
        return bf16.float_of_bits(n, f"as_ushort{n or ''}({x})")
    raise UnsupportedOp(f"arith.bitcast from {src} to {dst}: bf16 is held in floats, only bf16 <-> i16 is handled")


def _constant(em, op) -> str:
    attr = op.attributes["value"]
    t = op.results[0].type
    if isinstance(t, ir.VectorType):
        return T.vector_literal(attr, t, em.half)
    return T.scalar_literal(attr, t, em.half)


def _poison(em, op) -> str:
    """ub.poison may be refined to any value: zero, so that the C reads nothing uninitialised."""
    t = op.results[0].type
    zero = "false" if T.is_i1(t) and not T.width(t) else ("0.0f" if T.is_float(t) and em.ct(t)[0] != "d" else "0")
    if T.is_float(t) and em.ct(t).startswith("half"):
        zero = "(half)0.0f"
    return f"({em.ct(t)})({zero})" if T.width(t) else zero


HANDLERS: dict[str, Handler] = {
    **{k: _infix for k in _INFIX},
    **{k: _call for k in _CALL},
    **{k: _unsigned for k in _UNSIGNED},
    **{k: _shift for k in ("arith.shli", "arith.shrsi", "arith.shrui")},
    **{k: _math_test for k in _MATH_TESTS},
    **{k: _cast for k in ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
                          "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
                          "arith.index_castui", "arith.bitcast")},
    "arith.negf": _negf,
    "arith.maximumf": _nan_minmax,
    "arith.minimumf": _nan_minmax,
    "arith.floordivsi": _rounded_div,
    "arith.ceildivsi": _rounded_div,
    "arith.ceildivui": _rounded_div,
    "arith.cmpi": _cmpi,
    "arith.cmpf": _cmpf,
    "arith.select": _select,
    "arith.constant": _constant,
    "ub.poison": _poison,
    "math.absi": _absi,
    "math.fpowi": _fpowi,
}
