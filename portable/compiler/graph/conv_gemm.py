"""Convolutions as implicit GEMM: patches gathered into a matrix (im2col, a gather generic of its own), times the
filter as a matrix, on the register-blocked matmul path; 1x1 stride-1 convolutions need no gather at all.

- NHWC x HWCF: out[(n,oh,ow), f] = patches[(n,oh,ow), (kh,kw,c)] x W[(kh,kw,c), f].
- NCHW x FCHW (ONNX; grouped as NGCHW x GFCHW): out[f, (oh,ow)] = W[f, (c,kh,kw)] x patches[(c,kh,kw), (oh,ow)]
  per image (and group): the weights and the result keep their own layouts, so no transpose is needed.

The matmul's result is reshaped to the convolution's; elementwise consumers of that reshape (bias, folded
BatchNorm scale/shift, ReLU/Clip, residual add) are rebuilt on the matmul's layout (conv_epilogue.py), so dispatch
formation fuses them in place into the matmul's kernel. 3x3 stride-1 convolutions may take Winograd's form instead
(winograd.py). Depthwise convolutions stay direct. The NCHW forms besides the plain one (padded K, one pixel,
transposed) are in conv_forms.py.
"""

from __future__ import annotations

import re

from ...ir.linalg_info import indexing_maps, iterator_types, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from . import winograd as wino
from .conv_epilogue import collapse, fill_accumulator, finish, prod, sink_expand, zero_attr
from .conv_forms import one_pixel, padded_k, spatial, transposed
from .gathers import clamped, gather_generic, index_const, zero_pad_source


def _nhwc_conv_params(its: list[str], x_map: str, w_map: str, o_map: str) -> tuple[int, int, int, int] | None:
    """(sh, sw, dh, dw) when loops `its` and the maps' results are those of a generalized NHWC/HWCF 2-D
    convolution, else None."""
    if its != ["parallel"] * 4 + ["reduction"] * 3 or w_map != "(d4, d5, d6, d3)" or o_map != "(d0, d1, d2, d3)":
        return None
    m = re.fullmatch(r"\(d0, d1(?: \* (\d+))? \+ d4(?: \* (\d+))?, d2(?: \* (\d+))? \+ d5(?: \* (\d+))?, d6\)", x_map)
    if not m:
        return None
    sh, dh, sw, dw = (int(g) if g else 1 for g in m.groups())
    return sh, sw, dh, dw


def _map_results(conv: ir.Operation) -> tuple[list[str], str, str, str]:
    """(iterators, x map, w map, output map results) of a plain two-input convolution (see _plain_conv)."""
    return (iterator_types(conv), *(str(m).split("->")[1].strip() for m in indexing_maps(conv)))


def _conv_roles(op: ir.Operation) -> tuple[int, list[int]] | None:
    """(weight input, other inputs) of an NHWC or NCHW convolution: a generic whose body is `out + a * w` with `w`
    an input's element as is and `a` computed from the other inputs (their producers fused in by elementwise
    fusion: a prologue), all read through one map; None for anything else."""
    if op.name != "linalg.generic" or len(op.results) != 1 or "reduction" not in iterator_types(op):
        return None
    nin = num_inputs(op)
    if nin < 2 or len(list(op.operands)) != nin + 1:
        return None
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    y = list(block.operations)[-1].operands[0]
    add = y.owner if isinstance(y, ir.OpResult) else None
    if add is None or add.operation.name not in ("arith.addf", "arith.addi") or args[nin] not in list(add.operands):
        return None
    mul_v = [v for v in add.operands if v != args[nin]]
    mul = mul_v[0].owner if len(mul_v) == 1 and isinstance(mul_v[0], ir.OpResult) else None
    if mul is None or mul.operation.name not in ("arith.mulf", "arith.muli") or len(list(args[nin].uses)) != 1:
        return None
    maps = [str(m).split("->")[1].strip() for m in indexing_maps(op)]
    its = iterator_types(op)
    for wi in [i for i in range(nin) if args[i] in list(mul.operands)]:
        others = [i for i in range(nin) if i != wi]
        if len(set(maps[i] for i in others)) != 1 or len(list(args[wi].uses)) != 1:
            continue
        if _nhwc_conv_params(its, maps[others[0]], maps[wi], maps[-1]) or \
                _nchw_conv_params(its, maps[others[0]], maps[wi], maps[-1]):
            return wi, others
    return None


