"""Static per-thread temporaries (`memref.alloc` inside a kernel, e.g. the accumulators of a fused
multi-result reduction) become Function-storage `memref.alloca`, which MemRefToSPIRV lowers to private
variables; left as allocs they would be read as storage buffers, which SPIR-V cannot allocate."""

from __future__ import annotations

from ..compiler.ir_util import find_ops
from ..compiler.mlir import ir, memref


def allocs_to_private(gpu_module: ir.Operation) -> None:
    def private(op):
        t = ir.MemRefType(op.results[0].type)
        return t.has_static_shape and t.memory_space is None

    for op in find_ops(gpu_module, ("memref.alloc",), private):
        t = ir.MemRefType(op.results[0].type)
        private = ir.MemRefType.get(list(t.shape), t.element_type,
                                    memory_space=ir.Attribute.parse("#spirv.storage_class<Function>"))
        with ir.InsertionPoint(op), op.location:
            new = memref.AllocaOp(private, [], []).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def expand_absi(gpu_module: ir.Operation) -> None:
    """math.absi -> select(x < 0, 0 - x, x): math-to-spirv has no pattern for 64-bit or vector absi."""
    from ..compiler.mlir import arith

    for op in find_ops(gpu_module, ("math.absi",)):
        x = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            zero = arith.ConstantOp(x.type, ir.DenseElementsAttr.get_splat(x.type, ir.IntegerAttr.get(
                ir.VectorType(x.type).element_type, 0)) if isinstance(x.type, ir.VectorType)
                else ir.IntegerAttr.get(x.type, 0)).result
            neg = arith.SubIOp(zero, x).result
            lt = arith.CmpIOp(arith.CmpIPredicate.slt, x, zero).result
            new = arith.SelectOp(lt, neg, x).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
