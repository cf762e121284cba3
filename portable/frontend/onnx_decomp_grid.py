"""GridSample as ONNX ops that torch-mlir lowers to plain linalg: the sampling positions come from a run-time grid,
so they are computed on the device (denormalized, padded by zeros, border or reflection), and the corner values
are gathered from the flattened input and weighted (nearest, bilinear, bicubic)."""

from __future__ import annotations

import math

import numpy as np

from .onnx_decomp_nodes import (
    arith,
    cast,
    compute_dtype,
    f32,
    finish,
    is_float,
    opset,
    reduce_sum,
    reshape,
    unsupported,
)
from .onnx_decompose import Builder, rewrite

_GRID_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}
_TAP_OFFSETS = {"nearest": [0.0], "linear": [0.0, 1.0], "cubic": [-1.0, 0.0, 1.0, 2.0]}


@rewrite("GridSample")
def _grid_sample(node, b: Builder) -> bool:
    x, grid = node.input[0], node.input[1]
    shape, gshape = b.static_shape(x), b.static_shape(grid)
    mode = _GRID_MODES.get(b.attr("mode", b"bilinear" if opset(b) < 20 else b"linear").decode())
    padding = b.attr("padding_mode", b"zeros").decode()
    align = bool(b.attr("align_corners", 0))
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise unsupported(node, f"unknown mode '{b.attr('mode')}' or padding_mode '{padding}'")
    rank = len(shape) - 2
    if rank < 1 or len(gshape) != rank + 2 or gshape[-1] != rank or gshape[0] != shape[0]:
        raise unsupported(node, f"grid of shape {gshape} does not match X of shape {shape}")
    # Always rewritten: torch-mlir lowers only 2-D bilinear/nearest with zero padding, and its kernel reads out
    # of bounds for grid points outside [-1, 1] (wrong values, or a crash); its nearest rounds halves away from 0.
    dtype, gdtype = b.np_dtype(x), b.np_dtype(grid)
    if dtype is None or gdtype is None:
        raise unsupported(node, "the element types of its inputs are not known")
    if mode != "nearest" and not is_float(dtype):
        raise unsupported(node, f"{mode} sampling of {dtype} values is not supported")
    n, c, dims = shape[0], shape[1], list(shape[2:])
    points = math.prod(gshape[1:-1])
    coords = reshape(b, grid, [n, points, rank])
    offsets = _TAP_OFFSETS[mode]
    flat_index, weight, valid = None, None, None
    for d, length in enumerate(dims):
        g = b.op("Gather", [coords, b.constant(np.array(rank - 1 - d, np.int64), "component")], axis=2)  # [N, P]
        xd = _padded_coordinate(b, _denormalize(b, g, gdtype, length, align, mode), length, align, padding)
        idx, w, ok = _grid_taps(b, xd, length, align, padding, mode, offsets)  # [N, P, T] each
        # Taps of spatial dim d go to their own axis, so that broadcasting forms all tap combinations.
        at = [n, points] + [len(offsets) if i == d else 1 for i in range(rank)]
        stride = math.prod(dims[d + 1:])
        idx = reshape(b, b.op("Mul", [idx, b.constant(np.array(stride, np.int64), "stride")]), at)
        flat_index = idx if flat_index is None else b.op("Add", [flat_index, idx])
        if w is not None:
            w = reshape(b, w, at)
            weight = w if weight is None else b.op("Mul", [weight, w])
        if ok is not None:
            ok = reshape(b, ok, at)
            valid = ok if valid is None else b.op("And", [valid, ok])
    taps = len(offsets) ** rank
    k = points * taps
    index = b.op("Expand", [reshape(b, flat_index, [n, 1, k]), b.constant(np.array([n, c, k], np.int64), "shape")])
    y = b.op("GatherElements", [reshape(b, x, [n, c, math.prod(dims)]), index], axis=2)  # [N, C, P * taps]
    if valid is not None:
        zero = b.constant(np.zeros((), dtype), "zero")
        y = b.op("Where", [reshape(b, valid, [n, 1, k]), y, zero])
    if weight is not None:
        compute = compute_dtype(dtype)
        weight = cast(b, reshape(b, weight, [n, 1, k]), compute, np.float32)
        y = b.op("Mul", [cast(b, y, compute, dtype), weight])
        y = reduce_sum(b, reshape(b, y, [n, c, points, taps]), 3)
        y = cast(b, y, dtype, compute)
    return finish(b, node, reshape(b, y, [n, c] + list(gshape[1:-1])))


