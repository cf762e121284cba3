"""Rewrites of Resize into ONNX ops that torch-mlir lowers to plain linalg (Gather, GatherElements, MatMul,
elementwise ops, ReduceSum); GridSample is in onnx_decomp_grid.py, DFT, STFT and MelWeightMatrix in
onnx_decomp_spectral.py; the three share the building blocks of onnx_decomp_nodes.py.

Resize is separable: per resized axis, the output is a fixed linear map of the input along that axis, so its
taps and weights are computed here with numpy (float64, following the ONNX spec) and applied on the device as
a Gather (nearest), a MatMul with an [out, in] matrix (small axes) or a Gather of the taps + weighted sum.
GridSample's sampling positions come from a run-time grid: they are computed on the device, and the corner
values are gathered from the flattened input.
"""

from __future__ import annotations

import math

import numpy as np

from .onnx_decomp_nodes import (
    cast,
    compute_dtype,
    const_input,
    finish,
    is_float,
    opset,
    reduce_sum,
    reshape,
    unsupported,
)
from .onnx_decompose import Builder, rewrite

# An axis whose [out, in] resize matrix has at most this many entries is applied as one MatMul; larger ones
# gather their few taps instead (a 2x linear upsample of a 512-wide axis is 2 taps, not a 1024x512 matrix).
DENSE_RESIZE_LIMIT = 4096
# A nearest resize of contiguous axes is one Gather on those axes flattened, while its index table is this small.
FLAT_GATHER_LIMIT = 1 << 20


# ---------------------------------------------------------------------------------------------- helpers
def _from_compute(b: Builder, y: str, compute: np.dtype, out: np.dtype) -> str:
    """Back from the compute type to the op's type: integers are rounded (half to even) and saturated, as the
    reference's saturate_cast does."""
    if out.kind in "iu":
        info = np.iinfo(out)
        low, high = b.constant(np.array(info.min, compute), "min"), b.constant(np.array(info.max, compute), "max")
        y = b.op("Clip", [b.op("Round", [y]), low, high])
    return cast(b, y, out, compute)


# ----------------------------------------------------------------------------------------------- Resize
class _Axis:
    """How one axis is resized: input and output length, the scale the coordinates use, the roi."""

    def __init__(self, length: int, out: int, scale: float, roi: tuple):
        self.length, self.out, self.scale, self.roi = length, out, scale, roi


def _resize_inputs(node, b: Builder, ctm: str) -> tuple:
    """(roi, scales, sizes), each None when absent or empty; roi only for tf_crop_and_resize, which alone uses it."""
    roi = const_input(node, b, 1, "roi") if ctm == "tf_crop_and_resize" else None
    scales, sizes = const_input(node, b, 2, "scales"), const_input(node, b, 3, "sizes")
    return tuple(None if v is not None and v.size == 0 else v for v in (roi, scales, sizes))


def _resize_axes(node, b: Builder, inputs: tuple, shape: tuple, out_shape: tuple) -> dict[int, _Axis]:
    """The resized axes (axis -> _Axis) from scales or sizes, `axes` and keep_aspect_ratio_policy."""
    rank = len(shape)
    axes = [a + rank if a < 0 else a for a in (b.attr("axes") or range(rank))]
    roi, scales, sizes = inputs
    if (scales is None) == (sizes is None):
        raise unsupported(node, "exactly one of scales and sizes must be given")
    given = scales if scales is not None else sizes
    if given.size != len(axes):
        raise unsupported(node, f"it has {given.size} scales/sizes for {len(axes)} axes")
    if roi is not None and roi.size != 2 * len(axes):
        raise unsupported(node, f"its roi has {roi.size} values, expected {2 * len(axes)}")
    if scales is not None:
        scale = {a: float(s) for a, s in zip(axes, scales.astype(np.float64))}
    else:
        scale = {a: int(s) / shape[a] for a, s in zip(axes, sizes)}
        policy = b.attr("keep_aspect_ratio_policy", b"stretch").decode()
        if policy != "stretch":
            pick = {"not_larger": min, "not_smaller": max}.get(policy)
            if pick is None:
                raise unsupported(node, f"unknown keep_aspect_ratio_policy '{policy}'")
            s = pick(scale.values())
            scale = {a: s for a in axes}
    out = {}
    for i, a in enumerate(axes):
        # roi values stay numpy scalars of roi's type: the reference computes their differences in that type,
        # which decides whether a border output lands just inside or outside the input.
        span = (roi[i], roi[i + len(axes)]) if roi is not None else (0.0, 1.0)
        if scale[a] <= 0:
            raise unsupported(node, f"scale {scale[a]} of axis {a} is not positive")
        if out_shape[a] == shape[a] and math.isclose(scale[a], 1.0) and span == (0.0, 1.0):
            continue  # identity along this axis
        out[a] = _Axis(shape[a], out_shape[a], scale[a], span)
    return out


