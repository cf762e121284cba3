"""Rewrites of index-driven ONNX ops (cumulative sums and products, scatters, Compress, LpPool) into dense,
parallel ONNX ops that torch-mlir lowers to plain linalg: Where, Equal, Reduce*, Gather(Elements), Conv.

torch-mlir lowers CumSum to `tm_tensor.scan`, the scatters to `tm_tensor.scatter` and TopK to `tm_tensor.sort`;
none of them has a linalg form the compiler takes, and CumProd, TensorScatter and some LpPool forms have no
lowering at all. Shapes are static here, so each rewrite builds its masks and iotas at compile time:

- CumSum / CumProd: a triangular [L, L] mask along the axis, Where(mask, x, identity) then ReduceSum/ReduceProd.
- Scatter*: the run-time destination index of every update is compared with an iota of the destination rows
  (one-hot mask); 'none' takes the last update that hits a row (Gather), the reductions reduce over the mask.
- TopK: in onnx_decomp_topk.py.
- Compress: a constant condition becomes a Gather with constant indices.
- LpPool: |x|^p summed over the window by a Conv with a ones kernel, then ^(1/p).
- Gather, GatherElements, GatherND: constant indices range-checked; run-time ones clamped into the data (the
  kernels read unchecked), and where they are a graph input, that input's range recorded for the runtime.

Every mask is bounded by MAX_MASK elements (onnx_decomp_nodes.py); a larger one raises UnsupportedOp naming its size.
"""

from __future__ import annotations

import numpy as np

from .onnx_decomp_nodes import (
    FLOATS,
    INT16,
    INT32,
    INT64,
    UINT16,
    check_size,
    const_int,
    elem_type_of,
    norm_axis,
    reduce,
    reshape,
    squeeze,
    transpose,
    typed_const,
    unsqueeze,
)
from .onnx_decompose import Builder, rewrite

_NARROW = {9, 2, 3}  # bool, uint8, int8: not every Reduce* op takes them


# ------------------------------------------------------------------------------------------------ helpers


def _identity(op: str, elem_type: int):
    """The neutral element of a reduction `op` ('add', 'mul', 'max', 'min') in `elem_type`."""
    if op == "add":
        return 0
    if op == "mul":
        return 1
    if elem_type in FLOATS:
        return -np.inf if op == "max" else np.inf
    from onnx import helper

    info = np.iinfo(helper.tensor_dtype_to_np_dtype(elem_type))
    return info.min if op == "max" else info.max


# ------------------------------------------------------------------------------------- CumSum, CumProd
@rewrite("CumSum", "CumProd")
def _cumulative(node, b: Builder) -> bool:
    """out[..., i, ...] = reduce over j of x[..., j, ...] where mask[i, j]; the mask is the (strict, for
    `exclusive`) lower triangle, or the upper one for `reverse`."""
    x, out = node.input[0], node.output[0]
    shape = b.static_shape(x)
    if len(shape) == 0:
        b.fail("the input is a scalar: the op needs a rank >= 1 input")
    axis = norm_axis(b, int(const_int(b, node.input[1], "axis").reshape(-1)[0]), len(shape))
    if 0 in shape:
        b.op("Identity", [x], [out])
        return True
    length, trailing = shape[axis], (1,) * (len(shape) - axis - 1)
    check_size(b, shape[:axis] + (length,) + shape[axis:], "masked copy of the input")
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    reverse, exclusive = b.attr("reverse", 0), b.attr("exclusive", 0)
    if reverse:
        keep = j > i if exclusive else j >= i
    else:
        keep = j < i if exclusive else j <= i
    mask = b.constant(keep.reshape((length, length) + trailing), "mask")
    is_sum = node.op_type == "CumSum"
    neutral = typed_const(b, 0 if is_sum else 1, elem_type_of(b, x), "neutral")
    # x with a new axis for i in front of its axis (now j): [..., 1, L_j, ...] against the mask's [L_i, L_j].
    masked = b.op("Where", [mask, unsqueeze(b, x, [axis]), neutral])
    b.op("Identity", [reduce(b, "ReduceSum" if is_sum else "ReduceProd", masked, [axis + 1])], [out])
    return True


