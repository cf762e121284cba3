"""The combine of a row chain's reduction by subgroup shuffles (profile key `subgroup_reduce`).

A row chain's reduction leaves one partial per thread in workgroup memory (transform_script._row_chain_workgroup);
the combine that the script marks with COMBINE reduces them. Run by every thread over all the partials, it would
read T values per thread; a tree of partials in workgroup memory costs a barrier per level. Here each thread
combines its own partial with its subgroup's by butterfly shuffles (`gpu.shuffle xor`: every lane ends with the
subgroup's value), one lane per subgroup writes it to workgroup memory, and after one barrier every thread
combines the T / subgroup values (broadcast reads), starting from the reduction's init. The combiner is the
reduction's own body, so NaN and signed-zero rules stay the op's.

With the width ANY_WIDTH (profile `subgroup_reduce = "varying"`: AMD and Intel, whose drivers choose the subgroup
width per kernel) no width is assumed: each subgroup reduces its partials with the device's own subgroup reduction
(`gpu.subgroup_reduce`: SPIR-V GroupNonUniform arithmetic, OpenCL C sub_group_reduce_*), its first lane writes
the result at its subgroup id, and after one barrier every thread combines as many values as there are subgroups.
That needs a combiner the device reduces (add, min, max); others keep the loop over all partials. A max or min
that propagates NaN (arith.maximumf, minimumf) is reduced as its NaN-ignoring form plus a subgroup vote on NaN,
since neither SPIR-V's nor OpenCL's subgroup max defines NaN inputs.

Runs after thread mapping, before outlining (the ops are inside gpu.launch, outside the thread loops).
"""

from __future__ import annotations

from ...ir.mlir import arith, gpu, ir, memref, scf
from ...ir.util import clone_body, find_ops
from ..strategy.strategy import ANY_WIDTH

COMBINE = "portable.subgroup_combine"  # its value: the subgroup size, or ANY_WIDTH

# The combiners the device's subgroup reduction carries out, as the gpu.subgroup_reduce kind each becomes (a NaN-
# propagating max/min as the NaN-ignoring one, corrected by a vote).
_KINDS = {"arith.addf": "ADD", "arith.addi": "ADD", "arith.maxnumf": "MAXNUMF", "arith.minnumf": "MINNUMF",
          "arith.maximumf": "MAXNUMF", "arith.minimumf": "MINNUMF", "arith.maxsi": "MAXSI", "arith.minsi": "MINSI",
          "arith.maxui": "MAXUI", "arith.minui": "MINUI"}
_NAN_PROPAGATING = ("arith.maximumf", "arith.minimumf")


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


def _c(v: int) -> ir.Value:
    """An index constant at the current insertion point."""
    return arith.ConstantOp(ir.IndexType.get(), v).result


def _combiner(body: ir.Block) -> str | None:
    """The name of the one arith op that combines the body's two arguments, if that is all the body does."""
    ops = list(body.operations)
    if len(ops) != 2 or ops[1].operation.name != "linalg.yield" or list(ops[1].operands) != [ops[0].results[0]]:
        return None
    if set(ops[0].operands) != set(body.arguments) or len(ops[0].operands) != 2:
        return None
    return ops[0].operation.name


def _lower(op: ir.Operation, width: int) -> None:
    found = _partials(op)
    if found is None:
        return  # left as a loop every thread runs over all partials: correct, only slower
    if width == ANY_WIDTH:
        _lower_any_width(op, *found)
        return
    src, dst, threads = found
    if threads % width or threads <= width:
        return
    body = op.regions[0].blocks[0]
    f32 = ir.MemRefType(src.type).element_type
    with ir.InsertionPoint(op), op.location:
        i32 = ir.IntegerType.get_signless(32)
        tid = gpu.ThreadIdOp(gpu.Dimension.x).result
        zeros = [_c(0)] * (ir.MemRefType(src.type).rank - 1)
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
        lane = arith.RemUIOp(tid, _c(width)).result
        first = arith.CmpIOp(arith.CmpIPredicate.eq, lane, _c(0)).result
        write = scf.IfOp(first)
        with ir.InsertionPoint(write.then_block):
            memref.StoreOp(value, lanes, [arith.DivUIOp(tid, _c(width)).result])
            scf.YieldOp([])
        gpu.BarrierOp()
        dst_idx = [_c(0)] * ir.MemRefType(dst.type).rank
        acc = memref.LoadOp(dst, dst_idx).result
        for g in range(groups):
            acc = clone_body(body, [memref.LoadOp(lanes, [_c(g)]).result, acc])[0]
        _store_result(acc, dst, dst_idx, tid)
    op.erase()


