"""3x3 stride-1 convolutions by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, 2015): each 2x2 block
of outputs from a 4x4 input tile with 16 multiplies per input channel instead of 36.

For an NCHW convolution with constant weights g (F, C, 3, 3), over output tiles t = (n, ty, tx) of 2x2 pixels:

- filter transform, at compile time: U[k, c, f] = (G g[f, c] G^T)[k // 4, k % 4], a (16, C, F) constant;
- input transform, a gather generic over the input read as NHWC: V[k, t, c] = (B^T d[t, c] B)[k // 4, k % 4],
  d the 4x4 input tile at rows 2ty - pad .. 2ty - pad + 3 (zero outside the image);
- 16 independent matmuls on the register-blocked batch-matmul path: M[k, t, f] = sum_c V[k, t, c] U[k, c, f];
- output transform, a gather generic: out[n, 2ty + r, 2tx + s, f] = (A^T M[:, t, f] A)[r, s], then a transpose
  to NCHW that carries the convolution's epilogue.

The matmuls do 16 F C multiply-adds per tile where im2col + matmul does 36 (9 per output pixel), and the gathered
matrix holds 16 C values per tile instead of 36. Every coefficient of B^T and A^T is 0 or +-1, so both transforms are
additions and sign flips; G's halves are folded into U. Rounding stays near the direct product's: the zoo's networks
that take this form match onnxruntime to 3e-7 .. 1.1e-4 (max relative error), as they did through im2col.
"""

from __future__ import annotations

import numpy as np

from ...ir.linalg_info import fill_value
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import reassociation_attr
from .conv_epilogue import finish
from .gathers import clamped, gather_generic, index_const
from .horizontal import dense_constant

G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def filter_transform(g: np.ndarray) -> np.ndarray:
    """(F, C, 3, 3) filters -> U (16, C, F), U[4a + b] = (G g G^T)[a, b] transposed, computed in float64."""
    u = np.einsum("ai,fcij,bj->abcf", G, g.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(16, g.shape[1], g.shape[0]).astype(g.dtype))