# -------------------------------------------------------------------------------------------- Compress
@rewrite("Compress")
def _compress(node, b: Builder) -> bool:
    x, out = node.input[0], node.output[0]
    cond = b.const(node.input[1])
    if cond is None:
        b.fail(f"its condition '{node.input[1]}' is computed at run time, so the output shape depends on input "
                 f"values (data-dependent shape); portable compiles per shape: pass the condition in "
                 f"input_values= to fold it")
    shape = b.static_shape(x)
    axis = b.attr("axis")
    if axis is None:
        length = int(np.prod(shape, dtype=np.int64))
    else:
        axis = norm_axis(b, int(axis), len(shape))
        length = shape[axis]
    cond = np.asarray(cond).reshape(-1).astype(bool)
    if cond[length:].any():
        b.fail(f"the condition selects index {int(np.nonzero(cond)[0][-1])}, past the length {length} it applies to")
    picked = np.nonzero(cond[:length])[0].astype(np.int64)
    if picked.size == 0:
        b.fail("the condition selects nothing: a zero-size result is not supported")
    src = reshape(b, x, [-1]) if axis is None else x
    b.op("Gather", [src, b.constant(picked, "picked")], [out], axis=0 if axis is None else axis)
    # Inference cannot size a Compress output even for a constant condition: rewrites after this one need it.
    b.set_shape(out, (picked.size,) if axis is None else shape[:axis] + (picked.size,) + shape[axis + 1:])
    return True


# -------------------------------------------------------------------------------------------- scatters
def _scatter_rows(b: Builder, data: str, rows: int, width: int, updates: str, count: int, dest: str,
                  dest_width: int, reduction: str, elem_type: int) -> str:
    """The core of every scatter, on 2-D values: data [rows, width], updates [count, width], dest [count,
    dest_width] (int64; dest_width 1 or width, broadcast) holds the row of data each update goes to (one outside
    [0, rows) goes nowhere). Returns the [rows, width] result."""
    reduce_op = {"add": "ReduceSum", "mul": "ReduceProd", "max": "ReduceMax", "min": "ReduceMin"}
    if reduction != "none" and reduction not in reduce_op:
        b.fail(f"reduction '{reduction}' is not one of none, add, mul, max, min")
    check_size(b, (count, rows, dest_width if reduction == "none" else width), "scatter mask")
    row_iota = b.constant(np.arange(rows, dtype=np.int64).reshape(rows, 1), "rows")
    hits = b.op("Equal", [unsqueeze(b, dest, [1]), row_iota])  # [count, rows, dest_width]
    if reduction == "none":
        # Duplicate destinations are undefined by the spec: the last update wins, as in a sequential loop.
        upd_iota = b.constant(np.arange(count, dtype=np.int64).reshape(count, 1, 1), "updates")
        none = b.constant(np.array(-1, np.int64), "none")
        last = reduce(b, "ReduceMax", b.op("Where", [hits, upd_iota, none]), [0])  # [rows, dest_width]
        written = b.op("Greater", [last, none])
        safe = b.op("Where", [written, last, b.constant(np.array(0, np.int64), "zero")])
        if dest_width == 1:
            values = b.op("Gather", [updates, squeeze(b, safe, [1])], axis=0)
        else:
            values = b.op("GatherElements", [updates, safe], axis=0)
        return b.op("Where", [written, values, data])
    if elem_type in (INT16, UINT16):
        b.fail(f"reduction '{reduction}' on 16-bit integers is not supported (ONNX's Reduce* ops do not take "
                 f"them and torch-mlir's Cast has no lowering back to them)")
    if elem_type in _NARROW:
        # Not every Reduce* op takes bool or 8-bit integers: reduce in int32 and cast back (for bool, add is or and
        # mul is and; for the others the cast wraps as their own arithmetic would).
        data = b.op("Cast", [data], to=INT32)
        updates = b.op("Cast", [updates], to=INT32)
        result = _scatter_rows(b, data, rows, width, updates, count, dest, dest_width, reduction, INT32)
        return b.op("Cast", [result], to=elem_type)
    neutral = typed_const(b, _identity(reduction, elem_type), elem_type, "neutral")
    masked = b.op("Where", [hits, unsqueeze(b, updates, [1]), neutral])  # [count, rows, width]
    reduced = reduce(b, reduce_op[reduction], masked, [0])
    combine = {"add": "Add", "mul": "Mul", "max": "Max", "min": "Min"}[reduction]
    return b.op(combine, [data, reduced])


