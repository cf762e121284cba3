"""Linalg named ops as upstream front ends emit them (softmax, transpose, broadcast, reduce, map, matmul with
indexing maps and the older transpose_a/b spellings, contractions, elementwise named ops, pooling, convolutions,
pack/unpack), written as MLIR text and run on every device against numpy. Several ops share one function so each
group is one compile per device; ops that cannot compile fail with UnsupportedOp naming the op."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import portable
from portable.errors import UnsupportedOp

RNG = np.random.default_rng(5)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def positive(*shape):
    return RNG.random(shape).astype(np.float32) + 0.5


def ty(shape, dtype="f32"):
    return "tensor<" + "".join(f"{d}x" for d in shape) + dtype + ">"


def zeros(shape, value="0.0"):
    """Lines that make %init, `shape` filled with `value`."""
    return (f"%z = arith.constant {value} : f32\n%e0 = tensor.empty() : {ty(shape)}\n"
            f"%init = linalg.fill ins(%z : f32) outs(%e0 : {ty(shape)}) -> {ty(shape)}\n")


class Case:
    """One op: its operands, the MLIR lines computing %r of `shape` from %a0, %a1, ... and a numpy reference."""

    def __init__(self, name, args, shape, body, ref):
        self.name, self.args, self.shape, self.body, self.ref = name, args, shape, body, ref


def combine(cases) -> str:
    """One function computing every case (their SSA names made unique), returning all results."""
    params, lines, results, n = [], [], [], 0
    for k, c in enumerate(cases):
        names = {f"a{i}": f"arg{n + i}" for i in range(len(c.args))}
        params += [f"%arg{n + i}: {ty(a.shape)}" for i, a in enumerate(c.args)]
        n += len(c.args)
        def rename(m, k=k, names=names):
            return "%" + names.get(m.group(1), f"c{k}_{m.group(1)}")

        lines.append(re.sub(r"%([A-Za-z_]\w*)", rename, c.body))
        results.append((f"%c{k}_r", ty(c.shape)))
    return (f"func.func @main({', '.join(params)}) -> ({', '.join(t for _, t in results)}) {{\n" + "\n".join(lines)
            + f"\nreturn {', '.join(v for v, _ in results)} : {', '.join(t for _, t in results)}\n}}")


def run_cases(cases, device, rtol=1e-4):
    outs = portable.run(combine(cases), *[a for c in cases for a in c.args], device=device)
    for c, got in zip(cases, outs):
        want = np.asarray(c.ref(*c.args), np.float32)
        assert got.shape == want.shape, (c.name, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=c.name)


def softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ------------------------------------------------------------------------------------- aggregate and layout
def layout_cases():
    x, x3 = rand(4, 16), rand(2, 3, 8)
    return [
        Case("softmax", [x], (4, 16), f"%e = tensor.empty() : {ty((4, 16))}\n"
             f"%r = linalg.softmax dimension(1) ins(%a0 : {ty((4, 16))}) outs(%e : {ty((4, 16))}) -> {ty((4, 16))}",
             lambda a: softmax(a, 1)),
        Case("softmax_dim0", [x3], (2, 3, 8), f"%e = tensor.empty() : {ty((2, 3, 8))}\n"
             f"%r = linalg.softmax dimension(0) ins(%a0 : {ty((2, 3, 8))}) outs(%e : {ty((2, 3, 8))}) -> "
             f"{ty((2, 3, 8))}", lambda a: softmax(a, 0)),
        Case("transpose", [rand(2, 3, 4)], (4, 2, 3), f"%e = tensor.empty() : {ty((4, 2, 3))}\n"
             f"%r = linalg.transpose ins(%a0 : {ty((2, 3, 4))}) outs(%e : {ty((4, 2, 3))}) permutation = [2, 0, 1]",
             lambda a: a.transpose(2, 0, 1)),
        Case("broadcast", [rand(3, 4)], (3, 5, 4), f"%e = tensor.empty() : {ty((3, 5, 4))}\n"
             f"%r = linalg.broadcast ins(%a0 : {ty((3, 4))}) outs(%e : {ty((3, 5, 4))}) dimensions = [1]",
             lambda a: np.broadcast_to(a[:, None, :], (3, 5, 4))),
        Case("reduce", [rand(3, 4, 5)], (3, 5), zeros((3, 5))
             + f"%r = linalg.reduce ins(%a0 : {ty((3, 4, 5))}) outs(%init : {ty((3, 5))}) dimensions = [1]\n"
             "  (%in: f32, %acc: f32) {\n  %s = arith.addf %in, %acc : f32\n  linalg.yield %s : f32\n  }",
             lambda a: a.sum(1)),
        Case("map", [rand(3, 4), rand(3, 4)], (3, 4), f"%e = tensor.empty() : {ty((3, 4))}\n"
             f"%r = linalg.map ins(%a0, %a1 : {ty((3, 4))}, {ty((3, 4))}) outs(%e : {ty((3, 4))})\n"
             "  (%x: f32, %y: f32, %o: f32) {\n  %m = arith.mulf %x, %y : f32\n  %s = arith.addf %m, %x : f32\n"
             "  linalg.yield %s : f32\n  }", lambda a, b: a * b + a),
        Case("pack", [rand(7, 6)], (2, 3, 4, 2), f"%p = arith.constant 0.0 : f32\n%e = tensor.empty() : "
             f"{ty((2, 3, 4, 2))}\n%r = linalg.pack %a0 padding_value(%p : f32) inner_dims_pos = [0, 1] "
             f"inner_tiles = [4, 2] into %e : {ty((7, 6))} -> {ty((2, 3, 4, 2))}",
             lambda a: np.pad(a, ((0, 1), (0, 0))).reshape(2, 4, 3, 2).transpose(0, 2, 1, 3)),
        Case("unpack", [rand(2, 3, 4, 2)], (8, 6), f"%e = tensor.empty() : {ty((8, 6))}\n"
             f"%r = linalg.unpack %a0 inner_dims_pos = [0, 1] inner_tiles = [4, 2] into %e : {ty((2, 3, 4, 2))} -> "
             f"{ty((8, 6))}", lambda a: a.transpose(0, 2, 1, 3).reshape(8, 6)),
    ]


def test_softmax_and_layout_ops(device):
    run_cases(layout_cases(), device)


# ------------------------------------------------------------------------------------------ contractions
def _contraction(name, op, a, b, shape, ref, maps=None):
    spec = f" indexing_maps = [{', '.join(f'affine_map<{m}>' for m in maps)}]" if maps else ""
    return Case(name, [a, b], shape, zeros(shape) + f"%r = linalg.{op}{spec} ins(%a0, %a1 : {ty(a.shape)}, "
                f"{ty(b.shape)}) outs(%init : {ty(shape)}) -> {ty(shape)}", ref)


def contraction_cases():
    mnk = "(m, n, k) -> "
    bmnk = "(b, m, n, k) -> "
    return [
        _contraction("matmul", "matmul", rand(8, 6), rand(6, 5), (8, 5), lambda a, b: a @ b),
        _contraction("matmul_maps_b", "matmul", rand(8, 6), rand(5, 6), (8, 5), lambda a, b: a @ b.T,
                     [mnk + "(m, k)", mnk + "(n, k)", mnk + "(m, n)"]),
        _contraction("matmul_maps_a", "matmul", rand(6, 8), rand(6, 5), (8, 5), lambda a, b: a.T @ b,
                     [mnk + "(k, m)", mnk + "(k, n)", mnk + "(m, n)"]),
        # Spellings upstream removed (now matmul with indexing_maps): older front ends still write them.
        _contraction("matmul_transpose_b", "matmul_transpose_b", rand(8, 6), rand(5, 6), (8, 5), lambda a, b: a @ b.T),
        _contraction("matmul_transpose_a", "matmul_transpose_a", rand(6, 8), rand(6, 5), (8, 5), lambda a, b: a.T @ b),
        _contraction("batch_matmul_transpose_b", "batch_matmul_transpose_b", rand(2, 8, 6), rand(2, 5, 6), (2, 8, 5),
                     lambda a, b: a @ b.transpose(0, 2, 1)),
        _contraction("batch_matmul", "batch_matmul", rand(2, 8, 6), rand(2, 6, 5), (2, 8, 5), lambda a, b: a @ b),
        _contraction("batch_matmul_bcast", "batch_matmul", rand(8, 6), rand(2, 6, 5), (2, 8, 5),
                     lambda a, b: a[None] @ b, [bmnk + "(m, k)", bmnk + "(b, k, n)", bmnk + "(b, m, n)"]),
        _contraction("batch_reduce_matmul", "batch_reduce_matmul", rand(3, 8, 6), rand(3, 6, 5), (8, 5),
                     lambda a, b: (a @ b).sum(0)),
        _contraction("matvec", "matvec", rand(8, 6), rand(6), (8,), lambda a, b: a @ b),
        _contraction("vecmat", "vecmat", rand(6), rand(6, 8), (8,), lambda a, b: a @ b),
        _contraction("dot", "dot", rand(16), rand(16), (), lambda a, b: np.array(a @ b)),
        _contraction("batch_matvec", "batch_matvec", rand(2, 8, 6), rand(2, 6), (2, 8),
                     lambda a, b: np.einsum("bmk,bk->bm", a, b)),
        _contraction("contract", "contract", rand(2, 8, 6), rand(6, 5), (2, 8, 5), lambda a, b: a @ b,
                     [bmnk + "(b, m, k)", bmnk + "(k, n)", bmnk + "(b, m, n)"]),
        _contraction("mmt4d", "mmt4d", rand(2, 3, 4, 2), rand(5, 3, 2, 2), (2, 5, 4, 2),
                     lambda a, b: np.einsum("mkab,nkcb->mnac", a, b)),
    ]


def test_contractions(device):
    run_cases(contraction_cases(), device)


# ------------------------------------------------------------------------------------------- elementwise
_UNARY = {"exp": np.exp, "log": np.log, "abs": np.abs, "ceil": np.ceil, "floor": np.floor, "negf": np.negative,
          "reciprocal": lambda a: 1 / a, "round": lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5),
          "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a), "square": np.square, "tanh": np.tanh,
          "erf": np.vectorize(math.erf)}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
           "min": np.minimum, "powf": np.power}


def elementwise_cases():
    t = ty((3, 5))
    cases = []
    for op, f in _UNARY.items():
        x = positive(3, 5) * 3 if op in ("log", "sqrt", "rsqrt", "reciprocal") else rand(3, 5) * 3
        cases.append(Case(op, [x], (3, 5), f"%e = tensor.empty() : {t}\n%r = linalg.{op} ins(%a0 : {t}) "
                          f"outs(%e : {t}) -> {t}", f))
    for op, f in _BINARY.items():
        a, b = (positive(3, 5), rand(3, 5)) if op == "powf" else (rand(3, 5), positive(3, 5))
        cases.append(Case(op, [a, b], (3, 5), f"%e = tensor.empty() : {t}\n%r = linalg.{op} ins(%a0, %a1 : {t}, {t}) "
                          f"outs(%e : {t}) -> {t}", f))
    cases.append(Case("elementwise_exp", [rand(3, 5)], (3, 5), f"%e = tensor.empty() : {t}\n%r = linalg.elementwise "
                      f"kind=#linalg.elementwise_kind<exp> ins(%a0 : {t}) outs(%e : {t}) -> {t}", np.exp))
    cases.append(Case("elementwise_add_bcast", [rand(3, 5), rand(5)], (3, 5), f"%e = tensor.empty() : {t}\n"
                      "%r = linalg.elementwise kind=#linalg.elementwise_kind<add> indexing_maps = [affine_map<(i, j) "
                      "-> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>] "
                      f"ins(%a0, %a1 : {t}, {ty((5,))}) outs(%e : {t}) -> {t}", np.add))
    cases.append(Case("copy", [rand(3, 5)], (3, 5), f"%e = tensor.empty() : {t}\n%r = linalg.copy ins(%a0 : {t}) "
                      f"outs(%e : {t}) -> {t}", lambda a: a))
    return cases


def test_elementwise_named_ops(device):
    run_cases(elementwise_cases(), device)


# -------------------------------------------------------------------------------- pooling and convolutions
def _windows(x, k, s, spatial):
    """Windows of `x` over its axes `spatial` (kernel k, stride s, no padding): a list of strided views."""
    outs = [(x.shape[d] - k) // s + 1 for d in spatial]
    views = []
    for off in np.ndindex(*([k] * len(spatial))):
        idx = [slice(None)] * x.ndim
        for d, o, n in zip(spatial, off, outs):
            idx[d] = slice(o, o + s * (n - 1) + 1, s)
        views.append(x[tuple(idx)])
    return views


def _pool(name, x, out, kernel, spatial, reduce, init):
    w = ty(kernel)
    attrs = (f"{{dilations = dense<1> : vector<{len(kernel)}xi64>, strides = dense<2> : "
             f"vector<{len(kernel)}xi64>}}")
    return Case(name, [x], out, zeros(out, init) + f"%w = tensor.empty() : {w}\n%r = linalg.{name} {attrs} "
                f"ins(%a0, %w : {ty(x.shape)}, {w}) outs(%init : {ty(out)}) -> {ty(out)}",
                lambda a: reduce(_windows(a, kernel[0], 2, spatial)))


def _conv(name, x, w, out, ref, strides=1, dilations=1, rank=2):
    attrs = (f" {{dilations = dense<{dilations}> : tensor<{rank}xi64>, strides = dense<{strides}> : "
             f"tensor<{rank}xi64>}}") if rank else ""
    return Case(name, [x, w], out, zeros(out) + f"%r = linalg.{name}{attrs} ins(%a0, %a1 : {ty(x.shape)}, "
                f"{ty(w.shape)}) outs(%init : {ty(out)}) -> {ty(out)}", ref)


def _direct(x, w, spatial_x, out_spatial, contract):
    """sum over kernel offsets of einsum(contract, window of x, w[offset]) for a stride-1, dilation-1 conv whose
    kernel's spatial axes lead in w (w is transposed by the caller so they do)."""
    k = w.shape[:len(spatial_x)]
    total = 0
    for off in np.ndindex(*k):
        idx = [slice(None)] * x.ndim
        for d, o, n in zip(spatial_x, off, out_spatial):
            idx[d] = slice(o, o + n)
        total = total + np.einsum(contract, x[tuple(idx)], w[off])
    return total


