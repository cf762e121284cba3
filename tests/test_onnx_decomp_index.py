"""Rewrites of index-driven ONNX ops (onnx_decomp_index.py, onnx_decomp_topk.py): CumSum/CumProd, the scatters,
TopK, Compress and LpPool become dense ops; each is run on every device and checked against onnx's reference
evaluator (numpy for padded LpPool, whose reference divides padded windows differently from the spec's zero
padding)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import portable  # noqa: E402
from portable.errors import UnsupportedOp  # noqa: E402
from portable.frontend.onnx_decompose import decompose  # noqa: E402
from portable.frontend.onnx_import import infer_shapes, onnx_to_mlir  # noqa: E402

RNG = np.random.default_rng(11)
NP = {T.FLOAT: np.float32, T.DOUBLE: np.float64, T.INT32: np.int32, T.INT64: np.int64, T.BOOL: np.bool_,
      T.FLOAT16: np.float16, T.INT8: np.int8}


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def data(shape, dtype=T.FLOAT, low=-4, high=5):
    if dtype == T.BOOL:
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype in (T.INT8, T.INT32, T.INT64):
        return RNG.integers(low, high, shape).astype(NP[dtype])
    return RNG.standard_normal(shape).astype(NP[dtype])


def check(m, feeds, device, refs=None, rtol=1e-4, atol=1e-5):
    refs = refs if refs is not None else ReferenceEvaluator(m).run(None, feeds)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------- CumSum, CumProd
@pytest.mark.parametrize("op,shape,axis,exclusive,reverse,dtype", [
    ("CumSum", (3, 5, 4), -2, 0, 0, T.FLOAT),
    ("CumSum", (3, 5, 4), 1, 1, 1, T.FLOAT),
    ("CumSum", (7,), 0, 1, 0, T.INT32),
    ("CumSum", (2, 9), -1, 0, 1, T.INT64),
    ("CumProd", (4, 3), 0, 0, 0, T.DOUBLE),
    ("CumProd", (2, 6, 3), -1, 1, 1, T.FLOAT),
    ("CumProd", (5,), 0, 0, 1, T.INT32),
])
def test_cumulative(device, op, shape, axis, exclusive, reverse, dtype):
    x = data(shape, dtype, -3, 4) if op == "CumSum" else (RNG.uniform(0.5, 1.5, shape).astype(NP[dtype])
                                                           if dtype != T.INT32 else data(shape, dtype, -2, 3))
    m = model([helper.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)],
              [vi("x", list(shape), dtype)], [vi("y", list(shape), dtype)],
              [("axis", np.array(axis, np.int32))], opset=26 if op == "CumProd" else 14)
    check(m, {"x": x}, device)


# ------------------------------------------------------------------------------------------------ TopK
@pytest.mark.parametrize("shape,axis,k,largest,dtype", [
    ((3, 7), -1, 3, 1, T.FLOAT),
    ((5, 4, 3), 1, 4, 0, T.FLOAT),
    ((4, 6), 0, 2, 1, T.INT32),
    ((2, 9), -1, 9, 0, T.INT64),
])
def test_top_k(device, shape, axis, k, largest, dtype):
    x = data(shape, dtype, -2, 3)  # integers repeat: ties go to the lower index
    if dtype == T.FLOAT:
        x.reshape(-1)[[1, 4]] = x.reshape(-1)[[2, 7]]
        x.reshape(-1)[5] = np.nan  # NaN sorts as the largest value
    kshape = list(shape)
    kshape[axis] = k
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)],
              [vi("x", list(shape), dtype)], [vi("v", kshape, dtype), vi("i", kshape, T.INT64)],
              [("k", np.array([k], np.int64))], opset=11)
    check(m, {"x": x}, device)


@pytest.mark.parametrize("shape,axis,k,largest,dtype", [
    ((2, 300), -1, 5, 1, T.FLOAT),
    ((3, 250, 2), 1, 4, 0, T.FLOAT),  # padded to whole blocks: the padding ranks after NaN for the smallest
    ((2, 333), -1, 7, 0, T.INT32),
])
def test_top_k_of_a_long_axis_in_blocks(device, monkeypatch, shape, axis, k, largest, dtype):
    """Past the comparison limit (lowered here so small inputs take the path) the axis goes in blocks: each
    block's top k, then the top k of those; ties (integers, copied floats) still by the lower index."""
    from portable.frontend import onnx_decomp_topk

    monkeypatch.setattr(onnx_decomp_topk, "MAX_MASK", 40000)
    x = data(shape, dtype, -20, 20)
    if dtype == T.FLOAT:
        flat = x.reshape(-1)
        flat[[3, 40, 170]] = flat[[9, 41, 3]]
        flat[[5, 77]] = np.nan
    kshape = list(shape)
    kshape[axis] = k
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)],
              [vi("x", list(shape), dtype)], [vi("v", kshape, dtype), vi("i", kshape, T.INT64)],
              [("k", np.array([k], np.int64))], opset=11)
    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    ops = [n.op_type for n in decompose(infer_shapes(copy), infer_shapes).graph.node]
    assert ops.count("ReduceSum") == 4 and "TopK" not in ops  # two ranked steps, each two sums
    check(m, {"x": x}, device)


