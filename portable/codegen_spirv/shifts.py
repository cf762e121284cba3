"""Shifts by the bit width or more shift every bit out, as ONNX BitShift expects: MLIR leaves them poison and
SPIR-V undefined (lavapipe takes the amount modulo the width). The amount u (read unsigned, so negative
amounts count as large) goes as min(u, W-1) and then min(u, W) - min(u, W-1) more, both in range; an
arithmetic right shift so fills with the sign bit."""

from __future__ import annotations

from ..ir.mlir import arith, ir
from ..ir.util import find_ops

_SHIFTS = {"arith.shli": arith.ShLIOp, "arith.shrsi": arith.ShRSIOp, "arith.shrui": arith.ShRUIOp}


def _splat(t: ir.Type, v: int) -> ir.Value:
    if isinstance(t, ir.VectorType):
        return arith.ConstantOp(t, ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, v))).result
    return arith.ConstantOp(t, ir.IntegerAttr.get(t, v)).result


def _in_range(amount: ir.Value, width: int) -> bool:
    """Whether `amount` is a constant (or splat) known to be below the width."""
    owner = amount.owner
    if not isinstance(owner, ir.OpView) or owner.operation.name != "arith.constant":
        return False
    attr = owner.attributes["value"]
    if isinstance(attr, ir.DenseIntElementsAttr):
        if not attr.is_splat:
            return False
        attr = attr.get_splat_value()
    return isinstance(attr, ir.IntegerAttr) and 0 <= attr.value < width


def saturate_shifts(gpu_module: ir.Operation) -> None:
    """Every integer shift whose amount may reach the width becomes two shifts by in-range amounts."""
    def wanted(op) -> bool:
        t = op.results[0].type
        e = ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t
        return isinstance(e, ir.IntegerType) and e.width > 1 and not _in_range(op.operands[1], e.width)

    for op in find_ops(gpu_module, tuple(_SHIFTS), wanted):
        x, amount = op.operands
        t = x.type
        w = (ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t).width
        with ir.InsertionPoint(op), op.location:
            s1 = arith.MinUIOp(amount, _splat(t, w - 1)).result
            s2 = arith.SubIOp(arith.MinUIOp(amount, _splat(t, w)).result, s1).result
            cls = _SHIFTS[op.name]
            new = cls(cls(x, s1).result, s2).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def sign_extend_by_shifts(gpu_module: ir.Operation) -> None:
    """Sign extensions to i64 (arith.extsi, and index_cast from the 32-bit index; scalars or vectors) as a
    zero extension and a shift pair: lavapipe (Mesa 22.3, LLVM 15) evaluates signed comparisons of
    OpSConvert'ed 64-bit values wrongly (`sext(x) <= 3` is always false; tests/test_legalization.py)."""
    i32, i64 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(64)

    def elem(t: ir.Type) -> ir.Type:
        return ir.VectorType(t).element_type if isinstance(t, ir.VectorType) else t

    def like(t: ir.Type, e: ir.Type) -> ir.Type:
        return ir.VectorType.get(list(ir.VectorType(t).shape), e) if isinstance(t, ir.VectorType) else e

    def wanted(op) -> bool:
        if elem(op.results[0].type) != i64:
            return False
        return op.name == "arith.extsi" or isinstance(elem(op.operands[0].type), ir.IndexType)

    for op in find_ops(gpu_module, ("arith.extsi", "arith.index_cast"), wanted):
        x = op.operands[0]
        t = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            if isinstance(elem(x.type), ir.IndexType):
                x = arith.IndexCastOp(like(x.type, i32), x).result
            k = _splat(t, 64 - ir.IntegerType(elem(x.type)).width)
            new = arith.ShRSIOp(arith.ShLIOp(arith.ExtUIOp(t, x).result, k).result, k).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
