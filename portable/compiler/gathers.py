"""Gather generics: ops that move data by index (pad, concat, static slices, im2col patches) rebuilt as
elementwise linalg.generic ops whose body reads the source with tensor.extract. Each becomes a kernel of its
own; no tiling ever has to fuse them.
"""

from __future__ import annotations

from ..errors import UnsupportedOp
from .linalg_info import classify, indexing_maps, iterator_types, num_inputs
from .mlir import arith, ir, linalg, tensor


def _gather_generic(op: ir.Operation, out_t: ir.RankedTensorType, body) -> ir.Value:
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


def _idx(v: int) -> ir.Value:
    return arith.ConstantOp(ir.IndexType.get(), v).result


def _clamped(j: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
    """(0 <= j < size, j clamped into range): reads stay in bounds even where their value is discarded."""
    zero = _idx(0)
    ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, j, zero).result,
                      arith.CmpIOp(arith.CmpIPredicate.slt, j, _idx(size)).result).result
    return ok, arith.MinSIOp(arith.MaxSIOp(j, zero).result, _idx(size - 1)).result


def _static(values: list[int], what: str) -> list[int]:
    if any(v < -(2**62) or v > 2**62 for v in values):
        raise UnsupportedOp(f"{what} with dynamic offsets/sizes is not supported yet")
    return values


def pad_to_generic(pad: ir.Operation) -> None:
    """tensor.pad with static sizes -> read the source in bounds, else the pad value."""
    src = pad.operands[0]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(pad.results[0].type)
    if not (src_t.has_static_shape and out_t.has_static_shape):
        raise UnsupportedOp("tensor.pad with dynamic sizes is not supported yet")
    low = _static(list(ir.DenseI64ArrayAttr(pad.attributes["static_low"])), "tensor.pad")
    pad_value = list(pad.regions[0].blocks[0].operations)[-1].operands[0]

    def body(i):
        # The pad value may be defined inside the pad's region (a constant): rebuild it here.
        if isinstance(pad_value, ir.OpResult) and pad_value.owner.operation.parent == pad.operation:
            pv = arith.ConstantOp(out_t.element_type, pad_value.owner.attributes["value"]).result
        else:
            pv = pad_value
        inb, idxs = None, []
        for d in range(out_t.rank):
            ok, j = _clamped(arith.SubIOp(i[d], _idx(low[d])).result, src_t.shape[d])
            inb = ok if inb is None else arith.AndIOp(inb, ok).result
            idxs.append(j)
        v = tensor.ExtractOp(src, idxs).result
        return arith.SelectOp(inb, v, pv).result if inb is not None else v

    _gather_generic(pad, out_t, body)


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
            _, j = _clamped(arith.SubIOp(i[dim], _idx(start)).result, n)
            x = tensor.ExtractOp(v, [j if d == dim else i[d] for d in range(out_t.rank)]).result
            if value is None:
                value = x
            else:  # later inputs win from their start on
                here = arith.CmpIOp(arith.CmpIPredicate.sge, i[dim], _idx(start)).result
                value = arith.SelectOp(here, x, value).result
            start += n
        return value

    _gather_generic(op, out_t, body)


def extract_slice_to_generic(op: ir.Operation) -> None:
    """tensor.extract_slice with static offsets, sizes, strides (rank-reducing too) -> a strided copy."""
    src = op.operands[0]
    src_t, out_t = ir.RankedTensorType(src.type), ir.RankedTensorType(op.results[0].type)
    offs = _static(list(ir.DenseI64ArrayAttr(op.attributes["static_offsets"])), "tensor.extract_slice")
    sizes = _static(list(ir.DenseI64ArrayAttr(op.attributes["static_sizes"])), "tensor.extract_slice")
    strides = _static(list(ir.DenseI64ArrayAttr(op.attributes["static_strides"])), "tensor.extract_slice")
    if len(list(op.operands)) != 1 or not src_t.has_static_shape:
        raise UnsupportedOp("tensor.extract_slice with dynamic offsets/sizes is not supported yet")
    # A rank-reducing slice drops unit dims: keep dims in order while they match the result's shape.
    kept, want = [], list(out_t.shape)
    for d in range(src_t.rank):
        left_src, left_want = src_t.rank - d, len(want) - len(kept)
        if left_want and sizes[d] == want[len(kept)] and (sizes[d] != 1 or left_src == left_want):
            kept.append(d)
        elif sizes[d] != 1:
            raise UnsupportedOp(f"tensor.extract_slice result {out_t} does not match its sizes {sizes}")
    if len(kept) != len(want):
        raise UnsupportedOp(f"tensor.extract_slice result {out_t} does not match its sizes {sizes}")

    def body(i):
        pos = dict(zip(kept, i))
        idxs = []
        for d in range(src_t.rank):
            if d in pos:
                j = arith.AddIOp(arith.MulIOp(pos[d], _idx(strides[d])).result, _idx(offs[d])).result
            else:
                j = _idx(offs[d])
            idxs.append(j)
        return tensor.ExtractOp(src, idxs).result

    _gather_generic(op, out_t, body)


def _zero_pad_source(x: ir.Value) -> tuple[ir.Value, list[int]]:
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


