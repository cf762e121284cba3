"""Slices and concats (gathers.py) merged with the elementwise ops around them, as ops on linalg.

A gather is a kernel of its own: no tiling fuses a producer into a tensor.extract, nor a gather into its
consumer. A decoder's rotary embedding is two slices of q, two elementwise halves and their concat: five kernels
of 384 values each per projection, each a dispatch and a barrier (a decode step is ~100 of those in a row, 3 us
each on the H200). Here, before dispatch groups form:

- an elementwise op that reads a slice or concat as an input reads the gather's result by tensor.extract at
  the same position instead (it becomes a gather; the operand is dropped);
- an elementwise op (a slice or concat among them) whose every use is such a tensor.extract in a slice or
  concat, or which is itself a slice or concat, is computed at each of those reads: its body is cloned there,
  its inputs read by tensor.extract at the position through their maps, and it goes away.

The rotary embedding becomes one kernel that reads q, cos and sin. Values are unchanged: the same scalar ops,
on the same elements; the concat's reads are clamped in range, so computing a half at the other half's
clamped position is safe where its value is discarded.
"""

from __future__ import annotations

from ...ir.linalg_info import fill_value, indexing_maps, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import as_operation, clone_at
from .gathers import MOVE
from .generics import rebuild_generic


def map_indices(amap: ir.AffineMap) -> list[int | None] | None:
    """Per result of `amap`: its loop dim, or None for a constant 0; None when it has anything else."""
    out: list[int | None] = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            out.append(ir.AffineDimExpr(e).position)
        elif isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0:
            out.append(None)
        else:
            return None
    return out


def pointwise(op: ir.Operation) -> bool:
    """A single-result all-parallel generic writing its output at the loop position (identity map) without
    reading it, and whose inputs it reads through loop dims or constant 0s: a function of the position."""
    if op.name != "linalg.generic" or len(op.results) != 1 or "reduction" in iterator_types(op):
        return False
    maps = indexing_maps(op)
    nin = num_inputs(op)
    if maps[nin] != ir.AffineMap.get_identity(maps[nin].n_dims):
        return False
    block = op.regions[0].blocks[0]
    if list(block.arguments[nin].uses) or any(len(o.regions) for o in block.operations):
        return False
    return all(map_indices(m) is not None for m in maps[:nin])


def loop_index(d: int | None) -> ir.Value:
    """Inside a linalg body: the index of loop `d`, or 0 for a map's constant-0 result (None)."""
    return linalg.IndexOp(d).result if d is not None else arith.ConstantOp(ir.IndexType.get(), 0).result


def _read_by_extract(consumer: ir.Operation, operand: int) -> ir.Operation:
    """`consumer` reading input `operand` by tensor.extract at the position its map gives, the operand dropped
    (the new op is returned)."""
    nin = num_inputs(consumer)
    maps = indexing_maps(consumer)
    block = consumer.regions[0].blocks[0]
    value = consumer.operands[operand]
    with ir.InsertionPoint.at_block_begin(block), consumer.location:
        idx = [loop_index(d) for d in map_indices(maps[operand])]
        read = tensor.ExtractOp(value, idx).result
    block.arguments[operand].replace_all_uses_with(read)
    ins = [v for i, v in enumerate(list(consumer.operands)[:nin]) if i != operand]
    outs = list(consumer.operands)[nin:]
    keep = [m for i, m in enumerate(maps) if i != operand]
    arg_map = [i - (i > operand) if i != operand else 0 for i in range(len(block.arguments))]
    new = rebuild_generic(consumer, ins, outs, keep, iterator_types(consumer), arg_map,
                          [r.type for r in consumer.results])
    consumer.results[0].replace_all_uses_with(new.results[0])
    consumer.erase()
    return new


def _compute_at(op: ir.Operation, read: ir.Operation) -> None:
    """Replace `read` (a tensor.extract of `op`'s result) by `op`'s body computed at its indices."""
    at = list(read.operands)[1:]
    nin = num_inputs(op)
    maps = indexing_maps(op)
    body = op.regions[0].blocks[0]
    mapping: dict = {}
    with ir.InsertionPoint(read), read.location:
        for i, (v, m) in enumerate(zip(list(op.operands)[:nin], maps[:nin])):
            if not list(body.arguments[i].uses):
                continue
            scalar = fill_value(v)
            if scalar is not None:  # a fill's value itself: a fill is never a kernel of its own to be read from
                mapping[body.arguments[i]] = scalar
            elif isinstance(v.type, ir.ShapedType):
                zero = arith.ConstantOp(ir.IndexType.get(), 0).result
                mapping[body.arguments[i]] = tensor.ExtractOp(
                    v, [at[d] if d is not None else zero for d in map_indices(m)]).result
            else:
                mapping[body.arguments[i]] = v
        value = clone_at(body, at, mapping)
    read.results[0].replace_all_uses_with(value)
    read.erase()


def _enclosing_generic(op: ir.Operation) -> ir.Operation | None:
    """The linalg.generic whose body holds `op`, or None."""
    parent = op.parent
    while parent is not None and parent.name != "linalg.generic":
        parent = parent.parent
    return parent


