"""Give SPIR-V real 128-bit loads: kernel buffers accessed by aligned 1-d vector<4> transfers become
buffers of vec4 elements.

SPIR-V in Vulkan's logical addressing cannot reinterpret a float pointer as a vec4 pointer, so a vector load
from a float buffer becomes four scalar loads (a quarter of the memory throughput on GPUs that coalesce
wide loads). Retyping the buffer `memref<...xNxf32>` to `memref<...x(N/4)xvector<4xf32>>` keeps the bytes
the same for the runtime. A buffer is retyped only when every vector access on it is 4 wide at an innermost
index provably a multiple of 4, and it has no scalar stores (a scalar store would need a read-modify-write
of a vector other threads may be writing); scalar loads become a vector load plus an extract.
"""

from __future__ import annotations

from ..ir.mlir import arith, ir, memref, vector
from ..ir.util import find_ops, grouped_memref, memory_space, multiple_of

WIDTH = 4






_VEC = ("vector.transfer_read", "vector.transfer_write")


def _accesses(fn: ir.Operation) -> list[ir.Operation]:
    return find_ops(fn, _VEC + ("memref.load", "memref.store"))


def _mem_and_indices(op: ir.Operation) -> tuple[ir.Value, list[ir.Value]]:
    ops = list(op.operands)
    if op.name == "vector.transfer_read":  # source, indices, padding[, mask]
        n = int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[1])
        return ops[0], ops[1:1 + n]
    if op.name == "vector.transfer_write":  # vector, dest, indices[, mask]
        n = int(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"])[2])
        return ops[1], ops[2:2 + n]
    if op.name == "memref.store":
        return ops[1], ops[2:]
    return ops[0], ops[1:]


def _plain_vec4(op: ir.Operation) -> bool:
    """A 1-d, unmasked, in-bounds transfer of WIDTH lanes along the innermost dim."""
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    if seg[-1] != 0:
        return False
    vt = op.results[0].type if op.name == "vector.transfer_read" else op.operands[0].type
    if list(ir.VectorType(vt).shape) != [WIDTH]:
        return False
    if "in_bounds" not in op.attributes or str(op.attributes["in_bounds"]) != "[true]":
        return False
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    n = amap.n_dims
    return len(amap.results) == 1 and str(amap.results[0]) == f"d{n - 1}"


def vectorize_buffers(gpu_module: ir.Operation) -> None:
    """Retype eligible kernel buffer arguments and workgroup allocations of every gpu.func in `gpu_module` to vec4
    elements, in place (workgroup tiles staged by promotion.py are then read 128 bits at a time too)."""
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name != "gpu.func":
            continue
        fn = fn.operation
        entry = fn.regions[0].blocks[0]
        nargs = len(ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value).inputs)
        new_inputs = []
        for arg in list(entry.arguments)[:nargs]:
            new_inputs.append(_retyped(fn, arg) or arg.type)
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(new_inputs, list(ftype.results)))
        for alloc in find_ops(fn, ("memref.alloc",)):
            t = alloc.results[0].type
            if memory_space(t) == "workgroup":
                _retyped(fn, alloc.results[0])


def _retyped(fn: ir.Operation, buf: ir.Value) -> ir.Type | None:
    """Retype `buf` (a kernel argument or a workgroup allocation) to vec4 elements when every access allows it, and
    rewrite those accesses; returns the new type, else None."""
    t = buf.type
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape or t.rank == 0:
        return None
    elem = t.element_type
    # 32-bit lanes only: i1 has no storage layout in SPIR-V and i64 vec4 is wider than a 128-bit load.
    if t.shape[-1] % WIDTH or not (isinstance(elem, ir.F32Type) or
                                   isinstance(elem, ir.IntegerType) and elem.width == 32):
        return None
    mine = [op for op in _accesses(fn) if _mem_and_indices(op)[0] == buf]  # fresh: rewrites erase ops
    vec = [op for op in mine if op.name in _VEC]
    if not vec or any(op.name == "memref.store" for op in mine):
        return None
    if any(u.owner.name not in _VEC + ("memref.load", "memref.store") for u in buf.uses):
        return None  # a view or a call: its layout would change under it
    if not all(_plain_vec4(op) and multiple_of(_mem_and_indices(op)[1][-1], WIDTH) for op in vec):
        return None
    elem_v = ir.VectorType.get([WIDTH], t.element_type)
    new_t = grouped_memref(t, WIDTH, elem_v)
    if new_t is None:
        return None
    buf.set_type(new_t)
    for op in mine:
        _rewrite(op, buf, elem_v)
    return new_t


def _rewrite(op: ir.Operation, mem: ir.Value, elem_v: ir.Type) -> None:
    idx_t = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        _, idx = _mem_and_indices(op)
        w = arith.ConstantOp(idx_t, WIDTH).result
        outer = list(idx[:-1]) + [arith.DivUIOp(idx[-1], w).result]
        if op.name == "vector.transfer_read":
            new = memref.LoadOp(mem, outer).result
            op.results[0].replace_all_uses_with(new)
        elif op.name == "vector.transfer_write":
            memref.StoreOp(op.operands[0], mem, outer)
        else:  # scalar memref.load: load the vector, take the lane
            v = memref.LoadOp(mem, outer).result
            lane = arith.RemUIOp(idx[-1], w).result
            new = vector.ExtractOp(v, dynamic_position=[lane],
                                   static_position=[ir.ShapedType.get_dynamic_size()]).result
            op.results[0].replace_all_uses_with(new)
    op.erase()

