"""Graph builder: every emitted module parses and verifies with the upstream MLIR bindings, runs on the
CPU (MLIR's LLVM JIT, a test-only lowering) to the numbers `Graph.reference` gives, and `reference`
agrees with plain numpy. Bad graphs raise ShapeMismatch / UnsupportedOp at build time."""

from __future__ import annotations

import re

import numpy as np
import pytest
from graph_cpu_runner import check, rand, run_cpu

from portable.errors import ShapeMismatch, UnsupportedOp
from portable.frontend.graph import Graph, Tensor

# -- elementwise ----------------------------------------------------------------------------------------
BROADCASTS = [((3, 4), (4,)), ((3, 1), (1, 4)), ((3, 4), (1,)), ((1,), (3, 4)), ((2, 3, 4), (3, 1)),
              ((2, 1, 4), (2, 3, 1)), ((1, 1), (1, 1)), ((), (2, 3))]


@pytest.mark.parametrize("sa,sb", BROADCASTS)
def test_binary_broadcast_f32(sa, sb):
    g = Graph("binary")
    a, b = g.input(sa), g.input(sb)
    g.output(g.add(a, b), g.sub(a, b), g.mul(a, b), g.div(a, b), g.maximum(a, b), g.minimum(a, b), g.pow(a, b))
    text = g.to_mlir()
    assert "linalg.broadcast" not in text and "tensor.empty" in text
    x, y = rand(sa, lo=0.5, hi=2.0), rand(sb, seed=1, lo=-1.5, hi=1.5)
    ref = check(g, x, y, tol={"rtol": 1e-5, "atol": 1e-6})
    for r, fn in zip(ref, [np.add, np.subtract, np.multiply, np.divide, np.maximum, np.minimum, np.power]):
        np.testing.assert_allclose(r, fn(x, y), rtol=1e-6)


def test_broadcast_maps_drop_unit_dims_without_copies():
    g = Graph()
    a, b = g.input((3, 1)), g.input((1, 4))
    g.output(a + b)
    text = g.to_mlir()
    assert "tensor.collapse_shape %arg0 [[0, 1]] : tensor<3x1xf32> into tensor<3xf32>" in text
    assert "tensor.collapse_shape %arg1 [[0, 1]] : tensor<1x4xf32> into tensor<4xf32>" in text
    assert ("indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, "
            "affine_map<(d0, d1) -> (d0, d1)>]") in text
    g = Graph()
    a, s = g.input((2, 3)), g.input((1,))
    g.output(a * s)
    assert "tensor.collapse_shape %arg1 [] : tensor<1xf32> into tensor<f32>" in g.to_mlir()
    assert "affine_map<(d0, d1) -> ()>" in g.to_mlir()


def test_binary_int32_wraps_and_divides_toward_zero():
    g = Graph("int")
    a, b = g.input((2, 4), "int32"), g.input((4,), "int32")
    g.output(a + b, a - b, a * b, g.div(a, b), g.maximum(a, b), g.minimum(a, b), g.neg(a), g.abs(a),
             g.relu(a), g.clip(a, -3, 5), a + 1)
    x = np.array([[7, -7, 7, -7], [2**31 - 1, -(2**31), 0, 100]], np.int32)
    y = np.array([2, 2, -2, -2], np.int32)
    ref = check(g, x, y)
    np.testing.assert_array_equal(ref[3][0], [3, -3, -3, 3])  # C division, not numpy's //
    assert ref[0][1, 0] == -(2**31) + 1  # INT_MAX + 2 wraps
    np.testing.assert_array_equal(ref[2], x * y)
    np.testing.assert_array_equal(ref[9], np.clip(x, -3, 5))
    text = g.to_mlir()
    for op in ("arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.maxsi", "arith.minsi", "math.absi"):
        assert op in text


