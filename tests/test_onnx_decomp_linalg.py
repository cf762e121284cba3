"""Rewrites of linear-algebra and quantization ops (onnx_decomp_linalg.py): Det, LpNormalization, QLinearMatMul,
DequantizeLinear, QuantizeLinear and ConvTranspose become plain ops; each is run on every device and checked
against onnx's reference evaluator, or numpy where the reference departs from the spec (LpNormalization with p=1
sums x, not |x|; a 1-D per-row scale of QLinearMatMul's a is broadcast along columns there; grouped ConvTranspose).
Also the conformance runner's folding of a Compress condition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import portable  # noqa: E402
from portable.errors import UnsupportedOp  # noqa: E402
from portable.frontend.onnx_decomp_linalg import MAX_LU_DET  # noqa: E402
from portable.frontend.onnx_decompose import decompose  # noqa: E402
from portable.frontend.onnx_import import infer_shapes, onnx_to_mlir  # noqa: E402

RNG = np.random.default_rng(5)
NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.FLOAT16: np.float16, T.UINT8: np.uint8, T.INT8: np.int8,
      T.INT16: np.int16, T.INT32: np.int32}


def model(nodes, inputs, outputs, inits=(), opset=22):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def ints(shape, dtype, low=None, high=None):
    info = np.iinfo(NP[dtype])
    return RNG.integers(info.min if low is None else low, (info.max if high is None else high) + 1,
                        shape).astype(NP[dtype])


def check(m, feeds, device, refs=None, rtol=1e-5, atol=1e-6):
    refs = refs if refs is not None else ReferenceEvaluator(m).run(None, feeds)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        o, r = np.asarray(o), np.asarray(r)
        if r.dtype.kind in "iu" and o.dtype != r.dtype and o.dtype.itemsize == r.dtype.itemsize:
            o = o.view(r.dtype)  # MLIR integers are signless: a uint8 output may come back as int8
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


# -------------------------------------------------------------------------------------------------- Det
def det_cases(n):
    """Random matrices, one with a zero leading pivot (needs a row exchange), one with a zero column and one with
    two equal rows (singular)."""
    x = RNG.standard_normal((4, n, n))
    x[1, 0, 0] = 0
    if n > 1:
        x[2, :, 1] = 0
        x[3, 1] = x[3, 0]
    return x


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, MAX_LU_DET])
def test_det(device, n):
    x = det_cases(n).astype(np.float32).reshape(2, 2, n, n)
    m = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", [2, 2, n, n])], [vi("y", [2, 2])])
    check(m, {"x": x}, device, rtol=1e-4, atol=1e-5)


def test_det_2d_row_exchange(device):
    """test_det_2d: a zero top-left element; the result is a scalar."""
    m = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", [2, 2])], [vi("y", [])])
    check(m, {"x": np.array([[0, 1], [2, 3]], np.float32)}, device)


@pytest.mark.parametrize("dtype,n", [(T.DOUBLE, 5), (T.FLOAT16, 3), (T.FLOAT16, 4)])
def test_det_dtypes(device, dtype, n):
    x = det_cases(n)
    m = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", [4, n, n], dtype)], [vi("y", [4], dtype)])
    if dtype == T.FLOAT16:  # numpy's det takes no float16: the reference is the float32 det, rounded
        x = x.astype(np.float16)
        ref = np.linalg.det(x.astype(np.float32)).astype(np.float16)
        check(m, {"x": x}, device, refs=[ref], rtol=2e-3, atol=2e-3)
    else:
        check(m, {"x": x.astype(np.float64)}, device, rtol=1e-10, atol=1e-12)


def test_det_nan_propagates(device):
    x = RNG.standard_normal((2, 5, 5)).astype(np.float32)
    x[0, 3, 2] = np.nan
    m = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", [2, 5, 5])], [vi("y", [2])])
    y = portable.run(m, x, device=device)[0]
    assert np.isnan(y[0]) and np.isclose(y[1], np.linalg.det(x[1]), rtol=1e-4)


def test_det_large_n_is_left_to_torch_mlir():
    n = MAX_LU_DET + 1
    m = model([helper.make_node("Det", ["x"], ["y"])], [vi("x", [n, n])], [vi("y", [])])
    assert [nd.op_type for nd in decompose(infer_shapes(m), infer_shapes).graph.node] == ["Det"]


# ------------------------------------------------------------------------------------- LpNormalization
def lp_normalize(x, axis, p):
    """The spec: x / ||x||_p along the axis, 0 where the norm is 0."""
    norm = np.sum(np.abs(x) ** p, axis=axis, keepdims=True) ** (1.0 / p)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, 0, x / norm).astype(x.dtype)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the reference's 0/0, masked
@pytest.mark.parametrize("shape,axis,p", [((2, 2, 3), 0, 2), ((3, 4, 5), 1, 2), ((4, 6), -1, 2), ((3, 5), 0, 1),
                                          ((2, 3, 4), -1, 1)])
def test_lp_normalization_zero_norm(device, shape, axis, p):
    x = RNG.standard_normal(shape).astype(np.float32)
    line = [0] * len(shape)  # one all-zero line along the axis
    line[axis] = slice(None)
    x[tuple(line)] = 0
    m = model([helper.make_node("LpNormalization", ["x"], ["y"], axis=axis, p=p)], [vi("x", list(shape))],
              [vi("y", list(shape))])
    if p == 2:
        check(m, {"x": x}, device)
    check(m, {"x": x}, device, refs=[lp_normalize(x, axis, p)])


def test_lp_normalization_rejects_p3():
    m = model([helper.make_node("LpNormalization", ["x"], ["y"], p=3)], [vi("x", [2, 3])], [vi("y", [2, 3])])
    with pytest.raises(UnsupportedOp, match="LpNormalization.*p=3"):
        onnx_to_mlir(m)


# --------------------------------------------------------------------------------------- QLinearMatMul
def qlinear_model(ashape, bshape, oshape, a_type, b_type, y_type, params, scale_type=T.FLOAT, runtime=()):
    """QLinearMatMul with scales and zero points as initializers, or graph inputs for those named in
    `runtime`; `params` maps each parameter name to its value."""
    names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"]
    types = {"a": a_type, "a_zero_point": a_type, "b": b_type, "b_zero_point": b_type, "y_zero_point": y_type}
    inputs = [vi("a", list(ashape), a_type), vi("b", list(bshape), b_type)]
    inputs += [vi(k, list(params[k].shape), types.get(k, scale_type)) for k in names if k in runtime]
    inits = [(k, v) for k, v in params.items() if k not in runtime]
    return model([helper.make_node("QLinearMatMul", names, ["y"])], inputs, [vi("y", list(oshape), y_type)], inits,
                 opset=21)


def qlinear_params(a_type, b_type, y_type, scale_type, a_shape=(), b_shape=(), y_shape=()):
    dt = NP[scale_type]
    return {"a_scale": RNG.uniform(0.002, 0.01, a_shape).astype(dt), "a_zero_point": ints(a_shape, a_type),
            "b_scale": RNG.uniform(0.002, 0.01, b_shape).astype(dt), "b_zero_point": ints(b_shape, b_type),
            "y_scale": RNG.uniform(0.01, 0.03, y_shape).astype(dt), "y_zero_point": ints(y_shape, y_type)}


@pytest.mark.parametrize("a_type,b_type,y_type,scale_type", [
    (T.UINT8, T.UINT8, T.UINT8, T.FLOAT), (T.INT8, T.INT8, T.INT8, T.FLOAT16), (T.UINT8, T.INT8, T.INT8, T.FLOAT)])
def test_qlinear_matmul_batched(device, a_type, b_type, y_type, scale_type):
    """Rank 3 with a broadcast batch; uint8 zero points past 127."""
    params = qlinear_params(a_type, b_type, y_type, scale_type)
    if a_type == T.UINT8:
        params["a_zero_point"] = np.array(200, np.uint8)
    m = qlinear_model((3, 4, 6), (1, 6, 5), (3, 4, 5), a_type, b_type, y_type, params, scale_type)
    check(m, {"a": ints((3, 4, 6), a_type), "b": ints((1, 6, 5), b_type)}, device, rtol=0, atol=0)


def test_qlinear_matmul_per_row_and_column(device):
    """N-D per-row scales of a ([B, M, 1]) and per-column ones of b ([B, 1, N]), as graph inputs."""
    params = qlinear_params(T.UINT8, T.UINT8, T.UINT8, T.FLOAT, (2, 3, 1), (2, 1, 4))
    runtime = ("a_scale", "a_zero_point", "b_scale", "b_zero_point", "y_scale")
    m = qlinear_model((2, 3, 5), (2, 5, 4), (2, 3, 4), T.UINT8, T.UINT8, T.UINT8, params, runtime=runtime)
    feeds = {"a": ints((2, 3, 5), T.UINT8), "b": ints((2, 5, 4), T.UINT8), **{k: params[k] for k in runtime}}
    check(m, feeds, device, rtol=0, atol=0)


def test_qlinear_matmul_2d_vectors(device):
    """2-D: a 1-D per-row scale of a ([M], the spec's reading) and a 1-D per-column one of b ([N])."""
    params = qlinear_params(T.INT8, T.INT8, T.INT8, T.FLOAT, (3,), (4,))
    a, bm = ints((3, 5), T.INT8), ints((5, 4), T.INT8)
    m = qlinear_model((3, 5), (5, 4), (3, 4), T.INT8, T.INT8, T.INT8, params)
    acc = (a.astype(np.int32) - params["a_zero_point"][:, None]) @ (bm.astype(np.int32) - params["b_zero_point"])
    scale = (params["a_scale"][:, None] * params["b_scale"] / params["y_scale"]).astype(np.float32)
    ref = np.clip(np.rint(acc.astype(np.float32) * scale + params["y_zero_point"]), -128, 127).astype(np.int8)
    check(m, {"a": a, "b": bm}, device, refs=[ref], rtol=0, atol=0)


def test_qlinear_matmul_rejects_a_bad_scale_shape():
    params = qlinear_params(T.INT8, T.INT8, T.INT8, T.FLOAT, (4,))
    m = qlinear_model((3, 5), (5, 4), (3, 4), T.INT8, T.INT8, T.INT8, params)
    with pytest.raises(UnsupportedOp, match="QLinearMatMul.*a_zero_point.*per row"):
        onnx_to_mlir(m)


# ----------------------------------------------------------------------------------- DequantizeLinear
@pytest.mark.parametrize("x_type,axis,scale_type", [(T.UINT8, 1, T.FLOAT), (T.UINT8, -1, T.FLOAT16),
                                                    (T.INT8, 0, T.FLOAT), (T.INT16, 2, T.FLOAT)])
def test_dequantize_per_axis(device, x_type, axis, scale_type):
    shape = (2, 3, 4)
    size = shape[axis]
    zp = ints((size,), x_type)
    if x_type == T.UINT8:
        zp[0] = 200  # sign-extended by torch-mlir's own lowering
    scale = RNG.uniform(0.5, 4, (size,)).astype(NP[scale_type])
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=axis)], [vi("x", list(shape), x_type)],
              [vi("y", list(shape), scale_type)], [("s", scale), ("z", zp)], opset=21)
    check(m, {"x": ints(shape, x_type)}, device)


