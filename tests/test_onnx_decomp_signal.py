"""Resize, GridSample, DFT, STFT and MelWeightMatrix rewritten into plain ONNX ops (onnx_decomp_signal.py,
onnx_decomp_grid.py, onnx_decomp_spectral.py): small models built with onnx.helper, several variants per model,
run on every device and checked against onnx's reference evaluator (onnxruntime where the two disagree and the
spec sides with onnxruntime)."""

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


def model(nodes, inputs, outputs, inits=(), opset=19):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape=None, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def check(m, feeds, device, rtol=1e-4, atol=1e-5, reference="onnx", reference_model=None):
    """portable's outputs of m against the reference's (or onnxruntime's) of m or of an equivalent model."""
    r = reference_model or m
    if reference == "onnxruntime":
        ort = pytest.importorskip("onnxruntime", reason="this case is checked against onnxruntime")
        refs = ort.InferenceSession(r.SerializeToString()).run(None, feeds)
    else:
        refs = ReferenceEvaluator(r).run(None, feeds)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for i, (o, r) in enumerate(zip(outs, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype, (i, o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, err_msg=f"output {i} ({m.graph.output[i].name})")


# ------------------------------------------------------------------------------------------------- Resize
def resize_model(variants, shape, dtype=T.FLOAT, opset=19):
    """One model, one Resize per variant (name, scales, sizes, roi, attrs), all reading input x."""
    nodes, outputs, inits = [], [], []
    for name, scales, sizes, roi, attrs in variants:
        ins = ["x", "", "", ""]
        for i, (kind, value, np_type) in enumerate((("roi", roi, np.float32), ("scales", scales, np.float32),
                                                   ("sizes", sizes, np.int64))):
            if value is not None:
                ins[i + 1] = f"{name}_{kind}"
                inits.append((ins[i + 1], np.array(value, np_type)))
        nodes.append(helper.make_node("Resize", ins[:max(i for i, s in enumerate(ins) if s) + 1], [name], **attrs))
        outputs.append(vi(name, dtype=dtype))
    return model(nodes, [vi("x", shape, dtype)], outputs, inits, opset)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_coordinate_modes(device, mode):
    """Every coordinate transformation, up- and downscaling by odd factors, given as scales and as sizes."""
    variants = []
    for ctm in ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]:
        attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
        variants.append((f"{ctm}_up", [1, 1, 1.7, 2.5], None, None, attrs))
        variants.append((f"{ctm}_down", [1, 1, 0.6, 0.45], None, None, attrs))
        variants.append((f"{ctm}_sizes", None, [1, 3, 9, 4], None, attrs))
    check(resize_model(variants, [1, 3, 5, 7]), {"x": RNG.standard_normal((1, 3, 5, 7)).astype(np.float32)}, device)


def test_resize_nearest_modes_on_ties(device):
    """Coordinates landing exactly on .5 (2x downscale, half_pixel) and near it: each nearest_mode's rounding."""
    variants = [(f"{nm}_{i}", scales, None, None, dict(mode="nearest", nearest_mode=nm,
                                                       coordinate_transformation_mode=ctm))
                for nm in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
                for i, (scales, ctm) in enumerate([([1, 1, 0.5, 0.6], "half_pixel"), ([1, 1, 1.5, 0.8], "asymmetric"),
                                                   ([1, 1, 2.5, 1.7], "align_corners")])]
    x = np.arange(4 * 10, dtype=np.float32).reshape(1, 1, 4, 10)
    check(resize_model(variants, [1, 1, 4, 10]), {"x": x}, device, rtol=0, atol=0)


def test_resize_antialias_cubic_a_exclude_outside(device):
    variants = [
        ("linear_aa", [1, 1, 0.45, 0.3], None, None, dict(mode="linear", antialias=1)),
        ("cubic_aa", [1, 1, 0.6, 0.25], None, None, dict(mode="cubic", antialias=1)),
        ("cubic_aa_up", [1, 1, 1.6, 0.8], None, None, dict(mode="cubic", antialias=1, cubic_coeff_a=-0.5)),
        ("cubic_exclude", [1, 1, 1.6, 0.7], None, None, dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5)),
        ("linear_exclude", [1, 1, 0.7, 1.9], None, None, dict(mode="linear", exclude_outside=1)),
        ("nearest_exclude", [1, 1, 0.6, 1.7], None, None, dict(mode="nearest", exclude_outside=1,
                                                                nearest_mode="floor")),
    ]
    check(resize_model(variants, [1, 2, 11, 13]), {"x": RNG.standard_normal((1, 2, 11, 13)).astype(np.float32)},
          device)


