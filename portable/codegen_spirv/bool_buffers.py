"""Boolean kernel buffers as bytes. SPIR-V has no storage layout for booleans; upstream MemRefToSPIRV maps a
memref of i1 to an i8 array but then stores an i1 value into it (invalid). The runtime already lays a bool
tensor out as one byte per element (numpy's bool), so retype the buffer to i8 and convert at each access."""

from __future__ import annotations

from ..compiler.mlir import arith, ir

_ACCESS = {"memref.load": 0, "vector.load": 0, "memref.store": 1, "vector.store": 1}  # op -> memref operand


def _as(t: ir.Type, elem: ir.Type) -> ir.Type:
    return ir.VectorType.get(list(ir.VectorType(t).shape), elem) if isinstance(t, ir.VectorType) else elem


def bools_as_bytes(gpu_module: ir.Operation) -> None:
    """Retype memref<...xi1> arguments of every gpu.func to i8, in place; loads compare with 0, stores widen."""
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


def _zero(t: ir.Type) -> ir.Attribute:
    if isinstance(t, ir.VectorType):
        return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(t.element_type, 0))
    return ir.IntegerAttr.get(t, 0)