def test_unary_and_activations_f32():
    g = Graph("unary")
    a = g.input((4, 5))
    p = g.add(g.abs(a), 0.25)
    outs = [g.neg(a), g.abs(a), g.exp(a), g.log(p), g.tanh(a), g.sqrt(p), g.rsqrt(p), g.erf(a), g.relu(a),
            g.sigmoid(a), g.silu(a), g.gelu(a), g.gelu(a, approximate="none"), g.clip(a, -0.5, 0.5),
            g.clip(a, lo=0.0), g.pow(p, 2.0), 2.0 - a, 1.0 / p]
    g.output(*outs)
    x = rand((4, 5), seed=3, lo=-4, hi=4)
    ref = check(g, x, tol={"rtol": 2e-6, "atol": 2e-6})
    px = np.abs(x) + np.float32(0.25)
    from math import erf, pi, sqrt

    verf = np.vectorize(erf)
    want = [-x, np.abs(x), np.exp(x), np.log(px), np.tanh(x), np.sqrt(px), 1 / np.sqrt(px), verf(x),
            np.maximum(x, 0), 1 / (1 + np.exp(-x)), x / (1 + np.exp(-x)),
            0.5 * x * (1 + np.tanh(sqrt(2 / pi) * (x + 0.044715 * x**3))), 0.5 * x * (1 + verf(x / sqrt(2))),
            np.clip(x, -0.5, 0.5), np.maximum(x, 0), px**2, 2 - x, 1 / px]
    for k, (r, w) in enumerate(zip(ref, want)):
        np.testing.assert_allclose(r, w, rtol=1e-5, atol=1e-6, err_msg=f"output {k}")


def test_float16_graph():
    g = Graph("half")
    a, w = g.input((4, 8), "float16"), g.input((8, 3), "float16")
    h = g.gelu(g.matmul(a, w))
    g.output(h, g.softmax(h), g.sum(h, axis=1), g.cast(h, "float32"), g.cast(g.cast(a, "float32"), "float16"),
             g.erf(a))
    text = g.to_mlir()
    assert "f16" in text and "arith.extf" in text and "arith.truncf" in text
    check(g, tol={"rtol": 1e-2, "atol": 1e-2})


def test_cast_between_all_dtypes():
    g = Graph("casts")
    a, i = g.input((5,)), g.input((5,), "int32")
    g.output(g.cast(a, "int32"), g.cast(i, "float32"), g.cast(i, "int64"), g.cast(g.cast(i, "int64"), "int32"),
             g.cast(a, "float16"), g.cast(i, "float16"))
    x = np.array([-2.7, -0.5, 0.5, 2.7, 100.25], np.float32)
    ref = check(g, x, np.array([-3, 0, 1, 7, 2**20], np.int32))
    np.testing.assert_array_equal(ref[0], [-2, 0, 0, 2, 100])  # toward zero
    for op in ("arith.fptosi", "arith.sitofp", "arith.extsi", "arith.trunci"):
        assert op in g.to_mlir()


def test_int64_graph():
    g = Graph()
    a = g.input((3, 4), "int64")
    g.output(a * (2**40), g.sum(a, axis=0), g.max(a))
    check(g)


def test_tensor_operators():
    g = Graph()
    a, b = g.input((2, 3)), g.input((3, 2))
    g.output((a + 1.0) * a - a / 2.0, -a, a @ b, 1.0 - a)
    x, y = rand((2, 3)), rand((3, 2), seed=1)
    ref = check(g, x, y)
    np.testing.assert_allclose(ref[0], (x + 1) * x - x / 2, rtol=1e-6)
    np.testing.assert_allclose(ref[2], x @ y, rtol=1e-5)


# -- reductions -----------------------------------------------------------------------------------------
AXES = [0, 1, 2, -1, (0, 2), (2, 0), None]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_reductions(dtype):
    g = Graph("reduce")
    a = g.input((2, 3, 4), dtype)
    kinds = ["sum", "max", "min"] + (["mean"] if dtype == "float32" else [])
    cases = [(k, ax, kd) for k in kinds for ax in AXES for kd in (False, True)]
    g.output(*[getattr(g, k)(a, axis=ax, keepdims=kd) for k, ax, kd in cases])
    x = rand((2, 3, 4), dtype)
    ref = check(g, x)
    for (k, ax, kd), r in zip(cases, ref):
        want = getattr(np, k)(x, axis=ax, keepdims=kd, **({"dtype": x.dtype} if k == "sum" else {}))
        assert r.shape == np.shape(want), (k, ax, kd)
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6, err_msg=f"{k} axis={ax} keepdims={kd}")