def test_top_k_of_a_detectors_scores(device):
    """A detector's 300 best of 24000 scores (YOLOv10's end-to-end head): 24000 x 24000 comparisons would be
    too many; in blocks it matches onnxruntime's values and indices exactly."""
    ort = pytest.importorskip("onnxruntime")
    x = RNG.random((1, 24000)).astype(np.float32)
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=-1)], [vi("x", [1, 24000])],
              [vi("v", [1, 300]), vi("i", [1, 300], T.INT64)], [("k", np.array([300], np.int64))], opset=17)
    want = ort.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    got = portable.run(m, x, device=device)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])


def test_top_k_past_both_limits_names_the_size():
    from portable.frontend.onnx_decomp_topk import _block_size

    assert _block_size(1, 24000, 300) is not None
    assert _block_size(1, 1 << 20, 1 << 16) is None
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", [1, 1 << 20])],
              [vi("v", [1, 1 << 16]), vi("i", [1, 1 << 16], T.INT64)], [("k", np.array([1 << 16], np.int64))])
    with pytest.raises(UnsupportedOp, match="TopK.*pairwise comparison"):
        onnx_to_mlir(m)


def test_top_k_needs_constant_k():
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"])], [vi("x", [4, 5]), vi("k", [1], T.INT64)],
              [vi("v", [4, None]), vi("i", [4, None], T.INT64)])
    with pytest.raises(UnsupportedOp, match="TopK.*input_values"):
        onnx_to_mlir(m)


# -------------------------------------------------------------------------------------------- scatters
@pytest.mark.parametrize("reduction,axis,dtype", [
    ("none", 0, T.FLOAT), ("none", -1, T.BOOL), ("add", 1, T.FLOAT), ("add", -2, T.INT32),
    ("mul", 0, T.FLOAT), ("max", -1, T.INT64), ("min", 1, T.FLOAT), ("max", 0, T.BOOL), ("mul", 2, T.INT8),
])
def test_scatter_elements(device, reduction, axis, dtype):
    """Negative and duplicate indices, updates smaller than the data off the axis."""
    dshape, ishape = (4, 5, 3), [3, 4, 2]
    size = dshape[axis]
    indices = RNG.integers(-size, size, ishape).astype(np.int64)
    m = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=axis, reduction=reduction)],
              [vi("d", list(dshape), dtype), vi("i", ishape, T.INT64), vi("u", ishape, dtype)],
              [vi("y", list(dshape), dtype)])
    check(m, {"d": data(dshape, dtype), "i": indices, "u": data(ishape, dtype)}, device)


def test_scatter_elements_int32_indices_opset13(device):
    """Older opsets take Reduce* axes as attributes; int32 indices."""
    m = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1)],
              [vi("d", [3, 6]), vi("i", [3, 2], T.INT32), vi("u", [3, 2])], [vi("y", [3, 6])], opset=13)
    check(m, {"d": data((3, 6)), "i": np.array([[0, -1], [5, 2], [-3, 3]], np.int32), "u": data((3, 2))}, device)


