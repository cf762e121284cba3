"""Row kernels' columns regrouped so that each thread reads and writes whole vectors (profile `row_vector_columns`).

A row chain on one workgroup per row gives thread t the columns t, t+T, t+2T, ... (row_registers.py); after that
pass its kernel is straight-line code whose global accesses are scalar, at column t + kT for slots k = 0..K-1.
Here slot k moves to column (k // W) * WT + W t + k % W instead: the same columns, dealt to the threads in runs of
W, so slots kW..kW+W-1 of a thread are W adjacent columns and their W loads (stores) become one vector load
(store). Every thread still takes K columns, and which thread holds which column matters to no value: a column's
result depends on that column's inputs and on the row's reductions, and a reduction may fold its elements in any
order (the partials are combined over all threads). The pass checks that much on the kernel before it changes it:
a value that mixes several slots (a thread's partial) reaches only shuffles, subgroup reductions, workgroup memory and
more partials, never a global access, until every thread reads the same element of the workgroup memory it went to;
what a thread writes to workgroup memory is a partial or the same for every slot; a value stored to global column k
depends on no other slot.

H200, 4096x4096, device clock (benchmarks/results/h200/session9/row_columns): Vulkan softmax 35.4 -> 35.0 us, OpenCL
layernorm 39.5 -> 38.3 us; Vulkan layernorm and OpenCL softmax did not move. (A hand-written GLSL softmax with vec4
accesses had run 80.3% of HBM bandwidth against 79.2% scalar: session8/glsl_rows_vec4.json.)
"""

from __future__ import annotations

from ...ir.mlir import arith, ir, vector
from ...ir.util import constant_int, find_ops, memory_space, sized_kernels

_MIXED = -1  # tag of a value that depends on more than one slot
_VECTOR_MEMORY = ("vector.load", "vector.store", "vector.transfer_read", "vector.transfer_write", "vector.gather",
                  "vector.scatter", "vector.maskedload", "vector.maskedstore")


def regroup_columns(module: ir.Module, width: int) -> None:
    for fn in sized_kernels(module):
        _kernel(fn, width)