def test_reduction_ir_shape():
    g = Graph()
    a, i = g.input((3, 4)), g.input((3, 4), "int32")
    g.output(g.max(a, axis=1), g.max(i, axis=0), g.sum(a, axis=None), g.min(i, 0), g.mean(a, 1, keepdims=True))
    text = g.to_mlir()
    assert "arith.constant 0xFF800000 : f32" in text
    assert "arith.constant -2147483648 : i32" in text and "arith.constant 2147483647 : i32" in text
    assert 'iterator_types = ["parallel", "reduction"]' in text
    assert 'iterator_types = ["reduction", "reduction"]' in text and "-> tensor<f32>" in text
    assert text.count("linalg.fill") == 5
    assert "tensor.expand_shape" in text  # keepdims
    assert "arith.constant 0.25 : f32" in text  # mean = sum * 1/n
    check(g)


def test_reduction_of_int32_sum_wraps():
    g = Graph()
    a = g.input((4,), "int32")
    g.output(g.sum(a))
    (r,) = check(g, np.full(4, 2**30, np.int32))
    assert r == 0


@pytest.mark.parametrize("axis", [0, -1, 1])
def test_softmax(axis):
    g = Graph("softmax")
    a = g.input((3, 5, 4))
    g.output(g.softmax(a, axis=axis))
    text = g.to_mlir()
    assert text.count("linalg.generic") == 4 and "math.exp" in text and "arith.divf" in text
    x = rand((3, 5, 4), lo=-20, hi=20)
    (r,) = check(g, x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(r, e / e.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-7)


# -- contractions ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_matmul(dtype):
    g = Graph("mm")
    a, b = g.input((5, 7), dtype), g.input((7, 3), dtype)
    ba, bb = g.input((2, 5, 7), dtype), g.input((2, 7, 3), dtype)
    g.output(g.matmul(a, b), g.matmul(ba, bb), g.matmul(ba, b))
    text = g.to_mlir()
    assert "linalg.matmul" in text and "linalg.batch_matmul" in text
    x, y, bx, by = (rand(s, dtype, seed=k) for k, s in enumerate([(5, 7), (7, 3), (2, 5, 7), (2, 7, 3)]))
    ref = check(g, x, y, bx, by)
    for r, want in zip(ref, [x @ y, bx @ by, bx @ y]):
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)


def test_mlp_with_constants():
    rng = np.random.default_rng(7)
    w1, b1 = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    w2 = rng.standard_normal((32, 4)).astype(np.float32)
    g = Graph("mlp")
    x = g.input((8, 16))
    g.output(g.softmax(g.matmul(g.relu(g.matmul(x, g.constant(w1)) + g.constant(b1)), g.constant(w2))))
    xs = rand((8, 16))
    (r,) = check(g, xs)
    h = np.maximum(xs @ w1 + b1, 0) @ w2
    e = np.exp(h - h.max(-1, keepdims=True))
    np.testing.assert_allclose(r, e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-6)


def _naive_conv_nchw(x, w, stride, pads, dil):
    """Direct loops, independent of the reference's NHWC slicing."""
    (pt, pb), (pl, pr) = pads
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pt, pb), (pl, pr)])
    n, _c, h, wd = x.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - dil[0] * (kh - 1) - 1) // stride[0] + 1, (wd - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, f, oh, ow))
    for i in range(oh):
        for j in range(ow):
            for p in range(kh):
                for q in range(kw):
                    out[:, :, i, j] += x[:, :, i * stride[0] + p * dil[0], j * stride[1] + q * dil[1]] @ w[:, :, p, q].T
    return out