def _source_coords(ax: _Axis, ctm: str) -> tuple[np.ndarray, np.ndarray | None]:
    """x_original for every output index (float64), and for tf_crop_and_resize which ones fall outside."""
    o = np.arange(ax.out, dtype=np.float64)
    n, s = ax.length, ax.scale
    width = s * n  # the output length before rounding: align_corners and tf_crop_and_resize use it
    if ctm == "half_pixel":
        return (o + 0.5) / s - 0.5, None
    if ctm == "half_pixel_symmetric":
        offset = n / 2 * (1 - ax.out / width)
        return offset + (o + 0.5) / s - 0.5, None
    if ctm == "pytorch_half_pixel":
        # The spec (and onnxruntime, PyTorch) sample index 0 when the output has length 1.
        return ((o + 0.5) / s - 0.5) if ax.out > 1 else np.zeros_like(o), None
    if ctm == "align_corners":
        return (o * (n - 1) / (width - 1)) if width != 1 else np.zeros_like(o), None
    if ctm == "asymmetric":
        return o / s, None
    if ctm == "tf_crop_and_resize":
        start, end = ax.roi
        if width != 1:
            x = o * (end - start) * (n - 1) / (width - 1)
        else:
            x = np.full_like(o, (end - start) * (n - 1) / 2)
        x = x + start * (n - 1)
        return x, (x < 0) | (x > n - 1)
    raise ValueError(ctm)


def _keys(a: float):
    """Keys' cubic convolution kernel with coefficient a."""
    def kernel(t: np.ndarray) -> np.ndarray:
        t = np.abs(t)
        near = ((a + 2) * t - (a + 3)) * t * t + 1
        far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return np.where(t <= 1, near, np.where(t < 2, far, 0.0))
    return kernel


def _linear_kernel(t: np.ndarray) -> np.ndarray:
    return np.clip(1 - np.abs(t), 0, 1)