def test_dequantize_runtime_parameters(device):
    """Scale and uint8 zero point computed at run time (graph inputs), per axis."""
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=0)],
              [vi("x", [3, 5], T.UINT8), vi("s", [3]), vi("z", [3], T.UINT8)], [vi("y", [3, 5])], opset=21)
    check(m, {"x": ints((3, 5), T.UINT8), "s": np.array([0.5, 2, 3], np.float32),
              "z": np.array([255, 128, 3], np.uint8)}, device)


@pytest.mark.parametrize("x_type,zero_point", [(T.UINT8, True), (T.INT32, False), (T.INT8, True)])
def test_dequantize_per_tensor(device, x_type, zero_point):
    inputs = ["x", "s", "z"] if zero_point else ["x", "s"]
    inits = [("s", np.array(0.25, np.float32))] + ([("z", np.array(140 if x_type == T.UINT8 else -7,
                                                                     NP[x_type]))] if zero_point else [])
    x = ints((4, 5), x_type, *((-(1 << 20), 1 << 20) if x_type == T.INT32 else ()))
    m = model([helper.make_node("DequantizeLinear", inputs, ["y"])], [vi("x", [4, 5], x_type)], [vi("y", [4, 5])],
              inits, opset=21)
    check(m, {"x": x}, device)


