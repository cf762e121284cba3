"""Math ops that Vulkan's GLSL.std.450 instruction set lacks, rewritten before convert-math-to-spirv.

- Its transcendental instructions (Exp, Log, Pow, Sin, Tanh, ...) take 16- and 32-bit floats only: on f64
  they run in f32 (f32 precision; f64 buffers, loads, stores and basic arithmetic stay f64).
- It has no Erf: erf becomes a polynomial (Taylor series near 0, Abramowitz & Stegun 7.1.26 elsewhere;
  absolute error under 2e-7 in f32).
- Its Tanh may cancel near 0 (Vulkan lets it inherit the error of its exp form), and MathToSPIRV's
  log1p/expm1 are log(1 + x)/exp(x) - 1: near 0 these become Taylor series.
- OpFRem(x, ±inf) is NaN on lavapipe where C fmod gives x.
"""

from __future__ import annotations

import math as _math

from ..ir.mlir import arith, ir, math
from ..ir.util import find_ops

# GLSL.std.450 instructions defined for 16/32-bit floats only (SPIR-V extended instruction set spec); the
# math ops MathToSPIRV maps onto them or expands through them.
_F32_ONLY = ("math.exp", "math.exp2", "math.expm1", "math.log", "math.log2", "math.log10", "math.log1p",
             "math.powf", "math.sin", "math.cos", "math.tan", "math.asin", "math.acos", "math.atan",
             "math.atan2", "math.sinh", "math.cosh", "math.tanh", "math.asinh", "math.acosh", "math.atanh",
             "math.erf", "math.erfc", "math.cbrt")


def _with_elem(t: ir.Type, elem: ir.Type) -> ir.Type:
    return ir.VectorType.get(list(ir.VectorType(t).shape), elem) if isinstance(t, ir.VectorType) else elem


def _elem(t: ir.Type) -> ir.Type:
    return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t


def _const_like(t: ir.Type, v: float) -> ir.Value:
    a = ir.FloatAttr.get(_elem(t), v)
    return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, a) if isinstance(t, ir.VectorType) else a).result


# Taylor coefficients of log1p and expm1 (x^1 ... x^9); below |x| = 0.1 the first omitted term is under 1e-9
# of the result.
_LOG1P = [(-1) ** (k + 1) / k for k in range(1, 10)]
_EXPM1 = [1 / _math.factorial(k) for k in range(1, 10)]


def _poly(x: ir.Value, coeffs: list[float]) -> ir.Value:
    """coeffs[0] + coeffs[1]*x + ... by Horner's rule."""
    p = _const_like(x.type, coeffs[-1])
    for k in reversed(coeffs[:-1]):
        p = arith.AddFOp(arith.MulFOp(p, x).result, _const_like(x.type, k)).result
    return p


def f64_math_in_f32(gpu_module: ir.Operation) -> None:
    """Each f64 transcendental op computes in f32: truncf its operands, the op on f32, extf the result."""
    f32, f64 = ir.F32Type.get(), ir.F64Type.get()
    for op in find_ops(gpu_module, _F32_ONLY, lambda op: _elem(op.results[0].type) == f64):
        with ir.InsertionPoint(op), op.location:
            args = [arith.TruncFOp(_with_elem(v.type, f32), v).result if _elem(v.type) == f64 else v
                    for v in op.operands]
            narrow = ir.Operation.create(op.name, results=[_with_elem(op.results[0].type, f32)], operands=args,
                                         attributes={n: op.attributes[n] for n in op.attributes})
            wide = arith.ExtFOp(op.results[0].type, narrow.results[0]).result
        op.results[0].replace_all_uses_with(wide)
        op.erase()


# erf(x) = 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320) for |x| < 0.5 (next term < 2e-8).
_TAYLOR = [2 / _math.sqrt(_math.pi) * c for c in (1.0, -1 / 3, 1 / 10, -1 / 42, 1 / 216, -1 / 1320)]
# Abramowitz & Stegun 7.1.26: erf(x) = 1 - t*(a1 + t*(a2 + ...)) * exp(-x^2), t = 1 / (1 + p*x), x >= 0.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def expand_erf(gpu_module: ir.Operation) -> None:
    """math.erf on f16/f32 (scalars or vectors) -> polynomials and one exp; f64 ones have been narrowed
    to f32 first (f64_math_in_f32)."""
    for op in find_ops(gpu_module, ("math.erf",)):
        x = op.operands[0]
        t = x.type

        def c(v: float, t=t) -> ir.Value:
            return _const_like(t, v)

        with ir.InsertionPoint(op), op.location:
            ax = math.AbsFOp(x).result
            x2 = arith.MulFOp(x, x).result
            # near 0: odd Taylor series in x (keeps the relative error small where erf(x) ~ x)
            near = arith.MulFOp(_poly(x2, _TAYLOR), x).result
            # elsewhere: 1 - poly(t) * exp(-x^2), with the sign of x
            tt = arith.DivFOp(c(1.0), arith.AddFOp(c(1.0), arith.MulFOp(c(_AS_P), ax).result).result).result
            p = arith.MulFOp(_poly(tt, list(_AS_A)), tt).result
            e = math.ExpOp(arith.NegFOp(x2).result).result
            far = arith.SubFOp(c(1.0), arith.MulFOp(p, e).result).result
            far = math.CopySignOp(far, x).result
            small = arith.CmpFOp(arith.CmpFPredicate.OLT, ax, c(0.5)).result
            new = arith.SelectOp(small, near, far).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


