"""Numerics of every op family on every available device, against numpy (through the Graph builder)."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.codegen_spirv import validate

RNG = np.random.default_rng(1234)


def rand(shape, dtype="float32"):
    if dtype == "int32":
        return RNG.integers(-50, 50, size=shape, dtype=np.int32)
    return RNG.standard_normal(shape).astype(dtype)


def check(g, inputs, device, rtol=1e-4, atol=1e-4):
    exe = portable.compile(g, device=device)
    if device.startswith("vulkan"):
        for k in exe.executable.kernels:  # every emitted SPIR-V module must pass spirv-val
            validate(k.spirv)
    outs = exe(*inputs)
    refs = g.reference(*inputs)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        if np.issubdtype(r.dtype, np.integer):
            np.testing.assert_array_equal(o, r)
        else:
            np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
    return outs


@pytest.mark.parametrize("op", ["relu", "exp", "tanh", "sigmoid", "neg", "abs"])
def test_unary_f32(device, op):
    g = portable.Graph()
    x = g.input((7, 13))
    g.output(getattr(g, op)(x))
    check(g, [rand((7, 13))], device)


@pytest.mark.parametrize("shapes", [((7, 13), (7, 13)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((1,), (1,)),
                                    ((2, 3, 5), (3, 1))])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum"])
def test_binary_broadcast_f32(device, shapes, op):
    g = portable.Graph()
    a, b = g.input(shapes[0]), g.input(shapes[1])
    g.output(getattr(g, op)(a, b))
    check(g, [rand(shapes[0]), rand(shapes[1])], device)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "minimum"])
def test_binary_i32(device, op):
    g = portable.Graph()
    a, b = g.input((7, 13), "int32"), g.input((13,), "int32")
    g.output(getattr(g, op)(a, b))
    check(g, [rand((7, 13), "int32"), rand((13,), "int32")], device)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 13, 5), (129, 31, 257), (64, 64, 64)])
def test_matmul_f32(device, m, k, n):
    g = portable.Graph()
    a, b = g.input((m, k)), g.input((k, n))
    g.output(g.matmul(a, b))
    check(g, [rand((m, k)), rand((k, n))], device, rtol=1e-4, atol=1e-4)


def test_matmul_1000(device):
    g = portable.Graph()
    a, b = g.input((1000, 1000)), g.input((1000, 1000))
    g.output(g.matmul(a, b))
    check(g, [rand((1000, 1000)), rand((1000, 1000))], device, rtol=1e-3, atol=1e-3)


def test_matmul_i32(device):
    g = portable.Graph()
    a, b = g.input((9, 17), "int32"), g.input((17, 11), "int32")
    g.output(g.matmul(a, b))
    check(g, [rand((9, 17), "int32"), rand((17, 11), "int32")], device)


def test_batch_matmul(device):
    g = portable.Graph()
    a, b = g.input((3, 7, 13)), g.input((3, 13, 5))
    g.output(g.matmul(a, b))
    check(g, [rand((3, 7, 13)), rand((3, 13, 5))], device)


def test_batch_matmul_transposed_b(device):
    """Attention scores q . K^T against a cache: B read transposed (on PoCL, a register tile of B is transposed
    as a 2-D vector, which OpenCL C regroups lane by lane)."""
    g = portable.Graph()
    q, k = g.input((6, 1, 64)), g.input((6, 256, 64))
    g.output(g.matmul(q, g.transpose(k, (0, 2, 1))))
    check(g, [rand((6, 1, 64)), rand((6, 256, 64))], device)


def test_fused_matmul_bias_relu_is_one_kernel(device):
    g = portable.Graph()
    a, b, bias = g.input((129, 31)), g.input((31, 257)), g.input((257,))
    g.output(g.relu(g.add(g.matmul(a, b), bias)))
    check(g, [rand((129, 31)), rand((31, 257)), rand((257,))], device)
    exe = portable.compile(g, device=device)
    ds = exe.executable.dispatches
    assert all(len(d.slots) == 4 for d in ds)  # a, b, bias and the output: bias and ReLU run inside the matmul
    # One dispatch, or two where its 129 rows are peeled into whole register tiles and the rest (dispatch/split.py).
    assert len(ds) == 1 or (len(ds) == 2 and any(ds[1].offsets))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, (0, 2), None])
@pytest.mark.parametrize("op", ["sum", "max", "mean"])
def test_reductions(device, op, axis):
    g = portable.Graph()
    x = g.input((5, 7, 9))
    g.output(getattr(g, op)(x, axis=axis))
    check(g, [rand((5, 7, 9))], device, rtol=1e-4, atol=1e-4)


def test_reduction_keepdims_i32(device):
    g = portable.Graph()
    x = g.input((6, 10), "int32")
    g.output(g.sum(x, axis=1, keepdims=True), g.max(x, axis=0))
    check(g, [rand((6, 10), "int32")], device)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax(device, axis):
    g = portable.Graph()
    x = g.input((33, 65))
    g.output(g.softmax(x, axis=axis))
    check(g, [rand((33, 65))], device, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("stride,padding", [((1, 1), (0, 0)), ((2, 2), (1, 1)), ((1, 2), (1, 0))])
def test_conv2d(device, layout, stride, padding):
    g = portable.Graph()
    if layout == "NHWC":
        xs, ws = (2, 11, 9, 3), (3, 3, 3, 8)
    else:
        xs, ws = (2, 3, 11, 9), (8, 3, 3, 3)
    x, w = g.input(xs), g.input(ws)
    g.output(g.conv2d(x, w, stride=stride, padding=padding, layout=layout))
    check(g, [rand(xs), rand(ws)], device, rtol=1e-4, atol=1e-4)


def test_transpose_reshape(device):
    g = portable.Graph()
    x = g.input((4, 6, 5))
    t = g.transpose(x, (2, 0, 1))
    r = g.reshape(t, (5, -1))
    g.output(g.mul(r, r), t)
    check(g, [rand((4, 6, 5))], device)


def test_transpose_of_a_fused_result(device):
    """A transpose over shapes whose tiles divide (vectorized): on lavapipe it read its input transposed in a
    vector of 8, which SPIR-V cannot hold, and transpose(relu(a @ b)) failed to compile."""
    g = portable.Graph()
    a, b = g.input((64, 32)), g.input((32, 64))
    g.output(g.transpose(g.relu(g.matmul(a, b))), g.transpose(g.add(a, 1.0)))
    check(g, [rand((64, 32)), rand((32, 64))], device, rtol=1e-4, atol=1e-4)


def test_transpose_i32(device):
    g = portable.Graph()
    x = g.input((7, 13), "int32")
    g.output(g.transpose(x, (1, 0)))
    check(g, [rand((7, 13), "int32")], device)


def test_one_element_and_constants(device):
    g = portable.Graph()
    x = g.input((1,))
    c = g.constant(np.array([2.5], dtype=np.float32))
    w = g.constant(RNG.standard_normal((4, 3)).astype(np.float32))
    y = g.input((3, 2))
    g.output(g.mul(x, c), g.matmul(w, y))
    check(g, [rand((1,)), rand((3, 2))], device)


def test_large_elementwise(device):
    g = portable.Graph()
    a, b = g.input((1 << 20,)), g.input((1 << 20,))
    g.output(g.add(g.mul(a, b), a))
    check(g, [rand((1 << 20,)), rand((1 << 20,))], device)


@pytest.mark.parametrize("shape", [(64, 128, 96), (7, 13, 5)])
def test_matmul_f16_with_f32_accumulate(device, shape):
    m, k, n = shape
    g = portable.Graph()
    a, b = g.input((m, k), "float16"), g.input((k, n), "float16")
    g.output(g.matmul(a, b, out_dtype="float32"), g.relu(g.matmul(a, b)))
    xs = [rand((m, k), "float16"), rand((k, n), "float16")]
    outs = portable.run(g, *xs, device=device)
    refs = g.reference(*xs)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-5, atol=1e-5)  # f32 accumulate: exact up to order
    # f16 accumulate rounds every partial sum: tolerance grows with K
    np.testing.assert_allclose(outs[1].astype(np.float32), refs[1].astype(np.float32), rtol=2e-2, atol=0.02 * k ** 0.5)


def test_batched_conv_and_rank5_elementwise(device):
    """Loops beyond the innermost three parallel ones go to a linearized grid (one workgroup per index)."""
    g = portable.Graph()
    x, w = g.input((6, 20, 20, 32)), g.input((3, 3, 32, 16))
    a, b = g.input((2, 3, 4, 5, 6)), g.input((5, 1))
    g.output(g.conv2d(x, w, padding=(1, 1)), g.mul(a, b))
    check(g, [rand((6, 20, 20, 32)), rand((3, 3, 32, 16)), rand((2, 3, 4, 5, 6)), rand((5, 1))], device,
          rtol=1e-4, atol=1e-4)


def test_concat_and_slices(device):
    src = """
    func.func @main(%a: tensor<4x6xf32>, %b: tensor<4x3xf32>) -> (tensor<4x9xf32>, tensor<2x3xf32>, tensor<3xf32>) {
      %c = tensor.concat dim(1) %a, %b : (tensor<4x6xf32>, tensor<4x3xf32>) -> tensor<4x9xf32>
      %s = tensor.extract_slice %a[1, 0] [2, 3] [2, 2] : tensor<4x6xf32> to tensor<2x3xf32>
      %r = tensor.extract_slice %b[2, 0] [1, 3] [1, 1] : tensor<4x3xf32> to tensor<3xf32>
      return %c, %s, %r : tensor<4x9xf32>, tensor<2x3xf32>, tensor<3xf32>
    }"""
    a, b = rand((4, 6)), rand((4, 3))
    outs = portable.run(src, a, b, device=device)
    for o, r in zip(outs, [np.concatenate([a, b], 1), a[1:5:2, 0:6:2], b[2]]):
        np.testing.assert_array_equal(o, r)


def test_identity_and_constant_only_graph(device):
    src = """func.func @main(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
      %c = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
      return %a, %c : tensor<3xf32>, tensor<3xf32> }"""
    a = rand((3,))
    out_a, out_c = portable.run(src, a, device=device)
    np.testing.assert_array_equal(out_a, a)
    np.testing.assert_array_equal(out_c, [1, 2, 3])