@pytest.mark.parametrize("shape,axis,block", [((1, 4, 3, 2), 1, 2), ((2, 7), -1, 3), ((5, 3), 0, 4)])
def test_dequantize_blocked(device, shape, axis, block):
    """Blocks along the axis, the last one short where the block size does not divide it."""
    pshape = list(shape)
    pshape[axis] = -(-shape[axis] // block)
    scale = RNG.uniform(0.5, 4, pshape).astype(np.float32)
    zp = ints(pshape, T.UINT8)
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=axis, block_size=block)],
              [vi("x", list(shape), T.UINT8)], [vi("y", list(shape))], [("s", scale), ("z", zp)], opset=21)
    check(m, {"x": ints(shape, T.UINT8)}, device)


def test_dequantize_output_dtype(device):
    """opset 23's output_dtype: float16 out of float32 scales."""
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1, output_dtype=T.FLOAT16)],
              [vi("x", [2, 3], T.INT8)], [vi("y", [2, 3], T.FLOAT16)],
              [("s", np.array([0.1, 0.2, 0.3], np.float32)), ("z", np.array([-3, 0, 5], np.int8))], opset=23)
    check(m, {"x": ints((2, 3), T.INT8)}, device, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------------------- QuantizeLinear
@pytest.mark.parametrize("y_type,axis,block,x_type", [(T.UINT8, 1, 0, T.FLOAT), (T.INT8, -1, 0, T.FLOAT16),
                                                      (T.UINT8, 0, 2, T.FLOAT), (T.INT16, 1, 3, T.FLOAT),
                                                      (T.INT16, 0, 0, T.FLOAT)])
def test_quantize(device, y_type, axis, block, x_type):
    """Per axis and blocked; values that saturate, and ties (x / scale = k + 0.5) rounded to even before the
    zero point is added."""
    shape = (4, 5)
    pshape = list(shape)
    pshape[axis] = -(-shape[axis] // block) if block else shape[axis]
    pshape = pshape if block else [pshape[axis]]
    scale = RNG.choice([0.5, 0.25, 2.0], pshape).astype(NP[x_type])
    zp = ints(pshape, y_type, *((-300, 300) if y_type == T.INT16 else ()))
    zp.reshape(-1)[0] = 201 if y_type == T.UINT8 else 3
    x = (RNG.integers(-1200, 1200, shape) * 0.125).astype(NP[x_type])  # many exact ties
    m = model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=axis, block_size=block)],
              [vi("x", list(shape), x_type)], [vi("y", list(shape), y_type)], [("s", scale), ("z", zp)], opset=21)
    check(m, {"x": x}, device, rtol=0, atol=0)


