"""Cooperative-matrix matmuls whose epilogue first rounds the f32 product to f16: one kernel that stores f16
fragments.

An f16 model's MatMul or Gemm accumulates in f32 and rounds the product to f16 before its epilogue (the importer's
form). Dispatch joins that epilogue to the matmul out of place (`dispatch.narrows`: the product is f32, the
kernel's output f16), so bufferization gives the product a workgroup tile of its own inside the kernel: an f32
`memref.alloc` of the workgroup tile that the subgroups store their fragments to and the epilogue's threads read
back after a barrier (coop_matrix.emit_epilogue). Left so, that tile would be every thread's private memory. Here,
after convert-vector-to-gpu and the folding of views, each fragment is rounded instead
(`gpu.subgroup_mma_elementwise truncf`: OpFConvert on the cooperative matrix in SPIR-V, `cvt` in PTX) and stored to
the f16 output at the workgroup tile's place, and the epilogue reads that output where it read the product and
rounded it: no f32 tile, half the bytes stored, the rounding the model asks for (f32 sums rounded once). A plain
MatMul's epilogue, which stores the rounded product as it is, goes: the fragments are the output.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir.mlir import ir
from ...ir.util import find_ops
from .coop_matrix import MMA


def narrow_fragments(module: ir.Module) -> int:
    """Rewrite every kernel's f32 product tile as above; returns how many tiles were rewritten."""
    done = 0
    for fn in find_ops(module.operation, ("gpu.func",)):
        for alloc in find_ops(fn, ("memref.alloc",), _product_tile):
            _narrow(fn, alloc)
            done += 1
        if find_ops(fn, ("gpu.subgroup_mma_store_matrix",)) and find_ops(fn, ("memref.alloc",), _private):
            raise CompileError("a cooperative-matrix kernel keeps a buffer in private memory (a product tile this "
                               "pass did not find); it would compute wrong values", stage="coop-narrow")
    return done


def _private(op: ir.Operation) -> bool:
    return ir.MemRefType(op.results[0].type).memory_space is None


def _fragment(element: str) -> ir.Type:
    """The accumulator fragment type of the one cooperative-matrix shape (coop_matrix.MMA) with this element type."""
    return ir.Type.parse(f'!gpu.mma_matrix<{MMA}x{MMA}x{element}, "COp">')


def _product_tile(op: ir.Operation) -> bool:
    t = ir.MemRefType(op.results[0].type)
    return t.memory_space is None and t.rank == 2 and str(t.element_type) == "f32" and \
        any(u.owner.name == "gpu.subgroup_mma_store_matrix" for u in op.results[0].uses)


def _narrow(fn: ir.Operation, alloc: ir.Operation) -> None:
    tile = alloc.results[0]
    wm, wn = ir.MemRefType(tile.type).shape
    users = [u.owner for u in tile.uses]
    stores = [u for u in users if u.name == "gpu.subgroup_mma_store_matrix"]
    reads = [u for u in users if u.name == "vector.transfer_read"]
    rounds = [list(r.results[0].uses) for r in reads]
    if len(stores) + len(reads) != len(users) or any(
            len(us) != 1 or us[0].owner.name != "arith.truncf" for us in rounds):
        raise CompileError("a cooperative-matrix product tile is used other than by fragment stores and reads "
                           "rounded to f16; its kernel cannot store f16 fragments", stage="coop-narrow")
    f16 = ir.VectorType(rounds[0][0].owner.results[0].type).element_type if rounds else ir.F16Type.get()
    outs = [a for a in fn.regions[0].blocks[0].arguments if _written(a) and isinstance(a.type, ir.MemRefType) and
            ir.MemRefType(a.type).element_type == f16 and ir.MemRefType(a.type).rank == 2]
    if len(outs) != 1:
        raise CompileError(f"a cooperative-matrix kernel rounding its product writes {len(outs)} f16 matrices, "
                           "not one", stage="coop-narrow")
    (out,) = outs
    entry = fn.regions[0].blocks[0]
    index = ir.IndexType.get()
    with ir.InsertionPoint(entry.operations[0]), alloc.location:
        # The workgroup forall is mapped to blocks (y over rows, x over columns) in tiles of the product tile's
        # size: its place in the output.
        offsets = []
        for dim, size in (("y", wm), ("x", wn)):
            bid = ir.Operation.create("gpu.block_id", results=[index],
                                      attributes={"dimension": ir.Attribute.parse(f"#gpu<dim {dim}>")}).result
            c = ir.Operation.create("arith.constant", results=[index],
                                    attributes={"value": ir.IntegerAttr.get(index, size)}).result
            offsets.append(ir.Operation.create("arith.muli", results=[index], operands=[bid, c]).result)
        pad = ir.Operation.create("arith.constant", results=[f16],
                                  attributes={"value": ir.FloatAttr.get(f16, 0.0)}).result
    lead = ir.IntegerAttr.get(index, ir.MemRefType(out.type).shape[1])
    acc_type, half = (_fragment(t) for t in ("f32", "f16"))
    for st in stores:
        acc = st.operands[0]
        if acc.type != acc_type:
            raise CompileError(f"a cooperative-matrix product fragment of type {acc.type}; this pass narrows "
                               f"{acc_type} only", stage="coop-narrow")
        with ir.InsertionPoint(st), st.location:
            h = ir.Operation.create("gpu.subgroup_mma_elementwise", results=[half], operands=[acc], attributes={
                "opType": ir.Attribute.parse("#gpu<mma_element_wise truncf>")}).result
            idx = _shifted(list(st.operands)[2:], offsets)
            attrs = {k: st.attributes[k] for k in st.attributes}
            attrs["leadDimension"] = lead
            ir.Operation.create("gpu.subgroup_mma_store_matrix", operands=[h, out, *idx], attributes=attrs)
        st.erase()
    for rd, ((use,)) in zip(reads, rounds):
        rounded = use.owner
        writes = [u.owner for u in rounded.results[0].uses]
        if all(w.name == "vector.transfer_write" and w.operands[0] == rounded.results[0] and w.operands[1] == out
               for w in writes):
            # The rounded product stored as it is (a MatMul with no epilogue): the fragments already are the
            # output. (The epilogue's maps are the identity: the same element is read and written.)
            for w in writes:
                w.erase()
            rounded.erase()
            rd.erase()
            continue
        with ir.InsertionPoint(rd), rd.location:
            idx = _shifted(list(rd.operands)[1:3], offsets)
            new = ir.Operation.create("vector.transfer_read", results=[rounded.results[0].type],
                                      operands=[out, *idx, pad] + list(rd.operands)[4:],
                                      attributes={k: rd.attributes[k] for k in rd.attributes}).result
        rounded.results[0].replace_all_uses_with(new)
        rounded.erase()
        rd.erase()
    alloc.erase()


def _written(v: ir.Value) -> bool:
    return any(u.owner.name in ("vector.transfer_write", "vector.store", "memref.store") and u.operand_number == 1
               for u in v.uses)


def _shifted(indices: list[ir.Value], offsets: list[ir.Value]) -> list[ir.Value]:
    if len(indices) != 2:
        raise CompileError("a cooperative-matrix product tile accessed with other than two indices",
                           stage="coop-narrow")
    return [ir.Operation.create("arith.addi", results=[i.type], operands=[i, o]).result
            for i, o in zip(indices, offsets)]
