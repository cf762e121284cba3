"""Reads that every lane of a subgroup makes alike are split across the lanes and shared by shuffles.

For CPU Vulkan drivers (lavapipe): llvmpipe runs a subgroup as the SIMD lanes of one CPU thread, and Mesa 22.3
turns every buffer load into a loop over the lanes, with a bounds check per lane and component. A load that all
lanes make at the same address therefore costs as much as a different address per lane, while a shuffle with a
constant lane is a single register broadcast. In the register-blocked matmul the A values of a thread's rows are
the same in every lane of a subgroup (the lanes differ in columns): a read of L = S*w such values (S lanes) becomes
one w-wide read per lane at offset lane*w, and element i is then taken from lane i // w.

Measured on lavapipe (matmul 512 f32, CPU ms, 2026-11-30): 38 with 8x4 tiles and K steps of 4; 18 with 16x4 and
shared reads (K step 32); 12 once the rest of lane_kernels.py and 32x4 tiles are in (device_profiles/lavapipe.toml).
"""

from __future__ import annotations

from ...ir.mlir import arith, gpu, ir, vector
from ...ir.util import find_ops

# Ops whose result is the same in every lane when their operands are (thread ids other than x: see below).
_PURE = ("arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.divsi", "arith.remui",
         "arith.remsi", "arith.index_cast", "arith.index_castui", "arith.shli", "arith.shrui", "arith.shrsi",
         "arith.andi", "arith.ori", "arith.xori", "arith.minsi", "arith.minui", "arith.maxsi", "arith.maxui",
         "arith.select", "arith.cmpi", "arith.extsi", "arith.extui", "arith.trunci", "affine.apply",
         "gpu.block_id", "gpu.grid_dim", "gpu.block_dim")


def share_subgroup_reads(gpu_module: ir.Operation, subgroup: int) -> bool:
    """Split lane-invariant reads in loops across subgroups of `subgroup` lanes, in place; whether any was."""
    count = 0
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name == "gpu.func":
            count += _rewrite_func(fn.operation, subgroup)
    return count > 0


def _rewrite_func(fn: ir.Operation, subgroup: int) -> int:
    if "known_block_size" not in fn.attributes:
        return 0
    block = [int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"])]
    # Lanes of a subgroup are consecutive invocations: with x a multiple of the subgroup size they share y and z.
    if block[0] % subgroup or any(op.name == "gpu.return" and op.parent.name != "gpu.func"
                                  for op in find_ops(fn, ("gpu.return",))):
        return 0
    reads = [op for op in find_ops(fn, ("vector.transfer_read",)) if _shareable(op, subgroup)]
    if not reads:
        return 0
    entry = fn.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(entry), fn.location:
        lane = gpu.LaneIdOp().result
    for op in reads:
        _split(op, lane, subgroup)
    return len(reads)


def _shareable(op: ir.Operation, subgroup: int) -> bool:
    """A 1-d in-bounds read along the innermost dim, of a multiple of `subgroup` 32-bit elements (at most 4 per
    lane), in loops only (every lane active), at lane-invariant indices, whose every use takes one element."""
    vt = ir.VectorType(op.results[0].type)
    if vt.rank != 1 or vt.shape[0] % subgroup or vt.shape[0] // subgroup not in (1, 2, 4):
        return False
    et = vt.element_type
    narrow = isinstance(et, (ir.F16Type, ir.BF16Type))  # shuffled once widened to f32
    if not (narrow or isinstance(et, ir.F32Type) or isinstance(et, ir.IntegerType) and et.width == 32):
        return False
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if seg[-1] != 0 or str(op.attributes["in_bounds"]) != "[true]":  # masked, or may run past the end
        return False
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    if len(amap.results) != 1 or str(amap.results[0]) != f"d{amap.n_dims - 1}":
        return False
    parent = op.parent
    in_loop = False
    while parent.name != "gpu.func":
        if parent.name != "scf.for" or not all(_invariant(v) for v in list(parent.operands)[:3]):
            return False
        in_loop = True
        parent = parent.parent
    if not in_loop:
        return False
    indices = list(op.operands)[1:1 + seg[1]]
    if not all(_invariant(v) for v in indices):
        return False
    uses = [u.owner for u in op.results[0].uses]
    return bool(uses) and all(_single_element(u) and (not narrow or _widened(u)) for u in uses)


def _single_element(op) -> bool:
    return op.name == "vector.extract" and len(op.operands) == 1 and \
        len(ir.DenseI64ArrayAttr(op.attributes["static_position"])) == 1


def _widened(op) -> bool:
    """Every use of the element `op` extracts is an extension to f32."""
    uses = [u.owner for u in op.results[0].uses]
    return bool(uses) and all(u.name == "arith.extf" and isinstance(u.results[0].type, ir.F32Type) for u in uses)


def _invariant(v: ir.Value, depth: int = 0) -> bool:
    """Whether index value `v` is provably the same in every lane of a subgroup."""
    if depth > 32:
        return False
    if isinstance(v, ir.BlockArgument):
        owner = v.owner.owner
        # A loop's induction variable, when the loop's bounds are invariant (its iter_args may differ per lane).
        return owner is not None and owner.name == "scf.for" and v.arg_number == 0 and \
            all(_invariant(x, depth + 1) for x in list(owner.operands)[:3])
    op = v.owner.operation
    if op.name == "gpu.thread_id":
        return str(op.attributes["dimension"]) != "#gpu<dim x>"
    return op.name in _PURE and all(_invariant(x, depth + 1) for x in op.operands)


def _split(op: ir.Operation, lane: ir.Value, subgroup: int) -> None:
    vt = ir.VectorType(op.results[0].type)
    width = vt.shape[0] // subgroup
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    indices = operands[1:1 + seg[1]]
    i32 = ir.IntegerType.get_signless(32)
    with ir.InsertionPoint(op), op.location:
        offset = arith.MulIOp(lane, arith.ConstantOp(ir.IndexType.get(), width).result).result
        last = arith.AddIOp(indices[-1], offset).result
        mine = vector.TransferReadOp(ir.VectorType.get([width], vt.element_type), operands[0],
                                     indices[:-1] + [last], op.attributes["permutation_map"],
                                     operands[1 + seg[1]], [True]).result
        width_c = arith.ConstantOp(i32, subgroup).result  # the whole subgroup (the target environment's size)
    for use in [u.owner for u in op.results[0].uses]:
        pos = int(ir.DenseI64ArrayAttr(use.attributes["static_position"])[0])
        # 16-bit elements are shuffled as the f32 they are widened to (the extensions then take the shuffle).
        targets = [u.owner for u in use.results[0].uses] if vt.element_type.width == 16 else [use]
        with ir.InsertionPoint(use), use.location:
            element = vector.ExtractOp(mine, [], [pos % width]).result
            if vt.element_type.width == 16:
                element = arith.ExtFOp(ir.F32Type.get(), element).result
            src = arith.ConstantOp(i32, pos // width).result
            shuffled = gpu.ShuffleOp(element, src, width_c, gpu.ShuffleMode.IDX).results[0]
        for t in targets:
            t.results[0].replace_all_uses_with(shuffled)
            if t != use:
                t.erase()
        use.erase()
    op.erase()