def test_quantize_runtime_scale(device):
    """Scale a graph input (DynamicQuantizeLinear's form); no zero point: uint8."""
    m = model([helper.make_node("QuantizeLinear", ["x", "s"], ["y"])], [vi("x", [3, 4]), vi("s", [])],
              [vi("y", [3, 4], T.UINT8)], opset=21)
    check(m, {"x": RNG.uniform(-1, 30, (3, 4)).astype(np.float32), "s": np.array(0.1, np.float32)}, device,
          rtol=0, atol=0)


# --------------------------------------------------------------------------------------- ConvTranspose
def conv_transpose_reference(x, w, bias, group, strides, dilations, begin, out_sizes):
    """Every input element scattered through the kernel into the full (unpadded) result, then output position o
    of each axis read from full position o + begin (zero outside it), plus the bias."""
    spatial = x.ndim - 2
    step, per_group = x.shape[1] // group, w.shape[1]
    full_sizes = [s * (i - 1) + (k - 1) * d + 1 for s, i, k, d in zip(strides, x.shape[2:], w.shape[2:], dilations)]
    full = np.zeros((x.shape[0], per_group * group, *full_sizes))
    for g in range(group):
        xg, wg = x[:, g * step:(g + 1) * step], w[g * step:(g + 1) * step]
        for offset in itertools.product(*(range(k) for k in w.shape[2:])):
            where = tuple(slice(o * d, o * d + s * (i - 1) + 1, s)
                          for o, d, s, i in zip(offset, dilations, strides, x.shape[2:]))
            contrib = np.einsum("nc...,cm->nm...", xg, wg[(slice(None), slice(None)) + offset])
            full[(slice(None), slice(g * per_group, (g + 1) * per_group)) + where] += contrib
    out = np.zeros(full.shape[:2] + tuple(out_sizes))
    for pos in itertools.product(*(range(n) for n in out_sizes)):
        src = tuple(p + b for p, b in zip(pos, begin))
        if all(0 <= s < f for s, f in zip(src, full_sizes)):
            out[(slice(None), slice(None)) + pos] = full[(slice(None), slice(None)) + src]
    if bias is not None:
        out += bias.reshape((-1,) + (1,) * spatial)
    return out.astype(np.float32)