def _scatter_along_axis(b: Builder, data: str, dshape: tuple, dest: str, updates: str, ushape: tuple, axis: int,
                        reduction: str, out: str) -> None:
    """ScatterElements with `dest` (int64, shape `ushape`, already in [0, dshape[axis]) or past it for 'no
    write'): the axis is moved to the front and the other dimensions flattened, so the mask is
    [updates along axis, data along axis, rest] instead of [all updates, all data]."""
    rank = len(dshape)
    short = [(0, d - u) if i != axis else (0, 0) for i, (d, u) in enumerate(zip(dshape, ushape))]
    if any(p for _, p in short):
        # Updates smaller than the data off the axis: pad them to the data's shape with destinations that
        # match no row, so the rest of the data lines up with the rest of the updates.
        pads = b.constant(np.array([0] * rank + [p for _, p in short], np.int64), "pads")
        dest = b.op("Pad", [dest, pads, b.constant(np.array(dshape[axis], np.int64), "nowhere")])
        updates = b.op("Pad", [updates, pads])
        ushape = tuple(d if i != axis else u for i, (d, u) in enumerate(zip(dshape, ushape)))
    perm = [axis] + [i for i in range(rank) if i != axis]
    rows, count = dshape[axis], ushape[axis]
    width = int(np.prod([dshape[i] for i in perm[1:]], dtype=np.int64))
    moved = [dshape[i] for i in perm]

    def flat(name: str, shape: tuple, lead: int) -> str:
        return reshape(b, transpose(b, name, perm), [lead, width], [shape[i] for i in perm])

    result = _scatter_rows(b, flat(data, dshape, rows), rows, width, flat(updates, ushape, count), count,
                           flat(dest, ushape, count), width, reduction, elem_type_of(b, data))
    result = reshape(b, result, moved, [rows, width])
    b.op("Identity", [transpose(b, result, np.argsort(perm))], [out])


def _wrap_negative(b: Builder, index: str, size) -> str:
    """Negative indices count from the end: index + size where index < 0 (`size` a constant name)."""
    zero = b.constant(np.array(0, np.int64), "zero")
    return b.op("Where", [b.op("Less", [index, zero]), b.op("Add", [index, size]), index])


