"""Which workgroup barriers must also order global (buffer) memory.

A gpu.barrier is lowered with global-memory semantics by default (SPIR-V UniformMemory, OpenCL
CLK_GLOBAL_MEM_FENCE): a workgroup reduction zeroes its output in global memory, then one thread accumulates
into it. Those fences cost: on the H200 a K-step barrier that fenced global memory took the OpenCL matmul from
4.0 to 7.1 ms, and acquiring UniformMemory invalidates what the loads cached. A barrier needs them only when a
write to global memory can precede it in the same invocation (an earlier global store in program order, or a
store anywhere in a loop around it: the previous iteration's) and a thread may touch that buffer after it.
Write-after-read across threads needs only the execution dependency every barrier gives. Every other barrier is
marked as ordering workgroup memory alone (`memfence [#gpu.address_space<workgroup>]`), which both code
generators honour. Kernel arguments are distinct buffers (OpenCL C declares them restrict), and a kernel that
runs rows one after the other (serial_rows.py) marks each row's barriers as the first row's: the rows were
separate workgroups.
"""

from __future__ import annotations

from ...ir.mlir import ir
from ...ir.util import base_buffer, kernel_blocks, memory_space

WORKGROUP_ONLY = "[#gpu.address_space<workgroup>]"
# Operations that write memory through the memref operand at this index.
_STORES = {"memref.store": 1, "vector.store": 1, "vector.transfer_write": 1, "vector.maskedstore": 0,
           "vector.scatter": 0, "memref.atomic_rmw": 1, "memref.generic_atomic_rmw": 0, "memref.copy": 1,
           "gpu.subgroup_mma_store_matrix": 1}
# Operations that take memrefs and never write through them.
_READS = {"memref.load", "vector.load", "vector.transfer_read", "vector.maskedload", "vector.gather",
          "memref.subview", "memref.cast", "memref.reinterpret_cast", "memref.expand_shape",
          "memref.collapse_shape", "memref.dim", "memref.extract_strided_metadata", "memref.assume_alignment",
          "memref.extract_aligned_pointer_as_index", "gpu.subgroup_mma_load_matrix", "memref.dealloc",
          "memref.alloc", "memref.alloca", "gpu.barrier"}


def _is_global(value: ir.Value) -> bool:
    t = value.type
    if not isinstance(t, ir.MemRefType):
        return False
    if memory_space(t) in ("workgroup", "private"):
        return False
    # A buffer the kernel allocates without a memory space is the thread's own (made private later).
    base = base_buffer(value)
    return not (isinstance(base, ir.OpResult) and base.owner.name in ("memref.alloc", "memref.alloca"))


def _accesses(op: ir.Operation) -> list[tuple[ir.Value | None, bool]]:
    """(global buffer, written) for what `op` itself (not its regions) accesses; None: a buffer not known (an
    operation we do not know that takes a global memref is taken to write anything)."""
    name = op.name
    operands = list(op.operands)
    if name in _STORES:
        i = _STORES[name]
        if i >= len(operands):
            return [(None, True)]
        wrote = [(base_buffer(operands[i]), True)] if _is_global(operands[i]) else []
        return wrote + [(base_buffer(v), False) for j, v in enumerate(operands) if j != i and _is_global(v)]
    found = [(base_buffer(v), False) for v in operands if _is_global(v)]
    return found if name in _READS else [(None, True)] if found else []


def _events(ops: list[ir.Operation], loops: tuple, out: list) -> None:
    """`ops` flattened in program order into `out`: (barrier op, None, False, loops) and (None, buffer, written,
    loops), `loops` the loops around each."""
    for op in ops:
        if op.name == "gpu.barrier":
            out.append((op, None, False, loops))
            continue
        for buf, written in _accesses(op):
            out.append((None, buf, written, loops))
        inner = loops + (op,) if op.name in ("scf.for", "scf.while", "scf.forall", "scf.parallel") else loops
        for region in op.regions:
            for block in region.blocks:
                _events([o.operation for o in block.operations], inner, out)


def _conflict(written: set, touched: set) -> bool:
    return bool(written and touched and (None in written or None in touched or written & touched))


def mark(body: list[ir.Operation]) -> None:
    """Mark the barriers after which no thread touches a global buffer this invocation may have written before
    them: in program order, or anywhere in the outermost loop around the barrier (its other iterations)."""
    events: list = []
    _events(body, (), events)
    for i, (bar, _, _, loops) in enumerate(events):
        if bar is None or "address_spaces" in bar.attributes:
            continue
        around = [e for e in events if loops and e[0] is None and any(loops[0] == lp for lp in e[3])]
        written = {e[1] for e in events[:i] + around if e[0] is None and e[2]}
        touched = {e[1] for e in events[i + 1:] + around if e[0] is None}
        if not _conflict(written, touched):
            bar.attributes["address_spaces"] = ir.Attribute.parse(WORKGROUP_ONLY)


def _drop_trailing(body: list[ir.Operation]) -> None:
    """Barriers with nothing after them but the return order nothing."""
    for op in reversed(body[:-1]):
        if op.name != "gpu.barrier":
            break
        op.erase()


def relax_barriers(module: ir.Module) -> None:
    """Mark every barrier of every kernel that no global write can precede as ordering workgroup memory only;
    drop the barriers that end a kernel."""
    for block in kernel_blocks(module):  # structured control flow only
        body = [x.operation for x in block.operations]
        mark(body)
        _drop_trailing(body)