def conv_pool_cases():
    max_, sum_, min_ = (lambda v: np.max(v, 0)), (lambda v: np.sum(v, 0)), (lambda v: np.min(v, 0))
    ninf, inf = "0xFF800000", "0x7F800000"
    cases = [
        _pool("pooling_nchw_max", rand(1, 2, 7, 8), (1, 2, 3, 3), (3, 3), (2, 3), max_, ninf),
        _pool("pooling_nchw_sum", rand(1, 2, 7, 8), (1, 2, 3, 3), (3, 3), (2, 3), sum_, "0.0"),
        _pool("pooling_nhwc_max", rand(1, 7, 8, 2), (1, 3, 3, 2), (3, 3), (1, 2), max_, ninf),
        _pool("pooling_nhwc_sum", rand(1, 7, 8, 2), (1, 3, 3, 2), (3, 3), (1, 2), sum_, "0.0"),
        _pool("pooling_nhwc_min", rand(1, 7, 8, 2), (1, 3, 3, 2), (3, 3), (1, 2), min_, inf),
        _pool("pooling_nwc_max", rand(1, 9, 2), (1, 4, 2), (3,), (1,), max_, ninf),
        _pool("pooling_ndhwc_sum", rand(1, 5, 5, 6, 2), (1, 2, 2, 3, 2), (2, 2, 2), (1, 2, 3), sum_, "0.0"),
    ]
    x, w = rand(1, 3, 8, 8), rand(4, 3, 3, 3)
    cases.append(_conv("conv_2d_nchw_fchw", x, w, (1, 4, 6, 6),
                       lambda x, w: _direct(x, w.transpose(2, 3, 0, 1), (2, 3), (6, 6), "nchw,fc->nfhw")))
    cases.append(_conv("conv_2d_nchw_fchw", rand(1, 3, 9, 9), rand(4, 3, 3, 3), (1, 4, 5, 5), dilations=2,
                       ref=lambda x, w: sum(np.einsum("nchw,fc->nfhw", x[:, :, 2 * i:2 * i + 5, 2 * j:2 * j + 5],
                                                      w[:, :, i, j]) for i in range(3) for j in range(3))))
    cases.append(_conv("conv_2d_nhwc_hwcf", rand(1, 8, 8, 3), rand(3, 3, 3, 4), (1, 6, 6, 4),
                       lambda x, w: _direct(x, w, (1, 2), (6, 6), "nhwc,cf->nhwf")))
    cases.append(_conv("conv_2d_nhwc_fhwc", rand(1, 8, 8, 3), rand(4, 3, 3, 3), (1, 6, 6, 4),
                       lambda x, w: _direct(x, w.transpose(1, 2, 3, 0), (1, 2), (6, 6), "nhwc,cf->nhwf")))
    cases.append(_conv("depthwise_conv_2d_nhwc_hwc", rand(1, 8, 8, 4), rand(3, 3, 4), (1, 6, 6, 4),
                       lambda x, w: _direct(x, w, (1, 2), (6, 6), "nhwc,c->nhwc")))
    cases.append(_conv("depthwise_conv_2d_nchw_chw", rand(1, 4, 8, 8), rand(4, 3, 3), (1, 4, 6, 6),
                       lambda x, w: _direct(x, w.transpose(1, 2, 0), (2, 3), (6, 6), "nchw,c->nchw")))
    cases.append(_conv("depthwise_conv_2d_nhwc_hwcm", rand(1, 6, 6, 2), rand(3, 3, 2, 2), (1, 4, 4, 2, 2),
                       lambda x, w: _direct(x, w, (1, 2), (4, 4), "nhwc,cm->nhwcm")))
    cases.append(_conv("conv_2d_ngchw_fgchw", rand(1, 2, 3, 6, 6), rand(4, 2, 3, 3, 3), (1, 2, 4, 4, 4),
                       lambda x, w: _direct(x, w.transpose(3, 4, 0, 1, 2), (3, 4), (4, 4), "ngchw,fgc->ngfhw")))
    cases.append(_conv("conv_1d_nwc_wcf", rand(1, 9, 3), rand(3, 3, 4), (1, 7, 4), rank=1,
                       ref=lambda x, w: _direct(x, w, (1,), (7,), "nwc,cf->nwf")))
    cases.append(_conv("conv_1d_ncw_fcw", rand(1, 3, 9), rand(4, 3, 3), (1, 4, 7), rank=1,
                       ref=lambda x, w: _direct(x, w.transpose(2, 0, 1), (2,), (7,), "ncw,fc->nfw")))
    cases.append(_conv("conv_1d", rand(9), rand(3), (7,), rank=0,
                       ref=lambda x, w: _direct(x, w, (0,), (7,), "w,->w")))
    cases.append(_conv("conv_2d", rand(6, 7), rand(3, 3), (4, 5), rank=0,
                       ref=lambda x, w: _direct(x, w, (0, 1), (4, 5), "hw,->hw")))
    cases.append(_conv("conv_3d_ndhwc_dhwcf", rand(1, 4, 5, 5, 2), rand(2, 2, 2, 2, 3), (1, 3, 4, 4, 3), rank=3,
                       ref=lambda x, w: _direct(x, w, (1, 2, 3), (3, 4, 4), "ndhwc,cf->ndhwf")))
    cases.append(_conv("conv_3d_ncdhw_fcdhw", rand(1, 2, 4, 5, 5), rand(3, 2, 2, 2, 2), (1, 3, 3, 4, 4), rank=3,
                       ref=lambda x, w: _direct(x, w.transpose(2, 3, 4, 0, 1), (2, 3, 4), (3, 4, 4),
                                                "ncdhw,fc->nfdhw")))
    return cases


def test_pooling_and_convolutions(device):
    run_cases(conv_pool_cases(), device)


# ---------------------------------------------------------------------------------------------- failures
def test_unknown_op_is_unsupported_naming_it():
    t = ty((4, 16))
    text = (f"func.func @main(%a: {t}) -> {t} {{\n%e = tensor.empty() : {t}\n"
            f"%r = linalg.frobnicate ins(%a : {t}) outs(%e : {t}) -> {t}\nreturn %r : {t}\n}}")
    with pytest.raises(UnsupportedOp, match=r"op 'linalg.frobnicate' is not an op of this MLIR version"):
        portable.compile(text, device=portable.devices()[0][0].uri)


def test_op_outside_the_contract_names_its_node():
    """An op the compiler does not take fails with UnsupportedOp naming the op and the node its location names."""
    t = ty((4, 16))
    text = (f"func.func @main(%a: {t}) -> {t} {{\n"
            f'%r = tosa.abs %a : ({t}) -> {t} loc("encoder/abs_3")\nreturn %r : {t}\n}}')
    with pytest.raises(UnsupportedOp, match=r"op 'tosa.abs' \(from node 'encoder/abs_3'\) is not supported"):
        portable.compile(text, device=portable.devices()[0][0].uri)
