"""Strided channelwise (depthwise) NCHW convolutions as unit-stride ones over the input's stride phases.

A stride-s window reads input column s*w + kw: no vector of output columns reads a contiguous run, so the register
tiles of the vector taps strategy (strategy/forms.vector_conv) do not apply, and the scalar taps form ran lavapipe's
stride-2 depthwise layers of MobileNetV2 at ~40 ns an output. Split the input into its s x s phases,

    Q[n, c, a*s + b, i, j] = x[n, c, s*i + a, s*j + b]       (0 outside x: a gather; the pad feeding x inlined)

and the filter alike, W'[c, a*s + b, u, v] = w[c, s*u + a, s*v + b] (0 past the window, a constant made at compile
time); then out[n, c, h, w] = sum over phases p and taps u, v of Q[n, c, p, h + u, w + v] * W'[c, p, u, v], a
unit-stride window over the last two dims of Q, which vector_conv takes. The phase gather moves as many elements as
the pad it replaces (with phases as two dims (a, b) it ran slower: 11.3 against 8.0 ms for a 5 MB one on a loaded
host); Q's rows are padded to whole vec4s. The taps grow from kh*kw to s*s*ceil(kh/s)*ceil(kw/s) (9 -> 16 for 3x3
at stride 2): zero-weight multiplies, and loads of rows that they do not use.
"""

from __future__ import annotations

import numpy as np

from ...ir.linalg_info import indexing_maps, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import clone_at, clone_mapped
from .gathers import clamped, gather_generic, index_const
from .horizontal import dense_constant
from .windows import inlinable_gather

ATTR = "portable.stride_phases"  # on the rewritten convolution (tests read it)


def split_strided_windows(func_op: ir.Operation) -> int:
    """Rewrite every strided channelwise NCHW convolution at the top level of `func_op` whose filter is a constant;
    returns how many were."""
    todo = [op.operation for op in func_op.regions[0].blocks[0].operations
            if op.operation.name == "linalg.generic" and _form(op.operation) is not None]
    for op in todo:
        _split(op, *_form(op))
    return len(todo)


def _dim(e: ir.AffineExpr) -> int | None:
    return ir.AffineDimExpr(e).position if isinstance(e, ir.AffineDimExpr) else None


def _strided(e: ir.AffineExpr) -> tuple[int, int, int] | None:
    """(loop, stride, tap loop) of `loop * stride + tap`, else None."""
    if not isinstance(e, ir.AffineAddExpr):
        return None
    add = ir.AffineAddExpr(e)
    if _dim(add.rhs) is None:
        return None
    if _dim(add.lhs) is not None:
        return _dim(add.lhs), 1, _dim(add.rhs)
    if isinstance(add.lhs, ir.AffineMulExpr):
        m = ir.AffineMulExpr(add.lhs)
        if _dim(m.lhs) is not None and isinstance(m.rhs, ir.AffineConstantExpr):
            return _dim(m.lhs), ir.AffineConstantExpr(m.rhs).value, _dim(add.rhs)
    return None


def _form(op: ir.Operation) -> tuple | None:
    """(loops n, c, h, w, kh, kw; strides sh, sw) of out[n, c, h, w] += x[n, c, sh*h + kh, sw*w + kw] * w[c, kh, kw]
    with a constant f32 filter and a stride over 1, else None."""
    if num_inputs(op) != 2 or len(op.results) != 1 or len(iterator_types(op)) != 6:
        return None
    if [b.name for b in op.regions[0].blocks[0].operations] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return None
    xm, wm, om = indexing_maps(op)
    if len(xm.results) != 4 or len(wm.results) != 3 or len(om.results) != 4:
        return None
    n, c, h, w = (_dim(e) for e in om.results)
    rows, cols = _strided(xm.results[2]), _strided(xm.results[3])
    if None in (n, c, h, w) or rows is None or cols is None or [_dim(e) for e in xm.results[:2]] != [n, c]:
        return None
    (rh, sh, kh), (rw, sw, kw) = rows, cols
    its = iterator_types(op)
    if (rh, rw) != (h, w) or [_dim(e) for e in wm.results] != [c, kh, kw] or max(sh, sw) < 2 or \
            any(its[d] != "parallel" for d in (n, c, h, w)) or its[kh] != "reduction" or its[kw] != "reduction":
        return None
    x, wt = op.operands[0], op.operands[1]
    if not isinstance(ir.RankedTensorType(x.type).element_type, ir.F32Type) or dense_constant(wt) is None:
        return None
    return (n, c, h, w, kh, kw), (sh, sw)