def _plain_conv(op: ir.Operation, wi: int, others: list[int]) -> ir.Operation | None:
    """`op` as a convolution of two inputs (x, w) whose body is `out + x * w`: a prologue in the body (a ReLU of
    the previous layer fused in by elementwise fusion) becomes an elementwise op of its own that computes x, which
    `sink_expand` can then fuse into the previous layer's kernel. None when the prologue's inputs differ in shape."""
    nin = num_inputs(op)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    ops = list(block.operations)
    add = ops[-1].operands[0].owner
    mul = next(v.owner for v in add.operands if v != args[nin])
    a = next(v for v in mul.operands if v != args[wi])
    ins = list(op.operands)
    if nin == 2 and a == args[others[0]]:
        plain = [o.operation.name for o in ops] == [mul.operation.name, add.operation.name, "linalg.yield"]
        return op if plain and wi == 1 else None
    shapes = {tuple(ir.RankedTensorType(ins[i].type).shape) for i in others}
    elem = ir.RankedTensorType(ins[wi].type).element_type
    if len(shapes) != 1 or a.type != elem or ir.RankedTensorType(op.results[0].type).element_type != elem:
        return None
    shape = list(shapes.pop())
    maps = indexing_maps(op)
    rank = len(shape)
    with ir.InsertionPoint(op), op.location:
        pro = linalg.GenericOp(
            [ir.RankedTensorType.get(shape, elem)], [ins[i] for i in others], [tensor.EmptyOp(shape, elem).result],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))] * (len(others) + 1)),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank))
    pblock = pro.regions[0].blocks.append(*[ir.RankedTensorType(ins[i].type).element_type for i in others], elem)
    remap = {args[i]: pblock.arguments[j] for j, i in enumerate(others)}
    with ir.InsertionPoint(pblock):
        for o in ops[:-1]:
            if o.operation in (mul.operation, add.operation):
                continue
            c = o.operation.clone().operation
            for old, new in remap.items():
                c.replace_uses_of_with(old, new)
            for r_old, r_new in zip(o.results, c.results):
                remap[r_old] = r_new
        linalg.YieldOp([remap[a]])
    with ir.InsertionPoint(op), op.location:
        conv = linalg.GenericOp([op.results[0].type], [pro.results[0], ins[wi]], [ins[nin]],
                                ir.ArrayAttr.get([ir.AffineMapAttr.get(maps[i]) for i in (others[0], wi, nin)]),
                                op.attributes["iterator_types"])
    cblock = conv.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(cblock):
        fl = isinstance(elem, ir.FloatType)
        prod = (arith.MulFOp if fl else arith.MulIOp)(cblock.arguments[0], cblock.arguments[1]).result
        linalg.YieldOp([(arith.AddFOp if fl else arith.AddIOp)(cblock.arguments[2], prod).result])
    op.results[0].replace_all_uses_with(conv.results[0])
    op.erase()
    return conv.operation


def _same_elem(conv: ir.Operation) -> ir.Type | None:
    elem = ir.RankedTensorType(conv.results[0].type).element_type
    if any(ir.RankedTensorType(v.type).element_type != elem for v in list(conv.operands)[:2]):
        return None  # widening convolutions (i8 in, i32 out) stay direct
    return elem


