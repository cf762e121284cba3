"""Static per-thread temporaries (`memref.alloc` inside a kernel, e.g. the accumulators of a fused
multi-result reduction) become Function-storage `memref.alloca`, which MemRefToSPIRV lowers to private
variables; left as allocs they would be read as storage buffers, which SPIR-V cannot allocate."""

from __future__ import annotations

from ..ir.bounds import Bounds
from ..ir.mlir import ir, memref
from ..ir.util import find_ops


def allocs_to_private(gpu_module: ir.Operation) -> None:
    """Static allocs, and dynamic ones whose sizes have a known upper bound and are only loaded from and
    stored to (indices stay below the real size, so a buffer of the bound's shape holds them), become
    private arrays."""
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name != "gpu.func":
            continue
        fn = fn.operation
        block = tuple(int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"])) \
            if "known_block_size" in fn.attributes else (1, 1, 1)
        grid = tuple(int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_grid_size"])) \
            if "known_grid_size" in fn.attributes else None
        bounds = Bounds(block, grid)
        for op in find_ops(fn, ("memref.alloc",), lambda op: ir.MemRefType(op.results[0].type).memory_space is None):
            t = ir.MemRefType(op.results[0].type)
            shape = list(t.shape)
            if not t.has_static_shape:
                if any(u.owner.name not in ("memref.load", "memref.store") for u in op.results[0].uses):
                    continue
                dyn = iter(op.operands)
                for i in range(len(shape)):
                    if t.is_dynamic_dim(i):
                        shape[i] = bounds.upper(next(dyn))
                if any(d is None or d <= 0 for d in shape):
                    continue
            private = ir.MemRefType.get(shape, t.element_type,
                                        memory_space=ir.Attribute.parse("#spirv.storage_class<Function>"))
            with ir.InsertionPoint(op), op.location:
                new = memref.AllocaOp(private, [], []).result
            op.results[0].replace_all_uses_with(new)
            op.erase()


def expand_absi(gpu_module: ir.Operation) -> None:
    """math.absi -> select(x < 0, 0 - x, x): math-to-spirv has no pattern for 64-bit or vector absi."""
    from ..ir.mlir import arith

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