def test_resize_tf_crop_and_resize(device):
    """Crop boxes reaching past the input: those outputs take extrapolation_value; axes given in any order."""
    crop = dict(coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)
    variants = [(f"{mode}_crop", None, [1, 2, 3, 6], [0, 0, 0.3, -0.2, 1, 1, 1.1, 0.8], dict(mode=mode, **crop))
                for mode in ["nearest", "linear", "cubic"]]
    variants.append(("linear_crop_axes", None, [6, 3], [-0.2, 0.3, 0.8, 1.1], dict(mode="linear", axes=[3, 2],
                                                                                   **crop)))
    variants.append(("cubic_crop_one", [0.2, 1.4], None, [0.1, 0.25, 0.6, 0.9], dict(mode="cubic", axes=[2, 3],
                                                                                          **crop)))
    check(resize_model(variants, [1, 2, 4, 5]), {"x": RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)}, device)


def test_resize_axes_aspect_ratio_rank(device):
    """axes (negative, reversed), keep_aspect_ratio_policy, a resized batch axis: all beyond torch-mlir's lowering.
    The reference takes no negative axes: it runs the same model with axis -1 written 3."""
    variants = [
        ("nearest_axes", [3.0, 2.0], None, None, dict(mode="nearest", axes=[-1, 2])),
        ("linear_axes", None, [6, 4], None, dict(mode="linear", axes=[-1, -2])),
        ("linear_not_larger", None, [7, 7], None,
         dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_larger")),
        ("cubic_not_smaller", None, [7, 7], None,
         dict(mode="cubic", axes=[2, 3], keep_aspect_ratio_policy="not_smaller",
              coordinate_transformation_mode="align_corners")),
        ("linear_batch", [0.5, 1, 2.0, 1.5], None, None, dict(mode="linear")),
        ("nearest_batch_and_w", [1.5, 1, 1, 2.0], None, None, dict(mode="nearest")),
    ]
    positive = [(n, sc, sz, roi, dict(a, axes=[x % 4 for x in a["axes"]]) if "axes" in a else a)
                for n, sc, sz, roi, a in variants]
    check(resize_model(variants, [2, 3, 4, 5]), {"x": RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)}, device,
          reference_model=resize_model(positive, [2, 3, 4, 5]))
    volume = [("trilinear", [1, 1, 2.0, 1.5, 0.6], None, None, dict(mode="linear")),
              ("tricubic", [1, 1, 0.7, 1.0, 1.8], None, None, dict(mode="cubic"))]
    check(resize_model(volume, [1, 2, 3, 4, 5]), {"x": RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)},
          device)


def test_resize_pytorch_half_pixel_single_output(device):
    """One output along an axis samples index 0 (spec, onnxruntime, PyTorch); the reference samples -0.5."""
    attrs = dict(mode="cubic", coordinate_transformation_mode="pytorch_half_pixel")
    variants = [("cubic_one", None, [1, 1, 1, 3], None, attrs), ("cubic_one_s", [1, 1, 0.3, 0.6], None, None, attrs)]
    x = (np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5) ** 1.5)
    check(resize_model(variants, [1, 1, 4, 5]), {"x": x}, device, reference="onnxruntime")