def _nearest_taps(x: np.ndarray, nearest_mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The two neighbours floor/ceil of x and which one nearest_mode picks, as one-hot weights."""
    lo = np.floor(x)
    frac = x - lo
    pick_hi = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5,
               "floor": np.zeros_like(x, bool), "ceil": frac > 0}.get(nearest_mode)
    if pick_hi is None:
        raise ValueError(nearest_mode)
    idx = np.stack([lo, lo + 1], axis=1)
    return idx, np.stack([~pick_hi, pick_hi], axis=1).astype(np.float64)


def _interp_taps(x: np.ndarray, ax: _Axis, mode: str, cubic_a: float, antialias: bool):
    """Input indices [out, n] and weights [out, n] of linear/cubic interpolation at x. Antialiasing (when
    downscaling) stretches the kernel by 1/scale, so more taps contribute, and renormalizes the weights."""
    kernel, support = (_linear_kernel, 1) if mode == "linear" else (_keys(cubic_a), 2)
    stretch = min(ax.scale, 1.0) if antialias else 1.0
    start = int(np.floor(-support / stretch)) + 1  # first tap relative to the pixel left of x
    count = 2 - 2 * start
    # The pixel left of x, with an integer x counting as the right end of its interval (taps [x-1, x] for
    # linear): the ONNX reference's convention, which matters for which edge pixels a clamp repeats.
    left = np.ceil(x) - 1
    idx = left[:, None] + start + np.arange(count)[None, :]
    w = kernel((idx - x[:, None]) * stretch)
    if antialias:
        w = w / w.sum(axis=1, keepdims=True)
    return idx, w


def _axis_taps(ax: _Axis, attrs: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(indices [out, n] within the input, weights [out, n], outside mask [out] or None) for one axis."""
    x, outside = _source_coords(ax, attrs["ctm"])
    if attrs["mode"] == "nearest":
        idx, w = _nearest_taps(x, attrs["nearest_mode"])
    else:
        idx, w = _interp_taps(x, ax, attrs["mode"], attrs["cubic_a"], attrs["antialias"])
    if attrs["exclude_outside"]:
        w = np.where((idx < 0) | (idx >= ax.length), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    idx = np.clip(idx, 0, ax.length - 1).astype(np.int64)  # edge padding
    if outside is not None:
        w = np.where(outside[:, None], 0.0, w)
        outside = outside if outside.any() else None
    return idx, w, outside


def _as_gather(idx: np.ndarray, w: np.ndarray, outside: np.ndarray | None) -> np.ndarray | None:
    """The one input index each output reads, when every output copies one input value (nearest), else None."""
    ones = np.isclose(w, 1.0)
    if not np.all((ones | (w == 0)).sum(axis=1) == w.shape[1]):
        return None
    picked = ones.sum(axis=1)
    if not np.all((picked == 1) | ((picked == 0) & (outside if outside is not None else False))):
        return None
    return idx[np.arange(len(idx)), np.argmax(ones, axis=1)]


def _resize_attrs(b: Builder) -> dict:
    return {
        "mode": b.attr("mode", b"nearest").decode(),
        "ctm": b.attr("coordinate_transformation_mode", b"half_pixel").decode(),
        "nearest_mode": b.attr("nearest_mode", b"round_prefer_floor").decode(),
        "cubic_a": float(b.attr("cubic_coeff_a", -0.75)),
        "exclude_outside": bool(b.attr("exclude_outside", 0)),
        "antialias": bool(b.attr("antialias", 0)),
        "extrapolation_value": float(b.attr("extrapolation_value", 0.0)),
        "policy": b.attr("keep_aspect_ratio_policy", b"stretch").decode(),
        "has_axes": b.attr("axes") is not None,
    }


def _torch_mlir_resizes(attrs: dict, shape: tuple, dtype: np.dtype, axes: dict[int, _Axis]) -> bool:
    """Whether torch-mlir's own lowering (one kernel computing its taps) gets this linear/cubic Resize right.

    Checked against the ONNX reference: it lowers 4-D float32 inputs (float16 cubic and integers fail to
    compile) resized on H and W only, without antialias, exclude_outside, axes, an aspect-ratio policy or
    tf_crop_and_resize, cubic only with a=-0.75. It computes align_corners from the rounded output length
    (wrong when scale * in is not an integer), and pytorch_half_pixel cubic with one output differs. Its nearest
    mode rounds float32 coordinates, so outputs on a rounding boundary can pick the other pixel: nearest is
    always rewritten (a Gather, as cheap).
    """
    if attrs["mode"] not in ("linear", "cubic") or len(shape) != 4 or not set(axes) <= {2, 3} or dtype != np.float32:
        return False
    if attrs["antialias"] or attrs["exclude_outside"] or attrs["has_axes"] or attrs["policy"] != "stretch":
        return False
    if attrs["mode"] == "cubic" and attrs["cubic_a"] != -0.75:
        return False
    ctm = attrs["ctm"]
    if ctm == "align_corners":
        return all(math.isclose(ax.scale * ax.length, ax.out, rel_tol=1e-9) for ax in axes.values())
    if ctm == "pytorch_half_pixel" and attrs["mode"] == "cubic":
        return all(ax.out > 1 for ax in axes.values())
    return ctm in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "asymmetric")


@rewrite("Resize")
def _resize(node, b: Builder) -> bool:
    if opset(b) < 11:
        return False  # Resize-10 (no roi, asymmetric coordinates): torch-mlir's lowering covers it
    x = node.input[0]
    attrs = _resize_attrs(b)
    if attrs["mode"] not in ("nearest", "linear", "cubic"):
        raise unsupported(node, f"unknown mode '{attrs['mode']}'")
    if attrs["ctm"] not in ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                            "asymmetric", "tf_crop_and_resize"):
        raise unsupported(node, f"unknown coordinate_transformation_mode '{attrs['ctm']}'")
    inputs = _resize_inputs(node, b, attrs["ctm"])
    shape, out_shape = b.static_shape(x), b.static_shape(node.output[0])
    if 0 in shape or 0 in out_shape:
        raise unsupported(node, f"resizing {shape} to {out_shape}: empty tensors are not supported")
    axes = _resize_axes(node, b, inputs, shape, out_shape)
    dtype = b.np_dtype(x)
    if dtype is None:
        raise unsupported(node, f"the element type of '{x}' is not known")
    if _torch_mlir_resizes(attrs, shape, dtype, axes):
        return _as_torch_mlir_takes_it(node, b)
    taps = {a: _axis_taps(ax, attrs) for a, ax in axes.items()}
    gathers = {a: _as_gather(*t) for a, t in taps.items()}
    y, cur = x, list(shape)
    if taps and all(g is not None for g in gathers.values()):
        y, cur = _gather_axes(b, y, cur, gathers)
    else:
        if not (is_float(dtype) or dtype.kind in "iu"):
            raise unsupported(node, f"{attrs['mode']} interpolation of {dtype} values is not supported")
        compute = compute_dtype(dtype)
        y = cast(b, y, compute, dtype)
        for a, (idx, w, _) in taps.items():
            if gathers[a] is not None:
                y, cur = _gather_axes(b, y, cur, {a: gathers[a]})
            else:
                y, cur = _interpolate_axis(b, y, cur, a, axes[a].length, idx, w.astype(compute))
        y = _from_compute(b, y, compute, dtype)
    outside = [(a, t[2]) for a, t in taps.items() if t[2] is not None]
    if outside:
        y = _extrapolate(b, y, len(shape), outside, attrs["extrapolation_value"], dtype)
    return finish(b, node, y)