def _nhwc_conv_params(op: ir.Operation) -> tuple[int, int, int, int] | None:
    """(sh, sw, dh, dw) when `op` is a generalized NHWC/HWCF 2-D convolution, else None."""
    import re

    if op.name != "linalg.generic" or num_inputs(op) != 2 or classify(op).kind != "conv":
        return None
    if iterator_types(op) != ["parallel"] * 4 + ["reduction"] * 3:
        return None
    x_map, w_map, o_map = (str(m) for m in indexing_maps(op))
    if w_map.split("->")[1].strip() != "(d4, d5, d6, d3)" or o_map.split("->")[1].strip() != "(d0, d1, d2, d3)":
        return None
    m = re.fullmatch(r"\(d0, d1(?: \* (\d+))? \+ d4(?: \* (\d+))?, d2(?: \* (\d+))? \+ d5(?: \* (\d+))?, d6\)",
                     x_map.split("->")[1].strip())
    if not m:
        return None
    sh, dh, sw, dw = (int(g) if g else 1 for g in m.groups())
    return sh, sw, dh, dw


def conv_to_im2col_matmul(conv: ir.Operation, max_bytes: int) -> bool:
    """linalg.conv_2d_nhwc_hwcf -> patches gathered into an (N*OH*OW, KH*KW*C) matrix, times the filter as
    a (KH*KW*C, F) matrix: the convolution runs on the register-blocked matmul path (implicit padding is
    folded into the gather). Skipped (False) when the patch matrix would exceed `max_bytes`."""
    params = _nhwc_conv_params(conv)
    if params is None:
        return False
    x, w = conv.operands[0], conv.operands[1]
    init = conv.operands[2]
    out_t = ir.RankedTensorType(conv.results[0].type)
    w_t = ir.RankedTensorType(w.type)
    n, oh, ow, f = out_t.shape
    kh, kw, c, _ = w_t.shape
    elem = out_t.element_type
    if ir.RankedTensorType(x.type).element_type != elem or w_t.element_type != elem:
        return False
    if n * oh * ow * kh * kw * c * max(elem.width // 8, 1) > max_bytes:
        return False
    sh, sw, dh, dw = params
    src, low = _zero_pad_source(x)
    src_t = ir.RankedTensorType(src.type)
    cols_t = ir.RankedTensorType.get([n, oh, ow, kh, kw, c], elem)
    m, k = n * oh * ow, kh * kw * c
    i64 = ir.IntegerType.get_signless(64)

    def reassoc(groups):
        return ir.ArrayAttr.get([ir.ArrayAttr.get([ir.IntegerAttr.get(i64, d) for d in g]) for g in groups])

    with ir.InsertionPoint(conv), conv.location:
        placeholder = tensor.EmptyOp([n, oh, ow, kh, kw, c], elem)
    zero_attr = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)

    def body(i):
        bn, boh, bow, bkh, bkw, bc = i
        h = arith.SubIOp(arith.AddIOp(arith.MulIOp(boh, _idx(sh)).result, arith.MulIOp(bkh, _idx(dh)).result).result,
                         _idx(low[1])).result
        wv = arith.SubIOp(arith.AddIOp(arith.MulIOp(bow, _idx(sw)).result, arith.MulIOp(bkw, _idx(dw)).result).result,
                          _idx(low[2])).result
        ok_h, h = _clamped(h, src_t.shape[1])
        ok_w, wv = _clamped(wv, src_t.shape[2])
        v = tensor.ExtractOp(src, [bn, h, wv, bc]).result
        if low[1] or low[2] or src_t.shape[1] < (oh - 1) * sh + (kh - 1) * dh + 1 or \
                src_t.shape[2] < (ow - 1) * sw + (kw - 1) * dw + 1:
            v = arith.SelectOp(arith.AndIOp(ok_h, ok_w).result, v, arith.ConstantOp(elem, zero_attr).result).result
        return v

    cols = _gather_generic(placeholder.operation, cols_t, body)
    with ir.InsertionPoint(conv), conv.location:
        a = tensor.CollapseShapeOp(ir.RankedTensorType.get([m, k], elem), cols, reassoc([[0, 1, 2], [3, 4, 5]])).result
        b = tensor.CollapseShapeOp(ir.RankedTensorType.get([k, f], elem), w, reassoc([[0, 1, 2], [3]])).result
        producer = init.owner.operation if isinstance(init, ir.OpResult) else None
        if producer is not None and producer.name == "linalg.generic" and classify(producer).kind == "fill":
            # A fresh fill at the matmul's shape fuses into its kernel (a reshaped one would stay on the host).
            scalar = list(producer.regions[0].blocks[0].operations)[-1].operands[0]
            acc = linalg.fill(scalar, outs=[tensor.EmptyOp([m, f], elem).result])
        else:
            acc = tensor.CollapseShapeOp(ir.RankedTensorType.get([m, f], elem), init,
                                         reassoc([[0, 1, 2], [3]])).result
        mm = linalg.matmul(a, b, outs=[acc])
        res = tensor.ExpandShapeOp(out_t, mm, reassoc([[0, 1, 2], [3]]), [], [n, oh, ow, f]).result
    conv.results[0].replace_all_uses_with(res)
    conv.erase()
    return True


def convs_to_matmul(func_op: ir.Operation, max_bytes: int) -> None:
    """Every (generalized) NHWC convolution whose patch matrix fits `max_bytes` becomes im2col + matmul.
    Runs after elementwise fusion, so the patch gather stays its own kernel and the matmul vectorizes."""
    for op in list(func_op.regions[0].blocks[0].operations):
        if op.name == "linalg.generic":
            conv_to_im2col_matmul(op, max_bytes)
    for op in list(func_op.regions[0].blocks[0].operations):  # pads the gathers now read through
        # Every result unused: a multi-result generic (ArgMax's value + index) may have only its first one dead.
        if op.name in ("tensor.pad", "linalg.generic") and not any(list(r.uses) for r in op.results):
            op.erase()
