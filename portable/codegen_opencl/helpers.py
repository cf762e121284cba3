"""Small C functions the kernel source defines when an op has no one-expression OpenCL equivalent.

Each helper is specialised to one C type (`pt_maximumf_float4`) instead of relying on clang's
`overloadable` attribute, which not every OpenCL compiler accepts. The emitter puts the definitions of the
helpers a kernel uses above the kernel, in the order they were first needed.
"""

from __future__ import annotations

from typing import Protocol

from ..ir.mlir import ir
from . import types as T


class HelperSink(Protocol):
    def ct(self, t: ir.Type, unsigned: bool = False) -> str: ...

    def helper(self, name: str, definition: str) -> str: ...


def nan_minmax(em: HelperSink, kind: str, t: ir.Type) -> str:
    """arith.maximumf / minimumf: NaN if either operand is NaN, and -0.0 < +0.0 (IEEE 754-2019)."""
    ct = em.ct(t)
    it = T.int_type_of_float(ct)
    pick, bitop, fn = (">", "&", "fmax") if kind == "max" else ("<", "|", "fmin")
    name = f"pt_{kind}imumf_{ct}"
    if T.width(t) == 0:
        body = (
            f"    if (isnan(a) || isnan(b)) return a + b;\n"
            f"    if (a == b) return as_{ct}(({it})(as_{it}(a) {bitop} as_{it}(b)));  /* orders -0.0 and +0.0 */\n"
            f"    return a {pick} b ? a : b;\n"
        )
    else:
        body = (
            f"    {ct} m = select({fn}(a, b), as_{ct}(as_{it}(a) {bitop} as_{it}(b)), a == b);\n"
            f"    return select(m, a + b, isnan(a) | isnan(b));\n"
        )
    return em.helper(name, f"{ct} {name}({ct} a, {ct} b) {{\n{body}}}\n")


def rounded_divsi(em: HelperSink, kind: str, t: ir.Type) -> str:
    """arith.floordivsi (kind 'floor') / ceildivsi (kind 'ceil') from C's truncating division."""
    ct = em.ct(t)
    name = f"pt_{kind}divsi_{ct}"
    same_sign = "==" if kind == "ceil" else "!="
    if T.width(t) == 0:
        step = "q + 1" if kind == "ceil" else "q - 1"
        ret = f"    return (a % b != 0 && ((a < 0) {same_sign} (b < 0))) ? {step} : q;\n"
    else:
        # Vector comparisons give -1 for true lanes.
        sign = "-" if kind == "ceil" else "+"
        ret = f"    return q {sign} ((a % b != 0) & ((a < 0) {same_sign} (b < 0)));\n"
    body = f"    {ct} q = a / b;\n{ret}"
    return em.helper(name, f"{ct} {name}({ct} a, {ct} b) {{\n{body}}}\n")


def ceildivui(em: HelperSink, t: ir.Type) -> str:
    """arith.ceildivui."""
    ct, ut = em.ct(t), em.ct(t, unsigned=True)
    name = f"pt_ceildivui_{ct}"
    if T.width(t) == 0:
        body = (
            f"    {ut} q = ({ut})a / ({ut})b;\n"
            f"    return ({ct})(({ut})a % ({ut})b != 0 ? q + 1 : q);\n"
        )
    else:
        body = (
            f"    {ut} q = as_{ut}(a) / as_{ut}(b);\n"
            f"    return as_{ct}(q - as_{ut}(as_{ut}(a) % as_{ut}(b) != 0));\n"
        )
    return em.helper(name, f"{ct} {name}({ct} a, {ct} b) {{\n{body}}}\n")


def round_f16(em: HelperSink, t: ir.Type) -> str:
    """Rounds a float to the nearest f16 value (ties to even), for f16 computed in float on devices without
    cl_khr_fp16: every f16 op result is rounded, as the op would round in half precision."""
    ct = em.ct(t)
    ut = "u" + T.int_type_of_float(ct)
    name = f"pt_round_f16_{ct}"
    body = (
        f"    {ct} a = fabs(x);\n"
        f"    {ut} u = as_{ut}(x);\n"
        f"    {ct} normal = as_{ct}((u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu);  /* drop 13 mantissa bits */\n"
        f"    {ct} tiny = copysign(rint(a * 16777216.0f) * 5.9604644775390625e-08f, x);  /* f16 subnormals */\n"
    )
    if T.width(t) == 0:
        body += (
            "    if (isnan(x)) return x;\n"
            "    if (a >= 65520.0f) return copysign(INFINITY, x);\n"
            "    return a < 6.103515625e-05f ? tiny : normal;\n"
        )
    else:
        body += (
            f"    {ct} r = select(normal, tiny, a < 6.103515625e-05f);\n"
            f"    r = select(r, copysign(({ct})(INFINITY), x), a >= 65520.0f);\n"
            f"    return select(r, x, isnan(x));\n"
        )
    return em.helper(name, f"{ct} {name}({ct} x) {{\n{body}}}\n")


def shuffle_xor(em: HelperSink, spelling: str, t: ir.Type, width: int | None) -> str:
    """A whole-subgroup butterfly shuffle of a 32-bit value. `spelling` "ptx": NVIDIA's OpenCL compiler takes
    inline PTX, and OpenCL C 1.2 there has no subgroup functions (`shfl.sync.bfly` over the 32 lanes of a warp)."""
    from ..errors import UnsupportedOp

    ct = em.ct(t)
    if spelling != "ptx" or width != 32 or ct not in ("float", "int", "uint"):
        raise UnsupportedOp(f"a subgroup shuffle of {ct} over {width} lanes has no '{spelling}' OpenCL C form")
    name = f"pt_shuffle_xor_{ct}"
    body = (f"    uint r;\n"
            f'    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"\n'
            f'                 : "=r"(r) : "r"(as_uint(v)), "r"(m));\n'
            f"    return as_{ct}(r);\n")
    return em.helper(name, f"{ct} {name}({ct} v, int m) {{\n{body}}}\n")
