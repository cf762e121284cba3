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

from .ir_util import constant_int
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


# --- Fill loop nests (every GPU profile) ------------------------------------------------------------------------
# A promoted matmul's kernel starts with a loop nest storing the fill constant over the thread's own output
# elements, a barrier, then (loop_registers' hoisting) reads of those same elements into the K loop's
# accumulators. On the H200 that prologue (64 scalar stores, a barrier fencing global memory, 64 scalar reads,
# and a scalar-typed output buffer) left the f32 matmul 4096 at 3.55 ms against 3.27 ms for the same kernel
# with the accumulators started at zero. Here such reads take the constant when the thread itself filled every
# element they read, and the nest goes when the thread later overwrites all it stored and nobody reads it.
#
# Why thread-local reasoning is enough: all threads run the same code, so a thread's span from its fill to its
# last forwarded read holds the same barriers as every other thread's; no op in that span writes the buffer, so
# another thread's non-fill write to an element can follow that thread's own reads only, and reaching this
# thread's read unordered would be a data race in the kernel as generated. Fill writes all store one constant.

_MAX_ELEMENTS = 4096  # elements a thread's fill may cover for the enumeration below


def _linear(v: ir.Value, depth: int = 0) -> tuple[dict, int]:
    """`v` as ({leaf value: coefficient}, constant) over adds, subtracts and products with constants."""
    c = constant_int(v)
    if c is not None:
        return {}, c
    if depth < 32 and isinstance(v, ir.OpResult):
        op = v.owner.operation
        if op.name in ("arith.addi", "arith.subi"):
            (fa, ca), (fb, cb) = (_linear(x, depth + 1) for x in op.operands)
            sign = 1 if op.name == "arith.addi" else -1
            out = dict(fa)
            for k, n in fb.items():
                out[k] = out.get(k, 0) + sign * n
            return {k: n for k, n in out.items() if n}, ca + sign * cb
        if op.name == "arith.muli":
            for x, y in (op.operands, reversed(list(op.operands))):
                k = constant_int(y)
                if k is not None:
                    f, c = _linear(x, depth + 1)
                    return {a: n * k for a, n in f.items() if n * k}, c * k
    return {v: 1}, 0


def _fill_nest(loop: ir.Operation):
    """(store, [(iv, trip values)]) when `loop` is a perfect nest of constant-bound scf.for loops whose only
    effect is one memref.store of an arith.constant, else None."""
    ivs, op = [], loop
    while op.name == "scf.for" and len(list(op.operands)) == 3 and not len(op.results):
        lb, ub, step = (constant_int(v) for v in op.operands)
        if None in (lb, ub, step) or step <= 0 or ub <= lb:
            return None
        body = op.regions[0].blocks[0]
        ivs.append((body.arguments[0], range(lb, ub, step)))
        inner = [o.operation for o in body.operations if o.operation.name != "scf.yield"]
        rest = [o for o in inner if not o.name.startswith("arith.")]  # index arithmetic aside
        if len(rest) != 1:
            return None
        op = rest[0]
        if op.name == "memref.store":
            value = op.operands[0]
            const = isinstance(value, ir.OpResult) and value.owner.operation.name == "arith.constant"
            return (op, ivs) if const else None
    return None


def _elements(indices: list[ir.Value], ranges: dict, vshape: list[int]) -> set | None:
    """The elements (per dim: symbolic part, constant) that `indices` reach over the loop `ranges` (iv -> values)
    and a minor-identity vector of shape `vshape`; None when too many or not linear."""
    forms = [_linear(v) for v in indices]
    free = [iv for iv in ranges if any(iv in f for f, _ in forms)]
    count = 1
    for iv in free:
        count *= len(ranges[iv])
    for n in vshape:
        count *= n
    if count > _MAX_ELEMENTS:
        return None
    out = set()

    def rec(i: int, env: dict) -> None:
        if i < len(free):
            for x in ranges[free[i]]:
                rec(i + 1, {**env, free[i]: x})
            return
        base = []
        for f, c in forms:
            sym = frozenset((k, n) for k, n in f.items() if k not in env)
            base.append((sym, c + sum(n * env[k] for k, n in f.items() if k in env)))
        lead = len(base) - len(vshape)
        for offs in _offsets(vshape):
            out.add(tuple(b if d < lead else (b[0], b[1] + offs[d - lead]) for d, b in enumerate(base)))

    rec(0, {})
    return out


