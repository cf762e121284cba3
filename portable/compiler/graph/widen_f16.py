"""f16 held and computed as f32 on Vulkan devices without 16-bit storage (no StorageBuffer16BitAccess: the
generic, Mali Bifrost and Adreno 6xx profiles).

Such a device cannot load or store a 16-bit value, and upstream's SPIR-V type converter then reads an f16
buffer as an f32 array: wrong bytes, silently (an f16 matmul came out as garbage on every element). So, before
anything else, every f16 of the function becomes f32, as ncnn falls back to fp32 storage: tensor and scalar
types, block arguments of linalg bodies, constants, and the function's signature. The runtime converts at the
boundary (executable.TensorSig.device): float16 arrays in, float16 arrays out.

What changes: values between the graph's ops keep f32 precision; an explicit rounding to f16 inside the graph
(a Cast to float16, or an op computed in f16) keeps its rounding: the f32 result is rounded to the nearest f16
value in f32 arithmetic (`_round_to_f16`). Outputs are rounded to f16 on the host.
"""

from __future__ import annotations

import numpy as np

from ...errors import CompileError
from ...ir.mlir import arith, ir, math
from ...ir.util import nested_ops, retype_function


def _widen(t: ir.Type) -> ir.Type | None:
    """The f32 form of an f16 type (scalar, tensor or vector), None for any other type."""
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()
    if t == f16:
        return f32
    if isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).element_type == f16:
        rt = ir.RankedTensorType(t)
        return ir.RankedTensorType.get(list(rt.shape), f32, rt.encoding)
    if isinstance(t, ir.VectorType) and ir.VectorType(t).element_type == f16:
        return ir.VectorType.get(list(ir.VectorType(t).shape), f32)
    return None


def _constant(op: ir.Operation, new_type: ir.Type) -> None:
    attr = op.attributes["value"]
    with ir.InsertionPoint(op), op.location:
        if isinstance(attr, ir.FloatAttr):
            new_attr = ir.FloatAttr.get(ir.F32Type.get(), ir.FloatAttr(attr).value)
        elif isinstance(attr, ir.DenseElementsAttr):
            values = np.array(ir.DenseElementsAttr(attr), copy=True).astype(np.float32)
            new_attr = ir.DenseElementsAttr.get(values.reshape(ir.ShapedType(new_type).shape), type=new_type)
        else:
            raise CompileError(f"an f16 constant of an unsupported form ({str(attr)[:80]}) on a target without "
                               f"16-bit storage", stage="preprocess")
        new = arith.ConstantOp(new_type, new_attr)
    op.results[0].replace_all_uses_with(new.result)
    op.erase()


def _splat(value: float, like: ir.Type) -> ir.Value:
    f32 = ir.F32Type.get()
    if isinstance(like, ir.VectorType):
        return arith.ConstantOp(like, ir.DenseElementsAttr.get_splat(like, ir.FloatAttr.get(f32, value))).result
    return arith.ConstantOp(f32, ir.FloatAttr.get(f32, value)).result


def _round_to_f16(x: ir.Value) -> ir.Value:
    """x (f32) rounded to the nearest f16 value (ties to even), as f32: f16's 11 significant bits where x is a
    normal f16, its fixed step of 2^-24 below, infinity past 65504 (at 65520 and up, as a conversion rounds)."""
    t = x.type
    i32 = ir.IntegerType.get_signless(32)
    it = ir.VectorType.get(list(ir.VectorType(t).shape), i32) if isinstance(t, ir.VectorType) else i32

    def ci(v: int) -> ir.Value:
        if isinstance(it, ir.VectorType):
            return arith.ConstantOp(it, ir.DenseElementsAttr.get_splat(it, ir.IntegerAttr.get(i32, v))).result
        return arith.ConstantOp(i32, ir.IntegerAttr.get(i32, v)).result

    bits = arith.BitcastOp(it, x).result
    odd = arith.AndIOp(arith.ShRUIOp(bits, ci(13)).result, ci(1)).result
    rounded = arith.AndIOp(arith.AddIOp(bits, arith.AddIOp(ci(0xFFF), odd).result).result, ci(~0x1FFF)).result
    normal = arith.BitcastOp(t, rounded).result
    step = _splat(2.0 ** 24, t)
    small = arith.MulFOp(math.RoundEvenOp(arith.MulFOp(x, step).result).result, _splat(2.0 ** -24, t)).result
    mag = math.AbsFOp(x).result
    out = arith.SelectOp(arith.CmpFOp(arith.CmpFPredicate.OLT, mag, _splat(2.0 ** -14, t)).result, small,
                         normal).result
    inf = arith.SelectOp(arith.CmpFOp(arith.CmpFPredicate.OLT, x, _splat(0.0, t)).result, _splat(-np.inf, t),
                         _splat(np.inf, t)).result
    big = arith.CmpFOp(arith.CmpFPredicate.OGE, mag, _splat(65520.0, t)).result
    finite = arith.SelectOp(big, inf, out).result
    # A NaN stays itself (the integer rounding could carry a full payload into the sign bit).
    return arith.SelectOp(arith.CmpFOp(arith.CmpFPredicate.UNO, x, x).result, x, finite).result


def promote_f16(func_op: ir.Operation) -> tuple[list[int], list[int]] | None:
    """Rewrite every f16 of `func_op` as f32 (module docstring); returns the positions of the arguments and of
    the results that were float16 (the runtime converts those), or None where the function holds no f16."""
    ftype = ir.FunctionType(ir.TypeAttr(func_op.attributes["function_type"]).value)
    ops = nested_ops(func_op)
    if not any(_widen(v.type) for op in ops for v in list(op.results) + list(op.operands)) and \
            not any(_widen(t) for t in list(ftype.inputs) + list(ftype.results)):
        return None
    ins, outs = retype_function(func_op, ops, _widen)
    rounding, same = [], []
    for op in ops:
        if op.name == "arith.constant":
            t = _widen(op.results[0].type)
            if t is not None:
                _constant(op, t)
            continue
        if op.name == "arith.bitcast" and any(_widen(v.type) for v in list(op.operands) + list(op.results)):
            raise CompileError("a bitcast to or from float16 on a Vulkan target without 16-bit storage (float16 is "
                               "held as float32 there): compile for a device with 16-bit storage or for OpenCL",
                               stage="preprocess")
        produces_f16 = [r for r in op.results if _widen(r.type) is not None]
        for r in produces_f16:
            r.set_type(_widen(r.type))
        if op.name == "arith.truncf" and produces_f16:
            rounding.append(op)  # to f16: a rounding kept in f32
        elif op.name == "arith.extf" and op.operands[0].type == op.results[0].type:
            same.append(op)
        elif produces_f16 and op.name.split(".")[0] in ("arith", "math") and op.name not in (
                "arith.select", "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf",
                "arith.negf", "math.absf", "math.copysign"):
            rounding.append(op)  # arithmetic that computed in f16: its f32 result rounded as f16 would be
    for op in same:
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
    for op in rounding:
        r = op.results[0]
        uses = [(u.owner, u.operand_number) for u in r.uses]
        source = op.operands[0] if op.name == "arith.truncf" and op.operands[0].type == r.type else r
        with ir.InsertionPoint.after(op), op.location:
            rounded = _round_to_f16(source)
        for owner, i in uses:
            owner.operands[i] = rounded
        if source is not r:  # a truncf that became f32 -> f32
            op.erase()
    return [k for k, t in enumerate(ins) if t is not None], [k for k, t in enumerate(outs) if t is not None]