def _reads_in_moves(op: ir.Operation) -> list[ir.Operation] | None:
    """The tensor.extract ops that are all of `op`'s uses, each inside a slice or concat generic (or any generic
    when `op` is itself a slice or concat, or a copy); None when some use is anything else."""
    reads = []
    for u in op.results[0].uses:
        owner = as_operation(u.owner)
        if owner.name != "tensor.extract" or u.operand_number != 0:
            return None
        parent = _enclosing_generic(owner)
        if parent is None or not (MOVE in op.attributes or MOVE in parent.attributes or _copies(op)):
            return None
        reads.append(owner)
    return reads


def _broadcast_read(consumer: ir.Operation, operand: int) -> bool:
    """`consumer` reads input `operand` at fewer positions than it has loop iterations (some loop it does not
    follow: a rotated k written into every row of a cache, which then computes the rotation once per row)."""
    amap = indexing_maps(consumer)[operand]
    dims = {d for d in map_indices(amap) or [] if d is not None}
    ranges = loop_ranges(consumer) or []
    return any(r > 1 and d not in dims for d, r in enumerate(ranges))


def _push(op: ir.Operation, recompute: bool) -> bool:
    """Make every consumer of slice or concat `op` read it by tensor.extract, where all its users are
    elementwise ops reading it as an input (and, unless `recompute`, each at as many positions as it has loop
    iterations); whether it did."""
    if MOVE not in op.attributes or num_inputs(op) != 0 or not pointwise(op):
        return False
    uses = [(as_operation(u.owner), u.operand_number) for u in op.results[0].uses]
    if not uses or not all(c.name == "linalg.generic" and pointwise(c) and i < num_inputs(c) for c, i in uses):
        return False  # a slice that some other op reads stays a kernel; its neighbours keep their vectors
    if not recompute and any(_broadcast_read(c, i) for c, i in uses):
        return False
    while True:  # each rewrite replaces its consumer, and adds a tensor.extract use
        u = next((u for u in op.results[0].uses if as_operation(u.owner).name == "linalg.generic"), None)
        if u is None:
            return True
        _read_by_extract(as_operation(u.owner), u.operand_number)


def _copies(op: ir.Operation) -> bool:
    """`op` only moves elements: its body yields its one input as it is (a transpose, a broadcast)."""
    body = op.regions[0].blocks[0]
    ops = list(body.operations)
    return num_inputs(op) == 1 and len(ops) == 1 and len(ops[0].operands) == 1 and \
        ops[0].operands[0] == body.arguments[0]


def _extracted_only(op: ir.Operation) -> None:
    """A copy `op` whose every user generic already reads it by tensor.extract somewhere: those users read it
    only that way (computing a copy at a read is an index remap, no arithmetic; a decoder's q transposed into
    heads and read by the rotation, which takes both halves of each head by position, stays no kernel of its
    own)."""
    if not _copies(op):
        return
    uses = [(as_operation(u.owner), u.operand_number) for u in op.results[0].uses]
    extracting = [_enclosing_generic(o) for o, _ in uses if o.name == "tensor.extract"]
    operand_uses = [(o, i) for o, i in uses if o.name != "tensor.extract"]
    if not extracting or not all(c.name == "linalg.generic" and pointwise(c) and i < num_inputs(c)
                                 and any(c == p for p in extracting) for c, i in operand_uses):
        return
    while True:  # each rewrite replaces its consumer
        u = next((u for u in op.results[0].uses if as_operation(u.owner).name == "linalg.generic"), None)
        if u is None:
            return
        _read_by_extract(as_operation(u.owner), u.operand_number)


def _pull(op: ir.Operation) -> bool:
    """Compute elementwise `op` at each of its reads, where those are all it is used for; whether it did."""
    if not pointwise(op) or not list(op.results[0].uses):
        return False
    _extracted_only(op)
    reads = _reads_in_moves(op)
    if reads is None:
        return False
    for read in reads:
        _compute_at(op, read)
    op.erase()
    return True


def fuse_gathers(func_op: ir.Operation, recompute: bool = True) -> int:
    """Merge the slices and concats of `func_op`'s body with their elementwise neighbours (module docstring);
    returns how many rewrites it made. Without `recompute` (CPU drivers, where a kernel boundary costs less than
    arithmetic), a slice or concat that a consumer would compute many times over stays a kernel: lavapipe took 3.5
    ms per layer on the small decoder's cache write, which computed the rotated k once per cache row. A pull erases
    only the op itself, so the walk goes on after it; a push replaces the ops after it, so the walk starts over.
    Walks repeat while one changed anything (a pull can leave an earlier op read only inside gathers)."""
    block = func_op.regions[0].blocks[0]
    done, changed = 0, True
    while changed:
        changed = False
        for op in [o.operation for o in block.operations if o.name == "linalg.generic"]:
            if _push(op, recompute):
                done, changed = done + 1, True
                break
            if _pull(op):
                done, changed = done + 1, True
    return done
