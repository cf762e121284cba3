"""Gather generics: ops that move data by index (pad, concat, static slices; im2col patches in conv_gemm.py) rebuilt as
elementwise linalg.generic ops whose body reads the source with tensor.extract. Each becomes a kernel of its
own; no tiling ever has to fuse them (windows.py inlines a pad into the depthwise convolution or pool it feeds,
on profiles with `window_taps`).
"""

from __future__ import annotations

from ...errors import UnsupportedOp
from ...ir.linalg_info import VECTOR_GATHER, indexing_maps, is_identity, iterator_types
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import reassociation_groups


def gather_generic(op: ir.Operation, out_t: ir.RankedTensorType, body) -> ir.Value:
    """Replace `op` by an elementwise linalg.generic over `out_t` whose element at index vector `i` is
    `body(i)` (built at the generic's body insertion point; it reads sources with tensor.extract)."""
    rank, elem = out_t.rank, out_t.element_type
    with ir.InsertionPoint(op), op.location:
        empty = tensor.EmptyOp(list(out_t.shape), elem).result
        gen = linalg.GenericOp(
            [out_t], [], [empty], ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
        )
    block = gen.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block), op.location:
        linalg.YieldOp([body([linalg.IndexOp(d).result for d in range(rank)])])
    op.results[0].replace_all_uses_with(gen.results[0])
    op.erase()
    return gen.results[0]


def index_const(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def clamped(j: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
    """(0 <= j < size, j clamped into range): reads stay in bounds even where their value is discarded."""
    zero = index_const(0)
    ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, j, zero).result,
                      arith.CmpIOp(arith.CmpIPredicate.slt, j, index_const(size)).result).result
    return ok, arith.MinSIOp(arith.MaxSIOp(j, zero).result, index_const(size - 1)).result


def static_sizes(values: list[int], what: str) -> list[int]:
    if any(v < -(2**62) or v > 2**62 for v in values):
        raise UnsupportedOp(f"{what} with dynamic offsets/sizes is not supported yet")
    return values


# A gather whose reads may become vector loads (strategy/forms.vector_gathers): "contiguous" where every read runs along
# the innermost loop unchecked (a plain vector load: any target), "lanes" where some read is checked or moved along
# it (a load per lane: OpenCL C only).
MOVE = "portable.move"  # a slice or concat, which gather_fusion.py merges with its elementwise neighbours


def pad_to_generic(pad: ir.Operation, vectorizable: bool = False) -> None:
    """tensor.pad with static sizes -> read the source in bounds, else the pad value. `vectorizable` (a profile
    that vectorizes gathers asks for it): a float pad's unpadded dims read at the output index itself,
    unchecked, so a vectorizer sees a contiguous read along them; the generic is marked VECTOR_GATHER."""
    exact_unpadded = vectorizable and isinstance(ir.RankedTensorType(pad.results[0].type).element_type,
                                                  (ir.F32Type, ir.F16Type))
    src = pad.operands[0]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(pad.results[0].type)
    if not (src_t.has_static_shape and out_t.has_static_shape):
        raise UnsupportedOp("tensor.pad with dynamic sizes is not supported yet")
    low = static_sizes(list(ir.DenseI64ArrayAttr(pad.attributes["static_low"])), "tensor.pad")
    pad_value = list(pad.regions[0].blocks[0].operations)[-1].operands[0]

    def body(i):
        # The pad value may be defined inside the pad's region (a constant): rebuild it here.
        if isinstance(pad_value, ir.OpResult) and pad_value.owner.operation.parent == pad.operation:
            pv = arith.ConstantOp(out_t.element_type, pad_value.owner.attributes["value"]).result
        else:
            pv = pad_value
        inb, idxs = None, []
        for d in range(out_t.rank):
            if exact_unpadded and low[d] == 0 and src_t.shape[d] == out_t.shape[d]:
                idxs.append(i[d])
                continue
            ok, j = clamped(arith.SubIOp(i[d], index_const(low[d])).result, src_t.shape[d])
            inb = ok if inb is None else arith.AndIOp(inb, ok).result
            idxs.append(j)
        v = tensor.ExtractOp(src, idxs).result
        return arith.SelectOp(inb, v, pv).result if inb is not None else v

    gen = gather_generic(pad, out_t, body)
    if exact_unpadded:
        inner = out_t.rank - 1
        contiguous = low[inner] == 0 and src_t.shape[inner] == out_t.shape[inner]
        ir.OpResult(gen).owner.attributes[VECTOR_GATHER] = ir.StringAttr.get("contiguous" if contiguous else "lanes")


def concat_to_generic(op: ir.Operation) -> None:
    """tensor.concat along `dim` -> each output element read from the input whose range holds it."""
    out_t = ir.RankedTensorType(op.results[0].type)
    dim = ir.IntegerAttr(op.attributes["dim"]).value
    ins = list(op.operands)
    sizes = [ir.RankedTensorType(v.type).shape[dim] for v in ins]
    if not out_t.has_static_shape or any(not ir.RankedTensorType(v.type).has_static_shape for v in ins):
        raise UnsupportedOp("tensor.concat with dynamic shapes is not supported yet")

    def body(i):
        value, start = None, 0
        for v, n in zip(ins, sizes):
            if n == 0:
                continue
            _, j = clamped(arith.SubIOp(i[dim], index_const(start)).result, n)
            x = tensor.ExtractOp(v, [j if d == dim else i[d] for d in range(out_t.rank)]).result
            if value is None:
                value = x
            else:  # later inputs win from their start on
                here = arith.CmpIOp(arith.CmpIPredicate.sge, i[dim], index_const(start)).result
                value = arith.SelectOp(here, x, value).result
            start += n
        return value

    gather_generic(op, out_t, body).owner.attributes[MOVE] = ir.UnitAttr.get()