def test_resize_element_types(device):
    """Integers interpolate in float32 and round half to even; nearest copies any type exactly."""
    x = RNG.integers(-1000, 1000, (1, 2, 4, 5)).astype(np.int32)
    ints = [("linear_i32", [1, 1, 1.5, 0.7], None, None, dict(mode="linear")),
            ("cubic_i32", [1, 1, 1.3, 1.7], None, None, dict(mode="cubic", exclude_outside=1)),
            ("nearest_i32", [1, 1, 1.5, 0.7], None, None, dict(mode="nearest"))]
    check(resize_model(ints, [1, 2, 4, 5], T.INT32), {"x": x}, device, rtol=0, atol=0)
    x16 = RNG.standard_normal((1, 2, 4, 5)).astype(np.float16)
    halfs = [("linear_f16", [1, 1, 1.5, 0.7], None, None, dict(mode="linear", antialias=1)),
             ("cubic_f16", [1, 1, 1.5, 0.7], None, None, dict(mode="cubic")),
             ("nearest_f16", [1, 1, 1.5, 0.7], None, None, dict(mode="nearest"))]
    check(resize_model(halfs, [1, 2, 4, 5], T.FLOAT16), {"x": x16}, device, rtol=1e-3, atol=1e-3)


def test_resize_long_axis_gathers_taps(device):
    """An axis too long for a dense [out, in] matrix: its taps are gathered and weighted instead."""
    variants = [("linear_long", [1, 1, 1, 1.7], None, None,
                 dict(mode="linear", coordinate_transformation_mode="align_corners")),
                ("cubic_long_aa", [1, 1, 0.37, 1], None, None, dict(mode="cubic", antialias=1))]
    m = resize_model(variants, [1, 2, 300, 301])
    assert not any(n.op_type == "MatMul" for n in decompose(infer_shapes(m), infer_shapes).graph.node)
    check(m, {"x": RNG.standard_normal((1, 2, 300, 301)).astype(np.float32)}, device)


def test_plain_upsample_stays_cheap():
    """A 2x nearest/linear upsample of a CV-sized map is no matrix: nearest becomes one Gather with an index
    table the size of the output plane, linear stays torch-mlir's own one-kernel lowering."""
    variants = [("nearest2x", [1, 1, 2, 2], None, None, dict(mode="nearest")),
                ("linear2x", [1, 1, 2, 2], None, None, dict(mode="linear")),
                ("linear2x_corners", None, [1, 64, 192, 192], None, dict(mode="linear",
                                                                          coordinate_transformation_mode="align_corners"))]
    m = decompose(infer_shapes(resize_model(variants, [1, 64, 96, 96])), infer_shapes)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Resize") == 2 and ops.count("Gather") == 1 and "MatMul" not in ops, ops
    biggest = max(int(np.prod(t.dims)) for t in m.graph.initializer)
    assert biggest <= 192 * 192, biggest


def test_resize_trailing_empty_input(device):
    """A trailing '' for the absent sizes input: torch-mlir's own lowering crashes on it unless it is dropped."""
    m = model([helper.make_node("Resize", ["x", "", "s", ""], ["y"], mode="linear")], [vi("x", [1, 2, 3, 5])],
              [vi("y")], [("s", np.array([1, 1, 2, 1.5], np.float32))])
    check(m, {"x": RNG.standard_normal((1, 2, 3, 5)).astype(np.float32)}, device)


def test_resize_runtime_scales_are_refused():
    m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")], [vi("x", [1, 1, 4, 4]), vi("s", [4])],
              [vi("y")])
    with pytest.raises(UnsupportedOp, match=r"Resize.*scales input 's' is computed at run time"):
        onnx_to_mlir(m)


# --------------------------------------------------------------------------------------------- GridSample
def grid_model(variants, xshape, gshape, opset=22, dtype=T.FLOAT):
    nodes = [helper.make_node("GridSample", ["x", "grid"], [name], **attrs) for name, attrs in variants]
    return model(nodes, [vi("x", xshape, dtype), vi("grid", gshape)], [vi(name, dtype=dtype) for name, _ in variants],
                 opset=opset)


