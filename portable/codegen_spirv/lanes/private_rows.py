"""Private rows recomputed where they are read (CPU Vulkan drivers: lavapipe).

A row chain keeps each elementwise op that several later passes read as a row of the thread's private memory
(layernorm's x - mean, softmax's exp(x - max)): one loop writes it, later loops read it back. llvmpipe keeps an
indexed private array in scratch memory that every lane reaches by a loop over the lanes, one 32-bit element per
access, while a read of the kernel's input takes one access per lane for four columns once loop_vectorize.py
and wide_buffers.py are done. So a row written by a loop of pure arithmetic over inputs that stay unchanged is
not stored: each of its reads becomes that arithmetic at the read's column.

A row is recomputed when its one writer is an `scf.for` whose body holds loads, pure arith/math and one store
into the row at [constants..., iv]; every other use of the row is a load at the same constants, after the
writer; and nothing the body loads is written after the writer (kernel arguments never written, private
buffers written only before it).
"""

from __future__ import annotations

from ...ir.mlir import ir
from ...ir.util import clone_mapped, constant_int, find_ops

# Ops that write the memref operand `_WRITES[name]` (and could change what a recomputed row reads).
_WRITES = {"memref.store": 1, "vector.store": 1, "vector.transfer_write": 1, "memref.copy": 1,
           "memref.atomic_rmw": 1, "memref.generic_atomic_rmw": 0}
# Reads of a row beyond this many would recompute its arithmetic more often than a store and loads cost.
MAX_READS = 4
MAX_BODY_OPS = 24


def recompute_private_rows(gpu_module: ir.Operation) -> bool:
    """Replace the reads of eligible private rows by their arithmetic, in place; whether any was."""
    changed = False
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name == "gpu.func":
            # Rows in program order: a row recomputed from an earlier one then reads the kernel's inputs.
            for alloc in find_ops(fn.operation, ("memref.alloc", "memref.alloca"), _private):
                changed |= _recompute(fn.operation, alloc)
    return changed


def _private(op: ir.Operation) -> bool:
    t = ir.MemRefType(op.results[0].type)
    return t.memory_space is None and t.has_static_shape and not list(op.operands)


def _ancestor_in(op: ir.Operation, block: ir.Block) -> ir.Operation | None:
    """`op` or the op enclosing it that sits directly in `block`."""
    while op is not None:
        if op.block == block:
            return op
        op = op.parent.operation if op.parent is not None else None
    return None


def _recompute(fn: ir.Operation, alloc: ir.Operation) -> bool:
    row = alloc.results[0]
    users = [u.owner.operation for u in row.uses]
    stores = [u for u in users if u.name != "memref.load"]
    loads = [u for u in users if u.name == "memref.load"]
    if len(stores) != 1 or stores[0].name != "memref.store" or not loads or len(loads) > MAX_READS:
        return False
    store = stores[0]
    writer = store.parent.operation
    if writer.name != "scf.for" or list(writer.results) or store.block != writer.regions[0].blocks[0]:
        return False
    iv = writer.regions[0].blocks[0].arguments[0]
    slot = _slot(list(store.operands)[2:], iv)
    if slot is None or any(not _same_slot(list(ld.operands)[1:], list(store.operands)[2:], slot) for ld in loads):
        return False
    body = [o.operation for o in writer.regions[0].blocks[0].operations][:-1]
    if len(body) > MAX_BODY_OPS or not all(_pure_or_load(o) for o in body if o != store):
        return False
    block = writer.block
    for ld in loads:
        anc = _ancestor_in(ld, block)
        if anc is None or anc == writer or not writer.is_before_in_block(anc):
            return False
    if not _inputs_unchanged(fn, body, writer, row):
        return False
    for ld in loads:
        _inline(body, store, iv, ld)
    writer.erase()
    alloc.erase()
    return True


def _slot(idx: list, iv: ir.Value) -> int | None:
    """The position of the induction variable among a store's indices when the others are constants."""
    pos = [i for i, v in enumerate(idx) if v == iv]
    if len(pos) != 1 or any(constant_int(v) is None for i, v in enumerate(idx) if i != pos[0]):
        return None
    return pos[0]


def _same_slot(load_idx: list, store_idx: list, slot: int) -> bool:
    return len(load_idx) == len(store_idx) and all(
        i == slot or constant_int(a) == constant_int(b) for i, (a, b) in enumerate(zip(load_idx, store_idx)))


def _pure_or_load(op: ir.Operation) -> bool:
    if op.regions or len(op.results) != 1:
        return False
    return op.name == "memref.load" or op.name.startswith(("arith.", "math.")) or op.name == "affine.apply"


def _inputs_unchanged(fn: ir.Operation, body: list, writer: ir.Operation, row: ir.Value) -> bool:
    """Every buffer the writer's body loads is a kernel argument that is never written or a private buffer that
    is written only before the writer, in the writer's block."""
    read = [o.operands[0] for o in body if o.name == "memref.load"]
    if not read:
        return True
    writes = find_ops(fn, tuple(_WRITES))
    args = list(fn.regions[0].blocks[0].arguments)
    for mem in read:
        if mem == row:
            return False
        targets = [w for w in writes if w.operands[_WRITES[w.name]] == mem]
        if mem in args:
            if targets:
                return False
            continue
        owner = mem.owner.operation if isinstance(mem, ir.OpResult) else None
        if owner is None or owner.name not in ("memref.alloc", "memref.alloca") or not _private(owner):
            return False
        for w in targets:
            anc = _ancestor_in(w, writer.block)
            if anc is None or anc == writer or not anc.is_before_in_block(writer):
                return False
    return True


def _inline(body: list, store: ir.Operation, iv: ir.Value, load: ir.Operation) -> None:
    """The writer's arithmetic at the load's column, inserted before the load, which it replaces."""
    slot = _slot(list(store.operands)[2:], iv)
    values = {iv: list(load.operands)[1 + slot]}
    ip = ir.InsertionPoint(load)
    for op in body:
        if op != store:
            clone_mapped(op, values, ip)
    stored = store.operands[0]
    load.results[0].replace_all_uses_with(values.get(stored, stored))
    load.erase()
