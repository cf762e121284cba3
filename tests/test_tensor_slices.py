"""tensor.insert_slice (tensor_slices.py), scalars read from tensors at the top level (host_scalars.py), min/max on
booleans, and the ONNX ops whose torch-mlir lowering is wrong (onnx_checks.py): numerics on every device against
numpy or onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.codegen_spirv import validate
from portable.errors import UnsupportedOp
from portable.frontend.onnx_import import onnx_to_mlir

RNG = np.random.default_rng(11)


def tt(shape, elem="f32") -> str:
    return f"tensor<{'x'.join(str(d) for d in shape)}{'x' if shape else ''}{elem}>"


def run_mlir(text: str, inputs: list, device: str):
    exe = portable.compile(text, device=device)
    if device.startswith("vulkan"):
        for k in exe.executable.kernels:
            validate(k.spirv)
    return exe(*inputs)


def inserted(dest: np.ndarray, src: np.ndarray, offs, sizes, strides) -> np.ndarray:
    out = dest.copy()
    out[tuple(slice(o, o + (s - 1) * st + 1, st) for o, s, st in zip(offs, sizes, strides))] = src.reshape(sizes)
    return out


def insert_module(src_shape, dest_shape, offs, sizes, strides, dest: str) -> str:
    """dest: 'arg' (a function argument), 'const' (a splat constant 7), 'fill' (a fill of 0.5), 'zeros'."""
    ins = f"%src: {tt(src_shape)}" + (f", %dest: {tt(dest_shape)}" if dest == "arg" else "")
    pre = {
        "arg": "",
        "const": f"%dest = arith.constant dense<7.0> : {tt(dest_shape)}",
        "fill": f"%c = arith.constant 0.5 : f32\n  %e = tensor.empty() : {tt(dest_shape)}\n"
                f"  %dest = linalg.fill ins(%c : f32) outs(%e : {tt(dest_shape)}) -> {tt(dest_shape)}",
        "zeros": f"%dest = arith.constant dense<0.0> : {tt(dest_shape)}",
    }[dest]
    lst = lambda v: ", ".join(str(x) for x in v)  # noqa: E731
    return f"""