def test_scatter_deprecated(device):
    """Scatter (opset 9-10) is ScatterElements without reduction."""
    d, i, u = data((3, 4)), np.array([[1, -1], [0, 2], [3, 3]], np.int64), data((3, 2))
    m = model([helper.make_node("Scatter", ["d", "i", "u"], ["y"], axis=1)],
              [vi("d", [3, 4]), vi("i", [3, 2], T.INT64), vi("u", [3, 2])], [vi("y", [3, 4])], opset=10)
    same = model([helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1)],
                 [vi("d", [3, 4]), vi("i", [3, 2], T.INT64), vi("u", [3, 2])], [vi("y", [3, 4])])
    check(m, {"d": d, "i": i, "u": u}, device, refs=ReferenceEvaluator(same).run(None, {"d": d, "i": i, "u": u}))


@pytest.mark.parametrize("reduction,dshape,ishape,dtype", [
    ("none", (8,), (4, 1), T.FLOAT),
    ("none", (4, 3, 5), (2, 2, 2), T.INT32),  # slices of [5], duplicates: the last wins
    ("add", (4, 3, 5), (3, 1), T.FLOAT),
    ("mul", (5, 4), (2, 3, 2), T.FLOAT),
    ("max", (3, 4, 2), (5, 2), T.INT64),
    ("min", (6, 2), (3, 1), T.FLOAT),
])
def test_scatter_nd(device, reduction, dshape, ishape, dtype):
    k = ishape[-1]
    indices = np.stack([RNG.integers(-dshape[j], dshape[j], ishape[:-1]) for j in range(k)], -1).astype(np.int64)
    if reduction == "none" and len(ishape) == 2:  # without duplicates, as the spec asks for 'none'
        flat = RNG.permutation(dshape[0])[:ishape[0]]
        indices = (flat - dshape[0] * (flat % 2)).reshape(ishape).astype(np.int64)
    ushape = tuple(ishape[:-1]) + tuple(dshape[k:])
    m = model([helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)],
              [vi("d", list(dshape), dtype), vi("i", list(ishape), T.INT64), vi("u", list(ushape), dtype)],
              [vi("y", list(dshape), dtype)])
    feeds = {"d": data(dshape, dtype), "i": indices, "u": data(ushape, dtype)}
    if reduction == "none" and len(ishape) > 2:
        # Duplicates with 'none' are undefined by the spec; the rewrite lets the last one win, as the
        # reference's sequential loop does.
        feeds["i"][1, 1] = feeds["i"][0, 0]
    check(m, feeds, device)


@pytest.mark.parametrize("mode,axis,with_indices", [("linear", -2, True), ("circular", 1, True),
                                                    ("linear", 2, False)])
def test_tensor_scatter(device, mode, axis, with_indices):
    cache, update = [2, 5, 6, 3], [2, 5, 6, 3]
    update[axis] = 3
    feeds = {"c": data(cache), "u": data(update)}
    inputs = [vi("c", cache), vi("u", update)]
    if with_indices:
        feeds["w"] = np.array([1, 4] if mode == "circular" else [0, 2], np.int64)[:cache[0]]
        inputs.append(vi("w", [cache[0]], T.INT64))
    m = model([helper.make_node("TensorScatter", list(feeds), ["y"], axis=axis, mode=mode)], inputs,
              [vi("y", cache)], opset=24)
    check(m, feeds, device)


# -------------------------------------------------------------------------------------------- Compress
@pytest.mark.parametrize("axis,cond", [(None, [1, 0, 1, 1, 0, 0, 1]), (-1, [0, 1, 1]), (0, [1, 0, 1, 0, 1])])
def test_compress_constant_condition(device, axis, cond):
    attrs = {} if axis is None else {"axis": axis}
    x = data((5, 3))
    (ref,) = ReferenceEvaluator(model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)],
                                      [vi("x", [5, 3]), vi("c", [len(cond)], T.BOOL)], [vi("y", None)]))\
        .run(None, {"x": x, "c": np.array(cond, bool)})
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], **attrs)], [vi("x", [5, 3])], [vi("y", None)],
              [("c", np.array(cond, bool))])
    check(m, {"x": x}, device, refs=[ref])


def test_compress_runtime_condition_is_refused():
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], axis=0)], [vi("x", [5, 3]), vi("c", [5], T.BOOL)],
              [vi("y", None)])
    with pytest.raises(UnsupportedOp, match="data-dependent shape.*input_values"):
        onnx_to_mlir(m)