def grid_values(shape, dims, align_corners, span=1.6):
    """Grid points anywhere in [-span, span], half of them on pixel centres or half-way between two (ties)."""
    grid = RNG.uniform(-span, span, shape).astype(np.float32)
    for d, length in enumerate(reversed(dims)):
        k = RNG.integers(-2 * length, 2 * length + 1, shape[:-1]) / 2
        exact = (2 * k / (length - 1) - 1) if align_corners else ((2 * k + 1) / length - 1)
        grid[..., d] = np.where(RNG.random(shape[:-1]) < 0.5, exact, grid[..., d])
    return grid


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_grid_sample_2d(device, mode):
    for align in (0, 1):
        variants = [(f"{pad}", dict(mode=mode, padding_mode=pad, align_corners=align))
                    for pad in ["zeros", "border", "reflection"]]
        x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
        grid = grid_values((2, 4, 6, 2), [5, 7], align)
        check(grid_model(variants, [2, 3, 5, 7], [2, 4, 6, 2]), {"x": x, "grid": grid}, device)


def test_grid_sample_volumetric(device):
    variants = [(f"{mode}_{pad}_{align}", dict(mode=mode, padding_mode=pad, align_corners=align))
                for mode in ["nearest", "linear"] for pad in ["zeros", "reflection"] for align in (0, 1)]
    variants.append(("cubic_border", dict(mode="cubic", padding_mode="border")))
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    check(grid_model(variants, [1, 2, 3, 4, 5], [1, 2, 3, 4, 3]),
          {"x": x, "grid": RNG.uniform(-1.4, 1.4, (1, 2, 3, 4, 3)).astype(np.float32)}, device)


def test_grid_sample_opset16_names_and_int_nearest(device):
    """Opset 16 calls the modes bilinear/bicubic (checked against onnxruntime: the reference knows only the new
    names); integer inputs can be sampled nearest."""
    variants = [("bilinear", dict(mode="bilinear", padding_mode="reflection")),
                ("bicubic", dict(mode="bicubic", align_corners=1)), ("default", {})]
    x = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
    check(grid_model(variants, [1, 2, 4, 6], [1, 3, 5, 2], opset=16),
          {"x": x, "grid": RNG.uniform(-1.3, 1.3, (1, 3, 5, 2)).astype(np.float32)}, device, reference="onnxruntime")
    xi = RNG.integers(-50, 50, (2, 1, 4, 6)).astype(np.int32)
    check(grid_model([("nearest_i32", dict(mode="nearest", padding_mode="border"))], [2, 1, 4, 6], [2, 3, 5, 2],
                     dtype=T.INT32), {"x": xi, "grid": grid_values((2, 3, 5, 2), [4, 6], 0)}, device, rtol=0, atol=0)


def test_grid_sample_linear_of_integers_is_refused():
    m = grid_model([("y", dict(mode="linear"))], [1, 1, 4, 4], [1, 2, 2, 2], dtype=T.INT32)
    with pytest.raises(UnsupportedOp, match=r"GridSample.*linear sampling of int32"):
        onnx_to_mlir(m)


# ----------------------------------------------------------------------------------------- DFT, STFT, mel
def dft_model(variants, shape, opset):
    """One DFT per variant (name, axis, dft_length, attrs); opset 20 takes the axis as an input."""
    nodes, inits = [], []
    for name, axis, length, attrs in variants:
        ins = ["x", ""]
        if length is not None:
            ins[1] = f"{name}_n"
            inits.append((ins[1], np.array(length, np.int64)))
        if opset >= 20:
            ins.append(f"{name}_axis")
            inits.append((ins[2], np.array(axis, np.int64)))
        else:
            attrs = dict(attrs, axis=axis)
        nodes.append(helper.make_node("DFT", ins, [name], **attrs))
    return model(nodes, [vi("x", shape)], [vi(name) for name, *_ in variants], inits, opset)