@pytest.mark.parametrize("xshape,wshape,attrs,begin,out_sizes", [
    ((1, 1, 3, 3), (1, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [0, 0], [6, 6]),
    ((1, 2, 4, 3), (2, 3, 3, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}, [1, 1], [8, 9]),
    ((2, 1, 3, 3), (1, 2, 3, 3), {"pads": [1, 0, 2, 1], "strides": [3, 2]}, [1, 0], [6, 6]),
    ((1, 1, 3, 4), (1, 1, 3, 3), {"pads": [0, 2, 1, 0], "output_padding": [1, 1], "strides": [2, 2],
                                  "dilations": [1, 2]}, [0, 2], [7, 10]),
    ((3, 4, 3, 3), (4, 1, 3, 3), {"group": 2, "pads": [1, 0, 0, 0]}, [1, 0], [4, 5]),
    ((2, 3, 3, 3), (3, 1, 3, 3), {"group": 3}, [0, 0], [5, 5]),  # depthwise
    ((1, 2, 4, 4), (2, 1, 3, 3), {"group": 2, "auto_pad": "SAME_LOWER", "strides": [2, 2]}, [1, 1], [8, 8]),
    ((1, 4, 5), (4, 3, 2), {"group": 2, "auto_pad": "SAME_UPPER", "strides": [2], "output_shape": [9]}, [0], [9]),
    ((1, 2, 2, 3, 3), (2, 1, 2, 2, 2), {"pads": [0, 1, 0, 1, 0, 0]}, [0, 1, 0], [2, 3, 4]),
    ((1, 1, 3, 3), (1, 1, 1, 1), {"pads": [1, 0, 0, 1], "output_shape": [8, 9], "strides": [3, 3]}, [1, 0],
     [8, 9]),  # an output past the full result: zeros there, plus the bias
    ((1, 1, 4), (1, 2, 3), {"auto_pad": "VALID", "strides": [2]}, [0], [9]),
])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_transpose(device, xshape, wshape, attrs, begin, out_sizes, with_bias):
    x = RNG.standard_normal(xshape).astype(np.float32)
    w = RNG.standard_normal(wshape).astype(np.float32)
    group = attrs.get("group", 1)
    bias = RNG.standard_normal(wshape[1] * group).astype(np.float32) if with_bias else None
    inits = [("w", w)] + ([("b", bias)] if with_bias else [])
    node = helper.make_node("ConvTranspose", ["x", "w", "b"] if with_bias else ["x", "w"], ["y"], **attrs)
    oshape = [xshape[0], wshape[1] * group] + out_sizes
    m = model([node], [vi("x", list(xshape))], [vi("y", oshape)], inits)
    ref = conv_transpose_reference(x, w, bias, group, attrs.get("strides", [1] * len(begin)),
                                   attrs.get("dilations", [1] * len(begin)), begin, out_sizes)
    check(m, {"x": x}, device, refs=[ref], rtol=1e-4, atol=1e-5)


def test_conv_transpose_depthwise_runtime_weight(device):
    """A depthwise weight computed at run time is widened with zeros by a Concat on the device."""
    x, w = RNG.standard_normal((1, 4, 3, 3)).astype(np.float32), RNG.standard_normal((4, 1, 2, 2)).astype(np.float32)
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=4, pads=[0, 1, 1, 0], strides=[2, 2])],
              [vi("x", [1, 4, 3, 3]), vi("w", [4, 1, 2, 2])], [vi("y", [1, 4, 5, 5])])
    ref = conv_transpose_reference(x, w, None, 4, [2, 2], [1, 1], [0, 1], [5, 5])
    check(m, {"x": x, "w": w}, device, refs=[ref], rtol=1e-4, atol=1e-5)


