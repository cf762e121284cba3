"""Row chains: a row reduction, the elementwise work that consumes it and the reductions that follow, as one
dispatch (softmax = max, exp, sum, divide; layernorm = mean, centre, variance, normalize, scale and shift).

Every op of a chain loops over the same rows (its leading loops; unit extents aside) and one innermost loop
over the columns: reduced by the chain's reductions, parallel in its elementwise ops. Tiling the chain's last
op by whole rows and fusing the others into that tile (upstream `fuse_into_containing_op`) gives one kernel in
which every reduction is complete inside the tile and no intermediate reaches global memory: producers with
several users in the chain are recomputed from the inputs, so a row is read once per reduction pass.

Each elementwise op but the last keeps its row in the kernel (workgroup memory, registers or private memory).
A chain whose rows the device cannot hold recomputes the earliest of them instead (`recompute`): such an op's
body is computed inside each of its users, which read its inputs; the row is gone and its inputs are read once
more per user (from cache, mostly). That costs a read per pass where the unfused form, one kernel per op, writes
every intermediate to global memory and reads it back: softmax over 8192 columns on a 48 KiB device was 4
kernels.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.linalg_info import classify, indexing_maps, iterator_types, num_inputs
from ...ir.mlir import ir, tensor
from ...ir.util import as_operation, clone_at, reassociation_attr, reassociation_groups
from ..graph.gather_fusion import loop_index, map_indices, pointwise
from ..graph.generics import rebuild_generic


class _OpSet:
    """Operations compared by identity (an ir.Operation's hash follows its contents, which rewrites change)."""

    def __init__(self, ops=()):
        self.ops: list[ir.Operation] = list(ops)

    def __contains__(self, op) -> bool:
        return op is not None and any(op == x for x in self.ops)

    def add(self, op: ir.Operation) -> None:
        if op not in self:
            self.ops.append(op)

    def __iter__(self):
        return iter(list(self.ops))


def _producer(value: ir.Value) -> ir.Operation | None:
    return ir.OpResult(value).owner.operation if isinstance(value, ir.OpResult) else None


def _users(op: ir.Operation) -> list[ir.Operation]:
    return [as_operation(u.owner) for r in op.results for u in r.uses]


def _dims(amap: ir.AffineMap) -> list[int] | None:
    """The loop dims a map reads, in order, skipping constant-0 results (unit dims of a keepdims tensor); None
    when it has other expressions."""
    dims = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            dims.append(ir.AffineDimExpr(e).position)
        elif not (isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0):
            return None
    return dims


def _row_shape(op: ir.Operation) -> tuple[int, tuple[int, ...]] | None:
    """(columns, non-unit row extents) of a single-result reduction over its innermost loop or of an
    elementwise op; None for anything else."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    k = classify(op)
    if not k.ranges or k.gathers or len(k.ranges) < 2:
        return None
    n = len(k.ranges)
    out_dims = _dims(indexing_maps(op)[num_inputs(op)])
    if out_dims is None:
        return None
    if k.kind == "reduction":
        rows = [d for d in range(n - 1) if k.ranges[d] != 1]
        if k.iterators.count("reduction") != 1 or k.iterators[-1] != "reduction" or \
                [d for d in out_dims if k.ranges[d] != 1] != rows or n - 1 in out_dims:
            return None
    elif k.kind == "elementwise":
        if out_dims != list(range(n)):
            return None
        # The output's value must not be read (an accumulation into it would not be elementwise).
        if list(op.regions[0].blocks[0].arguments[num_inputs(op)].uses):
            return None
    else:
        return None
    return k.ranges[-1], tuple(r for r in k.ranges[:-1] if r != 1)


def _reads_rows(consumer: ir.Operation, operand: int, producer_is_reduction: bool) -> bool:
    """Whether `consumer` reads operand `operand` (a chain op's result) by whole rows of the same row tile: the
    column loop maps to the producer's column dim (elementwise producer) or not at all (reduction), and the
    non-unit row loops map in order to its row dims."""
    k = classify(consumer)
    n = len(k.ranges)
    dims = _dims(indexing_maps(consumer)[operand])
    if dims is None:
        return False
    if k.ranges[n - 1] == 1:
        pass  # one column: any slice of it is all of it
    elif producer_is_reduction:
        if n - 1 in dims:
            return False
    elif not dims or dims[-1] != n - 1 or n - 1 in dims[:-1]:
        return False
    rows = [d for d in dims if d != n - 1 and k.ranges[d] != 1]
    return rows == [d for d in range(n - 1) if k.ranges[d] != 1]


def _unit_reshape_source(value: ir.Value) -> tuple[ir.Operation, ir.Value] | None:
    """(reshape, its source) when `value` is a tensor.expand_shape / collapse_shape that only inserts or drops
    unit dims."""
    op = _producer(value)
    if op is None or op.name not in ("tensor.expand_shape", "tensor.collapse_shape"):
        return None
    src, dst = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.results[0].type)
    if [d for d in dst.shape if d != 1] != [d for d in src.shape if d != 1]:
        return None
    return op, op.operands[0]


def _read_through_unit_reshape(consumer: ir.Operation, operand: int) -> None:
    """Make `consumer` read the source of a unit-dim reshape operand directly. Expand: the map loses the
    results of the inserted unit dims; collapse: the dropped unit dims are read at index 0."""
    reshape, src = _unit_reshape_source(consumer.operands[operand])
    reassoc = reassociation_groups(reshape)
    dst_shape = list(ir.RankedTensorType(reshape.results[0].type).shape)
    src_shape = list(ir.RankedTensorType(src.type).shape)
    maps = indexing_maps(consumer)
    old = maps[operand]
    if reshape.name == "tensor.expand_shape":
        # One source dim per group: keep the group's result whose extent is the source's.
        results = [old.results[[d for d in group if dst_shape[d] == s][-1]] for group, s in zip(reassoc, src_shape)]
    else:
        # One result dim per group of source dims: it indexes the group's dim of that extent, the rest at 0.
        results = [None] * len(src_shape)
        for j, group in enumerate(reassoc):
            keep = [d for d in group if src_shape[d] == dst_shape[j]][-1]
            for d in group:
                results[d] = old.results[j] if d == keep else ir.AffineConstantExpr.get(0)
    maps[operand] = ir.AffineMap.get(old.n_dims, old.n_symbols, results)
    consumer.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])
    consumer.operands[operand] = src
    if not list(reshape.results[0].uses):
        reshape.erase()


def _chain_operand(consumer: ir.Operation, operand: int, members: _OpSet) -> ir.Operation | None:
    """The chain op that operand `operand` of `consumer` reads (through unit-dim reshapes, which are then folded
    into the consumer's map: up to two, a keepdims reduction's expand (_reduce_to_rows) read through a
    collapse), or None."""
    v = consumer.operands[operand]
    p = _producer(v)
    if p is not None and p in members:
        return p
    depth, src = 0, _unit_reshape_source(v)
    while depth < 2 and src is not None:
        v, depth = src[1], depth + 1
        src = _unit_reshape_source(v)
    if not depth or _producer(v) not in members:
        return None
    for _ in range(depth):
        _read_through_unit_reshape(consumer, operand)
    return _producer(consumer.operands[operand])


def _pre_op_ok(e: ir.Operation, shape, members: _OpSet) -> bool:
    """An elementwise op feeding the chain joins it (recomputed per pass) when all its users are in the chain
    and it does not read a matmul/conv/reduction result (those keep it as their own epilogue)."""
    if e.name != "linalg.generic" or _row_shape(e) != shape or classify(e).kind != "elementwise":
        return False
    if any(u not in members for u in _users(e)):
        return False
    for v in list(e.operands)[:num_inputs(e)]:
        p = _producer(v)
        if p is not None and p.name == "linalg.generic" and "reduction" in classify(p).iterators:
            return False
    return True


def private_bytes(chain: list[ir.Operation]) -> int:
    """Per-thread memory a chain's kernel keeps: each elementwise op but the last becomes a row buffer of the
    thread (a fused producer's row tile is materialized once and read by each of its users)."""
    total = 0
    for op in chain[:-1]:
        if classify(op).kind == "elementwise":
            t = ir.RankedTensorType(op.results[0].type)
            total += t.shape[-1] * max(1, t.element_type.width // 8)
    return total


def shared_bytes(chain: list[ir.Operation], threads: int) -> int:
    """Workgroup memory a chain's kernel takes in the one-workgroup-per-row form: a row per elementwise op but
    the last; per reduction a partial per thread (and per subgroup-sized second level) and its result."""
    total = 0
    for i, op in enumerate(chain):
        t = ir.RankedTensorType(op.results[0].type)
        size = max(1, t.element_type.width // 8)
        if classify(op).kind == "elementwise":
            total += 0 if i == len(chain) - 1 else classify(op).ranges[-1] * size
        else:
            total += (threads + (32 if threads > 32 else 0) + 1) * size  # two-level partials, the result
    return total


def _reduce_to_rows(op: ir.Operation) -> None:
    """A reduction whose output keeps the reduced dim as a unit dim (ONNX keepdims: map (d0, d1) -> (d0, 0))
    cannot be tiled from a slice of its result; when its init is a fill, it reduces into the rows alone and a
    tensor.expand_shape restores the keepdims shape for its users."""
    nin = num_inputs(op)
    maps = indexing_maps(op)
    out = maps[nin]
    keep = [i for i, e in enumerate(out.results) if isinstance(e, ir.AffineDimExpr)]
    if not keep or len(keep) == len(out.results) or _dims(out) is None or len(op.results) != 1:
        return
    fill = _producer(op.operands[nin])
    if fill is None or fill.name != "linalg.generic" or classify(fill).kind != "fill" or num_inputs(fill) != 0:
        return
    old_t = ir.RankedTensorType(op.results[0].type)
    shape = [old_t.shape[i] for i in keep]
    new_t = ir.RankedTensorType.get(shape, old_t.element_type)
    ident = ir.AffineMap.get_identity(len(shape))
    with ir.InsertionPoint(op), op.location:
        empty = tensor.EmptyOp(shape, old_t.element_type).result
        copy = fill.clone(ir.InsertionPoint(op))
        new_fill = rebuild_generic(copy.operation, [], [empty], [ident], ["parallel"] * len(shape), [0], [new_t])
        copy.operation.erase()
    new_maps = maps[:nin] + [ir.AffineMap.get(out.n_dims, out.n_symbols, [out.results[i] for i in keep])]
    nargs = len(op.regions[0].blocks[0].arguments)
    new = rebuild_generic(op, list(op.operands)[:nin], [new_fill.results[0]], new_maps, iterator_types(op),
                          list(range(nargs)), [new_t])
    # Groups of the expand: each kept dim with the unit dims after it (leading unit dims join the first).
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(old_t.rank):
        if i in keep:
            groups.append(pending + [i])
            pending = []
        elif groups:
            groups[-1].append(i)
        else:
            pending.append(i)
    reassoc = reassociation_attr(groups)
    with ir.InsertionPoint.after(new), op.location:
        back = tensor.ExpandShapeOp(old_t, new.results[0], reassoc, [], list(old_t.shape)).result
    op.results[0].replace_all_uses_with(back)
    op.erase()
    if not list(fill.results[0].uses):
        fill.erase()


def find_chains(func_op: ir.Operation, fits: Callable[[list[ir.Operation]], bool],
                single: bool = False) -> list[list[ir.Operation]]:
    """Row chains of `func_op`'s body (block order, at least one reduction and one more op; with `single`, a lone
    reduction too) that `fits` (the device's memory holds what the kernel keeps), some rows computed again where
    they are read if that is what it takes (`recompute`); every op but the last has all its users in the chain.
    Ops of a chain that cannot be made to fit stay one kernel per op.

    `single` (GPU profiles): a reduction alone, whose result no elementwise op reads (that op would be a kernel of
    its own after a chain; a plain reduction's kernel runs it as an epilogue), reads its row as a chain does:
    columns cyclic over the threads (coalesced), combined by subgroups, instead of each thread reading a
    contiguous piece (strategy._workgroup_reduction). H200, split_rows.py's partial maxima and sums, softmax
    8x1048576 on Vulkan 0.315 -> 0.066 ms (benchmarks/results/h200/session23/split_rows{,_coalesced}_vulkan.json)."""
    block = func_op.regions[0].blocks[0]
    for op in [op.operation for op in block.operations if op.name == "linalg.generic"]:
        k = classify(op)
        if k.kind == "reduction" and k.iterators.count("reduction") == 1 and k.iterators[-1] == "reduction":
            _reduce_to_rows(op)
    taken, tried = _OpSet(), _OpSet()  # ops in chains; reductions that start none
    chains = []
    while True:
        # Listed afresh each time: recomputing a chain's rows replaces ops.
        generics = [op.operation for op in block.operations if op.name == "linalg.generic"]
        r = next((g for g in generics if g not in taken and g not in tried and classify(g).kind == "reduction"),
                 None)
        if r is None:
            return chains
        chain = _chain_from(r, generics, taken, single)
        if chain is not None and not fits(chain):
            chain = recompute(chain, fits)
        if chain is None:
            tried.add(r)
            continue
        for op in chain:
            taken.add(op)
        chains.append(chain)


def _chain_from(r: ir.Operation, generics: list[ir.Operation], taken: _OpSet,
                single: bool) -> list[ir.Operation] | None:
    """The row chain that reduction `r` starts (find_chains), or None."""
    shape = _row_shape(r)
    if shape is None:
        return None
    members = _OpSet([r])
    chain = [r]
    for u in generics[next(i for i, g in enumerate(generics) if g == r) + 1:]:
        if u in taken or _row_shape(u) != shape:
            continue
        reads = []
        for i in range(num_inputs(u)):
            p = _chain_operand(u, i, members)
            if p is not None:
                reads.append((i, p))
        if reads and all(_reads_rows(u, i, classify(p).kind == "reduction") for i, p in reads):
            members.add(u)
            chain.append(u)
    # The longest prefix whose ops, all but the last, are used only inside it.
    while len(chain) > 1:
        inside = _OpSet(chain)
        if all(all(u in inside for u in _users(op)) for op in chain[:-1]):
            break
        chain.pop()
    if len(chain) < 2 and not (single and not any(u.name == "linalg.generic" and classify(u).kind == "elementwise"
                                                  for u in _users(r))):
        return None  # a lone reduction read by an elementwise op keeps that op as its kernel's epilogue (dispatch)
    members = _OpSet(chain)
    grew = True
    while grew:
        grew = False
        for op in list(members):
            for v in list(op.operands)[:num_inputs(op)]:
                e = _producer(v)
                if e is None or e in members or e in taken or not _pre_op_ok(e, shape, members):
                    continue
                if not all(_reads_rows(u, i, False) for u in _users(e)
                           for i, w in enumerate(list(u.operands)[:num_inputs(u)]) if _producer(w) in _OpSet([e])):
                    continue
                members.add(e)
                grew = True
    return [g for g in generics if g in members]


def recompute(chain: list[ir.Operation], fits: Callable[[list[ir.Operation]], bool]) -> list[ir.Operation] | None:
    """The chain with its earliest elementwise rows computed inside their users, as few as make it fit (module
    docstring); None when even all of them do not, or one of them cannot be (not a function of its position)."""
    rows = [op for op in chain[:-1] if classify(op).kind == "elementwise"]
    for n in range(1, len(rows) + 1):
        gone = _OpSet(rows[:n])
        if fits([op for op in chain if op not in gone]):
            break
    else:
        return None
    if not all(pointwise(op) for op in gone):
        return None
    # By position: computing an op inside a user replaces that user (which may be the next to go).
    chain = list(chain)
    drop = [i for i, op in enumerate(chain) if op in gone]
    for j in drop:
        op = chain[j]
        while list(op.results[0].uses):
            use = next(iter(op.results[0].uses))
            consumer = as_operation(use.owner)
            i = next(i for i, c in enumerate(chain) if c is not None and c == consumer)
            chain[i] = _compute_inside(consumer, use.operand_number, op)
        op.erase()
        chain[j] = None
    return [op for op in chain if op is not None]


def _compute_inside(consumer: ir.Operation, operand: int, producer: ir.Operation) -> ir.Operation:
    """`consumer` with input `operand` (`producer`'s result, a pointwise op) replaced by `producer`'s body: it
    reads `producer`'s inputs through their maps composed with the operand's (loop dims and constant 0s both)."""
    nin = num_inputs(consumer)
    maps = indexing_maps(consumer)
    at = map_indices(maps[operand])  # consumer loop (or None: 0) per producer loop
    p_nin = num_inputs(producer)
    p_maps = indexing_maps(producer)[:p_nin]
    n_dims = maps[operand].n_dims

    def composed(m: ir.AffineMap) -> ir.AffineMap:
        out = [ir.AffineDimExpr.get(at[d]) if d is not None and at[d] is not None else ir.AffineConstantExpr.get(0)
               for d in map_indices(m)]
        return ir.AffineMap.get(n_dims, 0, out)

    keep = [i for i in range(nin) if i != operand]
    ins = [consumer.operands[i] for i in keep] + list(producer.operands)[:p_nin]
    outs = list(consumer.operands)[nin:]
    new_maps = [maps[i] for i in keep] + [composed(m) for m in p_maps] + maps[nin:]
    old_arg = consumer.regions[0].blocks[0].arguments[operand]
    arg_map = [None if i == operand else keep.index(i) if i < nin else len(keep) + p_nin + i - nin
               for i in range(nin + len(outs))]
    new = rebuild_generic(consumer, ins, outs, new_maps, iterator_types(consumer), arg_map,
                          [r.type for r in consumer.results])
    block = new.regions[0].blocks[0]
    p_body = producer.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(block), consumer.location:
        positions = [loop_index(d) for d in at]
        mapping = {p_body.arguments[j]: block.arguments[len(keep) + j] for j in range(p_nin)}
        old_arg.replace_all_uses_with(clone_at(p_body, positions, mapping))
    for r_old, r_new in zip(consumer.results, new.results):
        r_old.replace_all_uses_with(r_new)
    consumer.erase()
    for idx in list(block.operations):
        if idx.name in ("linalg.index", "arith.constant") and not list(idx.results[0].uses):
            idx.erase()
    return new