def _denormalize(b: Builder, g: str, gdtype: np.dtype, length: int, align: bool, mode: str) -> str:
    """Grid value in [-1, 1] -> float32 pixel coordinate, rounded half to even for nearest. As in the reference,
    the arithmetic is in the grid's type, and in its order (nearest rounds, so the last bit matters)."""
    def c(v: float) -> str:
        return b.constant(np.array(v, gdtype), "c")
    if align:  # -1 and 1 are the centres of the corner pixels
        x = b.op("Mul", [b.op("Div", [b.op("Add", [g, c(1.0)]), c(2.0)]), c(length - 1.0)])
    else:  # -1 and 1 are the outer edges of the corner pixels
        x = b.op("Div", [b.op("Sub", [b.op("Mul", [b.op("Add", [g, c(1.0)]), c(float(length))]), c(1.0)]), c(2.0)])
    x = cast(b, x, np.float32, gdtype)
    return b.op("Round", [x]) if mode == "nearest" else x


def _bounds(length: int, align: bool) -> tuple[float, float]:
    return (0.0, length - 1.0) if align else (-0.5, length - 0.5)


def _reflect(b: Builder, x: str, lo: float, hi: float) -> str:
    """Reflect coordinates outside [lo, hi] back into it off its borders, as often as needed."""
    add, sub, mul, div = arith(b)
    if hi <= lo:  # one pixel with align_corners: every coordinate reflects onto it
        return mul(x, 0.0)
    below = b.op("Less", [x, f32(b, lo)])
    above = b.op("Greater", [x, f32(b, hi)])
    dist = b.op("Where", [below, sub(lo, x), sub(x, hi)])
    times = b.op("Floor", [div(dist, hi - lo)])  # whole spans travelled
    rest = sub(dist, mul(times, hi - lo))
    # An odd number of whole spans lands on the far border.
    odd = b.op("Greater", [sub(times, mul(b.op("Floor", [mul(times, 0.5)]), 2.0)), f32(b, 0.5)])
    from_lo, from_hi = add(lo, rest), sub(hi, rest)
    low = b.op("Where", [odd, from_hi, from_lo])
    high = b.op("Where", [odd, from_lo, from_hi])
    return b.op("Where", [below, low, b.op("Where", [above, high, x])])


def _padded_coordinate(b: Builder, x: str, length: int, align: bool, padding: str) -> str:
    """Coordinates outside the sampling range [lo, hi] clamped (border) or reflected (reflection) into it."""
    lo, hi = _bounds(length, align)
    if padding == "border":
        outside = b.op("Or", [b.op("Less", [x, f32(b, lo)]), b.op("Greater", [x, f32(b, hi)])])
        return b.op("Where", [outside, b.op("Clip", [x, f32(b, 0.0), f32(b, length - 1.0)]), x])
    if padding == "reflection":
        return _reflect(b, x, lo, hi)
    return x


def _grid_taps(b: Builder, x: str, length: int, align: bool, padding: str, mode: str, offsets: list):
    """(int64 pixel indices [N, P, T], float32 weights [N, P, T] or None for nearest, in-range mask or None)
    of the taps around coordinates x [N, P]; taps outside the input read 0 (zeros), the edge pixel (border)
    or their reflection (reflection)."""
    add, sub, _, _ = arith(b)
    x = b.op("Unsqueeze", [x, b.constant(np.array([2], np.int64), "axes")])
    base = x if mode == "nearest" else b.op("Floor", [x])
    pos = add(base, b.constant(np.array(offsets, np.float32), "offsets"))
    weight = None
    if mode != "nearest":
        dist = b.op("Abs", [sub(x, pos)])
        weight = b.op("Relu", [sub(1.0, dist)]) if mode == "linear" else _cubic_weight(b, dist, -0.75)
    ok = None
    if padding == "zeros":
        ok = b.op("And", [b.op("GreaterOrEqual", [pos, f32(b, 0.0)]),
                          b.op("LessOrEqual", [pos, f32(b, length - 1.0)])])
    elif padding == "reflection":
        pos = _reflect(b, pos, *_bounds(length, align))
    pos = b.op("Clip", [pos, f32(b, 0.0), f32(b, length - 1.0)])
    from onnx import TensorProto

    return b.op("Cast", [pos], to=TensorProto.INT64), weight, ok


def _cubic_weight(b: Builder, t: str, a: float) -> str:
    """Keys' cubic kernel at distances t in [0, 2]."""
    add, sub, mul, _ = arith(b)
    near = add(mul(mul(sub(mul(t, a + 2), a + 3), t), t), 1.0)  # ((a+2)t - (a+3)) t^2 + 1
    far = sub(mul(add(mul(sub(mul(t, a), 5 * a), t), 8 * a), t), 4 * a)  # ((at - 5a) t + 8a) t - 4a
    return b.op("Where", [b.op("LessOrEqual", [t, f32(b, 1.0)]), near, far])