def test_conv_transpose_same_matches_onnx_reference(device):
    """test_convtranspose_autopad_same's form, against onnx's reference evaluator itself."""
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])],
              [vi("x", [1, 1, 3, 3])], [vi("y", [1, 2, 6, 6])],
              [("w", RNG.standard_normal((1, 2, 3, 3)).astype(np.float32))])
    check(m, {"x": RNG.standard_normal((1, 1, 3, 3)).astype(np.float32)}, device, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------- the graph, the runner
def test_rewritten_ops_leave_the_graph():
    """After decompose, none of the rewritten nodes is left for torch-mlir (nor the checks that refuse them)."""
    nodes = [helper.make_node("Det", ["m"], ["d"]),
             helper.make_node("LpNormalization", ["d"], ["n"], axis=0),
             helper.make_node("QLinearMatMul", ["qa", "sa", "za", "qb", "sb", "zb", "sy", "zy"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "sy", "zy"], ["f"]),
             helper.make_node("QuantizeLinear", ["f", "sy", "zy"], ["g"]),
             helper.make_node("ConvTranspose", ["c", "w"], ["t"], auto_pad="SAME_UPPER", strides=[2])]
    inits = [("sa", np.array(0.1, np.float32)), ("za", np.array(130, np.uint8)), ("sb", np.array(0.2, np.float32)),
             ("zb", np.array(7, np.uint8)), ("sy", np.array(0.3, np.float32)), ("zy", np.array(250, np.uint8)),
             ("w", np.ones((1, 1, 3), np.float32))]
    m = model(nodes, [vi("m", [3, 5, 5]), vi("qa", [2, 3, 4], T.UINT8), vi("qb", [2, 4, 3], T.UINT8),
                      vi("c", [1, 1, 4])], [vi("n", [3]), vi("g", [2, 3, 3], T.UINT8), vi("t", [1, 1, 8])], inits)
    out = decompose(infer_shapes(m), infer_shapes)
    ops = {n.op_type for n in out.graph.node}
    assert not ops & {"Det", "LpNormalization", "QLinearMatMul", "DequantizeLinear", "QuantizeLinear"}, ops
    conv = [n for n in out.graph.node if n.op_type == "ConvTranspose"]
    assert len(conv) == 1 and not any(a.name in ("auto_pad", "pads") for a in conv[0].attribute)
    assert {"MatMul", "Slice", "Where"} <= ops


def test_runner_folds_a_compress_condition(tmp_path):
    """A 1-D bool input that decides a shape (Compress's condition) is folded on the retry, so the case
    imports (the Compress rewrite then gathers with constant indices)."""
    from portable.conformance.cases import Case
    from portable.conformance.execute import import_case

    m = model([helper.make_node("Compress", ["x", "c"], ["y"], axis=0)], [vi("x", [3, 2]), vi("c", [3], T.BOOL)],
              [vi("y", [None, 2])])
    onnx.save(m, str(tmp_path / "model.onnx"))
    (tmp_path / "data").mkdir()
    feeds = [RNG.standard_normal((3, 2)).astype(np.float32), np.array([True, False, True])]
    paths = []
    for i, (name, value) in enumerate(zip(["x", "c", "y"], feeds + [feeds[0][[0, 2]]])):
        p = tmp_path / "data" / f"{name}_{i}.pb"
        p.write_bytes(numpy_helper.from_array(value, name).SerializeToString())
        paths.append(str(p))
    case = Case("compress", "node", str(tmp_path / "model.onnx"), ((tuple(paths[:2]), (paths[2],)),))
    info, payload = import_case(case)
    assert not isinstance(payload, dict), payload
    assert info["folded_inputs"] == ["c"]