def tiles(oh: int, ow: int) -> tuple[int, int]:
    """Output tiles of 2x2 pixels over an oh x ow output (the last row/column of tiles half used when odd)."""
    return -(-oh // 2), -(-ow // 2)


def worth_it(c: int, f: int, oh: int, ow: int) -> bool:
    """The matmuls' saving pays for the two transforms: the tiles must be mostly full (a 1-wide output runs half
    empty tiles), and C and F wide enough that the multiply, not the transforms' gathers, dominates (the input
    transform costs about 16 C reads per tile, the output transform 9 F; the product 16 F C)."""
    th, tw = tiles(oh, ow)
    return min(oh, ow) >= 4 and c >= 16 and f >= 16 and 16 * th * tw < 9 * oh * ow * 0.8


def _sel(cond: ir.Value, a: ir.Value, b: ir.Value) -> ir.Value:
    return arith.SelectOp(cond, a, b).result


def _eq(x: ir.Value, v: int) -> ir.Value:
    return arith.CmpIOp(arith.CmpIPredicate.eq, x, index_const(v)).result


def _signed(neg: ir.Value, x: ir.Value) -> ir.Value:
    return _sel(neg, arith.NegFOp(x).result, x)


def input_transform(src: ir.Value, low: tuple[int, int], oh: int, ow: int, before: ir.Operation) -> ir.Value:
    """V (16, N, TH, TW, C) from `src` (N, C, H, W), read as zero outside it and offset by the low padding `low`.
    The input is read as (N, H, W, C) (a transpose first), so that neighbouring channels are neighbouring reads.
    B^T's rows a = 0..3 each take two input rows: (i0, +-1) and (i1, +-1) with i0 = min(a, 1), i1 = 2 + (a == 3),
    negative for (a == 2) at i0 and for a in (0, 3) at i1; the same along the columns."""
    st = ir.RankedTensorType(src.type)
    n, c, h, w = st.shape
    th, tw = tiles(oh, ow)
    elem = st.element_type
    with ir.InsertionPoint(before), before.location:
        nhwc = linalg.transpose(src, outs=[tensor.EmptyOp([n, h, w, c], elem).result], permutation=[0, 2, 3, 1])
        placeholder = tensor.EmptyOp([16, n, th, tw, c], elem)

    def body(ix):
        k, bn, ty, tx, bc = ix
        zero_f = arith.ConstantOp(elem, ir.FloatAttr.get(elem, 0.0)).result
        a = arith.DivUIOp(k, index_const(4)).result
        b = arith.RemUIOp(k, index_const(4)).result

        def taps(x):  # (first offset, its sign is negative, second offset, its sign is negative)
            first = arith.MinUIOp(x, index_const(1)).result
            second = _sel(_eq(x, 3), index_const(3), index_const(2))
            return first, _eq(x, 2), second, arith.OrIOp(_eq(x, 0), _eq(x, 3)).result

        row0 = arith.SubIOp(arith.MulIOp(ty, index_const(2)).result, index_const(low[0])).result
        col0 = arith.SubIOp(arith.MulIOp(tx, index_const(2)).result, index_const(low[1])).result

        def read(i, j):
            ok_h, hh = clamped(arith.AddIOp(row0, i).result, h)
            ok_w, ww = clamped(arith.AddIOp(col0, j).result, w)
            v = tensor.ExtractOp(nhwc, [bn, hh, ww, bc]).result
            return _sel(arith.AndIOp(ok_h, ok_w).result, v, zero_f)

        i0, ni0, i1, ni1 = taps(a)
        j0, nj0, j1, nj1 = taps(b)

        def row(i):
            return arith.AddFOp(_signed(nj0, read(i, j0)), _signed(nj1, read(i, j1))).result

        return arith.AddFOp(_signed(ni0, row(i0)), _signed(ni1, row(i1))).result

    return gather_generic(placeholder.operation, ir.RankedTensorType.get([16, n, th, tw, c], elem), body)


def output_transform(m: ir.Value, n: int, oh: int, ow: int, before: ir.Operation) -> ir.Value:
    """out (N, F, OH, OW) from the products M (16, N*TH*TW, F): A^T's row r sums rows r, r+1, r+2 of the tile, the
    last two negated for r = 1; the same along the columns. The sums run over (N, OH, OW, F), reading M along F
    (an NCHW walk reads one value per cache line of M: 4.3 ms against 0.4 for a 64-channel 56x56 layer on PoCL),
    and a transpose gives the convolution's layout; elementwise consumers (bias, activation, residual add) fuse
    into that transpose."""
    mt = ir.RankedTensorType(m.type)
    f = mt.shape[2]
    elem = mt.element_type
    th, tw = tiles(oh, ow)
    with ir.InsertionPoint(before), before.location:
        placeholder = tensor.EmptyOp([n, oh, ow, f], elem)

    def body(ix):
        bn, y, x, bf = ix
        two = index_const(2)
        r, s = arith.RemUIOp(y, two).result, arith.RemUIOp(x, two).result
        t = arith.AddIOp(arith.MulIOp(arith.AddIOp(arith.MulIOp(bn, index_const(th)).result,
                                                   arith.DivUIOp(y, two).result).result, index_const(tw)).result,
                         arith.DivUIOp(x, two).result).result
        neg_r, neg_s = _eq(r, 1), _eq(s, 1)

        def at(u, v):  # M[4 (r + u) + s + v, t, f]
            k = arith.AddIOp(arith.MulIOp(arith.AddIOp(r, index_const(u)).result, index_const(4)).result,
                             arith.AddIOp(s, index_const(v)).result).result
            return tensor.ExtractOp(m, [k, t, bf]).result

        def row(u):
            tail = arith.AddFOp(at(u, 1), at(u, 2)).result
            return arith.AddFOp(at(u, 0), _signed(neg_s, tail)).result

        tail = arith.AddFOp(row(1), row(2)).result
        return arith.AddFOp(row(0), _signed(neg_r, tail)).result

    nhwf = gather_generic(placeholder.operation, ir.RankedTensorType.get([n, oh, ow, f], elem), body)
    with ir.InsertionPoint(before), before.location:
        t = linalg.transpose(nhwf, outs=[tensor.EmptyOp([n, f, oh, ow], elem).result], permutation=[0, 3, 1, 2])
    return t.results[0] if isinstance(t, ir.OpView) else t


def _products(v: ir.Value, u: ir.Value, elem: ir.Type) -> ir.Value:
    """M[k, t, f] = sum_c V[k, t, c] U[k, c, f]: loops k, t, f, c, from a zero accumulator. The filters are the
    columns: every zoo network's F is a multiple of 8, while the tile count is any number (7x7 outputs: 16 tiles,
    14x14: 49), and the register-blocked matmul vectorizes its columns."""
    k, t, c = ir.RankedTensorType(v.type).shape
    f = ir.RankedTensorType(u.type).shape[2]
    d = [ir.AffineDimExpr.get(i) for i in range(4)]
    maps = [ir.AffineMap.get(4, 0, [d[0], d[1], d[3]]), ir.AffineMap.get(4, 0, [d[0], d[3], d[2]]),
            ir.AffineMap.get(4, 0, [d[0], d[1], d[2]])]
    zero = arith.ConstantOp(elem, ir.FloatAttr.get(elem, 0.0)).result
    acc = linalg.fill(zero, outs=[tensor.EmptyOp([k, t, f], elem).result])
    out_t = ir.RankedTensorType.get([k, t, f], elem)
    gen = linalg.GenericOp([out_t], [v, u], [acc], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                           ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                                             for it in ("parallel", "parallel", "parallel", "reduction")]))
    body = gen.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(body):
        linalg.YieldOp([arith.AddFOp(body.arguments[2], arith.MulFOp(body.arguments[0], body.arguments[1]).result
                                     ).result])
    return gen.results[0]


