"""bf16 without a bf16 type: values are C floats, bits are `ushort`, arithmetic is f32.

OpenCL C has no bfloat16 type (cl_intel_bfloat16 is one vendor's). A bf16 value lives in a float (a bf16 is an
f32 whose low 16 bits are zero), so every arith/math/vector op runs as its float form; buffers hold the bits
(storage.py). What is rounded where follows the SPIR-V path, so both targets compute the same numbers: there
`arith-emulate-unsupported-floats` and `math-extend-to-supported-types` wrap each op that computes on bf16 in
extf/truncf marked `contract`, and canonicalization folds the extf(truncf(x)) between two such ops back to x.
So a bf16 result of a computing op is used unrounded (its "wide" float) by the next computing op, and rounded
to nearest even by everything else: stores, selects, vector moves, loop-carried values, casts, bitcasts.
Explicit conversions to bf16 (truncf, sitofp, uitofp) go through f32, as the SPIR-V path and ONNX's do.
"""

from __future__ import annotations

from ..ir.mlir import ir
from . import types as T

# Ops on bf16 that the SPIR-V path leaves alone (bits moved, or rounding to bf16 itself); other arith and
# math ops compute in f32, as do these vector ops.
_NOT_COMPUTING = {"arith.bitcast", "arith.extf", "arith.truncf", "arith.constant", "arith.select",
                  "arith.sitofp", "arith.uitofp"}
_VECTOR_COMPUTING = {"vector.contract", "vector.reduction", "vector.multi_reduction", "vector.fma",
                     "vector.outerproduct", "vector.matmul", "vector.scan"}


def computes_in_f32(op) -> bool:
    """Whether op computes on bf16 values in f32: its bf16 operands may be wide and its bf16 results are."""
    name = op.operation.name
    computing = name in _VECTOR_COMPUTING or (name.split(".")[0] in ("arith", "math") and name not in _NOT_COMPUTING)
    return computing and any(T.is_bf16(v.type) for v in (*op.operands, *op.results))


def bits(n: int, x: str) -> str:
    """The ushort (ushortN for n lanes) bits of the float (floatN) x that holds a bf16 value: its upper half.
    Every bf16 value but a wide one is rounded already (or loaded, or a constant), so this moves bits as the
    SPIR-V path's i16 loads and stores do, NaN payloads included."""
    if n == 0:
        return f"(ushort)(as_uint({x}) >> 16)"
    return f"convert_ushort{n}(as_uint{n}({x}) >> 16)"


def float_of_bits(n: int, b: str) -> str:
    """The float (floatN for n lanes; n = 0 for a scalar) whose upper 16 bits are the ushort bf16 bits b:
    exact, a bf16 value is an f32 with 16 zero low bits."""
    if n == 0:
        return f"as_float((uint){b} << 16)"
    return f"as_float{n}(convert_uint{n}({b}) << 16)"


def rounded(em, n: int, x: str) -> str:
    """The float (floatN) x rounded to the nearest bf16 value."""
    v = str(n) if n else ""
    name = f"pt_round_bf16_float{v}"
    body = f"    return {float_of_bits(n, _rounded_bits(em, n) + '(x)')};\n"
    em.helper(name, f"float{v} {name}(float{v} x) {{\n{body}}}\n")
    return f"{name}({x})"


def convert(em, src: ir.Type, x: str, unsigned: bool) -> str:
    """arith.truncf / sitofp / uitofp (unsigned) of x, of type src, to bf16: through f32, each step rounded to
    nearest even. From f64 and 32/64-bit integers that can round twice; it is what the SPIR-V path, ml_dtypes and
    the ONNX reference's Cast compute, so all of them agree."""
    n = T.width(src)
    if T.is_float(src) and T.bits(src) == 32:
        return rounded(em, n, x)
    return rounded(em, n, f"convert_float{n}({x})" if n else f"(float){x}")


def _rounded_bits(em, n: int) -> str:
    """Adding 0x7FFF plus the lowest kept bit carries into the kept bits exactly when the dropped half is above
    a half ulp, or a half ulp with the kept part odd (ties to even); a carry out of the mantissa raises the
    exponent, to infinity past the largest bf16, and infinities (zero mantissa) stay. NaN becomes the quiet
    NaN 0x7FC0, as arith-expand's truncf makes it on the SPIR-V path."""
    v = str(n) if n else ""
    name = f"pt_bf16_bits_float{v}"
    if n == 0:
        body = ("    uint u = as_uint(x);\n"
                "    return isnan(x) ? (ushort)0x7FC0 : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);\n")
    else:
        body = (f"    uint{n} u = as_uint{n}(x);\n"
                f"    u = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;\n"
                f"    return convert_ushort{n}(select(u, (uint{n})(0x7FC0u), isnan(x)));\n")
    return em.helper(name, f"ushort{v} {name}(float{v} x) {{\n{body}}}\n")