# ---------------------------------------------------------------------------------------------- LpPool
def lp_pool_reference(x, kernel, strides, dilations, begin, end, p, out_shape):
    """Zero-padded Lp pooling as the spec defines it: (sum over the window of |x|^p)^(1/p)."""
    padded = np.pad(np.abs(x.astype(np.float64)) ** p, [(0, 0), (0, 0)] + list(zip(begin, end)))
    out = np.zeros(x.shape[:2] + tuple(out_shape))
    for o in np.ndindex(*out_shape):
        window = tuple(slice(o[i] * strides[i], o[i] * strides[i] + dilations[i] * (kernel[i] - 1) + 1, dilations[i])
                       for i in range(len(kernel)))
        out[(..., *o)] = padded[(..., *window)].sum(axis=tuple(range(2, 2 + len(kernel))))
    return (out ** (1.0 / p)).astype(x.dtype)


@pytest.mark.parametrize("shape,attrs,begin,end,out_shape", [
    ((1, 3, 11), dict(kernel_shape=[3], p=3), [0], [0], [9]),
    ((2, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1], p=2), [1, 0], [1, 1], [4, 3]),
    ((1, 2, 7, 8), dict(kernel_shape=[2, 3], strides=[2, 2], ceil_mode=1, p=1), [0, 0], [1, 1], [4, 4]),
    ((1, 2, 8, 9), dict(kernel_shape=[2, 2], dilations=[2, 1], auto_pad="SAME_LOWER", p=4), [1, 1], [1, 0],
     [8, 9]),
    ((1, 2, 5, 6), dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER", p=2), [0, 0], [1, 1],
     [3, 3]),
    ((1, 2, 5, 4, 6), dict(kernel_shape=[2, 2, 3], p=3), [0, 0, 0], [0, 0, 0], [4, 3, 4]),
])
def test_lp_pool(device, shape, attrs, begin, end, out_shape):
    x = data(shape)
    m = model([helper.make_node("LpPool", ["x"], ["y"], **attrs)], [vi("x", list(shape))],
              [vi("y", list(shape[:2]) + out_shape)])
    ref = lp_pool_reference(x, attrs["kernel_shape"], attrs.get("strides", [1] * len(begin)),
                            attrs.get("dilations", [1] * len(begin)), begin, end, attrs["p"], out_shape)
    check(m, {"x": x}, device, refs=[ref], rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------- the graph and limits
def test_rewritten_ops_leave_the_graph():
    """After decompose, no node of a rewritten op type is left (torch-mlir never sees them); a rewrite after a
    Compress sees the Compress result's shape, which inference leaves unknown."""
    nodes = [helper.make_node("CumSum", ["x", "ax"], ["a"]),
             helper.make_node("TopK", ["a", "k"], ["v", "i"]),
             helper.make_node("ScatterElements", ["x", "i", "v"], ["s"], axis=1, reduction="add"),
             helper.make_node("ScatterND", ["s", "nd", "row"], ["t"]),
             helper.make_node("Compress", ["t", "c"], ["u"], axis=0),
             helper.make_node("CumProd", ["u", "ax"], ["w"]),
             helper.make_node("LpPool", ["z"], ["y"], kernel_shape=[2])]
    m = model(nodes, [vi("x", [3, 4]), vi("z", [1, 2, 5])], [vi("w", [2, 4]), vi("y", [1, 2, 4])],
              [("ax", np.array(0, np.int64)), ("k", np.array([2], np.int64)), ("nd", np.array([[1]], np.int64)),
               ("row", np.ones((1, 4), np.float32)), ("c", np.array([1, 0, 1], bool))], opset=26)
    out = decompose(infer_shapes(m), infer_shapes)
    ops = {n.op_type for n in out.graph.node}
    assert not ops & {"CumSum", "CumProd", "TopK", "ScatterElements", "ScatterND", "Compress", "LpPool"}, ops
    assert {"Where", "Gather", "Conv"} <= ops


def test_mask_limit():
    """A mask past 2^26 elements is refused with its size, not built."""
    m = model([helper.make_node("CumSum", ["x", "ax"], ["y"])], [vi("x", [4, 5000])], [vi("y", [4, 5000])],
              [("ax", np.array(1, np.int64))])
    with pytest.raises(UnsupportedOp, match=r"CumSum.*4x5000x5000.*2\^26"):
        onnx_to_mlir(m)