def nhwc_conv_to_matmul(conv: ir.Operation, max_bytes: int) -> bool:
    """linalg.conv_2d_nhwc_hwcf -> patches gathered into an (N*OH*OW, KH*KW*C) matrix, times the filter as a
    (KH*KW*C, F) matrix (implicit padding folded into the gather). Skipped (False) when the patch matrix would
    exceed `max_bytes`. A 1x1 stride-1 unpadded convolution multiplies the input viewed as (N*H*W, C): no gather
    kernel copies it (H200, 8x56x56x64->256: 47.2 -> 29.1 us on Vulkan, 50.5 -> 30.5 on OpenCL;
    benchmarks/results/h200/session20/conv_1x1_view.json)."""
    params = _nhwc_conv_params(*_map_results(conv))
    elem = _same_elem(conv) if params else None
    if elem is None:
        return False
    x, w, init = conv.operands[0], conv.operands[1], conv.operands[2]
    n, oh, ow, f = ir.RankedTensorType(conv.results[0].type).shape
    kh, kw, c, _ = ir.RankedTensorType(w.type).shape
    sh, sw, dh, dw = params
    src, low = zero_pad_source(x)
    src_t = ir.RankedTensorType(src.type)
    m = n * oh * ow
    if (kh, kw, sh, sw) == (1, 1, 1, 1) and src == x and list(src_t.shape[1:3]) == [oh, ow]:
        with ir.InsertionPoint(conv), conv.location:
            _matmul(conv, collapse(x, [[0, 1, 2], [3]]), w, init, m, f, elem)
        return True
    if n * oh * ow * kh * kw * c * max(elem.width // 8, 1) > max_bytes:
        return False
    masked = low[1] or low[2] or src_t.shape[1] < (oh - 1) * sh + (kh - 1) * dh + 1 or \
        src_t.shape[2] < (ow - 1) * sw + (kw - 1) * dw + 1
    with ir.InsertionPoint(conv), conv.location:
        placeholder = tensor.EmptyOp([n, oh, ow, kh, kw, c], elem)

    def body(i):
        bn, boh, bow, bkh, bkw, bc = i
        ok_h, h = clamped(spatial(boh, bkh, sh, dh, low[1]), src_t.shape[1])
        ok_w, wv = clamped(spatial(bow, bkw, sw, dw, low[2]), src_t.shape[2])
        v = tensor.ExtractOp(src, [bn, h, wv, bc]).result
        if masked:
            zero = arith.ConstantOp(elem, zero_attr(elem)).result
            v = arith.SelectOp(arith.AndIOp(ok_h, ok_w).result, v, zero).result
        return v

    cols = gather_generic(placeholder.operation, ir.RankedTensorType.get([n, oh, ow, kh, kw, c], elem), body)
    with ir.InsertionPoint(conv), conv.location:
        _matmul(conv, collapse(cols, [[0, 1, 2], [3, 4, 5]]), w, init, m, f, elem)
    return True


def _matmul(conv: ir.Operation, a: ir.Value, w: ir.Value, init: ir.Value, m: int, f: int, elem: ir.Type) -> None:
    """conv's result as the (M, K) patch matrix `a` times the HWCF filter viewed as (K, F)."""
    b = collapse(w, [[0, 1, 2], [3]])
    acc, rest = fill_accumulator(init, [m, f], elem)
    mm = linalg.matmul(a, b, outs=[acc])
    finish(conv, mm, [[0, 1, 2], [3]], rest)


def _nchw_conv_params(its: list[str], x_map: str, w_map: str, o_map: str) -> tuple[int, int, int, int, int] | None:
    """(batch dims, sh, sw, dh, dw) when loops `its` and the maps' results are those of a generalized NCHW x FCHW
    convolution (1 batch dim, n) or a grouped NGCHW x GFCHW one (2 batch dims, n and g); else None. Loops: batch
    dims, f, oh, ow, c, kh, kw."""
    nb = its.count("parallel") - 3
    if nb not in (1, 2) or its != ["parallel"] * (nb + 3) + ["reduction"] * 3:
        return None
    r = nb + 3
    d = [f"d{i}" for i in range(r + 3)]
    if o_map != f"({', '.join(d[:r])})" or w_map != f"({', '.join(d[1:nb + 1] + d[r:])})":
        return None
    sp = r"{}(?: \* (\d+))? \+ {}(?: \* (\d+))?"
    m = re.fullmatch(r"\(" + ", ".join(d[:nb] + [d[r], sp.format(d[nb + 1], d[r + 1]), sp.format(d[nb + 2], d[r + 2])])
                     + r"\)", x_map)
    if not m:
        return None
    sh, dh, sw, dw = (int(g) if g else 1 for g in m.groups())
    return nb, sh, sw, dh, dw


def nchw_conv_to_matmul(conv: ir.Operation, max_bytes: int, pixel_multiple: int = 0, k_multiple: int = 0,
                        winograd: bool = False, row_vectors: bool = False, batch_rows: bool = False) -> bool:
    """linalg.conv_2d_nchw_fchw (and conv_2d_ngchw_gfchw) -> per image and group, W as an (F, C*KH*KW) matrix
    times patches as a (C*KH*KW, OH*OW) matrix: a plain matmul for one image and group, a batched one otherwise.
    A 1x1 stride-1 unpadded convolution multiplies the input viewed as (C, H*W) with no gather. Skipped (False)
    when a patch matrix is needed and would exceed `max_bytes`.

    Transposed form (one image and group, constant weights, OH*OW not a multiple of `pixel_multiple`): patches
    gathered as (OH*OW, C*KH*KW) times the filter transposed at compile time to (C*KH*KW, F), then the (OH*OW, F)
    product transposed back to (F, OH*OW). The register-blocked matmul vectorizes its columns: in the plain form
    those are the pixels, and a ragged count (7x7 = 49 at the end of ResNet and MobileNet) left one pixel per
    thread with scalar strided patch reads; here the columns are the filters (a multiple of 8 in every zoo CV
    network). The extra transpose and the patch copy of a 1x1 convolution move OH*OW*F and OH*OW*C elements,
    small next to the K-long reductions they save; a 1x1 stride-1 convolution whose pixels fill 4-wide vectors
    keeps the plain form, which needs no copy at all.

    `row_vectors` (a profile with matmul_row_vector_cols) turns a 1x1 convolution over one pixel with constant
    weights into a row-vector product (_one_pixel).

    `k_multiple` (the profile's conv_k_multiple): in the plain gathered form for one image and group with constant
    weights, a reduction length C*KH*KW that it does not divide (a stem's 3*7*7 = 147, 3*3*3 = 27) is padded to
    one it does: zero patch rows and zero weight columns, so that the matmul steps K by whole vectors
    (ResNet's stem on lavapipe: 3.9 GFLOP/s with K = 147, 18 with K = 196).

    `winograd` (the profile's conv_winograd): a 3x3 stride-1 convolution with constant f32 weights,
    wide enough for it to pay (winograd.worth_it), runs as F(2x2, 3x3) (winograd.py) instead.

    `batch_rows` (the profile's conv_batch_rows): a batch of images with constant weights (one group) and fewer
    than BATCH_ROWS_PIXELS output pixels each takes the transposed form with every image's pixels as rows of one
    matmul. On PoCL its copies cost more than they save
    (8 x 128 x 28 x 28 -> 512 1x1: 21 -> 31 ms, 2026-12-07), so CPU-driver profiles keep per-image products."""
    params = _nchw_conv_params(*_map_results(conv))
    elem = _same_elem(conv) if params else None
    if elem is None:
        return False
    nb, sh, sw, dh, dw = params
    x, w, init = conv.operands[0], conv.operands[1], conv.operands[2]
    out_shape = list(ir.RankedTensorType(conv.results[0].type).shape)
    batch, f, oh, ow = out_shape[:nb], out_shape[nb], out_shape[nb + 1], out_shape[nb + 2]
    w_shape = list(ir.RankedTensorType(w.type).shape)
    c, kh, kw = w_shape[-3:]
    src, low = zero_pad_source(x)
    src_t = ir.RankedTensorType(src.type)
    h, wd = src_t.shape[-2:]
    direct_view = kh == kw == 1 and sh == sw == 1 and not any(low) and (h, wd) == (oh, ow)
    if not direct_view and prod(batch) * c * kh * kw * oh * ow * max(elem.width // 8, 1) > max_bytes:
        return False
    kept = [i for i in range(nb) if batch[i] > 1]  # batch dims the matmul keeps; unit ones are dropped
    # The result's dims grouped into the matmul's: unit batch dims join the next group; f; (oh, ow).
    groups, pending = [], []
    for i in range(nb):
        pending.append(i)
        if batch[i] > 1:
            groups.append(pending)
            pending = []
    groups += [pending + [nb], [nb + 1, nb + 2]]
    p = oh * ow
    if winograd and wino.rewrite(conv, src, low, w, init, (nb, batch, f, c, kh, kw, oh, ow), (sh, sw, dh, dw), elem,
                              max_bytes):
        return True
    # A 1x1 stride-1 convolution has no gather to reorder: the transposed form adds a copy of its input, paid
    # back only where the pixels do not fill even 4-wide vectors (MobileNetV2's 14x14 1x1 layers: 0.20 -> 0.29 ms).
    # Fewer pixels than a vector (squeeze-and-excitation's 1x1 convolutions over one pixel) keep the plain form: the
    # transposed one adds two kernels to a matrix-vector product (EfficientNet-B0: 64 more dispatches).
    if pixel_multiple and p >= pixel_multiple and p % pixel_multiple and (not direct_view or p % 4) and not kept and \
            nb == 1 and \
            c * kh * kw * p * max(elem.width // 8, 1) <= max_bytes and \
            transposed(conv, src, low, w, init, groups, (f, c, kh, kw, oh, ow, h, wd), (sh, sw, dh, dw), elem,
                        pixel_multiple):
        return True
    # A batch of images (one group) with few pixels each: their pixels are the rows of one matmul in the transposed
    # form, not a batch of per-image products (BATCH_ROWS_PIXELS).
    if batch_rows and kept == [0] and nb == 1 and p < BATCH_ROWS_PIXELS and \
            prod(batch) * c * kh * kw * p * max(elem.width // 8, 1) <= max_bytes and \
            transposed(conv, src, low, w, init, groups, (f, c, kh, kw, oh, ow, h, wd), (sh, sw, dh, dw), elem,
                        pixel_multiple or 1, images=batch[0]):
        return True
    # One pixel, on the profiles whose matrix-vector products take vector columns (matmul_row_vector_cols, lavapipe:
    # its matmuls read K-long columns one scalar per lane): as a row vector times the filters transposed. PoCL keeps
    # the column form (its 1x960 @ 960x1280 head ran 139 -> 207 us transposed, 2026-12-07).
    if row_vectors and direct_view and p == 1 and not kept and nb == 1 and one_pixel(conv, src, w, init, c, f, elem):
        return True
    k = c * kh * kw
    if k_multiple and k % k_multiple and not direct_view and not kept and nb == 1 and \
            padded_k(conv, src, low, w, init, groups, (f, c, kh, kw, oh, ow, h, wd), (sh, sw, dh, dw), elem,
                      -(-k // k_multiple) * k_multiple):
        return True
    with ir.InsertionPoint(conv), conv.location:
        if direct_view:
            patches = collapse(src, groups[:-2] + [pending + [nb], [nb + 1, nb + 2]])
        else:
            masked = any(low) or h < (oh - 1) * sh + (kh - 1) * dh + 1 or wd < (ow - 1) * sw + (kw - 1) * dw + 1
            shape = [batch[i] for i in kept] + [c, kh, kw, oh, ow]
            placeholder = tensor.EmptyOp(shape, elem)

    if not direct_view:
        def body(ix):
            at = dict(zip(kept, ix))
            bc, bkh, bkw, boh, bow = ix[len(kept):]
            ok_h, hh = clamped(spatial(boh, bkh, sh, dh, low[-2]), h)
            ok_w, ww = clamped(spatial(bow, bkw, sw, dw, low[-1]), wd)
            v = tensor.ExtractOp(src, [at.get(i, index_const(0)) for i in range(nb)] + [bc, hh, ww]).result
            if masked:
                v = arith.SelectOp(arith.AndIOp(ok_h, ok_w).result, v,
                                   arith.ConstantOp(elem, zero_attr(elem)).result).result
            return v

        cols = gather_generic(placeholder.operation, ir.RankedTensorType.get(shape, elem), body)
        nk = len(kept)
        with ir.InsertionPoint(conv), conv.location:
            patches = collapse(cols, [[i] for i in range(nk)] + [[nk, nk + 1, nk + 2], [nk + 3, nk + 4]])
    g_kept = nb == 2 and batch[1] > 1
    with ir.InsertionPoint(conv), conv.location:
        # Weights: (g,) f, c, kh, kw -> (g,) f, k; a unit group dim joins f.
        wr = len(w_shape)
        if nb == 2 and not g_kept:
            wmat = collapse(w, [[0, 1], [2, 3, 4]])
        else:
            wmat = collapse(w, [[i] for i in range(wr - 4)] + [[wr - 4], [wr - 3, wr - 2, wr - 1]])
        small = [batch[i] for i in kept] + [f, p]
        acc, rest = fill_accumulator(init, small, elem)
        if not kept:
            mm = linalg.matmul(wmat, patches, outs=[acc])
        else:
            mm = _batched_matmul(wmat, patches, acc, len(kept), g_kept)
    finish(conv, mm, groups, rest)
    return True


# conv_batch_rows takes convolutions of fewer output pixels per image than this. H100, ResNet-50 at batch 8, device
# clock per stage, per-image products -> one product over the batch's pixels (gpu-host-2026-12-07-h100-session5):
# 7x7 layers 1935 -> 1058 us and 14x14 2795 -> 2090 us (the per-image form ran 49-pixel workgroups over 2 filters
# each, 6-10 TFLOP/s), but 28x28 1705 -> 1657 and 56x56 642 -> 1417 us, where transposing the larger outputs back
# to NCHW costs what the faster products save.
BATCH_ROWS_PIXELS = 512


def _batched_matmul(wmat: ir.Value, patches: ir.Value, acc: ir.Value, nk: int, g_kept: bool) -> ir.Value:
    """out[b..., f, p] += W[(g,) f, k] * patches[b..., k, p]: loops b..., f, p, k (g, when kept, is the last b)."""
    nd = nk + 3
    dims = [ir.AffineDimExpr.get(i) for i in range(nd)]
    bd, fd, pd, kd = dims[:nk], dims[nk], dims[nk + 1], dims[nk + 2]
    maps = [ir.AffineMap.get(nd, 0, ([bd[-1]] if g_kept else []) + [fd, kd]),
            ir.AffineMap.get(nd, 0, bd + [kd, pd]),
            ir.AffineMap.get(nd, 0, bd + [fd, pd])]
    t = ir.RankedTensorType(acc.type)
    elem = t.element_type
    gen = linalg.GenericOp([t], [wmat, patches], [acc], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                           ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                                             for it in ["parallel"] * (nd - 1) + ["reduction"]]))
    body = gen.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(body):
        fl = isinstance(elem, ir.FloatType)
        prod = (arith.MulFOp if fl else arith.MulIOp)(body.arguments[0], body.arguments[1]).result
        linalg.YieldOp([(arith.AddFOp if fl else arith.AddIOp)(body.arguments[2], prod).result])
    return gen.results[0]


def convs_to_matmul(func_op: ir.Operation, max_bytes: int, pixel_multiple: int = 0, k_multiple: int = 0,
                    winograd: bool = False, row_vectors: bool = False, batch_rows: bool = False) -> None:
    """Every (generalized) NHWC or NCHW convolution whose patch matrix fits `max_bytes` becomes im2col +
    matmul. Runs after elementwise fusion, so the patch gather stays its own kernel and the matmul vectorizes.
    `pixel_multiple` (the profile's conv_pixel_multiple): an NCHW convolution with constant weights whose output
    pixels per channel are not a multiple of it multiplies in the transposed form (see nchw_conv_to_matmul);
    `winograd`: 3x3 stride-1 ones run as Winograd F(2x2, 3x3) where it pays (winograd.py)."""
    # Convolutions found first: rewriting one erases ops (its init, its consumers) that a live walk would visit.
    convs = []
    for op in func_op.regions[0].blocks[0].operations:
        roles = _conv_roles(op)
        if roles is not None:
            convs.append((op, *roles))
    for op, wi, others in convs:
        split = num_inputs(op) > 2 or len(list(op.regions[0].blocks[0].operations)) > 3
        conv = _plain_conv(op, wi, others)
        if conv is None:
            continue
        x = conv.operands[0]
        if split:  # the prologue's reshaped inputs: the prologue joins the previous layer's epilogue
            for v in list(x.owner.operation.operands):
                if isinstance(v, ir.OpResult) and v.owner.operation.name == "tensor.expand_shape":
                    sink_expand(v.owner.operation)
                    break
        nhwc_conv_to_matmul(conv, max_bytes) or nchw_conv_to_matmul(conv, max_bytes, pixel_multiple, k_multiple,
                                                                    winograd, row_vectors, batch_rows)
    for op in reversed(list(func_op.regions[0].blocks[0].operations)):  # pads the gathers now read through
        # Every result unused: a multi-result generic (ArgMax's value + index) may have only its first one dead.
        if op.name in ("tensor.pad", "linalg.generic", "tensor.collapse_shape", "tensor.expand_shape") and \
                not any(list(r.uses) for r in op.results):
            op.erase()