def _broadcast_move(src: ir.Value) -> tuple[ir.Value, list[int]] | None:
    """(its input, the loop dim each input dim reads) when `src` is the result of a linalg.generic that only moves
    data (one input read through distinct loop dims, the body yields it, identity output) and broadcasts it over
    some loop; else None."""
    if not (isinstance(src, ir.OpResult) and src.owner.name == "linalg.generic"):
        return None
    g = src.owner.operation
    if len(g.operands) != 2 or len(g.results) != 1 or any(it != "parallel" for it in iterator_types(g)):
        return None
    body = list(g.regions[0].blocks[0].operations)
    if len(body) != 1 or list(body[0].operands) != [g.regions[0].blocks[0].arguments[0]]:
        return None
    in_map, out_map = indexing_maps(g)
    dims = [ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None for e in in_map.results]
    if not is_identity(out_map) or None in dims or len(set(dims)) != len(dims) or len(dims) == in_map.n_dims:
        return None
    return g.operands[0], dims


def collapse_of_broadcast_to_generic(op: ir.Operation) -> bool:
    """tensor.collapse_shape of a broadcast (`_broadcast_move`: grouped-query attention's keys repeated over the
    query heads of each KV head, then merged into one heads dim) -> a gather reading the broadcast's input, which
    gather_fusion merges with its neighbours and the product that reads it takes in: the repeated keys are never
    written. Whether it changed `op`."""
    found = _broadcast_move(op.operands[0])
    out_t = ir.RankedTensorType(op.results[0].type)
    src_t = ir.RankedTensorType(op.operands[0].type)
    if found is None or not out_t.has_static_shape or not src_t.has_static_shape:
        return False
    source, dims = found
    groups = reassociation_groups(op)
    shape = list(src_t.shape)

    def body(i):
        expanded: dict[int, ir.Value] = {}
        for j, group in enumerate(groups):  # each collapsed index split into its group's dims, innermost fastest
            rest = i[j]
            for d in reversed(group):
                if shape[d] == 1:
                    expanded[d] = index_const(0)
                    continue
                expanded[d] = arith.RemUIOp(rest, index_const(shape[d])).result
                rest = arith.DivUIOp(rest, index_const(shape[d])).result
        return tensor.ExtractOp(source, [expanded[d] for d in dims]).result

    gather_generic(op, out_t, body).owner.attributes[MOVE] = ir.UnitAttr.get()
    return True


def slice_dims(sizes: list[int], shape: list[int], what: str) -> list[int]:
    """The dims of a slice with `sizes` that the sliced tensor of `shape` keeps: a rank-reducing slice drops unit
    dims; keep dims in order while they match the shape."""
    kept: list[int] = []
    for d in range(len(sizes)):
        left_sizes, left_want = len(sizes) - d, len(shape) - len(kept)
        if left_want and sizes[d] == shape[len(kept)] and (sizes[d] != 1 or left_sizes == left_want):
            kept.append(d)
        elif sizes[d] != 1:
            raise UnsupportedOp(f"{what} of shape {shape} does not match its sizes {sizes}")
    if len(kept) != len(shape):
        raise UnsupportedOp(f"{what} of shape {shape} does not match its sizes {sizes}")
    return kept


def extract_slice_to_generic(op: ir.Operation) -> None:
    """tensor.extract_slice with static offsets, sizes, strides (rank-reducing too) -> a strided copy."""
    src = op.operands[0]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(op.results[0].type)
    offs = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])), "tensor.extract_slice")
    sizes = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"])), "tensor.extract_slice")
    strides = static_sizes(list(ir.DenseI64ArrayAttr(op.attributes["static_strides"])), "tensor.extract_slice")
    if len(list(op.operands)) != 1 or not src_t.has_static_shape:
        raise UnsupportedOp("tensor.extract_slice with dynamic offsets/sizes is not supported yet")
    kept = slice_dims(sizes, list(out_t.shape), "tensor.extract_slice")

    def body(i):
        pos = dict(zip(kept, i))
        idxs = []
        for d in range(src_t.rank):
            if d in pos:
                j = arith.AddIOp(arith.MulIOp(pos[d], index_const(strides[d])).result, index_const(offs[d])).result
            else:
                j = index_const(offs[d])
            idxs.append(j)
        return tensor.ExtractOp(src, idxs).result

    gather_generic(op, out_t, body).owner.attributes[MOVE] = ir.UnitAttr.get()


def zero_pad_source(x: ir.Value) -> tuple[ir.Value, list[int]]:
    """(source, low padding) when `x` is a tensor.pad of a constant zero with static amounts, else (x, 0s)."""
    rank = ir.RankedTensorType(x.type).rank
    if isinstance(x, ir.OpResult) and x.owner.operation.name == "tensor.pad":
        pad = x.owner.operation
        value = list(pad.regions[0].blocks[0].operations)[-1].operands[0]
        low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
        if isinstance(value, ir.OpResult) and value.owner.operation.name == "arith.constant" and \
                str(value.owner.attributes["value"]).split(":")[0].strip() in ("0.000000e+00", "0") and \
                all(0 <= v < 2**31 for v in low):
            return pad.operands[0], low
    return x, [0] * rank