def _as_torch_mlir_takes_it(node, b: Builder) -> bool:
    """Leave the node to torch-mlir; its Resize lowering crashes (segfault) on an empty trailing optional
    input (sizes given as ''), so such a node is re-emitted without it."""
    from onnx import helper

    used = list(node.input)
    while used and not used[-1]:
        used.pop()
    if len(used) == len(node.input):
        return False
    b.op(node.op_type, used, list(node.output), **{a.name: helper.get_attribute_value(a) for a in node.attribute})
    return True


def _gather_axes(b: Builder, y: str, cur: list, index: dict[int, np.ndarray]) -> tuple[str, list]:
    """Gather along each axis of `index`; contiguous axes at once on their flattened block when the index
    table stays small (one Gather, like the nearest kernel torch-mlir would emit)."""
    lo, hi = min(index), max(index)
    block = range(lo, hi + 1)
    outs = [len(index[a]) if a in index else cur[a] for a in block]
    if len(index) > 1 and len(index) == len(block) and math.prod(outs) <= FLAT_GATHER_LIMIT:
        flat = np.zeros(1, np.int64)
        for a in block:  # row-major offsets of the gathered block: outer axes vary slowest
            flat = (flat[:, None] * cur[a] + index[a][None, :]).reshape(-1)
        y = reshape(b, y, cur[:lo] + [math.prod(cur[lo:hi + 1])] + cur[hi + 1:])
        y = b.op("Gather", [y, b.constant(flat, "index")], axis=lo)
        cur = cur[:lo] + outs + cur[hi + 1:]
        return reshape(b, y, cur), cur
    for a, idx in index.items():
        y = b.op("Gather", [y, b.constant(idx, "index")], axis=a)
        cur = cur[:a] + [len(idx)] + cur[a + 1:]
    return y, cur


def _interpolate_axis(b: Builder, y: str, cur: list, axis: int, length: int, idx: np.ndarray, w: np.ndarray):
    """Weighted sum of the taps along one axis: a MatMul with the [out, in] matrix when it is small, else a
    Gather of the [out, n] taps, a Mul by their weights and a ReduceSum over the taps."""
    out = idx.shape[0]
    if out * length <= DENSE_RESIZE_LIMIT:
        mat = np.zeros((out, length), w.dtype)
        np.add.at(mat, (np.repeat(np.arange(out), idx.shape[1]), idx.reshape(-1)), w.reshape(-1))
        before, after = math.prod(cur[:axis]), math.prod(cur[axis + 1:])
        if after == 1:  # the last axis (or one followed by 1s): rows times the transposed matrix
            z = b.op("MatMul", [reshape(b, y, [before, length]), b.constant(mat.T.copy(), "resize")])
        else:  # matrix times each [in, after] slab, batched over the axes before
            z = b.op("MatMul", [b.constant(mat, "resize"), reshape(b, y, [before, length, after])])
        cur = cur[:axis] + [out] + cur[axis + 1:]
        return reshape(b, z, cur), cur
    n = idx.shape[1]
    g = b.op("Gather", [y, b.constant(idx, "taps")], axis=axis)  # [..., out, n, ...]
    weights = w.reshape([out, n] + [1] * (len(cur) - axis - 1))
    z = reduce_sum(b, b.op("Mul", [g, b.constant(weights, "weights")]), axis + 1)
    return z, cur[:axis] + [out] + cur[axis + 1:]


def _extrapolate(b: Builder, y: str, rank: int, outside: list, value: float, dtype: np.dtype) -> str:
    """tf_crop_and_resize: outputs whose source coordinate is outside the input on any axis take `value`."""
    mask = np.zeros([1] * rank, bool)
    for a, out_a in outside:
        mask = mask | out_a.reshape([-1 if i == a else 1 for i in range(rank)])
    if dtype.kind in "iu":  # rounded half to even and saturated, like interpolated integers
        value = np.clip(np.round(value), np.iinfo(dtype).min, np.iinfo(dtype).max)
    fill = np.array(value).astype(dtype) if dtype.kind != "b" else np.array(bool(value))
    return b.op("Where", [b.constant(mask, "outside"), b.constant(fill, "extrapolation"), y])
