"""Boolean kernel buffers as bytes. SPIR-V has no storage layout for booleans; upstream MemRefToSPIRV maps a
memref of i1 to an i8 array but then stores an i1 value into it (invalid). The runtime already lays a bool
tensor out as one byte per element (numpy's bool), so retype the buffer to i8 and convert at each access."""

from __future__ import annotations

from ..ir.mlir import arith, ir, memref, vector

_ACCESS = {"memref.load": 0, "vector.load": 0, "memref.store": 1, "vector.store": 1}  # op -> memref operand


def _as(t: ir.Type, elem: ir.Type) -> ir.Type:
    return ir.VectorType.get(list(ir.VectorType(t).shape), elem) if isinstance(t, ir.VectorType) else elem


def bools_as_bytes(gpu_module: ir.Operation, byte_storage: bool = True) -> None:
    """Retype memref<...xi1> arguments of every gpu.func to i8, in place; loads compare with 0, stores widen.

    Without 8-bit storage (StorageBuffer8BitAccess) upstream emulates i8 buffers as i32 words, and its vector
    load/store lowering then indexes words as if they were bytes: vector accesses become one access per lane."""
    i1, i8 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(8)
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name != "gpu.func":
            continue
        fn = fn.operation
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        inputs = list(ftype.inputs)
        for i, arg in enumerate(list(fn.regions[0].blocks[0].arguments)[:len(inputs)]):
            t = arg.type
            if not isinstance(t, ir.MemRefType) or t.element_type != i1:
                continue
            users = [u.owner for u in arg.uses]
            if not all(u.name in _ACCESS and u.operands[_ACCESS[u.name]] == arg for u in users):
                continue  # another use (a view) would need the same treatment; leave it to fail visibly
            new_t = ir.MemRefType.get(list(t.shape), i8, t.layout, t.memory_space)
            arg.set_type(new_t)
            inputs[i] = new_t
            for op in users:
                if not byte_storage and op.name in ("vector.load", "vector.store"):
                    _per_lane(op, i8)
                    continue
                with ir.InsertionPoint(op), op.location:
                    if op.name in ("memref.load", "vector.load"):
                        op.results[0].set_type(_as(op.results[0].type, i8))
                        with ir.InsertionPoint.after(op):
                            zero = arith.ConstantOp(op.results[0].type, _zero(op.results[0].type)).result
                            b = arith.CmpIOp(arith.CmpIPredicate.ne, op.results[0], zero).result
                        op.results[0].replace_all_uses_except(b, b.owner.operation)
                    else:
                        v = op.operands[0]
                        op.operands[0] = arith.ExtUIOp(_as(v.type, i8), v).result
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(ftype.results)))


def _per_lane(op: ir.Operation, i8: ir.Type) -> None:
    """A 1-d vector.load/store of i1 on a (now i8) buffer as scalar byte accesses, one per lane."""
    idx_t = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        if op.name == "vector.load":
            mem, idx = op.operands[0], list(op.operands[1:])
            vt = ir.VectorType(op.results[0].type)
        else:
            mem, idx = op.operands[1], list(op.operands[2:])
            vt = ir.VectorType(op.operands[0].type)
        zero = arith.ConstantOp(i8, 0).result
        lanes = []
        n = vt.shape[0] if vt.rank else 1  # a 0-d vector is one lane
        for j in range(n):
            at = idx[:-1] + [arith.AddIOp(idx[-1], arith.ConstantOp(idx_t, j).result).result] if j else idx
            if op.name == "vector.load":
                b = memref.LoadOp(mem, at).result
                lanes.append(arith.CmpIOp(arith.CmpIPredicate.ne, b, zero).result)
            else:
                bit = vector.ExtractOp(op.operands[0], [], [j] if vt.rank else []).result
                memref.StoreOp(arith.ExtUIOp(i8, bit).result, mem, at)
        if op.name == "vector.load":
            op.results[0].replace_all_uses_with(vector.FromElementsOp(vt, lanes).result)
    op.erase()


def _zero(t: ir.Type) -> ir.Attribute:
    if isinstance(t, ir.VectorType):
        return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, 0))
    return ir.IntegerAttr.get(t, 0)