def _store_result(acc: ir.Value, dst: ir.Value, dst_idx: list[ir.Value], tid: ir.Value) -> None:
    """Every thread holds the combined value: into its own copy of the result, or by thread 0 into a shared one."""
    if ir.MemRefType(dst.type).memory_space is None:
        memref.StoreOp(acc, dst, dst_idx)  # the thread's own copy
    else:
        store = scf.IfOp(arith.CmpIOp(arith.CmpIPredicate.eq, tid, _c(0)).result)
        with ir.InsertionPoint(store.then_block):
            memref.StoreOp(acc, dst, dst_idx)
            scf.YieldOp([])


def _lower_any_width(op: ir.Operation, src: ir.Value, dst: ir.Value, threads: int) -> None:
    body = op.regions[0].blocks[0]
    name = _combiner(body)
    if name not in _KINDS or threads < 2:
        return  # left as a loop over all partials
    elem = ir.MemRefType(src.type).element_type
    with ir.InsertionPoint(op), op.location:
        i32 = ir.IntegerType.get_signless(32)
        def reduce(value: ir.Value, kind: str) -> ir.Value:
            # Not marked uniform: SPIR-V's uniform group ops need the Groups capability, a kernel one, where the
            # GroupNonUniform arithmetic is what Vulkan devices have.
            return gpu.SubgroupReduceOp(value, ir.Attribute.parse(f"#gpu<all_reduce_op {kind.lower()}>")).result

        tid = gpu.ThreadIdOp(gpu.Dimension.x).result
        zeros = [_c(0)] * (ir.MemRefType(src.type).rank - 1)
        mine = memref.LoadOp(src, zeros + [tid]).result
        value = reduce(mine, _KINDS[name])
        if name in _NAN_PROPAGATING:
            nan = arith.CmpFOp(arith.CmpFPredicate.UNO, mine, mine).result
            flag = arith.SelectOp(nan, arith.ConstantOp(i32, 1).result, arith.ConstantOp(i32, 0).result).result
            any_nan = arith.CmpIOp(arith.CmpIPredicate.ne, reduce(flag, "MAXSI"),
                                   arith.ConstantOp(i32, 0).result).result
            value = arith.SelectOp(any_nan, arith.ConstantOp(elem, float("nan")).result, value).result
        # One value per subgroup; as many subgroups as threads at most (a width of 1), whatever the device runs.
        lanes = memref.AllocOp(ir.MemRefType.get([threads], elem,
                                                 memory_space=ir.Attribute.parse("#gpu.address_space<workgroup>")),
                               [], []).result
        first = arith.CmpIOp(arith.CmpIPredicate.eq, gpu.LaneIdOp().result, _c(0)).result
        write = scf.IfOp(first)
        with ir.InsertionPoint(write.then_block):
            memref.StoreOp(value, lanes, [gpu.SubgroupIdOp().result])
            scf.YieldOp([])
        gpu.BarrierOp()
        dst_idx = [_c(0)] * ir.MemRefType(dst.type).rank
        init = memref.LoadOp(dst, dst_idx).result
        loop = scf.ForOp(_c(0), gpu.NumSubgroupsOp().result, _c(1), [init])
        with ir.InsertionPoint(loop.body):
            acc = clone_body(body, [memref.LoadOp(lanes, [loop.induction_variable]).result,
                                    loop.inner_iter_args[0]])[0]
            scf.YieldOp([acc])
        acc = loop.results[0]
        _store_result(acc, dst, dst_idx, tid)
    op.erase()
