"""tensor.insert_slice with static offsets, sizes and strides, rewritten into ops the compiler maps to kernels.

- into a splat (a fill, a splat constant, or tensor.empty) with unit strides: a tensor.pad of the source
  (ConvTranspose's zero border, Pad, CenterCropPad, EyeLike); pads become gather generics (gathers.py) or
  fold into a convolution's im2col (conv_gemm.py);
- otherwise a gather generic over the destination: each element reads the source where its index falls in
  the (strided) slice and the destination elsewhere (ConvTranspose with strides, Det's row updates).
"""

from __future__ import annotations

from ...errors import UnsupportedOp
from ...ir.linalg_info import fill_value
from ...ir.mlir import arith, ir, tensor
from .gathers import clamped, gather_generic, index_const, slice_dims, static_sizes


def insert_slices_to_generics(func_op: ir.Operation) -> None:
    """Rewrite every top-level tensor.insert_slice of `func_op`, in block order (a chain of inserts into
    one destination rewrites its first insert first)."""
    for op in list(func_op.regions[0].blocks[0].operations):
        if op.name == "tensor.insert_slice":
            insert_slice_to_generic(op)


def insert_slice_to_generic(op: ir.Operation) -> None:
    src, dest = op.operands[0], op.operands[1]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(op.results[0].type)
    what = "tensor.insert_slice"
    offs = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])), what)
    sizes = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"])), what)
    strides = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_strides"])), what)
    if len(list(op.operands)) != 2 or not (src_t.has_static_shape and out_t.has_static_shape):
        raise UnsupportedOp(f"{what} with dynamic offsets/sizes is not supported yet: {_first_line(op)}")
    kept = slice_dims(sizes, list(src_t.shape), what)
    with ir.InsertionPoint(op), op.location:
        splat = splat_value(dest)
    if splat is not None and all(s == 1 for s in strides) and len(kept) == out_t.rank:
        _to_pad(op, splat, offs)
        return
    _to_gather(op, splat, offs, sizes, strides, kept)


def splat_value(v: ir.Value) -> ir.Value | None:
    """The one value every element of `v` holds, as a scalar usable at the insertion point: for a fill, a splat
    arith.constant, or tensor.empty (undefined contents: zero); else None. Builds at the insertion point."""
    if not isinstance(v, ir.OpResult):
        return None
    p = v.owner.operation
    elem = ir.RankedTensorType(v.type).element_type
    if p.name == "tensor.empty":
        return _zero(elem)
    if p.name == "arith.constant":
        attr = p.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr) and ir.DenseElementsAttr(attr).is_splat:
            return arith.ConstantOp(elem, ir.DenseElementsAttr(attr).get_splat_value()).result
        return None
    return fill_value(v)


def _zero(elem: ir.Type) -> ir.Value | None:
    if isinstance(elem, ir.FloatType):
        return arith.ConstantOp(elem, ir.FloatAttr.get(elem, 0.0)).result
    if isinstance(elem, ir.IntegerType):
        return arith.ConstantOp(elem, ir.IntegerAttr.get(elem, 0)).result
    return None


def _to_pad(op: ir.Operation, value: ir.Value, offs: list[int]) -> None:
    """Unit strides into a splat: tensor.pad of the source by the offsets, with the splat as pad value."""
    src = op.operands[0]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(op.results[0].type)
    high = [out_t.shape[d] - offs[d] - src_t.shape[d] for d in range(out_t.rank)]
    with ir.InsertionPoint(op), op.location:
        pad = tensor.PadOp(out_t, src, [], [], offs, high)
        block = pad.regions[0].blocks.append(*([ir.IndexType.get()] * out_t.rank))
        with ir.InsertionPoint(block):
            tensor.YieldOp(value)
    op.results[0].replace_all_uses_with(pad.result)
    op.erase()


def _to_gather(op: ir.Operation, splat: ir.Value | None, offs: list[int], sizes: list[int], strides: list[int],
               kept: list[int]) -> None:
    """out[i] = src[(i - offs) / strides] where i is in the slice, else dest[i] (or the splat)."""
    src, dest = op.operands[0], op.operands[1]
    out_t = ir.RankedTensorType(op.results[0].type)

    def body(i):
        inside, idxs = None, []
        for d in range(out_t.rank):
            ok, q = _slice_index(i[d], offs[d], sizes[d], strides[d], out_t.shape[d])
            if ok is not None:
                inside = ok if inside is None else arith.AndIOp(inside, ok).result
            if d in kept:
                idxs.append(q)
        v = tensor.ExtractOp(src, idxs).result
        if inside is None:
            return v  # the slice covers the whole destination
        other = splat if splat is not None else tensor.ExtractOp(dest, i).result
        return arith.SelectOp(inside, v, other).result

    gather_generic(op, out_t, body)


def _slice_index(i: ir.Value, off: int, size: int, stride: int, extent: int) -> tuple[ir.Value | None, ir.Value]:
    """(whether destination index `i` is in the slice along one dim, None when always; the source index there,
    clamped into the source so that reads stay in bounds where the value is discarded)."""
    if off == 0 and stride == 1 and size == extent:
        return None, i
    j = arith.SubIOp(i, index_const(off)).result if off else i
    if stride == 1:
        return clamped(j, size)
    # In the slice: 0 <= j <= (size - 1) * stride and j % stride == 0.
    ok, _ = clamped(j, (size - 1) * stride + 1)
    on_step = arith.CmpIOp(arith.CmpIPredicate.eq, arith.RemSIOp(j, index_const(stride)).result, index_const(0)).result
    _, q = clamped(arith.DivSIOp(j, index_const(stride)).result, size)
    return arith.AndIOp(ok, on_step).result, q


def _first_line(op: ir.Operation) -> str:
    return str(op).splitlines()[0][:200]
