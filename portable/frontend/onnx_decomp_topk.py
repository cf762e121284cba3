"""TopK as dense, parallel ONNX ops (torch-mlir lowers it to `tm_tensor.sort`, which has no linalg form).

Every element's rank along the axis is the number of elements that come before it (larger, or smaller for
largest=0; an equal one with a lower index; NaN counts as the largest value, as in onnx's reference); the element
of rank r is picked for r < k. That compares every pair: L x L per row. A long axis with a small k (a detector's
300 best of 24000 scores) goes in two steps instead: the axis in blocks of S, each block's own top k by ranks
(L x S comparisons), then the top k of the blocks' B x k candidates (B k x B k). Candidates keep the blocks'
order, so equal values still come out by their index. The result is sorted whatever `sorted` says (the spec
allows it).
"""

from __future__ import annotations

import math

import numpy as np

from .onnx_decomp_nodes import (
    FLOATS,
    INT64,
    MAX_MASK,
    check_size,
    const_int,
    elem_type_of,
    norm_axis,
    reduce,
    reshape,
    typed_const,
    unsqueeze,
)
from .onnx_decompose import Builder, rewrite


@rewrite("TopK")
def _top_k(node, b: Builder) -> bool:
    x = node.input[0]
    shape = b.static_shape(x)
    rank = len(shape)
    if rank == 0:
        b.fail("the input is a scalar: TopK needs a rank >= 1 input")
    axis = norm_axis(b, int(b.attr("axis", -1)), rank)
    if len(node.input) < 2 or not node.input[1]:
        b.fail("TopK-1 with k as an attribute is not supported (the model is older than opset 10)")
    k = int(const_int(b, node.input[1], "K").reshape(-1)[0])
    length = shape[axis]
    if not 0 <= k <= length:
        b.fail(f"K={k} is out of range for an axis of length {length}")
    values_out, indices_out = node.output[0], node.output[1] if len(node.output) > 1 else ""
    if k == 0 or 0 in shape:
        b.fail("a zero-size result (K=0 or an empty input) is not supported")
    largest = bool(b.attr("largest", 1))
    outer = math.prod(shape) // length
    if outer * length * length <= MAX_MASK:
        indices = _ranked(b, x, shape, axis, k, largest, elem_type_of(b, x))
    else:
        indices = _blocked(b, x, shape, axis, k, largest)
    if indices_out:
        b.op("Identity", [indices], [indices_out])
    if values_out:
        b.op("GatherElements", [x, indices], [values_out], axis=axis)
    return True


def _ranked(b: Builder, x: str, shape: tuple, axis: int, k: int, largest: bool, elem: int) -> str:
    """Indices (int64) of the k first elements of `x` (of `shape`, ONNX element type `elem`) along `axis` by
    rank, from pairwise comparisons."""
    length, trailing = shape[axis], (1,) * (len(shape) - axis - 1)
    check_size(b, shape[:axis] + (length,) + shape[axis:], "pairwise comparison")
    x_i = unsqueeze(b, x, [axis + 1])  # [..., L_i, 1, ...]
    x_j = unsqueeze(b, x, [axis])  # [..., 1, L_j, ...]
    first = b.op("Greater" if largest else "Less", [x_j, x_i])
    same = b.op("Equal", [x_j, x_i])
    if elem in FLOATS:
        nan_i, nan_j = b.op("IsNaN", [x_i]), b.op("IsNaN", [x_j])
        bigger, smaller = (nan_j, nan_i) if largest else (nan_i, nan_j)
        first = b.op("Or", [first, b.op("And", [bigger, b.op("Not", [smaller])])])
        same = b.op("Or", [same, b.op("And", [nan_i, nan_j])])
    lower = np.arange(length)[None, :] < np.arange(length)[:, None]  # [i, j]: j < i
    tie = b.op("And", [same, b.constant(lower.reshape((length, length) + trailing), "lower")])
    before = b.op("Cast", [b.op("Or", [first, tie])], to=INT64)
    ranks = reduce(b, "ReduceSum", before, [axis + 1])  # [..., L_i, ...]: a permutation of 0..L-1
    r_iota = b.constant(np.arange(k, dtype=np.int64).reshape((k, 1) + trailing), "ranks")
    picked = b.op("Equal", [unsqueeze(b, ranks, [axis]), r_iota])  # [..., k, L_i, ...]
    i_iota = b.constant(np.arange(length, dtype=np.int64).reshape((length,) + trailing), "iota")
    zero = b.constant(np.array(0, np.int64), "zero")
    return reduce(b, "ReduceSum", b.op("Where", [picked, i_iota, zero]), [axis + 1])  # [..., k, ...]


def _block_size(outer: int, length: int, k: int) -> int | None:
    """The block length S (a power of two) that keeps both steps' comparisons under MAX_MASK, the fewest in
    total; None if no S does."""
    best = None
    for e in range(1, max(2, length.bit_length())):
        s = 1 << e
        blocks, kept = -(-length // s), min(k, s)
        first, second = outer * blocks * s * s, outer * (blocks * kept) ** 2
        if first <= MAX_MASK and second <= MAX_MASK and (best is None or first + second < best[0]):
            best = (first + second, s)
    return best[1] if best else None


def _blocked(b: Builder, x: str, shape: tuple, axis: int, k: int, largest: bool) -> str:
    length, pre, post = shape[axis], shape[:axis], shape[axis + 1:]
    s = _block_size(math.prod(pre) * math.prod(post), length, k)
    if s is None:
        dims = "x".join(str(int(d)) for d in pre + (length, length) + post)
        b.fail(f"this rewrite would build a {dims} pairwise comparison, and in blocks still more than "
               f"{MAX_MASK} (2^26) elements per step for K={k}")
    blocks, kept = -(-length // s), min(k, s)
    elem = elem_type_of(b, x)
    if blocks * s > length:
        # Padding that ranks after every element: -inf (or the smallest integer) for the largest; for the
        # smallest NaN, which ranks after +inf (and after the elements' own NaNs, by index).
        if elem in FLOATS:
            worst = -np.inf if largest else np.nan
        else:
            from onnx import helper

            info = np.iinfo(helper.tensor_dtype_to_np_dtype(elem))
            worst = info.min if largest else info.max
        pad = pre + (blocks * s - length,) + post
        filler = b.op("Expand", [typed_const(b, worst, elem, "worst"), b.constant(np.array(pad, np.int64), "pad")])
        x = b.op("Concat", [x, filler], axis=axis)
    grid = pre + (blocks, s) + post
    xb = reshape(b, x, grid)
    local = _ranked(b, xb, grid, axis + 1, kept, largest, elem)  # [pre, B, kept, post]
    offsets = (np.arange(blocks, dtype=np.int64) * s).reshape((blocks, 1) + (1,) * len(post))
    index = b.op("Add", [local, b.constant(offsets, "block_start")])
    values = b.op("GatherElements", [xb, local], axis=axis + 1)
    candidates = pre + (blocks * kept,) + post
    best = _ranked(b, reshape(b, values, candidates), candidates, axis, k, largest, elem)
    return b.op("GatherElements", [reshape(b, index, candidates), best], axis=axis)


__all__: list[str] = []