# tanh(x) = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 - 1382x^11/155925 (odd series, in x^2)
_TANH = [1.0, -1 / 3, 2 / 15, -17 / 315, 62 / 2835, -1382 / 155925]


def accurate_tanh(gpu_module: ir.Operation) -> None:
    """tanh near 0 as its series: Vulkan lets GLSL.std.450 Tanh inherit the error of (e^2x - 1)/(e^2x + 1),
    which cancels for small x (lavapipe: 2e-3 relative at 5e-5, failing ONNX Mish)."""
    for op in find_ops(gpu_module, ("math.tanh",)):
        x = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            near = arith.MulFOp(_poly(arith.MulFOp(x, x).result, _TANH), x).result
            far = math.TanhOp(x).result
            small = arith.CmpFOp(arith.CmpFPredicate.OLT, math.AbsFOp(x).result, _const_like(x.type, 0.125)).result
            new = arith.SelectOp(small, near, far).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def accurate_log1p_expm1(gpu_module: ir.Operation) -> None:
    """log1p and expm1 near 0 without the cancellation of log(1 + x) and exp(x) - 1 (what MathToSPIRV
    emits; log1p(4.5e-5) lost 3 digits in f32, failing ONNX Mish): a Taylor polynomial for |x| < 0.1 (the
    log/exp trick of Goldberg needs a log accurate near 1, which lavapipe's is not), the plain form beyond."""
    for op in find_ops(gpu_module, ("math.log1p", "math.expm1")):
        x = op.operands[0]
        t = x.type
        with ir.InsertionPoint(op), op.location:
            near = arith.MulFOp(_poly(x, _LOG1P if op.name == "math.log1p" else _EXPM1), x).result
            one = _const_like(t, 1.0)
            if op.name == "math.log1p":
                far = math.LogOp(arith.AddFOp(one, x).result).result
            else:
                far = arith.SubFOp(math.ExpOp(x).result, one).result
            small = arith.CmpFOp(arith.CmpFPredicate.OLT, math.AbsFOp(x).result, _const_like(t, 0.1)).result
            new = arith.SelectOp(small, near, far).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def remf_by_infinity(gpu_module: ir.Operation) -> None:
    """x rem ±inf is x for finite x (C fmod, IEEE remainder); OpFRem on lavapipe gives NaN there."""
    for op in find_ops(gpu_module, ("arith.remf",)):
        x, y = op.operands
        t = x.type
        with ir.InsertionPoint.after(op), op.location:
            inf = _const_like(t, float("inf"))
            y_inf = arith.CmpFOp(arith.CmpFPredicate.OEQ, math.AbsFOp(y).result, inf).result
            x_fin = arith.CmpFOp(arith.CmpFPredicate.ONE, math.AbsFOp(x).result, inf).result
            new = arith.SelectOp(arith.AndIOp(y_inf, x_fin).result, x, op.results[0]).result
        op.results[0].replace_all_uses_except(new, new.owner.operation)


def narrow_float_to_int_via_i32(gpu_module: ir.Operation) -> None:
    """Float to 8/16-bit integer conversions go through i32 and truncate. Integers are signless, so ONNX uint8
    results come as `fptosi f32 to i8`; an OpConvertFToS to an 8-bit type saturates at 127 on NVIDIA's driver
    (uint8 200 read back 127) where lavapipe wraps. Through i32 every value of either 8-bit range keeps its bits."""
    for op in find_ops(gpu_module, ("arith.fptosi", "arith.fptoui")):
        t = op.results[0].type
        elem = _elem(t)
        if not isinstance(elem, ir.IntegerType) or elem.width >= 32:
            continue
        wide = _with_elem(t, ir.IntegerType.get_signless(32))
        with ir.InsertionPoint(op), op.location:
            conv = arith.FPToSIOp if op.name == "arith.fptosi" else arith.FPToUIOp
            new = arith.TruncIOp(t, conv(wide, op.operands[0]).result).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