def _kernel(fn: ir.Operation, width: int) -> None:
    block_size = [int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"])]
    threads = block_size[0]
    body = fn.regions[0].blocks[0]
    tids = [op.results[0] for op in body.operations if op.operation.name == "gpu.thread_id"
            and str(op.attributes["dimension"]) == "#gpu<dim x>"]
    if block_size[1:] != [1, 1] or len(tids) != 1:
        return
    tid = tids[0]
    args = list(body.arguments)
    accesses = [op for op in find_ops(fn, ("memref.load", "memref.store")) if _memref(op) in args]
    slots = [_slot(op, tid, threads) for op in accesses]
    if not accesses or any(k is None for k in slots) or any(op.parent != fn for op in accesses):
        return
    seen: dict = {}
    for op, k in zip(accesses, slots):
        t = ir.MemRefType(_memref(op).type)
        if not t.has_static_shape or t.shape[-1] % (threads * width) or not 0 <= k < t.shape[-1] // threads:
            return
        seen.setdefault(_memref(op), (t.shape[-1] // threads, set()))[1].add(k)
    if any(ks != set(range(n)) for n, ks in seen.values()):
        return  # a buffer's row not covered whole: dealt differently, it would cover other columns
    slot_of = dict(zip(accesses, slots))
    if not _slots_kept_apart(body, slot_of, tid):
        return
    with ir.InsertionPoint(tid.owner), fn.location:
        base = arith.MulIOp(tid, _index(width)).result
    tid.owner.move_before(base.owner)
    groups: dict = {}
    for op, k in zip(accesses, slots):
        with ir.InsertionPoint(op), op.location:
            op.operands[len(op.operands) - 1] = _column(base, k, threads, width)
        key = (op.name, _memref(op), tuple(_indices(op)[:-1]), k // width)
        groups.setdefault(key, {})[k % width] = op
    alive = {id(op): op for op in accesses}  # an erased operation must not be touched again
    for (name, mem, _, run), members in groups.items():
        if len(members) == width:
            ops = [members[j] for j in range(width)]
            others = [op for op in alive.values() if _memref(op) == mem]
            if _vector_access(body, name, mem, ops, others, base, run * width, threads, width):
                for op in ops:
                    del alive[id(op)]


def _column(base: ir.Value, k: int, threads: int, width: int) -> ir.Value:
    return arith.AddIOp(base, _index((k // width) * threads * width + k % width)).result


def _memref(op: ir.Operation) -> ir.Value:
    return op.operands[0] if op.name == "memref.load" else op.operands[1]


def _indices(op: ir.Operation) -> list[ir.Value]:
    return list(op.operands)[1:] if op.name == "memref.load" else list(op.operands)[2:]


def _slot(op: ir.Operation, tid: ir.Value, threads: int) -> int | None:
    """k where the access's innermost index is tid + k * threads and its other indices are free of tid; else
    None."""
    idx = _indices(op)
    if not idx or any(_uses(v, tid) for v in idx[:-1]):
        return None
    last = idx[-1]
    if last == tid:
        return 0
    if not isinstance(last, ir.OpResult) or last.owner.operation.name != "arith.addi":
        return None
    a, b = last.owner.operands
    c = constant_int(b) if a == tid else constant_int(a) if b == tid else None
    if c is None or c % threads:
        return None
    return c // threads


def _uses(v: ir.Value, tid: ir.Value, depth: int = 0) -> bool:
    if v == tid:
        return True
    if depth > 16 or not isinstance(v, ir.OpResult):
        return depth > 16
    return any(_uses(o, tid, depth + 1) for o in v.owner.operands)


def _slots_kept_apart(body: ir.Block, slot_of: dict, tid: ir.Value) -> bool:
    """Tags every value with the slot it depends on (None: none, _MIXED: several) and checks the rules in the
    module docstring. Partials stored to workgroup memory are combined over the threads where every thread reads
    the same element (an index free of the thread id); read back at a thread's own index, or from private memory,
    they are still partials."""
    tag: dict = {}
    partials: set = set()  # buffers a partial was stored to

    def join(a, b):
        if a is None:
            return b
        return a if b is None or a == b else _MIXED

    def walk(block: ir.Block) -> bool:
        for op in block.operations:
            op = op.operation
            name = op.name
            if op in slot_of:
                if name == "memref.load":
                    tag[op.results[0]] = slot_of[op]
                elif tag.get(op.operands[0]) not in (None, slot_of[op]):
                    return False  # a global store of another slot's value, or of a partial
                continue
            if name in _VECTOR_MEMORY:
                return False
            if name == "memref.store":  # workgroup or private memory: a partial or a uniform value
                value, *indices = [tag.get(v) for v in list(op.operands)[:1] + list(op.operands)[2:]]
                if value not in (None, _MIXED) or any(t is not None for t in indices):
                    return False
                if value == _MIXED:
                    partials.add(op.operands[1])
                continue
            if name == "memref.load":
                mem, idx = op.operands[0], list(op.operands)[1:]
                if any(tag.get(v) is not None for v in idx):
                    return False
                shared = memory_space(mem) == "workgroup"
                own = not shared or any(_uses(v, tid) for v in idx)
                tag[op.results[0]] = _MIXED if mem in partials and own else None
                continue
            if len(op.regions):
                if any(tag.get(v) is not None for v in op.operands):
                    return False  # a slot-dependent branch or loop, or a partial carried through one
                if not all(walk(b) for region in op.regions for b in region.blocks):
                    return False
                # Results (a loop's carried values: subgroup_reduce.py's combine over the subgroups' values) are
                # followed where what every region yields is free of slots.
                yielded = [v for region in op.regions for b in region.blocks for t in list(b.operations)[-1:]
                           for v in t.operands]
                if len(op.results) and any(tag.get(v) is not None for v in yielded):
                    return False
                continue
            t = None
            for v in op.operands:
                t = join(t, tag.get(v))
            if name in ("gpu.shuffle", "gpu.subgroup_reduce") and t is not None:
                t = _MIXED  # lanes combine their values: a partial
            for r in op.results:
                tag[r] = t
        return True

    return walk(body)


def _index(n: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), n).result


def _vector_access(body: ir.Block, name: str, mem: ir.Value, ops: list[ir.Operation], others: list[ir.Operation],
                   base: ir.Value, first: int, threads: int, width: int) -> bool:
    """`width` scalar accesses of adjacent columns as one in-bounds vector transfer: a read where the first of them
    was, a write where the last of them was; whether they were replaced."""
    order = {op: i for i, op in enumerate(o.operation for o in body.operations)}
    span = range(min(order[o] for o in ops), max(order[o] for o in ops) + 1)
    if any(order[o] in span and o not in ops for o in others):
        return False  # another access to the buffer between them: left scalar
    elem = ir.MemRefType(mem.type).element_type
    vt = ir.VectorType.get([width], elem)
    perm = ir.AffineMap.get_minor_identity(len(_indices(ops[0])), 1)
    if name == "memref.load":
        anchor = min(ops, key=lambda o: order[o])
        with ir.InsertionPoint(anchor), anchor.location:
            idx = _indices(ops[0])[:-1] + [_column(base, first, threads, width)]
            zero = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)
            vec = vector.TransferReadOp(vt, mem, idx, perm, arith.ConstantOp(elem, zero).result, [True]).result
            for j, op in enumerate(ops):
                op.results[0].replace_all_uses_with(vector.ExtractOp(vec, [], [j]).result)
    else:
        anchor = max(ops, key=lambda o: order[o])
        with ir.InsertionPoint(anchor), anchor.location:
            idx = _indices(ops[0])[:-1] + [_column(base, first, threads, width)]
            vec = vector.FromElementsOp(vt, [op.operands[0] for op in ops]).result
            vector.TransferWriteOp(None, vec, mem, idx, perm, [True])
    for op in ops:
        op.erase()
    return True