def _offsets(shape: list[int]) -> list[tuple[int, ...]]:
    out = [()]
    for n in shape:
        out = [o + (i,) for o in out for i in range(n)]
    return out


def _access(op: ir.Operation, mem: ir.Value) -> tuple[list[ir.Value], list[int]] | None:
    """(indices, vector shape) of an in-bounds, unmasked, minor-identity read or write of `mem` itself."""
    if op.name in ("memref.load", "memref.store"):
        at = 0 if op.name == "memref.load" else 1
        return (list(op.operands)[at + 1:], []) if op.operands[at] == mem else None
    if op.name in ("vector.transfer_read", "vector.transfer_write"):
        read = op.name == "vector.transfer_read"
        if op.operands[0 if read else 1] != mem or _segments(op)[-1] or "false" in str(op.attributes["in_bounds"]):
            return None
        if not _minor_identity(op):
            return None
        vtype = op.results[0].type if read else op.operands[0].type
        return _indices(op), list(ir.VectorType(vtype).shape)
    return None


def _touches_buffer(op: ir.Operation, mem: ir.Value) -> bool:
    found = []

    def visit(o):
        if any(v == mem for v in o.operands):
            found.append(o)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return bool(found)


def forward_fill_nests(module: ir.Module) -> None:
    """In every single-block kernel: the reads of elements the thread itself filled become the constant; the
    fill nest goes when it is dead; barriers no memory access precedes go after it."""
    def walk(op: ir.Operation) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    o = inner.operation
                    if o.name == "gpu.func" and len(o.regions[0].blocks) == 1:
                        _forward_nests(o.regions[0].blocks[0])
                    else:
                        walk(o)

    walk(module.operation)


def _forward_nests(block: ir.Block) -> None:
    ops = [o.operation for o in block.operations]
    for i, nest in enumerate(ops):
        found = _fill_nest(nest) if nest.name == "scf.for" else None
        if found is None:
            continue
        store, ivs = found
        mem = store.operands[1]
        if not isinstance(mem, ir.BlockArgument) or any(_touches_buffer(o, mem) for o in ops[:i]):
            continue  # a kernel argument, untouched before: no view or earlier write to reason about
        filled = _elements(list(store.operands)[2:], dict(ivs), [])
        if filled is None:
            continue
        value = store.operands[0].owner.attributes["value"]
        forwarded = []
        for later in ops[i + 1:]:
            if not _touches_buffer(later, mem):
                continue
            acc = _access(later, mem) if later.name in ("memref.load", "vector.transfer_read") else None
            got = _elements(acc[0], {}, acc[1]) if acc else None
            if got is None or not got <= filled:
                break
            forwarded.append(later)
        for r in forwarded:
            rtype = r.results[0].type
            with ir.InsertionPoint(r), r.location:
                if isinstance(rtype, ir.VectorType):
                    const = arith.ConstantOp(rtype, ir.DenseElementsAttr.get_splat(rtype, value)).result
                else:
                    const = arith.ConstantOp(rtype, value).result
            r.results[0].replace_all_uses_with(const)
            r.erase()
        if forwarded and _overwritten(block, nest, mem, filled):
            nest.erase()
            _drop_leading_barriers(block)
        return  # one fill nest per kernel: the op list above is stale now


def _overwritten(block: ir.Block, nest: ir.Operation, mem: ir.Value, filled: set) -> bool:
    """Nothing reads `mem` any more, and the thread's later top-level writes store every element it filled."""
    written: set = set()
    after = False
    for o in (x.operation for x in block.operations):
        if o == nest:
            after = True
            continue
        if not after or not _touches_buffer(o, mem):
            continue
        acc = _access(o, mem) if o.name in ("memref.store", "vector.transfer_write") else None
        if acc is None:
            return False  # a read, a view, or a write inside a region: the fill may still be seen
        got = _elements(acc[0], {}, acc[1])
        if got is None:
            return False
        written |= got
    return filled <= written


def _drop_leading_barriers(block: ir.Block) -> None:
    """Barriers before any op that may touch memory order nothing."""
    for o in [x.operation for x in block.operations]:
        if o.name == "gpu.barrier":
            o.erase()
        elif o.regions or not o.name.startswith(_QUIET) or o.name in ("vector.transfer_read", "memref.load"):
            return
