"""Which workgroup barriers must also order global (buffer) memory.

A gpu.barrier is lowered with global-memory semantics by default (SPIR-V UniformMemory, OpenCL
CLK_GLOBAL_MEM_FENCE): a workgroup reduction zeroes its output in global memory, then one thread accumulates
into it. Those fences cost: on the H200 a K-step barrier that fenced global memory took the OpenCL matmul from
4.0 to 7.1 ms, and acquiring UniformMemory invalidates what the loads cached. A barrier needs them only when a
write to global memory can precede it in the same invocation: an earlier global store in program order, or a
store anywhere in a loop around it (the previous iteration's). Write-after-read across threads needs only the
execution dependency every barrier gives. Every other barrier is marked as ordering workgroup memory alone
(`memfence [#gpu.address_space<workgroup>]`), which both code generators honour.
"""

from __future__ import annotations

from .ir_util import kernel_blocks
from .mlir import ir

_WORKGROUP_ONLY = "[#gpu.address_space<workgroup>]"
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
    space = t.memory_space
    return space is None or not any(s in str(space) for s in ("workgroup", "private"))


def _writes_global(op: ir.Operation) -> bool:
    """Whether `op` itself (not its regions) may write global memory."""
    name = op.name
    if name in _STORES:
        operands = list(op.operands)
        i = _STORES[name]
        return i >= len(operands) or _is_global(operands[i])
    if name in _READS:
        return False
    return any(_is_global(v) for v in op.operands)  # an operation we do not know: assume it writes


def _has_global_write(op: ir.Operation) -> bool:
    if _writes_global(op):
        return True
    return any(_has_global_write(inner.operation) for region in op.regions for block in region.blocks
               for inner in block.operations)


def _visit(ops: list[ir.Operation], seen: bool) -> bool:
    """Mark the barriers in `ops` (in program order) that no global write precedes; return whether one may have
    happened by the end. `seen`: a global write may precede the first op."""
    for op in ops:
        if op.name == "gpu.barrier":
            if not seen and "address_spaces" not in op.attributes:
                op.attributes["address_spaces"] = ir.Attribute.parse(_WORKGROUP_ONLY)
            continue
        if not op.regions:
            seen = seen or _writes_global(op)
            continue
        loop = op.name in ("scf.for", "scf.while", "scf.forall", "scf.parallel")
        inside = seen or (loop and _has_global_write(op))  # a loop's next iteration follows its stores
        after = seen or _writes_global(op)
        for region in op.regions:
            for block in region.blocks:
                after = _visit([o.operation for o in block.operations], inside) or after
        seen = after
    return seen


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
        _visit(body, False)
        _drop_trailing(body)
