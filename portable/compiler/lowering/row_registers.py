"""Row buffers that one thread alone writes and reads, kept in registers (profile key `row_registers`: the most
values a thread keeps per buffer).

A row chain on one workgroup per row (transform_script._row_chain_workgroup) gives columns to threads
cyclically at every step (thread t takes columns t, t+T, ...), its reductions' partials too: each element of a
step's workgroup-memory row is written and read by the same thread. Such a buffer needs no workgroup memory and
no barrier. The step loops (C / T iterations) are unrolled, each access then names a constant slot k (column
t + k*T), and every load takes the value of the last store to its slot; the stores and the buffer go. Per-thread
(private) buffers accessed at constant indices go the same way. Barriers that then order no shared access go too.
"""

from __future__ import annotations

from ...ir.mlir import arith, ir
from ...ir.util import as_operation, base_buffer, clone_body, constant_int, memory_space, sized_kernels

_ACCESS = ("memref.load", "memref.store")


def keep_rows_in_registers(module: ir.Module, limit: int) -> None:
    for fn in sized_kernels(module):
        _kernel(fn, limit)


def _kernel(fn: ir.Operation, limit: int) -> None:
    block_size = [int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"])]
    if block_size[1:] != [1, 1]:
        return
    threads = block_size[0]
    body = fn.regions[0].blocks[0]
    tids = [op.results[0] for op in body.operations if op.operation.name == "gpu.thread_id"
            and str(op.attributes["dimension"]) == "#gpu<dim x>"]
    buffers = [op.operation for op in body.operations if op.operation.name == "memref.alloc"]
    owned = []
    loops: list[ir.Operation] = []
    for alloc in buffers:
        found = _owned_loops(alloc, tids, threads, limit)
        if found is not None:
            owned.append(alloc)
            for lp in found:
                if not any(lp == x for x in loops):
                    loops.append(lp)
    if not owned:
        return
    for loop in loops:
        _unroll(loop)
    for alloc in owned:
        _forward(alloc, body, tids, threads)
    _reuse_input_loads(fn, body, tids)
    _drop_idle_barriers(body)


def _workgroup(alloc: ir.Operation) -> bool:
    return memory_space(alloc.results[0]) == "workgroup"


def _is_tid(v: ir.Value, tids: list[ir.Value]) -> bool:
    return any(v == t for t in tids)


def _slot_of(index: ir.Value, tids: list[ir.Value], threads: int):
    """For a workgroup buffer's last index: the constant column offset c of `tid + c` (0 for `tid`), the loop whose
    induction variable v makes it `tid + v`, or None."""
    if _is_tid(index, tids):
        return 0
    if not isinstance(index, ir.OpResult) or index.owner.operation.name != "arith.addi":
        return None
    a, b = index.owner.operation.operands
    other = b if _is_tid(a, tids) else a if _is_tid(b, tids) else None
    if other is None:
        return None
    c = constant_int(other)
    if c is not None:
        return c if c % threads == 0 else None
    if isinstance(other, ir.BlockArgument) and other.arg_number == 0:
        loop = other.owner.owner
        if loop is not None and loop.name == "scf.for" and constant_int(loop.operands[0]) == 0 and \
                constant_int(loop.operands[2]) == threads and constant_int(loop.operands[1]) is not None:
            return loop
    return None


def _owned_loops(alloc: ir.Operation, tids, threads: int, limit: int) -> list[ir.Operation] | None:
    """The top-level loops to unroll for `alloc` to be kept in registers, or None when it cannot be: an access
    that is not a plain load or store, not at the top level of the kernel or of such a loop, or (workgroup
    memory) at a column another thread may touch; or more than `limit` slots."""
    t = ir.MemRefType(alloc.results[0].type)
    if not t.has_static_shape:
        return None
    shared = _workgroup(alloc)
    if t.memory_space is not None and not shared:
        return None
    if shared and (any(d != 1 for d in t.shape[:-1]) or t.shape[-1] % threads or t.shape[-1] // threads > limit):
        return None
    if not shared and _volume(t) > limit:
        return None
    kernel_block = alloc.parent
    loops = []
    for use in alloc.results[0].uses:
        op = as_operation(use.owner)
        if op.name not in _ACCESS or use.operand_number != (1 if op.name == "memref.store" else 0):
            return None
        idx = list(op.operands)[2 if op.name == "memref.store" else 1:]
        if not shared:
            if any(constant_int(i) is None for i in idx) or op.parent != kernel_block and not _in_top_loop(op):
                return None
            if _in_top_loop(op):
                if not _short(op.parent, limit):
                    return None
                loops.append(as_operation(op.parent))
            continue
        if any(constant_int(i) != 0 for i in idx[:-1]):
            return None
        slot = _slot_of(idx[-1], tids, threads)
        if slot is None:
            return None
        if isinstance(slot, int):
            if op.parent != kernel_block and not _in_top_loop(op):
                return None
            if _in_top_loop(op):
                if not _short(op.parent, limit):
                    return None
                loops.append(as_operation(op.parent))
        else:
            if op.parent != slot or slot.parent != kernel_block or constant_int(slot.operands[1]) > t.shape[-1] \
                    or not _short(slot, limit):
                return None
            loops.append(as_operation(slot))
    return loops


def _short(loop: ir.Operation, limit: int) -> bool:
    """Whether scf.for `loop` has constant bounds and at most `limit` iterations (unrolling it stays small)."""
    lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
    return None not in (lb, ub, step) and step > 0 and len(range(lb, ub, step)) <= limit


def _in_top_loop(op: ir.Operation) -> bool:
    """Whether `op` sits directly in the body of an scf.for that sits directly in the kernel's body."""
    loop = op.parent
    return loop.name == "scf.for" and loop.parent.name == "gpu.func"


def _volume(t: ir.MemRefType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def _unroll(loop: ir.Operation) -> None:
    lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
    body = loop.regions[0].blocks[0]
    values = list(loop.operands)[3:]
    with ir.InsertionPoint(loop), loop.location:
        for i in range(lb, ub, step):
            values = clone_body(body, [arith.ConstantOp(ir.IndexType.get(), i).result] + values)
    for r, v in zip(loop.results, values):
        r.replace_all_uses_with(v)
    loop.erase()


def _key(op: ir.Operation, shared: bool, tids, threads: int):
    idx = list(op.operands)[2 if op.name == "memref.store" else 1:]
    if shared:
        return _slot_of(idx[-1], tids, threads)
    return tuple(constant_int(i) for i in idx)


def _forward(alloc: ir.Operation, body: ir.Block, tids, threads: int) -> None:
    """Loads take the value last stored to their slot, in the kernel's straight-line order; the stores and the
    buffer then go. Left as is when a slot is read before it is written."""
    shared = _workgroup(alloc)
    accesses = [as_operation(u.owner) for u in alloc.results[0].uses]
    keys = [_key(a, shared, tids, threads) for a in accesses]
    if any(a.parent != alloc.parent for a in accesses) or any(not isinstance(k, (int, tuple)) for k in keys):
        return  # not all unrolled to the top level
    last: dict = {}
    loads = []
    for op in body.operations:
        op = op.operation
        if op.name not in _ACCESS or not any(op == a for a in accesses):
            continue
        key = _key(op, shared, tids, threads)
        if op.name == "memref.store":
            last[key] = op.operands[0]
        elif key in last:
            loads.append((op, last[key]))
        else:
            return
    for op, value in loads:
        op.results[0].replace_all_uses_with(value)
        op.erase()
    for a in [as_operation(u.owner) for u in alloc.results[0].uses]:
        a.erase()
    alloc.erase()


def _reuse_input_loads(fn: ir.Operation, body: ir.Block, tids) -> None:
    """A kernel argument the kernel never writes, loaded twice at the same index at the top level (a chain that
    reads its input in two passes: layernorm's mean, then the centring), is read once."""
    written = set()

    def visit(o):
        if o.name in ("memref.store", "vector.store", "vector.transfer_write", "memref.copy",
                      "memref.atomic_rmw"):
            written.add(base_buffer(o.operands[1]))
        elif "atomic" in o.name:
            written.add(base_buffer(o.operands[0]))  # memref.generic_atomic_rmw
        elif o.name in ("memref.subview", "memref.cast", "memref.reinterpret_cast") and \
                any(u.owner.name not in ("memref.load", "memref.subview") for u in o.results[0].uses):
            written.add(base_buffer(o.operands[0]))  # a view used other than by loads: not followed
        return ir.WalkResult.ADVANCE

    fn.walk(visit)
    args = [a for a in fn.regions[0].blocks[0].arguments if isinstance(a.type, ir.MemRefType) and a not in written]
    seen: dict = {}
    for op in list(body.operations):
        op = op.operation
        if op.name != "memref.load" or not any(op.operands[0] == a for a in args):
            continue
        key = (op.operands[0], tuple(_index_key(i, tids) for i in list(op.operands)[1:]))
        if key in seen:
            op.results[0].replace_all_uses_with(seen[key])
            op.erase()
        else:
            seen[key] = op.results[0]


def _index_key(v: ir.Value, tids):
    """An index's value up to how it is spelled: a constant, the thread id plus a constant, or the value."""
    c = constant_int(v)
    if c is not None:
        return ("const", c)
    if _is_tid(v, tids):
        return ("tid", 0)
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.addi":
        a, b = v.owner.operation.operands
        for x, y in ((a, b), (b, a)):
            if _is_tid(x, tids) and constant_int(y) is not None:
                return ("tid", constant_int(y))
    return v


def _touches(ops: list[ir.Operation]) -> tuple[set, set, bool]:
    """(buffers read, buffers written, any nested barrier) of `ops`; an unmodelled write is None."""
    reads, writes = set(), set()
    nested = False

    def visit(o):
        nonlocal nested
        if o.name == "gpu.barrier":
            nested = True
        elif o.name in ("memref.load", "vector.load", "vector.transfer_read"):
            reads.add(base_buffer(o.operands[0]))
        elif o.name in ("memref.store", "vector.store", "vector.transfer_write"):
            writes.add(base_buffer(o.operands[1]))
        elif o.name == "memref.copy":
            reads.add(base_buffer(o.operands[0]))
            writes.add(base_buffer(o.operands[1]))
        elif o.name.startswith("memref.atomic") or o.name.startswith("memref.generic_atomic"):
            writes.add(None)  # unmodelled: keeps every barrier next to it
        return ir.WalkResult.ADVANCE

    for op in ops:
        if op is not None:
            op.walk(visit)
    return reads, writes, nested


def _drop_idle_barriers(body: ir.Block) -> None:
    """Top-level barriers across which no buffer is written on one side and touched on the other."""
    ops = [op.operation for op in body.operations]
    bars = [i for i, op in enumerate(ops) if op.name == "gpu.barrier"]
    keep_prev = -1
    for j, b in enumerate(bars):
        nxt = bars[j + 1] if j + 1 < len(bars) else len(ops)
        r1, w1, n1 = _touches(ops[keep_prev + 1:b])
        r2, w2, n2 = _touches(ops[b + 1:nxt])
        conflict = n1 or n2 or None in w1 or None in w2 or (w1 & (r2 | w2)) or (w2 & r1)
        if conflict:
            keep_prev = b
        else:
            ops[b].erase()
            ops[b] = None