def _split(op: ir.Operation, loops: tuple, strides: tuple) -> None:
    n, c, h, w, kh, kw = loops
    sh, sw = strides
    ranges = loop_ranges(op)
    x, wt, init = op.operands[0], op.operands[1], op.operands[2]
    x_t = ir.RankedTensorType(x.type)
    f32 = x_t.element_type
    big_h, big_w = x_t.shape[2], x_t.shape[3]
    oh, ow, kh_n, kw_n = ranges[h], ranges[w], ranges[kh], ranges[kw]
    uh, uw = -(-kh_n // sh), -(-kw_n // sw)  # taps per phase
    qh, qw = oh + uh - 1, -(-(ow + uw - 1) // 4) * 4  # phase rows and columns the outputs read (whole vec4 rows)
    q_t = ir.RankedTensorType.get([x_t.shape[0], x_t.shape[1], sh * sw, qh, qw], f32)
    # A pad feeding the convolution (its only user) is read in place: one gather kernel.
    pad = inlinable_gather(x, op)

    def body(i):
        bn, bc, p, bi, bj = i
        a, b = arith.DivUIOp(p, index_const(sw)).result, arith.RemUIOp(p, index_const(sw)).result
        ok_h, row = clamped(arith.AddIOp(arith.MulIOp(bi, index_const(sh)).result, a).result, big_h)
        ok_w, col = clamped(arith.AddIOp(arith.MulIOp(bj, index_const(sw)).result, b).result, big_w)
        at = [bn, bc, row, col]
        v = clone_at(pad.regions[0].blocks[0], at, {}) if pad is not None else tensor.ExtractOp(x, at).result
        zero = arith.ConstantOp(f32, ir.FloatAttr.get(f32, 0.0)).result
        return arith.SelectOp(arith.AndIOp(ok_h, ok_w).result, v, zero).result

    with ir.InsertionPoint(op), op.location:
        placeholder = tensor.EmptyOp(list(q_t.shape), f32)
    q = gather_generic(placeholder.operation, q_t, body)
    wv = dense_constant(wt)
    phases = np.zeros((wv.shape[0], sh * sw, uh, uw), np.float32)
    for a in range(sh):
        for b in range(sw):
            taps = wv[:, a::sh, b::sw]
            phases[:, a * sw + b, :taps.shape[1], :taps.shape[2]] = taps
    d = [ir.AffineDimExpr.get(i) for i in range(7)]
    # Loops n, h, w, c (as the output's), then the taps: phase, u, v.
    pn, ph, pw, pc, pp, pu, pv = d
    out_map = [{n: pn, c: pc, h: ph, w: pw}[_dim(e)] for e in indexing_maps(op)[2].results]
    maps = [ir.AffineMap.get(7, 0, [pn, pc, pp, ir.AffineAddExpr.get(ph, pu), ir.AffineAddExpr.get(pw, pv)]),
            ir.AffineMap.get(7, 0, [pc, pp, pu, pv]),
            ir.AffineMap.get(7, 0, out_map)]
    out_t = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        w_t = ir.RankedTensorType.get(list(phases.shape), f32)
        wc = arith.ConstantOp(w_t, ir.DenseElementsAttr.get(phases, type=w_t)).result
        gen = linalg.GenericOp(
            [out_t], [q, wc], [init], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ["parallel"] * 4 + ["reduction"] * 3]))
    block = gen.regions[0].blocks.append(f32, f32, f32)
    old = op.regions[0].blocks[0]
    mapping = dict(zip(old.arguments, block.arguments))
    with ir.InsertionPoint(block), op.location:
        for o in list(old.operations)[:-1]:
            clone_mapped(o.operation, mapping)
        linalg.YieldOp([mapping[list(old.operations)[-1].operands[0]]])
    gen.operation.attributes[ATTR] = ir.UnitAttr.get()
    op.results[0].replace_all_uses_with(gen.results[0])
    op.erase()
    if pad is not None and not list(pad.results[0].uses):
        pad.erase()

