"""int64 computed as int32 for devices without 64-bit integers (Vulkan shaderInt64 off: no SPIR-V Int64).

ONNX graphs carry int64 wherever they hold an index: token ids, positions, Gather indices, ArgMax's result. A
device without 64-bit integers cannot load, store or compute them, so before anything else every i64 of the
function becomes i32: tensor and scalar types, block arguments of linalg bodies, constants (each checked to fit),
and the function's own signature. Sign and zero extensions to i64 and truncations from it that become i32 -> i32
go away. The runtime converts at the boundary (executable.TensorSig.device): int64 arrays in, checked to fit,
int64 arrays out.

What changes: int64 values must stay within int32's range. A constant outside it is a CompileError here; an input
outside it is an error when the graph is called; an intermediate value that would pass 2^31 wraps (as IREE's
i64 -> i32 demotion does). Indices, ids and positions never come near that.
"""

from __future__ import annotations

import numpy as np

from ...errors import CompileError
from ...ir.mlir import arith, ir
from ...ir.util import nested_ops, retype_function

_LIMITS = np.iinfo(np.int32)


def _narrow(t: ir.Type) -> ir.Type | None:
    """The i32 form of an i64 type (scalar, tensor or vector), None for any other type."""
    i64 = ir.IntegerType.get_signless(64)
    if t == i64:
        return ir.IntegerType.get_signless(32)
    if isinstance(t, ir.RankedTensorType) and ir.RankedTensorType(t).element_type == i64:
        rt = ir.RankedTensorType(t)
        return ir.RankedTensorType.get(list(rt.shape), ir.IntegerType.get_signless(32), rt.encoding)
    if isinstance(t, ir.VectorType) and ir.VectorType(t).element_type == i64:
        return ir.VectorType.get(list(ir.VectorType(t).shape), ir.IntegerType.get_signless(32))
    return None


def _fits(values: np.ndarray, where: str) -> None:
    if values.size and (values.min() < _LIMITS.min or values.max() > _LIMITS.max):
        bad = values[(values < _LIMITS.min) | (values > _LIMITS.max)].reshape(-1)[0]
        raise CompileError(f"{where}: the int64 constant {int(bad)} does not fit in 32 bits, and this target has no "
                           f"64-bit integers (its profile or device lacks shaderInt64), so int64 is computed as "
                           f"int32; compile for a device with 64-bit integers or for OpenCL", stage="preprocess")


def _constant(op: ir.Operation, new_type: ir.Type) -> None:
    """Replace an i64 arith.constant by its i32 equal."""
    attr = op.attributes["value"]
    with ir.InsertionPoint(op), op.location:
        if isinstance(attr, ir.IntegerAttr):
            v = ir.IntegerAttr(attr).value
            _fits(np.array([v], np.int64), "a scalar constant")
            new_attr = ir.IntegerAttr.get(new_type, v)
        elif isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
            v = ir.IntegerAttr(ir.DenseElementsAttr(attr).get_splat_value()).value
            _fits(np.array([v], np.int64), "a constant tensor")
            new_attr = ir.DenseElementsAttr.get_splat(new_type, ir.IntegerAttr.get(
                ir.IntegerType.get_signless(32), v))
        elif isinstance(attr, ir.DenseElementsAttr):
            values = np.array(ir.DenseElementsAttr(attr), copy=True).astype(np.int64)
            _fits(values, "a constant tensor")
            new_attr = ir.DenseElementsAttr.get(values.astype(np.int32).reshape(ir.ShapedType(new_type).shape),
                                                type=new_type)
        else:
            raise CompileError(f"an int64 constant of an unsupported form ({str(attr)[:80]}) on a target without "
                               f"64-bit integers", stage="preprocess")
        new = arith.ConstantOp(new_type, new_attr)
    op.results[0].replace_all_uses_with(new.result)
    op.erase()


def demote_i64(func_op: ir.Operation) -> tuple[list[int], list[int]]:
    """Rewrite every i64 of `func_op` as i32; returns the positions of the arguments and of the results that were
    int64 (the runtime converts those)."""
    ops = nested_ops(func_op)
    ins, outs = retype_function(func_op, ops, _narrow)
    same_width = []
    for op in ops:
        if op.name == "arith.constant":
            t = _narrow(op.results[0].type)
            if t is not None:
                _constant(op, t)
            continue
        if op.name == "arith.bitcast" and any(_narrow(v.type) for v in list(op.operands) + list(op.results)):
            raise CompileError("a bitcast to or from int64 on a target without 64-bit integers (int64 is computed "
                               "as int32 there): compile for a device with 64-bit integers", stage="preprocess")
        for r in op.results:
            t = _narrow(r.type)
            if t is not None:
                r.set_type(t)
        if op.name in ("arith.extsi", "arith.extui", "arith.trunci") and op.operands[0].type == op.results[0].type:
            same_width.append(op)
    for op in same_width:  # an extension to or truncation from int64 that now goes from i32 to i32
        op.results[0].replace_all_uses_with(op.operands[0])
        op.erase()
    return [k for k, t in enumerate(ins) if t is not None], [k for k, t in enumerate(outs) if t is not None]