CONVS = [  # stride, padding, dilation, expected (top, bottom), (left, right)
    ((2, 2), 1, (1, 1), ((1, 1), (1, 1))),
    ((1, 1), "same", (1, 1), ((1, 1), (1, 1))),
    ((2, 2), "same", (1, 1), ((0, 1), (0, 1))),
    ((1, 2), ((0, 2), (1, 0)), (2, 1), ((0, 2), (1, 0))),
    ((1, 1), "valid", (1, 1), ((0, 0), (0, 0))),
]


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("stride,padding,dilation,pads", CONVS)
def test_conv2d(layout, stride, padding, dilation, pads):
    xs, ws, bs = rand((2, 3, 8, 8)), rand((4, 3, 3, 3), seed=1), rand((4,), seed=2)  # NCHW / FCHW
    g = Graph("conv")
    if layout == "NHWC":
        x, w = g.input((2, 8, 8, 3)), g.input((3, 3, 3, 4))
        args = (xs.transpose(0, 2, 3, 1).copy(), ws.transpose(2, 3, 1, 0).copy(), bs)
    else:
        x, w = g.input((2, 3, 8, 8)), g.input((4, 3, 3, 3))
        args = (xs, ws, bs)
    b = g.input((4,))
    g.output(g.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, layout=layout),
             g.conv2d(x, w, stride=stride, padding=padding, dilation=dilation, layout=layout))
    text = g.to_mlir()
    assert ("linalg.conv_2d_nhwc_hwcf" if layout == "NHWC" else "linalg.conv_2d_nchw_fchw") in text
    assert f"strides = dense<[{stride[0]}, {stride[1]}]> : tensor<2xi64>" in text
    assert ("tensor.pad" in text) == (pads != ((0, 0), (0, 0)))
    ref = check(g, *args, tol={"rtol": 1e-5, "atol": 1e-5})
    want = _naive_conv_nchw(xs, ws, stride, pads, dilation)
    if layout == "NHWC":
        want = want.transpose(0, 2, 3, 1)
        bias = bs
    else:
        bias = bs[:, None, None]
    np.testing.assert_allclose(ref[1], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ref[0], want + bias, rtol=1e-5, atol=1e-5)


def test_conv2d_int32():
    g = Graph()
    x, w = g.input((1, 5, 5, 2), "int32"), g.input((3, 3, 2, 2), "int32")
    g.output(g.conv2d(x, w, stride=2, padding=1))
    check(g)


# -- data movement --------------------------------------------------------------------------------------
RESHAPES = [  # src, target, ops expected in the IR
    ((2, 3, 4), (6, 4), ["collapse"]),
    ((6, 4), (2, 3, -1), ["expand"]),
    ((2, 3, 4), (4, -1), ["collapse", "expand"]),
    ((2, 1, 3), (2, 3), ["collapse"]),
    ((2, 3), (1, 2, 3, 1), ["expand"]),
    ((1, 1), (), ["collapse"]),
    ((), (1, 1, 1), ["expand"]),
    ((24,), (2, 3, 4), ["expand"]),
    ((2, 3, 4), (-1,), ["collapse"]),
]


@pytest.mark.parametrize("src,dst,ops", RESHAPES)
def test_reshape(src, dst, ops):
    g = Graph("reshape")
    a = g.input(src)
    r = g.reshape(a, dst)
    g.output(r, r * 2.0)
    text = g.to_mlir()
    assert [op for op in ("collapse", "expand") if f"tensor.{op}_shape" in text] == ops
    x = rand(src)
    ref = check(g, x)
    np.testing.assert_array_equal(ref[0], x.reshape(dst))


def test_transpose():
    g = Graph()
    a = g.input((2, 3, 4))
    g.output(g.transpose(a, (1, 2, 0)), g.transpose(a), g.transpose(g.input((5, 2), "int32")))
    assert "permutation = [1, 2, 0]" in g.to_mlir() and "linalg.transpose" in g.to_mlir()
    x, y = rand((2, 3, 4)), rand((5, 2), "int32")
    ref = check(g, x, y)
    np.testing.assert_array_equal(ref[0], x.transpose(1, 2, 0))
    np.testing.assert_array_equal(ref[1], x.T)
    np.testing.assert_array_equal(ref[2], y.T)


