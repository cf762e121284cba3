"""The forms of an NCHW convolution's implicit GEMM that conv_gemm.nchw_conv_to_matmul picks besides its plain one,
each taking constant weights: the reduction padded to a multiple (`padded_k`), one pixel as a row vector
(`one_pixel`), and the transposed product with the pixels (of one image or a batch) as rows (`transposed`)."""

from __future__ import annotations

import numpy as np

from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import reassociation_attr
from .conv_epilogue import collapse, fill_accumulator, finish, prod, zero_attr
from .gathers import clamped, gather_generic, index_const
from .horizontal import dense_constant


def spatial(bh: ir.Value, bk: ir.Value, s: int, d: int, low: int) -> ir.Value:
    """An input row (or column) index: output position bh times stride s plus tap bk times dilation d, less the
    low pad."""
    h = arith.AddIOp(arith.MulIOp(bh, index_const(s)).result, arith.MulIOp(bk, index_const(d)).result).result
    return arith.SubIOp(h, index_const(low)).result


def padded_k(conv: ir.Operation, src: ir.Value, low: list[int], w: ir.Value, init: ir.Value,
             groups: list[list[int]], dims: tuple, strides: tuple, elem: ir.Type, k_padded: int) -> bool:
    """nchw_conv_to_matmul's plain form for one image and group with the reduction padded to `k_padded`: patches
    gathered as (k_padded, OH*OW) over k = (c, kh, kw) flattened, zero past C*KH*KW, times the weights as an
    (F, k_padded) constant with zero columns there. False (nothing changed) unless the weights are a constant."""
    wv = dense_constant(w)
    if wv is None:
        return False
    f, c, kh, kw, oh, ow, h, wd = dims
    sh, sw, dh, dw = strides
    k, p = c * kh * kw, oh * ow
    with ir.InsertionPoint(conv), conv.location:
        placeholder = tensor.EmptyOp([k_padded, oh, ow], elem)

    def body(ix):
        bk, boh, bow = ix
        real = arith.CmpIOp(arith.CmpIPredicate.slt, bk, index_const(k)).result
        bk = arith.MinSIOp(bk, index_const(k - 1)).result  # the padded rows read a real element, then drop it
        bc = arith.DivSIOp(bk, index_const(kh * kw)).result
        r = arith.RemSIOp(bk, index_const(kh * kw)).result
        bkh, bkw = arith.DivSIOp(r, index_const(kw)).result, arith.RemSIOp(r, index_const(kw)).result
        ok_h, hh = clamped(spatial(boh, bkh, sh, dh, low[-2]), h)
        ok_w, ww = clamped(spatial(bow, bkw, sw, dw, low[-1]), wd)
        v = tensor.ExtractOp(src, [index_const(0), bc, hh, ww]).result
        ok = arith.AndIOp(arith.AndIOp(ok_h, ok_w).result, real).result
        return arith.SelectOp(ok, v, arith.ConstantOp(elem, zero_attr(elem)).result).result

    cols = gather_generic(placeholder.operation, ir.RankedTensorType.get([k_padded, oh, ow], elem), body)
    with ir.InsertionPoint(conv), conv.location:
        patches = collapse(cols, [[0], [1, 2]])
        wpad = np.zeros((f, k_padded), dtype=wv.dtype)
        wpad[:, :k] = wv.reshape(f, k)
        w_type = ir.RankedTensorType.get([f, k_padded], elem)
        wmat = arith.ConstantOp(w_type, ir.DenseElementsAttr.get(wpad, type=w_type)).result
        acc, rest = fill_accumulator(init, [f, p], elem)
        mm = linalg.matmul(wmat, patches, outs=[acc])
    finish(conv, mm, groups, rest)
    return True


def one_pixel(conv: ir.Operation, src: ir.Value, w: ir.Value, init: ir.Value, c: int, f: int,
              elem: ir.Type) -> bool:
    """A 1x1 convolution over one pixel (squeeze-and-excitation, a classifier head after global pooling) as the
    row-vector product x (1, C) times the filter transposed at compile time, (C, F): the vector's and the result's
    bytes are the same in either orientation, so no copy is made, and the strategies take it as a matrix-vector
    product with the filters as vector columns (as (F, C) times (C, 1) one thread took a whole column of filters over
    a scalar loop). False (nothing changed) unless the weights are a constant."""
    wv = dense_constant(w)
    if wv is None:
        return False
    with ir.InsertionPoint(conv), conv.location:
        x = collapse(src, [[0], [1, 2, 3]])
        wt_type = ir.RankedTensorType.get([c, f], elem)
        wt = arith.ConstantOp(wt_type, ir.DenseElementsAttr.get(
            np.ascontiguousarray(wv.reshape(f, c).T), type=wt_type)).result
        acc, rest = fill_accumulator(init, [1, f], elem)
        mm = linalg.matmul(x, wt, outs=[acc])
    finish(conv, mm, [[0], [1, 2, 3]], rest)
    return True