def product(conv: ir.Operation, src: ir.Value, low: tuple[int, int], g: np.ndarray, oh: int, ow: int,
            elem: ir.Type) -> ir.Value:
    """The convolution of `src` (N, C, H, W; `low` its implicit zero padding) with constant filters `g`
    (F, C, 3, 3), stride 1, as an (N, F, OH, OW) value built before `conv` (no bias: the caller adds the init).
    The images' tiles are the matmuls' rows together."""
    f, c = g.shape[:2]
    n = ir.RankedTensorType(src.type).shape[0]
    th, tw = tiles(oh, ow)
    v5 = input_transform(src, low, oh, ow, conv)
    with ir.InsertionPoint(conv), conv.location:
        v = tensor.CollapseShapeOp(ir.RankedTensorType.get([16, n * th * tw, c], elem), v5,
                                   reassociation_attr([[0], [1, 2, 3], [4]])).result
        u_type = ir.RankedTensorType.get([16, c, f], elem)
        u = arith.ConstantOp(u_type, ir.DenseElementsAttr.get(filter_transform(g), type=u_type)).result
        m = _products(v, u, elem)
    return output_transform(m, n, oh, ow, conv)


def rewrite(conv: ir.Operation, src: ir.Value, low: list[int], w: ir.Value, init: ir.Value, dims: tuple,
            strides: tuple, elem: ir.Type, max_bytes: int) -> bool:
    """Replace NCHW convolution `conv` (its input `src` with implicit zero padding `low`, weights `w`, init
    `init`; dims (batch dims, batch, F, C, KH, KW, OH, OW), strides (sh, sw, dh, dw)) by its Winograd form; False
    (nothing changed) where that does not apply or pay, or where its transformed tiles (16 values per tile and
    channel, in and out) would exceed `max_bytes`."""
    nb, batch, f, c, kh, kw, oh, ow = dims
    if nb != 1 or (kh, kw) != (3, 3) or strides != (1, 1, 1, 1) or not isinstance(elem, ir.F32Type) or \
            any(low[:-2]) or not worth_it(c, f, oh, ow):
        return False
    th, tw = tiles(oh, ow)
    if 16 * batch[0] * th * tw * max(c, f) * 4 > max_bytes:
        return False
    g = dense_constant(w)
    if g is None:
        return False
    res = product(conv, src, (low[-2], low[-1]), g.reshape(f, c, 3, 3), oh, ow, elem)
    scalar = fill_value(init)
    zero = isinstance(scalar, ir.OpResult) and scalar.owner.operation.name == "arith.constant" and \
        ir.FloatAttr(scalar.owner.attributes["value"]).value == 0.0
    finish(conv, res, None, None if zero else init)
    return True