def test_pad():
    g = Graph()
    a = g.input((2, 3), "int32")
    g.output(g.pad(a, [(1, 0), (2, 1)], value=-7))
    x = rand((2, 3), "int32")
    (r,) = check(g, x)
    np.testing.assert_array_equal(r, np.pad(x, [(1, 0), (2, 1)], constant_values=-7))


# -- constants and signature ----------------------------------------------------------------------------
def test_constants_are_exact():
    rng = np.random.default_rng(1)
    big = rng.standard_normal((7, 9)).astype(np.float32)
    big[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    vals = [big, rng.standard_normal(40).astype(np.float16), rng.integers(-2**31, 2**31 - 1, 33, dtype=np.int32),
            np.array([[0.1, -2.5e-8], [3e38, 1.0]], np.float32), np.full((3, 2), -np.inf, np.float32),
            np.float32(0.3), np.array([1, 2, 3], np.int64)]
    g = Graph("constants")
    a = g.input((3,))
    g.output(*[g.constant(v) for v in vals], a)
    text = g.to_mlir()
    assert 'dense<"0x' in text and "dense<0xFF800000> : tensor<3x2xf32>" in text
    assert "dense<[[0.10000000149011612, -2.5000000292152436e-08], [3.0000000054977558e+38, 1.0]]>" in text
    x = rand((3,))
    got = run_cpu(g, x)
    for v, r in zip(vals + [x], got):
        assert r.tobytes() == np.asarray(v).tobytes()
    for v, r in zip(vals, g.reference(x)):
        assert r.tobytes() == np.asarray(v).tobytes()


def test_signature_and_dead_code():
    g = Graph("sig")
    a, _b = g.input((2, 3)), g.input((3,), "int32")
    g.exp(a)  # not an output: not emitted
    y = g.tanh(a)
    g.output(y)
    g.output(a, y)  # outputs append; inputs may be returned as they are
    text = g.to_mlir()
    assert "func.func @main(%arg0: tensor<2x3xf32>, %arg1: tensor<3xi32>) -> " \
           "(tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>)" in text
    assert "math.exp" not in text and text.count("func.func") == 1
    assert [t.shape for t in g.inputs] == [(2, 3), (3,)] and [t.dtype for t in g.outputs] == ["float32"] * 3
    ops = set(re.findall(r"= ([a-z_]+\.[a-z_0-9]+)", text))
    assert ops <= {"tensor.empty", "linalg.generic", "math.tanh"}
    check(g, rand((2, 3)), rand((3,), "int32"))


def test_only_contract_dialects_appear():
    g = Graph()
    x = g.input((1, 6, 6, 2))
    y = g.conv2d(x, g.constant(np.ones((3, 3, 2, 4), np.float32)), stride=2, padding="same")
    z = g.reshape(g.transpose(y, (0, 3, 1, 2)), (4, -1))
    g.output(g.mean(g.softmax(z, 0), axis=1, keepdims=True),
             g.gelu(g.matmul(z, g.constant(np.full((9, 5), 0.5, np.float32)))))
    text = g.to_mlir()
    ops = set(re.findall(r"^\s*(?:%[\w.]+ = )?([a-z_]+)\.[a-z_0-9]+", text, re.MULTILINE))
    assert ops == {"func", "linalg", "tensor", "arith", "math"}, ops
    check(g)


# -- errors ---------------------------------------------------------------------------------------------
def _raises(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match):
        fn(*args, **kw)


def test_shape_errors():
    g = Graph()
    a, b, i = g.input((3, 4)), g.input((5, 6)), g.input((3, 4), "int32")
    _raises(ShapeMismatch, r"add: dtypes differ.*\(3, 4\) float32.*\(3, 4\) int32.*g\.cast", g.add, a, i)
    _raises(ShapeMismatch, r"mul: shapes \(3, 4\) and \(5, 6\) do not broadcast", g.mul, a, b)
    _raises(ShapeMismatch, r"sum: axis 2 is out of range for shape \(3, 4\)", g.sum, a, axis=2)
    _raises(ShapeMismatch, r"max: axis \(0, -2\) repeats", g.max, a, axis=(0, -2))
    _raises(ShapeMismatch, r"softmax: axis -3 is out of range", g.softmax, a, -3)
    _raises(ShapeMismatch, r"matmul: a is \(3, 4\) float32, b is \(5, 6\) float32; inner dims differ", g.matmul, a, b)
    _raises(ShapeMismatch, r"batch dims differ", g.matmul, g.input((2, 3, 4)), g.input((3, 4, 5)))
    _raises(ShapeMismatch, r"reshape: \(3, 4\) has 12 elements but \(5, 2\) has 10", g.reshape, a, (5, 2))
    _raises(ShapeMismatch, r"reshape: \(3, 4\) \(12 elements\) cannot be viewed as \(5, -1\)", g.reshape, a, (5, -1))
    _raises(ShapeMismatch, r"one -1", g.reshape, a, (-1, -1))
    _raises(ShapeMismatch, r"transpose: perm \(0, 0\)", g.transpose, a, (0, 0))
    _raises(ShapeMismatch, r"add: scalar 0.5 is not an integer.*int32", g.add, i, 0.5)
    _raises(ShapeMismatch, r"scalar 1099511627776 is not an integer in \[-2147483648, 2147483647\]", g.add, i, 2**40)
    _raises(ShapeMismatch, r"scalar inf", g.maximum, i, float("inf"))
    _raises(ShapeMismatch, r"at least one operand must be a Tensor", g.add, 1.0, 2.0)
    _raises(ShapeMismatch, r"pad: pads", g.pad, a, [(1, 1)])
    x = g.input((1, 8, 8, 3))
    _raises(ShapeMismatch, r"conv2d: x is \(1, 8, 8, 3\).*input has 3 channels but the weights expect 2",
            g.conv2d, x, g.input((3, 3, 2, 4)))
    _raises(ShapeMismatch, r"bias is \(3,\) but must be \(4,\)", g.conv2d, x, g.input((3, 3, 3, 4)), g.input((3,)))
    _raises(ShapeMismatch, r"larger than the padded input", g.conv2d, x, g.input((9, 9, 3, 4)))
    _raises(ShapeMismatch, r"stride", g.conv2d, x, g.input((3, 3, 3, 4)), stride=0)
    _raises(ShapeMismatch, r"expected a Tensor of graph", g.add, Graph().input((3, 4)), a)
    _raises(ShapeMismatch, r"has no outputs", g.to_mlir)
    _raises(ShapeMismatch, r"dim < 1", g.input, (0, 3))


def test_unsupported_errors():
    g = Graph()
    i = g.input((3,), "int32")
    for op in (g.exp, g.log, g.tanh, g.sqrt, g.rsqrt, g.erf, g.sigmoid, g.silu, g.gelu, g.mean, g.softmax):
        _raises(UnsupportedOp, r"not defined for int32; cast", op, i)
    _raises(UnsupportedOp, r"pow: not defined for int32", g.pow, i, i)
    _raises(UnsupportedOp, r"float64.*dtype='float32'", g.constant, np.ones(3))
    _raises(UnsupportedOp, r"dtype 'bfloat16' is not supported", g.input, (3,), "bfloat16")
    _raises(UnsupportedOp, r"supported ranks", g.matmul, g.input((3,)), g.input((3, 2)))
    _raises(UnsupportedOp, r"layout='NCWH'", g.conv2d, g.input((1, 3, 4, 4)), g.input((2, 3, 1, 1)), layout="NCWH")
    _raises(UnsupportedOp, r"approximate='fast'", g.gelu, g.input((3,)), approximate="fast")


def test_reference_checks_inputs():
    g = Graph("r")
    a = g.input((2, 3))
    g.output(a)
    _raises(ShapeMismatch, r"takes 1 inputs, got 0", g.reference)
    _raises(ShapeMismatch, r"input 0 is \(2, 3\) float64, expected \(2, 3\) float32", g.reference, np.ones((2, 3)))
    assert isinstance(a, Tensor) and a.shape == (2, 3) and a.dtype == "float32"