@pytest.mark.parametrize("opset", [17, 20])
def test_dft(device, opset):
    """Forward and inverse, one-sided, signal zero-padded (dft_length 12) or truncated (5), odd lengths, real
    and complex input, each signal axis."""
    for parts in (1, 2):
        variants = []
        for inverse in (0, 1):
            for length in (None, 5, 12):
                variants.append((f"inv{inverse}_n{length}", 1, length, dict(inverse=inverse)))
        if parts == 1:
            variants += [("rfft", 1, None, dict(onesided=1)), ("rfft_n12", 2, 12, dict(onesided=1)),
                         ("axis0", 0, None, {}), ("axis_neg", -2, 6, dict(inverse=1))]
        elif opset >= 20:  # irfft: one-sided complex spectrum in, real signal out
            irfft = dict(inverse=1, onesided=1)
            variants += [("irfft", 1, None, irfft), ("irfft_n9", 2, 9, irfft)]
        x = RNG.standard_normal((2, 7, 3, parts)).astype(np.float32)
        check(dft_model(variants, [2, 7, 3, parts], opset), {"x": x}, device, rtol=1e-4, atol=1e-4)


def test_dft_long_signal(device):
    x = RNG.standard_normal((2, 500, 1)).astype(np.float32)
    check(dft_model([("rfft", 1, None, dict(onesided=1)), ("ifft", 1, 512, dict(inverse=1))], [2, 500, 1], 20),
          {"x": x}, device, rtol=1e-3, atol=1e-3)


def stft_model(signal_shape, step, frame_length=None, window=None, window_input=False, onesided=1):
    ins, inputs, inits = ["s", "step", "", ""], [vi("s", signal_shape)], [("step", np.array(step, np.int64))]
    if window is not None:
        ins[2] = "w"
        if window_input:
            inputs.append(vi("w", [len(window)]))
        else:
            inits.append(("w", np.asarray(window, np.float32)))
    if frame_length is not None:
        ins[3] = "n"
        inits.append(("n", np.array(frame_length, np.int64)))
    # onesided is always given: onnx's shape inference reads a missing one as 0, against its schema (default 1).
    return model([helper.make_node("STFT", ins, ["y"], onesided=onesided)], inputs, [vi("y")], inits, opset=17)


def test_stft(device):
    s = RNG.standard_normal((2, 64, 1)).astype(np.float32)
    check(stft_model([2, 64, 1], 8, frame_length=16), {"s": s}, device, atol=1e-4)
    check(stft_model([2, 64, 1], 5, window=np.hanning(15)), {"s": s}, device, atol=1e-4)
    check(stft_model([2, 64, 1], 6, window=np.hamming(16), window_input=True, onesided=0),
          {"s": s, "w": np.hamming(16).astype(np.float32)}, device, atol=1e-4)
    c = RNG.standard_normal((1, 41, 2)).astype(np.float32)
    check(stft_model([1, 41, 2], 7, frame_length=9, onesided=0), {"s": c}, device, atol=1e-4)


@pytest.mark.parametrize("params", [(8, 16, 8192, 0.0, 4096.0), (10, 63, 16000, 20.0, 7000.0)])
def test_mel_weight_matrix_from_runtime_scalars(device, params):
    """All five inputs at run time: the filters are computed on the device, the shape is the declared one."""
    mels, dft_length, rate, low, high = params
    names = ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"]
    types = [T.INT32, T.INT32, T.INT32, T.FLOAT, T.FLOAT]
    m = model([helper.make_node("MelWeightMatrix", names, ["y"])], [vi(n, [], t) for n, t in zip(names, types)],
              [vi("y", [dft_length // 2 + 1, mels])], opset=17)
    feeds = dict(zip(names, [np.array(mels, np.int32), np.array(dft_length, np.int32), np.array(rate, np.int32),
                             np.array(low, np.float32), np.array(high, np.float32)]))
    check(m, feeds, device, rtol=0, atol=1e-6)