@rewrite("ScatterElements", "Scatter")
def _scatter_elements(node, b: Builder) -> bool:
    data, indices, updates = node.input[:3]
    out = node.output[0]
    dshape, ishape = b.static_shape(data), b.static_shape(indices)
    if len(dshape) == 0:
        b.fail("the data is a scalar: the op needs a rank >= 1 input")
    axis = norm_axis(b, int(b.attr("axis", 0)), len(dshape))
    if 0 in ishape or 0 in dshape:
        b.op("Identity", [data], [out])
        return True
    dest = indices if elem_type_of(b, indices) == INT64 else b.op("Cast", [indices], to=INT64)
    dest = _wrap_negative(b, dest, b.constant(np.array(dshape[axis], np.int64), "size"))
    reduction = b.attr("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    _scatter_along_axis(b, data, dshape, dest, updates, ishape, axis, reduction, out)
    return True


@rewrite("ScatterND")
def _scatter_nd(node, b: Builder) -> bool:
    """Each k-tuple of `indices` names a row of data seen as [prod(shape[:k]), prod(shape[k:])]."""
    data, indices, updates = node.input[:3]
    out = node.output[0]
    dshape, ishape = b.static_shape(data), b.static_shape(indices)
    if len(ishape) == 0:
        b.fail("the indices are a scalar: ScatterND needs rank >= 1 indices")
    k = ishape[-1]
    if k > len(dshape):
        b.fail(f"index tuples of length {k} do not fit rank-{len(dshape)} data")
    count = int(np.prod(ishape[:-1], dtype=np.int64))
    rows = int(np.prod(dshape[:k], dtype=np.int64))
    width = int(np.prod(dshape[k:], dtype=np.int64))
    if count == 0 or 0 in dshape:
        b.op("Identity", [data], [out])
        return True
    reduction = b.attr("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if k == 0:
        dest = b.constant(np.zeros((count, 1), np.int64), "dest")
    else:
        tuples = reshape(b, indices, [count, k], ishape)
        tuples = _wrap_negative(b, tuples, b.constant(np.array([dshape[:k]], np.int64), "sizes"))
        strides = np.cumprod((dshape[1:k] + (1,))[::-1])[::-1].astype(np.int64)
        linear = b.op("Mul", [tuples, b.constant(strides.reshape(1, k), "strides")])
        dest = reduce(b, "ReduceSum", linear, [1], keepdims=1)  # [count, 1]
    result = _scatter_rows(b, reshape(b, data, [rows, width], dshape), rows, width,
                           reshape(b, updates, [count, width], b.static_shape(updates)), count, dest, 1,
                           reduction, elem_type_of(b, data))
    b.op("Reshape", [result, b.constant(np.array(dshape, np.int64), "shape")], [out])
    return True


@rewrite("TensorScatter")
def _tensor_scatter(node, b: Builder) -> bool:
    """present = past with update[b, ..., s, ...] written at sequence position write_indices[b] + s (modulo the
    cache length in 'circular' mode): a ScatterElements along the sequence axis with computed indices."""
    past, update = node.input[:2]
    write = node.input[2] if len(node.input) > 2 else ""
    out = node.output[0]
    pshape, ushape = b.static_shape(past), b.static_shape(update)
    rank = len(pshape)
    if rank < 2:
        b.fail("the cache needs a batch and a sequence axis (rank >= 2)")
    axis = norm_axis(b, int(b.attr("axis", -2)), rank)
    if axis == 0:
        b.fail("axis 0 is the batch axis; the sequence axis must be another one")
    if len(ushape) != rank or any(p != u for i, (p, u) in enumerate(zip(pshape, ushape)) if i != axis) \
            or ushape[axis] > pshape[axis]:
        b.fail(f"update shape {ushape} does not fit cache shape {pshape} along axis {axis}")
    mode = b.attr("mode", b"linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("linear", "circular"):
        b.fail(f"mode '{mode}' is not one of linear, circular")
    if 0 in ushape:
        b.op("Identity", [past], [out])
        return True
    seq = ushape[axis]
    positions = np.arange(seq, dtype=np.int64).reshape((1,) * axis + (seq,) + (1,) * (rank - axis - 1))
    dest = b.constant(positions, "positions")
    if write:
        starts = reshape(b, write, [pshape[0]] + [1] * (rank - 1))
        if elem_type_of(b, write) != INT64:
            starts = b.op("Cast", [starts], to=INT64)
        dest = b.op("Add", [starts, dest])
    if mode == "circular":
        dest = b.op("Mod", [dest, b.constant(np.array(pshape[axis], np.int64), "length")])
    dest = b.op("Expand", [dest, b.constant(np.array(ushape, np.int64), "shape")])
    _scatter_along_axis(b, past, pshape, dest, update, ushape, axis, "none", out)
    return True


# ---------------------------------------------------------------------------------------------- LpPool
def _pool_pads(b: Builder, spatial_in, spatial_out, kernel, strides, dilations) -> list[int]:
    """Begin and end pads (onnx order) that make a floor-mode Conv produce the inferred output size: auto_pad
    and ceil_mode only change the output size and the begin pads; end pads follow from the size."""
    n = len(kernel)
    auto_pad = b.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    pads = list(b.attr("pads", [0] * (2 * n)))
    begin, end = [], []
    for i in range(n):
        span = dilations[i] * (kernel[i] - 1) + 1
        needed = (spatial_out[i] - 1) * strides[i] + span - spatial_in[i]  # total pad the last window reaches
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max(needed, 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            lo = 0
        elif auto_pad == "NOTSET":
            lo = int(pads[i])
        else:
            b.fail(f"auto_pad '{auto_pad}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        begin.append(lo)
        end.append(max(needed - lo, 0))
    return begin + end


@rewrite("LpPool")
def _lp_pool(node, b: Builder) -> bool:
    x, out = node.input[0], node.output[0]
    shape, oshape = b.static_shape(x), b.static_shape(out)
    kernel = [int(k) for k in b.attr("kernel_shape", [])]
    n = len(kernel)
    if n == 0 or len(shape) != n + 2 or len(oshape) != n + 2:
        b.fail(f"kernel_shape {kernel} does not match an input of shape {shape}")
    strides = [int(s) for s in b.attr("strides", [1] * n)]
    dilations = [int(d) for d in b.attr("dilations", [1] * n)]
    p = b.attr("p", 2)
    if float(p) <= 0:
        b.fail(f"p={p} must be positive")
    elem_type = elem_type_of(b, x)
    pads = _pool_pads(b, shape[2:], oshape[2:], kernel, strides, dilations)
    if p == 1:
        powered = b.op("Abs", [x])
    elif p == 2:
        powered = b.op("Mul", [x, x])
    else:
        powered = b.op("Pow", [b.op("Abs", [x]), typed_const(b, float(p), elem_type, "p")])
    # Sum each window with a ones kernel: padding is zeros, which add nothing to an Lp sum. Batch and channels
    # are folded into one batch of single-channel images (torch-mlir has no grouped 3-D convolution).
    images = [shape[0] * shape[1], 1] + list(shape[2:])
    ones = typed_const(b, np.ones([1, 1] + kernel), elem_type, "window")
    summed = b.op("Conv", [reshape(b, powered, images), ones], kernel_shape=kernel, strides=strides,
                  dilations=dilations, pads=pads)
    if p == 2:
        summed = b.op("Sqrt", [summed])
    elif p != 1:
        summed = b.op("Pow", [summed, typed_const(b, 1.0 / float(p), elem_type, "root")])
    b.op("Reshape", [summed, b.constant(np.array(oshape, np.int64), "shape")], [out])
    return True


__all__: list[str] = []


# ------------------------------------------------------------------------------------------------ gathers


@rewrite("Gather", "GatherElements", "GatherND")
def _gather_in_bounds(node, b: Builder) -> bool:
    """Indices in bounds. ONNX takes indices in [-n, n), negative ones counting from the end; onnxruntime refuses
    others. Constant indices out of range are refused here, naming the node. Indices computed at run time are
    clamped into [-n, n - 1] and the negative ones wrapped (+ n) before the gather: the lowered kernel reads
    `data[index]` unchecked, and an index past the end would read another buffer's memory. Where the indices come
    straight from a graph input (token ids into an embedding), the input's valid range goes into the plan and the
    runtime refuses a call that breaks it, as onnxruntime does; indices computed on the device that leave the range
    read the nearest edge row (README: known limits)."""
    from ..errors import ShapeMismatch
    from .onnx_checks import node_desc

    data, indices = node.input[:2]
    dshape, ishape = b.shape(data), b.shape(indices)
    itype = elem_type_of(b, indices)
    if dshape is None or ishape is None or itype not in (INT32, INT64) or len(dshape) == 0:
        return False
    if node.op_type == "GatherND":
        batch = int(b.attr("batch_dims", 0))
        k = ishape[-1] if ishape else 0
        if not ishape or not 0 <= batch < len(ishape) or batch + k > len(dshape):
            return False  # malformed: left to shape inference and torch-mlir's own checks
        sizes = np.array(dshape[batch:batch + k], np.int64)
        attrs = {"batch_dims": batch}
    else:
        axis = norm_axis(b, int(b.attr("axis", 0)), len(dshape))
        sizes = np.array(dshape[axis], np.int64)
        attrs = {"axis": axis}
    if 0 in ishape or not sizes.all():
        return False  # nothing is read (or nothing can be): torch-mlir's lowering handles empty gathers
    const = b.const(indices)
    if const is not None:
        bad = (const < -sizes) | (const >= sizes)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            n = int(np.broadcast_to(sizes, const.shape)[at])
            raise ShapeMismatch(f"{node_desc(node)}: index {int(const[at])} (at {at} of its indices) is out of range "
                                f"for a dimension of size {n} (valid: {-n} to {n - 1}); fix the model's indices")
        return False
    if sizes.ndim == 0 or (sizes == sizes.flat[0]).all():
        n = int(sizes.flat[0])
        b.input_range(indices, -n, n - 1, f"{node_desc(node)} indexes a dimension of size {n}")
    dtype = np.int32 if itype == INT32 else np.int64
    # Clamped into [-n, n - 1], then Python's modulo wraps the negative ones. (Not Where/Add: ONNX shape inference
    # propagates Add over a 1-D int64 tensor as if it were a shape, one symbolic dim per element: minutes for
    # large index tensors.)
    inside = b.op("Max", [b.op("Min", [indices, b.constant((sizes - 1).astype(dtype), "last")]),
                          b.constant((-sizes).astype(dtype), "first")])
    safe = b.op("Mod", [inside, b.constant(sizes.astype(dtype), "size")], fmod=0)
    b.op(node.op_type, [data, safe], list(node.output), **attrs)
    return True