func.func @f({ins}) -> {tt(dest_shape)} {{
  {pre}
  %r = tensor.insert_slice %src into %dest[{lst(offs)}] [{lst(sizes)}] [{lst(strides)}]
      : {tt(src_shape)} into {tt(dest_shape)}
  return %r : {tt(dest_shape)}
}}"""


DEST_VALUE = {"const": 7.0, "fill": 0.5, "zeros": 0.0}

INSERTS = [
    # src shape, dest shape, offsets, sizes, strides, destination
    ((3,), (10,), (2,), (3,), (3,), "arg"),
    ((3,), (10,), (7,), (3,), (1,), "const"),
    ((3, 4), (7, 9), (1, 2), (3, 4), (1, 1), "fill"),
    ((3, 4), (7, 9), (0, 1), (3, 4), (2, 2), "arg"),
    ((4, 5), (3, 6, 5), (1, 1, 0), (1, 4, 5), (1, 1, 1), "arg"),  # rank-reducing
    ((4, 5), (3, 6, 5), (2, 0, 0), (1, 4, 5), (1, 1, 1), "const"),  # rank-reducing into a splat
    ((1, 2, 3, 3), (1, 2, 9, 7), (0, 0, 1, 0), (1, 2, 3, 3), (1, 1, 3, 2), "zeros"),  # ConvTranspose's upsampling
    ((2, 3, 2, 2), (2, 5, 4, 6), (0, 1, 2, 1), (2, 3, 2, 2), (1, 1, 1, 4), "fill"),
]


@pytest.mark.parametrize("case", INSERTS, ids=lambda c: f"{c[1]}-{c[5]}-s{''.join(map(str, c[4]))}")
def test_insert_slice(device, case):
    src_shape, dest_shape, offs, sizes, strides, dest = case
    src = RNG.standard_normal(src_shape).astype(np.float32)
    text = insert_module(src_shape, dest_shape, offs, sizes, strides, dest)
    if dest == "arg":
        d = RNG.standard_normal(dest_shape).astype(np.float32)
        (out,) = run_mlir(text, [src, d], device)
    else:
        d = np.full(dest_shape, DEST_VALUE[dest], np.float32)
        (out,) = run_mlir(text, [src], device)
    np.testing.assert_array_equal(out, inserted(d, src, offs, sizes, strides))


def test_insert_slice_chain_into_empty(device):
    """Two inserts that together define every element of an empty tensor (Det's rows), then a use."""
    text = """
func.func @f(%a: tensor<1x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %0 = tensor.insert_slice %a into %e[0, 0] [1, 3] [1, 1] : tensor<1x3xf32> into tensor<2x3xf32>
  %1 = tensor.insert_slice %b into %0[1, 0] [1, 3] [1, 1] : tensor<3xf32> into tensor<2x3xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]} ins(%1 : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %x : f32
    linalg.yield %y : f32
  } -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}"""
    a, b = RNG.standard_normal((1, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    (out,) = run_mlir(text, [a, b], device)
    np.testing.assert_allclose(out, np.concatenate([a, b[None]]) ** 2, rtol=1e-6)


def test_insert_slice_dynamic_offset_is_refused(device):
    text = """
func.func @f(%a: tensor<2xf32>, %d: tensor<5xf32>, %i: tensor<i64>) -> tensor<5xf32> {
  %n = tensor.extract %i[] : tensor<i64>
  %o = arith.index_cast %n : i64 to index
  %r = tensor.insert_slice %a into %d[%o] [2] [1] : tensor<2xf32> into tensor<5xf32>
  return %r : tensor<5xf32>
}"""
    with pytest.raises(UnsupportedOp, match="insert_slice with dynamic offsets"):
        portable.compile(text, device=device)


# ---------------------------------------------------------------------------------------- scalars from tensors
SCALE_BY_MAX = """
func.func @f(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<f32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %m = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>], iterator_types = ["reduction"]}
      ins(%x : tensor<6xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %s = tensor.extract %m[] : tensor<f32>
  %e = tensor.empty() : tensor<6xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<6xf32>) outs(%e : tensor<6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<6xf32>
  return %y, %m : tensor<6xf32>, tensor<f32>
}"""


def test_extract_of_reduction_used_in_kernel(device):
    x = RNG.uniform(0.5, 3.0, 6).astype(np.float32)
    y, m = run_mlir(SCALE_BY_MAX, [x], device)
    np.testing.assert_allclose(y, x / x.max(), rtol=1e-6)
    np.testing.assert_allclose(m, x.max())


SCALAR_CHAIN = """
func.func @f(%x: tensor<3x4xf32>, %v: tensor<4xf32>) -> tensor<3x4xf32> {
  %c2 = arith.constant 2 : index
  %k = arith.constant 3.0 : f64
  %s = tensor.extract %v[%c2] : tensor<4xf32>
  %w = arith.extf %s : f32 to f64
  %q = arith.mulf %w, %k : f64
  %t = arith.truncf %q : f64 to f32
  %e = tensor.empty() : tensor<3x4xf32>
  %filled = linalg.fill ins(%t : f32) outs(%e : tensor<3x4xf32>) -> tensor<3x4xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %filled : tensor<3x4xf32>, tensor<3x4xf32>) outs(%e : tensor<3x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    %r2 = arith.subf %r, %s : f32
    linalg.yield %r2 : f32
  } -> tensor<3x4xf32>
  return %y : tensor<3x4xf32>
}"""


def test_extract_at_constant_index_through_scalar_ops(device):
    """A scalar read at a constant index, widened to f64 and scaled on the top level, fills a tensor and is
    used in a kernel's body."""
    x, v = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    (y,) = run_mlir(SCALAR_CHAIN, [x, v], device)
    np.testing.assert_allclose(y, x + np.float32(np.float64(v[2]) * 3.0) - v[2], rtol=1e-5, atol=1e-6)


DYNAMIC_INDEX = """
func.func @f(%x: tensor<5xf32>, %t: tensor<7xf32>, %i: tensor<i64>) -> tensor<5xf32> {
  %n = tensor.extract %i[] : tensor<i64>
  %c7 = arith.constant 7 : i64
  %wrapped = arith.remsi %n, %c7 : i64
  %idx = arith.index_cast %wrapped : i64 to index
  %s = tensor.extract %t[%idx] : tensor<7xf32>
  %e = tensor.empty() : tensor<5xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<5xf32>) outs(%e : tensor<5xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<5xf32>
  return %y : tensor<5xf32>
}"""


@pytest.mark.parametrize("i", [3, 12])
def test_extract_at_index_read_from_a_tensor(device, i):
    x, t = RNG.standard_normal(5).astype(np.float32), RNG.standard_normal(7).astype(np.float32)
    (y,) = run_mlir(DYNAMIC_INDEX, [x, t, np.array(i, np.int64)], device)
    np.testing.assert_allclose(y, x * t[i % 7], rtol=1e-6)


def test_scalar_used_outside_linalg_is_refused(device):
    text = """
func.func @f(%t: tensor<3xf32>) -> tensor<2xf32> {
  %c0 = arith.constant 0 : index
  %s = tensor.extract %t[%c0] : tensor<3xf32>
  %d = arith.addf %s, %s : f32
  %r = tensor.from_elements %s, %d : tensor<2xf32>
  return %r : tensor<2xf32>
}"""
    with pytest.raises(UnsupportedOp, match="scalar read from a tensor.*used by 'tensor.from_elements'"):
        portable.compile(text, device=device)


# ---------------------------------------------------------------------------------------- through ONNX
onnx = pytest.importorskip("onnx", reason="the ONNX tests need the 'onnx' package")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def check_onnx(m, feeds, device, rtol=1e-4, atol=1e-5):
    refs = ReferenceEvaluator(m).run(None, feeds)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        if o.dtype != r.dtype and o.dtype.itemsize == r.dtype.itemsize and o.dtype.kind in "iu":
            o = o.view(r.dtype)  # uint8 outputs come back as the signless int8 of the MLIR
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


CONV_TRANSPOSES = [
    # x shape, w shape, attributes
    ((1, 2, 4, 3), (2, 3, 3, 3), {"strides": [2, 3], "pads": [1, 2, 1, 2]}),
    ((1, 1, 5), (1, 2, 3), {"strides": [3], "output_padding": [1]}),
    ((1, 2, 3, 3), (2, 1, 2, 2), {"dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 1, 2, 3, 2), (1, 2, 2, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSES, ids=lambda c: "x".join(map(str, c[0])))
def test_conv_transpose(device, case):
    xs, ws, attrs = case
    ref = ReferenceEvaluator(model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
                                   [vi("x", list(xs)), vi("w", list(ws))], [vi("y", None)]))
    x, w = RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ws).astype(np.float32)
    ys = ref.run(None, {"x": x, "w": w})[0].shape
    m = model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)],
              [vi("x", list(xs)), vi("w", list(ws))], [vi("y", list(ys))])
    check_onnx(m, {"x": x, "w": w}, device)


@pytest.mark.parametrize("x", [[0.3, -1.2, 4.0, 2.5, -0.7, 1.1], [1.0, 2.5, 0.5, 7.0, 3.0, 0.25],
                               [-5.0, -1.0, -2.0, -3.0, -4.0, -0.5]])
def test_dynamic_quantize_linear(device, x):
    m = model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zp"])],
              [vi("x", [6])], [vi("y", [6], T.UINT8), vi("scale", []), vi("zp", [], T.UINT8)], opset=11)
    check_onnx(m, {"x": np.array(x, np.float32)}, device, rtol=1e-6, atol=0)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_reduce_min_max_of_booleans(device, op):
    m = model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)],
              [vi("x", [4, 3], T.BOOL)], [vi("y", [4, 1], T.BOOL)], [("axes", np.array([1], np.int64))], opset=20)
    x = np.array([[True, False, True], [False, False, False], [True, True, True], [False, True, False]])
    check_onnx(m, {"x": x}, device)


