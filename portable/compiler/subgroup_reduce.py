"""The combine of a row chain's reduction by subgroup shuffles (profile key `subgroup_reduce`).

A row chain's reduction leaves one partial per thread in workgroup memory (transform_script._row_chain_workgroup);
the combine that the script marks with COMBINE reduces them. Run by every thread over all the partials, it would
read T values per thread; a tree of partials in workgroup memory costs a barrier per level. Here each thread
combines its own partial with its subgroup's by butterfly shuffles (`gpu.shuffle xor`: every lane ends with the
subgroup's value), one lane per subgroup writes it to workgroup memory, and after one barrier every thread
combines the T / subgroup values (broadcast reads), starting from the reduction's init. The combiner is the
reduction's own body, so NaN and signed-zero rules stay the op's.

Runs after thread mapping, before outlining (the ops are inside gpu.launch, outside the thread loops).
"""

from __future__ import annotations

from .ir_util import clone_body, find_ops
from .mlir import arith, gpu, ir, memref, scf

COMBINE = "portable.subgroup_combine"  # its value: the subgroup size


def lower_combines(module: ir.Module) -> None:
    for op in find_ops(module.operation, ("linalg.reduce", "linalg.generic"), lambda o: COMBINE in o.attributes):
        width = ir.IntegerAttr(op.attributes[COMBINE]).value
        del op.attributes[COMBINE]
        _lower(op, width)


def _partials(op: ir.Operation) -> tuple[ir.Value, ir.Value, int] | None:
    """(partials, result, threads) of a single-input single-output combine over the last dim of unit-leading
    partials into a unit result, else None."""
    if len(op.operands) != 2 or len(op.results):
        return None
    src, dst = op.operands
    st, dt = ir.MemRefType(src.type), ir.MemRefType(dst.type)
    if not st.has_static_shape or any(d != 1 for d in st.shape[:-1]) or any(d != 1 for d in dt.shape):
        return None
    return src, dst, st.shape[-1]


def _lower(op: ir.Operation, width: int) -> None:
    found = _partials(op)
    if found is None:
        return  # left as a loop every thread runs over all partials: correct, only slower
    src, dst, threads = found
    if threads % width or threads <= width:
        return
    body = op.regions[0].blocks[0]
    f32 = ir.MemRefType(src.type).element_type
    with ir.InsertionPoint(op), op.location:
        idx = ir.IndexType.get()
        i32 = ir.IntegerType.get_signless(32)

        def c(v: int) -> ir.Value:
            return arith.ConstantOp(idx, v).result

        tid = gpu.ThreadIdOp(gpu.Dimension.x).result
        zeros = [c(0)] * (ir.MemRefType(src.type).rank - 1)
        value = memref.LoadOp(src, zeros + [tid]).result
        # Butterfly over the subgroup: after log2(width) steps every lane holds the whole subgroup's value.
        step = width // 2
        while step:
            other = gpu.ShuffleOp(value, arith.ConstantOp(i32, step).result, arith.ConstantOp(i32, width).result,
                                  gpu.ShuffleMode.XOR).results[0]
            value = clone_body(body, [other, value])[0]
            step //= 2
        groups = threads // width
        lanes = memref.AllocOp(ir.MemRefType.get([groups], f32,
                                                 memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>")),
                               [], []).result
        lane = arith.RemUIOp(tid, c(width)).result
        first = arith.CmpIOp(arith.CmpIPredicate.eq, lane, c(0)).result
        write = scf.IfOp(first)
        with ir.InsertionPoint(write.then_block):
            memref.StoreOp(value, lanes, [arith.DivUIOp(tid, c(width)).result])
            scf.YieldOp([])
        gpu.BarrierOp()
        dst_idx = [c(0)] * ir.MemRefType(dst.type).rank
        acc = memref.LoadOp(dst, dst_idx).result
        for g in range(groups):
            acc = clone_body(body, [memref.LoadOp(lanes, [c(g)]).result, acc])[0]
        if ir.MemRefType(dst.type).memory_space is None:
            memref.StoreOp(acc, dst, dst_idx)  # the thread's own copy
        else:
            store = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid, c(0)).result)
            with ir.InsertionPoint(store.then_block):
                memref.StoreOp(acc, dst, dst_idx)
                scf.YieldOp([])
    op.erase()