def transposed(conv: ir.Operation, src: ir.Value, low: list[int], w: ir.Value, init: ir.Value,
               groups: list[list[int]], dims: tuple, strides: tuple, elem: ir.Type, f_multiple: int = 1,
               images: int = 1) -> bool:
    """nchw_conv_to_matmul's transposed form for one group of `images` images, their pixels the rows of one
    matmul; False (nothing changed) unless the weights are a constant. A filter count that `f_multiple` does not
    divide is padded to one it does with zero filters, whose columns the transpose back leaves out, where that adds
    at most 1/16 of the work: the product's columns are the register tile's vectors (SqueezeNet's 1000 classifier
    filters had 4-wide ones). The slice costs a copy kernel, which smaller counts (40, 120) would not pay back."""
    wv = dense_constant(w)
    if wv is None:
        return False
    f, c, kh, kw, oh, ow, h, wd = dims
    sh, sw, dh, dw = strides
    p, k = oh * ow, c * kh * kw
    rows = images * p
    masked = any(low) or h < (oh - 1) * sh + (kh - 1) * dh + 1 or wd < (ow - 1) * sw + (kw - 1) * dw + 1
    with ir.InsertionPoint(conv), conv.location:
        placeholder = tensor.EmptyOp([rows, k], elem)

    def split(i: ir.Value, sizes: list[int]) -> list[ir.Value]:
        """Flat index `i` over row-major `sizes` -> one index per size (no division for a size of 1)."""
        out = []
        for j, n in enumerate(sizes):
            inner = prod(sizes[j + 1:])
            q = i if inner == 1 else arith.DivUIOp(i, index_const(inner)).result
            out.append(index_const(0) if n == 1 else q if j == 0 else arith.RemUIOp(q, index_const(n)).result)
        return out

    def body(ix):
        (bn, boh, bow), (bc, bkh, bkw) = split(ix[0], [images, oh, ow]), split(ix[1], [c, kh, kw])
        ok_h, hh = clamped(spatial(boh, bkh, sh, dh, low[-2]), h)
        ok_w, ww = clamped(spatial(bow, bkw, sw, dw, low[-1]), wd)
        v = tensor.ExtractOp(src, [bn, bc, hh, ww]).result
        if masked:
            zero = arith.ConstantOp(elem, zero_attr(elem)).result
            v = arith.SelectOp(arith.AndIOp(ok_h, ok_w).result, v, zero).result
        return v

    # Gathered over (pixel, tap) flat: over (oh, ow, c, kh, kw) the threads of a workgroup took only the small
    # innermost loops (a 1x1 convolution's channels, a stem's 3x3x3), and lavapipe ran one 16-64-thread workgroup
    # per pixel (12321 of them for SqueezeNet's 111x111 stem: 18 ms).
    patches = gather_generic(placeholder.operation, ir.RankedTensorType.get([rows, k], elem), body)
    fp = -(-f // f_multiple) * f_multiple
    fp = fp if 16 * (fp - f) <= f else f
    with ir.InsertionPoint(conv), conv.location:
        wt_type = ir.RankedTensorType.get([k, fp], elem)
        wt_value = np.zeros((k, fp), dtype=wv.dtype)
        wt_value[:, :f] = wv.reshape(f, k).T
        wt = arith.ConstantOp(wt_type, ir.DenseElementsAttr.get(wt_value, type=wt_type)).result
        acc, rest = fill_accumulator(init, [rows, fp], elem)
        mm = linalg.matmul(patches, wt, outs=[acc])
        if fp != f:
            mm = tensor.extract_slice(ir.RankedTensorType.get([rows, f], elem), mm, [], [], [], [0, 0], [rows, f],
                                      [1, 1])
        if images == 1:
            back = linalg.transpose(mm, outs=[tensor.EmptyOp([f, p], elem).result], permutation=[1, 0])
        else:
            per_image = tensor.ExpandShapeOp(ir.RankedTensorType.get([images, p, f], elem), mm,
                                             reassociation_attr([[0, 1], [2]]), [], [images, p, f]).result
            back = linalg.transpose(per_image, outs=[tensor.EmptyOp([images, f, p], elem).result],
                                    permutation=[0, 2, 1])
    finish(conv, back, groups, rest)
    return True
