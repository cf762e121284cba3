"""vector.transfer_read / transfer_write that stay in bounds, for 1-D and N-D vectors.

Only the forms that need no masking: every dimension `in_bounds` and no mask operand. The permutation map
may name any memref dim per vector dim (a transposed or strided read) and, for reads, a constant 0 (a
broadcast dim). Each row of the vector is one vloadN/vstoreN when its lanes are contiguous in memory, else
lane by lane.
"""

from __future__ import annotations

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import nd_vectors as nd
from . import storage
from . import types as T
from .vector_ops import lane


def _check(op, memref_type: ir.MemRefType, vector_type: ir.Type, n_fixed: int) -> list[int | None]:
    """The memref dim each vector dim walks (None: a broadcast dim); raises for forms that need masking."""
    name = op.operation.name
    if len(op.operands) != n_fixed + memref_type.rank:
        raise UnsupportedOp(f"{name} with a mask")
    in_bounds = op.attributes["in_bounds"]
    if not all(ir.BoolAttr(b).value for b in in_bounds):
        raise UnsupportedOp(f"{name} that may run out of bounds (needs masking)")
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    dims: list[int | None] = []
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            dims.append(e.position)
        elif isinstance(e, ir.AffineConstantExpr) and e.value == 0 and name.endswith("read"):
            dims.append(None)
        else:
            raise UnsupportedOp(f"{name} with permutation map {amap}")
    return dims


def _lane_offsets(mem, vector_type: ir.Type, dims: list[int | None]) -> list[int]:
    """Element offset of each lane (row-major) from the first, through the strides of the memref dims that
    the vector dims walk (0 along a broadcast dim)."""
    shape = list(vector_type.shape)
    strides = [0 if d is None else mem.strides[d] for d in dims]
    offsets = []
    for e in range(T.lanes(vector_type)):
        off, rest = 0, e
        for size, stride in zip(reversed(shape), reversed(strides)):
            off += (rest % size) * stride
            rest //= size
        offsets.append(off)
    return offsets


def _rows(vector_type: ir.Type) -> tuple[ir.Type, int]:
    rt = nd.row_type(vector_type) if nd.is_multi(vector_type) else vector_type
    return rt, T.lanes(rt)


def transfer_read(em, op) -> None:
    source, result = op.operands[0], op.results[0]
    mt, vt = source.type, result.type
    dims = _check(op, mt, vt, 2)
    indices = list(op.operands[1:1 + mt.rank])
    mem = em.mems.get(source)
    if mem is None or T.is_i1(mem.element):
        raise UnsupportedOp("vector.transfer_read of an i1 memref or of a view")
    offsets = _lane_offsets(mem, vt, dims)
    rt, n = _rows(vt)
    slots = []
    for k in range(0, len(offsets), n):
        row = offsets[k:k + n]
        _, idx = em.address(source, indices, row[0])
        if n == 1:
            expr = storage.load(mem, idx)
        elif row == list(range(row[0], row[0] + n)):  # contiguous
            expr = storage.vload(mem, n, idx, em.aligned_vector(source, indices, n, vt.element_type, row[0]))
        else:
            lanes = (storage.load(mem, em.address(source, indices, o)[1]) for o in row)
            expr = f"({em.ct(rt)})({', '.join(lanes)})"
        slots.append(em.declare(em.ct(rt), expr))
    em.bind(result, slots)


def transfer_write(em, op) -> None:
    value, dest = op.operands[0], op.operands[1]
    mt, vt = dest.type, value.type
    dims = _check(op, mt, vt, 2)
    indices = list(op.operands[2:2 + mt.rank])
    mem = em.mems.get(dest)
    if mem is None or T.is_i1(mem.element):
        raise UnsupportedOp("vector.transfer_write to an i1 memref or to a view")
    offsets = _lane_offsets(mem, vt, dims)
    rt, n = _rows(vt)
    for slot, k in zip(em.slots(value), range(0, len(offsets), n), strict=True):
        row = offsets[k:k + n]
        if n > 1 and row == list(range(row[0], row[0] + n)):
            _, idx = em.address(dest, indices, row[0])
            em.line(storage.vstore(mem, n, idx, slot, em.aligned_vector(dest, indices, n, vt.element_type, row[0])))
            continue
        for i, o in enumerate(row):
            _, idx = em.address(dest, indices, o)
            em.line(storage.store(mem, idx, lane(slot, i, rt)))


HANDLERS = {"vector.transfer_read": transfer_read, "vector.transfer_write": transfer_write}
