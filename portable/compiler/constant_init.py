"""Accumulators initialized through memory start from the constant instead (CPU Vulkan drivers: lavapipe).

The register-blocked matmul fills its output tile with zeros, reads the tile back into registers, and writes it
once the K loop is done. On llvmpipe each of those buffer accesses is a loop over the SIMD lanes with a bounds
check per element, so for a short K (a 1x1 convolution, attention's K = 64) the round trip is a large part of the
kernel. Here the reads that follow a constant write of the region they read take the constant, and the write is
dropped when the kernel later overwrites all of it and reads none of it.

Measured on lavapipe (CPU ms, interleaved runs, 2026-11-30): bmm 8x256x64 @ 8x64x256 5.5 -> 5.1, conv 1x1
1x56x56x64->256 8.8 -> 8.6.
"""

from __future__ import annotations

from .mlir import arith, ir

# Ops that neither write memory nor branch: the reads of the region may move across them.
_QUIET = ("arith.", "affine.apply", "gpu.block_id", "gpu.thread_id", "gpu.lane_id", "gpu.block_dim", "gpu.grid_dim",
          "vector.transfer_read", "memref.load", "ub.poison")


def forward_constant_writes(gpu_module: ir.Operation) -> bool:
    """Fold reads of constant-written regions to the constant, in place; whether any was."""
    changed = False
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name == "gpu.func":
            for block in fn.operation.regions[0].blocks:
                changed |= _forward_in_block(block)
    return changed


def _forward_in_block(block: ir.Block) -> bool:
    # The writes first: forwarding erases reads, which a list of all the block's ops would still hold.
    writes = [op.operation for op in block.operations if op.operation.name == "vector.transfer_write"]
    changed = False
    for op in writes:
        if _splat_write(op) is not None:
            changed |= _forward_from(op)
    return changed


def _splat_write(op: ir.Operation) -> ir.Attribute | None:
    """The splat constant an unmasked, in-bounds, minor-identity transfer_write stores, else None."""
    value = op.operands[0]
    if not isinstance(value, ir.OpResult) or value.owner.operation.name != "arith.constant":
        return None
    attr = value.owner.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr) or not attr.is_splat:
        return None
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if seg[-1] != 0 or "false" in str(op.attributes["in_bounds"]) or not _minor_identity(op):
        return None
    return attr


def _minor_identity(op: ir.Operation) -> bool:
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    n, r = amap.n_dims, len(amap.results)
    return [str(e) for e in amap.results] == [f"d{i}" for i in range(n - r, n)]


def _segments(op: ir.Operation) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _indices(op: ir.Operation) -> list[ir.Value]:
    seg = _segments(op)
    start = 1 if op.name == "vector.transfer_read" else 2
    return list(op.operands)[start:start + seg[1 if op.name == "vector.transfer_read" else 2]]


def _row_offset(v: ir.Value, base: ir.Value) -> int | None:
    """c when `v` is `base` (0) or `base + c` with a constant c."""
    if v == base:
        return 0
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.addi":
        a, b = v.owner.operands
        for x, y in ((a, b), (b, a)):
            if x == base and isinstance(y, ir.OpResult) and y.owner.operation.name == "arith.constant":
                return ir.IntegerAttr(y.owner.attributes["value"]).value
    return None


def _covered(read: ir.Operation, write: ir.Operation) -> bool:
    """Whether `read` (1-d, in bounds) reads inside the 1-d or 2-d region `write` stores."""
    if read.operands[0] != write.operands[1] or not _minor_identity(read):
        return False
    if str(read.attributes["in_bounds"]) != "[true]" or _segments(read)[-1]:
        return False
    wshape = list(ir.VectorType(write.operands[0].type).shape)
    rshape = list(ir.VectorType(read.results[0].type).shape)
    ri, wi = _indices(read), _indices(write)
    if len(ri) != len(wi) or len(rshape) != 1 or rshape[0] != wshape[-1] or ri[-1] != wi[-1]:
        return False
    if len(wshape) == 1:
        return ri[:-1] == wi[:-1]
    if len(wshape) != 2 or ri[:-2] != wi[:-2]:
        return False
    row = _row_offset(ri[-2], wi[-2])
    return row is not None and 0 <= row < wshape[0]


def _forward_from(write: ir.Operation) -> bool:
    """Fold the reads after `write`, up to the first op that may write memory or branch, that it covers."""
    splat = _splat_write(write)
    mem = write.operands[1]
    forwarded = False
    for nxt in _following(write):
        if not nxt.name.startswith(_QUIET):
            break
        if nxt.name == "vector.transfer_read" and _covered(nxt, write):
            rtype = nxt.results[0].type
            with ir.InsertionPoint(nxt), nxt.location:
                const = arith.ConstantOp(rtype, ir.DenseElementsAttr.get_splat(rtype, splat.get_splat_value())).result
            nxt.results[0].replace_all_uses_with(const)
            nxt.erase()
            forwarded = True
    if forwarded and _dead(write, mem):
        write.erase()
    return forwarded


def _following(op: ir.Operation) -> list[ir.Operation]:
    """The ops after `op` in its block (collected first: the caller erases some)."""
    ops = [o.operation for o in op.block.operations]
    i = next(j for j, o in enumerate(ops) if o == op)
    return ops[i + 1:]


def _dead(write: ir.Operation, mem: ir.Value) -> bool:
    """No read of `mem` is left, and later writes in the same block store every row `write` stored."""
    users = [u.owner for u in mem.uses]
    if any(u.name not in ("vector.transfer_write",) for u in users):
        return False
    later = [u for u in users if u != write]
    after = _following(write)
    if any(u not in after for u in later):
        return False
    wshape = list(ir.VectorType(write.operands[0].type).shape)
    wi = _indices(write)
    rows = set()
    for u in later:
        if not _row_cover(u, wi, wshape):
            continue
        rows.add(_row_offset(_indices(u)[-2], wi[-2]) if len(wshape) == 2 else 0)
    return rows >= set(range(wshape[0] if len(wshape) == 2 else 1))


def _row_cover(u: ir.Operation, wi: list[ir.Value], wshape: list[int]) -> bool:
    """A later 1-d in-bounds write of one whole row of the region."""
    ui = _indices(u)
    ushape = list(ir.VectorType(u.operands[0].type).shape)
    if len(ui) != len(wi) or ushape != wshape[-1:] or ui[-1] != wi[-1] or "false" in str(u.attributes["in_bounds"]):
        return False
    if list(ir.DenseI32ArrayAttr(u.attributes["operandSegmentSizes"]))[-1] or not _minor_identity(u):
        return False
    if len(wshape) == 1:
        return ui[:-1] == wi[:-1]
    row = _row_offset(ui[-2], wi[-2])
    return ui[:-2] == wi[:-2] and row is not None and 0 <= row < wshape[0]