def test_gelu_tanh_is_expanded(device):
    """torch-mlir lowers approximate='tanh' with a rounded sqrt(2/pi); its ONNX function body is exact."""
    m = model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], [vi("x", [64])], [vi("y", [64])],
              opset=20)
    check_onnx(m, {"x": np.linspace(-6, 3, 64, dtype=np.float32)}, device, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes(device, mode):
    m = model([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)],
              [vi("x", [1, 2, 4, 6])], [vi("y", [1, 8, 2, 3])], opset=28)
    try:
        ReferenceEvaluator(m)
    except Exception as e:  # noqa: BLE001 - an onnx without the mode attribute
        pytest.skip(f"this onnx has no SpaceToDepth with a mode: {e}")
    check_onnx(m, {"x": np.arange(48, dtype=np.float32).reshape(1, 2, 4, 6)}, device, rtol=0, atol=0)


def test_mean_variance_normalization_default_axes(device):
    m = model([helper.make_node("MeanVarianceNormalization", ["x"], ["y"])], [vi("x", [3, 3, 3, 1])],
              [vi("y", [3, 3, 3, 1])], opset=13)
    check_onnx(m, {"x": RNG.standard_normal((3, 3, 3, 1)).astype(np.float32)}, device)


def _qlinear_matmul(shape_a, shape_b):
    inits = [("as", np.array(0.01, np.float32)), ("az", np.array(3, np.int8)), ("bs", np.array(0.02, np.float32)),
             ("bz", np.array(-2, np.int8)), ("ys", np.array(0.05, np.float32)), ("yz", np.array(1, np.int8))]
    out = list(shape_a[:-1]) + [shape_b[-1]]
    return model([helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
                 [vi("a", list(shape_a), T.INT8), vi("b", list(shape_b), T.INT8)], [vi("y", out, T.INT8)], inits)


def test_batched_qlinear_matmul(device):
    # torch-mlir's lowering would drop the zero points; the frontend rewrites the node (onnx_decomp_linalg.py).
    a = RNG.integers(-128, 127, (2, 2, 4), dtype=np.int8)
    b = RNG.integers(-128, 127, (2, 4, 3), dtype=np.int8)
    check_onnx(_qlinear_matmul((2, 2, 4), (2, 4, 3)), {"a": a, "b": b}, device, rtol=0, atol=0)


def test_qlinear_matmul_2d(device):
    a = RNG.integers(-128, 127, (2, 4), dtype=np.int8)
    b = RNG.integers(-128, 127, (4, 3), dtype=np.int8)
    check_onnx(_qlinear_matmul((2, 4), (4, 3)), {"a": a, "b": b}, device, rtol=0, atol=0)


@pytest.mark.parametrize("zp", [[84, 24, 196], [84, 24, 96]])
def test_dequantize_per_axis_uint8_zero_point(device, zp):
    # Zero points >= 128 were sign-extended by torch-mlir's lowering; the frontend rewrites the node.
    m = model([helper.make_node("DequantizeLinear", ["x", "s", "zp"], ["y"], axis=1)],
              [vi("x", [1, 3, 2], T.UINT8)], [vi("y", [1, 3, 2])],
              [("s", np.array([2.0, 4.0, 5.0], np.float32)), ("zp", np.array(zp, np.uint8))], opset=21)
    x = np.array([[[3, 89], [34, 200], [245, 99]]], np.uint8)
    check_onnx(m, {"x": x}, device, rtol=0, atol=0)


def test_lstm_with_peepholes_is_refused():
    h = 3
    m = model([helper.make_node("LSTM", ["x", "w", "r", "", "", "", "", "p"], ["", "yh"], hidden_size=h)],
              [vi("x", [1, 2, 4])], [vi("yh", [1, 2, h])],
              [("w", np.ones((1, 4 * h, 4), np.float32)), ("r", np.ones((1, 4 * h, h), np.float32)),
               ("p", np.ones((1, 3 * h), np.float32))])
    with pytest.raises(UnsupportedOp, match="peephole"):
        onnx_to_mlir(m)


def test_pad_with_runtime_value(device):
    """The pad value is a graph input: a scalar read from a tensor, used by the pad's gather kernel."""
    m = model([helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode="constant")],
              [vi("x", [2, 3]), vi("v", [])], [vi("y", [4, 6])], [("pads", np.array([1, 2, 1, 1], np.int64))])
    check_onnx(m, {"x": RNG.standard_normal((2, 3)).astype(np.float32), "v": np.array(2.5, np.float32)}, device)
