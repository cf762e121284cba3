"""Rewrites of linear-algebra and quantization ONNX ops whose torch-mlir lowering is wrong or missing, into plain
ONNX ops (MatMul, Reduce*, Where, Cast, Slice, Pad) that torch-mlir lowers to linalg:

- Det: torch-mlir eliminates without row exchanges (NaN on a zero leading pivot). Here: the Leibniz sum for
  n <= 3, LU with partial pivoting unrolled over the static n for n <= MAX_LU_DET; larger n is left to torch-mlir.
- LpNormalization: torch-mlir divides by a zero norm (NaN); the spec (and onnx's reference) gives 0 there.
- QLinearMatMul: torch-mlir drops the zero points of operands of rank > 2. Here: int32 matmul of the
  zero-point-corrected operands, requantized in float32 with round-half-to-even and saturation, per tensor or
  per row (a) / per column (b).
- DequantizeLinear: torch-mlir sign-extends a per-axis uint8 zero point and has no blocked form. Here:
  (float(x) - float(zero point)) * scale, as onnx's reference computes it, per tensor, per axis or per block.
- QuantizeLinear: torch-mlir mistypes a per-axis uint8 zero point and has no blocked form. Here: the
  reference's round_half_even(x / scale) + zero point, saturated, in the same three forms.
- ConvTranspose: torch-mlir has no lowering for auto_pad SAME_* or begin pads != end pads, and fails on a
  depthwise one (one channel in and out per group). Here: an unpadded ConvTranspose (a depthwise one with a zero
  second output channel per group, dropped after), then Slice (and Pad, for an output past the full result) and
  the bias.
"""

from __future__ import annotations

import itertools

import numpy as np

from .onnx_decompose import Builder, rewrite

MAX_LU_DET = 8  # largest static n whose Det is unrolled into LU steps; above, torch-mlir's lowering stays

_FLOAT, _UINT8, _INT8, _INT16, _INT32, _DOUBLE, _BF16 = 1, 2, 3, 5, 6, 11, 16  # onnx.TensorProto element types
_QUANTIZED = {_UINT8: np.uint8, _INT8: np.int8, _INT16: np.int16, _INT32: np.int32}


# ------------------------------------------------------------------------------------------------ helpers


def _elem_type(b: Builder, name: str) -> int:
    t = b.elem_type(name)
    if t is None:
        b.fail(f"the element type of '{name}' is not known")
    return t


def _norm_axis(b: Builder, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        b.fail(f"axis {axis} is out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


def _opset(b: Builder) -> int:
    return next((o.version for o in b.m.opset_import if o.domain in ("", "ai.onnx")), 1)


def _given(node, i: int) -> bool:
    return len(node.input) > i and bool(node.input[i])


def _ints(b: Builder, values) -> str:
    return b.constant(np.array(values, np.int64), "ints")


def _reshape(b: Builder, x: str, shape) -> str:
    value = b.const(x)
    if value is not None:  # a scale or zero point: reshaped here rather than on the device
        return b.constant(np.asarray(value).reshape(shape), "reshaped")
    return b.op("Reshape", [x, _ints(b, list(shape))])


def _axes_op(b: Builder, op: str, x: str, axes, since: int, **attrs) -> str:
    """`op` over `axes`: an input from opset `since` on, an attribute before."""
    axes = [int(a) for a in axes]
    if _opset(b) >= since:
        return b.op(op, [x, _ints(b, axes)], **attrs)
    return b.op(op, [x], axes=axes, **attrs)


def _unsqueeze(b: Builder, x: str, axes) -> str:
    return _axes_op(b, "Unsqueeze", x, axes, 13)


_AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMax": 18, "ReduceMin": 18}


def _reduce(b: Builder, op: str, x: str, axes, keepdims: int = 0) -> str:
    return _axes_op(b, op, x, axes, _AXES_INPUT_SINCE[op], keepdims=keepdims)


def _slice(b: Builder, x: str, axes, starts, ends) -> str:
    return b.op("Slice", [x, _ints(b, starts), _ints(b, ends), _ints(b, axes)])


def _take(b: Builder, x: str, index: int, axis: int) -> str:
    """x with `axis` removed, at position `index` (a Gather with a scalar index)."""
    return b.op("Gather", [x, b.constant(np.array(index, np.int64), "index")], axis=axis)


def _typed(b: Builder, value, elem_type: int, hint: str = "const") -> str:
    """A constant of element type `elem_type` (bfloat16, which numpy lacks, is made in float32 and cast)."""
    if elem_type == _BF16:
        return b.op("Cast", [b.constant(np.asarray(value, np.float32), hint)], to=_BF16)
    from onnx import helper

    return b.constant(np.asarray(value, helper.tensor_dtype_to_np_dtype(elem_type)), hint)


def _cast(b: Builder, x: str, have: int, want: int) -> str:
    return x if have == want else b.op("Cast", [x], to=want)


# -------------------------------------------------------------------------------------------------- Det
@rewrite("Det")
def _det(node, b: Builder) -> bool:
    x, out = node.input[0], node.output[0]
    shape = b.static_shape(x)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        b.fail(f"the input of shape {shape} is not a (batch of) square matrices")
    n, batch = shape[-1], shape[:-2]
    count = int(np.prod(batch, dtype=np.int64))
    if n > MAX_LU_DET or n == 0 or count == 0:
        return False  # left to torch-mlir's lowering (right unless a leading pivot is zero or tiny)
    elem_type = _elem_type(b, x)
    # float16 and bfloat16 are accumulated in float32, then rounded once.
    work = elem_type if elem_type in (_FLOAT, _DOUBLE) else _FLOAT
    mats = _cast(b, _reshape(b, x, [count, n, n]), elem_type, work)
    det = _leibniz_det(b, mats, n, work) if n <= 3 else _lu_det(b, mats, n, work)
    det = _cast(b, det, work, elem_type)
    b.op("Reshape", [det, _ints(b, list(batch))], [out])
    return True


def _leibniz_det(b: Builder, mats: str, n: int, elem_type: int) -> str:
    """sum over permutations p of sign(p) * prod_i m[i, p(i)], for [count, n, n] matrices (n <= 3: at most six
    terms): one Gather per row picks the factor of every term."""
    perms = list(itertools.permutations(range(n)))
    signs = [(-1) ** sum(p[i] > p[j] for i in range(n) for j in range(i + 1, n)) for p in perms]
    flat = _reshape(b, mats, [-1, n * n])
    terms = None
    for row in range(n):
        picks = b.constant(np.array([row * n + p[row] for p in perms], np.int64), "picks")
        factor = b.op("Gather", [flat, picks], axis=1)  # [count, terms]
        terms = factor if terms is None else b.op("Mul", [terms, factor])
    signed = b.op("Mul", [terms, _typed(b, signs, elem_type, "signs")])
    return _reduce(b, "ReduceSum", signed, [1])


def _lu_det(b: Builder, mats: str, n: int, elem_type: int) -> str:
    """Gaussian elimination with partial pivoting, one step per column of the static n: the pivot is the first
    row of largest magnitude in the column (as LAPACK's getrf picks it); a row exchange flips the sign. A zero
    pivot (a zero column: singular) gives a zero determinant and no division by zero."""
    zero, one = _typed(b, 0, elem_type, "zero"), _typed(b, 1, elem_type, "one")
    det, a = None, mats
    for m in range(n, 0, -1):  # a: the [count, m, m] trailing block still to eliminate
        col = _take(b, a, 0, 2)  # [count, m]
        if m == 1:
            pivot = _take(b, col, 0, 1)
        else:
            pivot_row, rest, swapped = _pivot(b, a, col, m, zero)
            pivot = _take(b, pivot_row, 0, 1)  # [count]
            safe = b.op("Where", [b.op("Equal", [pivot, zero]), one, pivot])
            below = _slice(b, rest, [1], [1], [m])  # rows 1.. after the exchange: [count, m-1, m]
            factors = b.op("Div", [_take(b, below, 0, 2), _unsqueeze(b, safe, [1])])  # [count, m-1]
            tail = _unsqueeze(b, _slice(b, pivot_row, [1], [1], [m]), [1])  # [count, 1, m-1]
            a = b.op("Sub", [_slice(b, below, [2], [1], [m]), b.op("Mul", [_unsqueeze(b, factors, [2]), tail])])
            pivot = b.op("Where", [swapped, b.op("Neg", [pivot]), pivot])  # a row exchange flips the sign
        det = pivot if det is None else b.op("Mul", [det, pivot])
    # NaN anywhere makes no pivot compare equal to the column's maximum: say NaN rather than a made-up value.
    has_nan = _reduce(b, "ReduceMax", b.op("Cast", [b.op("IsNaN", [mats])], to=_INT32), [1, 2])
    nan = _typed(b, np.nan, elem_type, "nan")
    return b.op("Where", [b.op("Greater", [has_nan, b.constant(np.array(0, np.int32), "zero")]), nan, det])


def _pivot(b: Builder, a: str, col: str, m: int, zero: str) -> tuple[str, str, str]:
    """For [count, m, m] blocks `a` with first column `col`: (the pivot row [count, m], `a` with the pivot row
    replaced by row 0 [count, m, m], whether row 0 was not the pivot [count])."""
    magnitude = b.op("Abs", [col])
    largest = _reduce(b, "ReduceMax", magnitude, [1], keepdims=1)
    iota = b.constant(np.arange(m, dtype=np.int64), "iota")
    candidates = b.op("Where", [b.op("Equal", [magnitude, largest]), iota, b.constant(np.array(m, np.int64), "m")])
    first = _reduce(b, "ReduceMin", candidates, [1], keepdims=1)  # [count, 1]
    chosen = b.op("Equal", [iota, first])  # [count, m], one-hot
    chosen_rows = _unsqueeze(b, chosen, [2])
    pivot_row = _reduce(b, "ReduceSum", b.op("Where", [chosen_rows, a, zero]), [1])
    top = _unsqueeze(b, _take(b, a, 0, 1), [1])  # [count, 1, m]
    rest = b.op("Where", [chosen_rows, top, a])
    swapped = b.op("Not", [_take(b, chosen, 0, 1)])
    return pivot_row, rest, swapped


# ------------------------------------------------------------------------------------- LpNormalization
@rewrite("LpNormalization")
def _lp_normalization(node, b: Builder) -> bool:
    """x / ||x||_p along the axis, 0 where the norm is 0 (onnx's reference; torch-mlir gives NaN there)."""
    x, out = node.input[0], node.output[0]
    shape = b.static_shape(x)
    if not shape:
        b.fail("the input is a scalar: the op needs a rank >= 1 input")
    axis = _norm_axis(b, int(b.attr("axis", -1)), len(shape))
    p = int(b.attr("p", 2))
    if p == 1:
        norm = _reduce(b, "ReduceSum", b.op("Abs", [x]), [axis], keepdims=1)
    elif p == 2:
        norm = b.op("Sqrt", [_reduce(b, "ReduceSum", b.op("Mul", [x, x]), [axis], keepdims=1)])
    else:
        b.fail(f"p={p}: only p=1 and p=2 are defined")
    zero = _typed(b, 0, _elem_type(b, x), "zero")
    b.op("Where", [b.op("Equal", [norm, zero]), zero, b.op("Div", [x, norm])], [out])
    return True


# --------------------------------------------------------------------------------------- QLinearMatMul
def _per_tensor(shape: tuple) -> bool:
    return int(np.prod(shape, dtype=np.int64)) == 1


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _param_layout(b: Builder, name: str, target: tuple, role: str) -> tuple:
    """The shape a scale or zero point takes to broadcast against `target`: () per tensor; per row of operand a
    (role 'row': a 1-D [M] becomes [M, 1], or [..., M, 1] as given), per column of operand b or of the output
    (role 'column': [N] or [..., 1, N] as given)."""
    shape = b.static_shape(name)
    if _per_tensor(shape):
        return ()
    if role == "row" and len(shape) == 1 and len(target) >= 2 and shape[0] == target[-2]:
        return (shape[0], 1)
    if role == "row" and len(shape) == len(target) and shape[-1] == 1 and _broadcasts_to(shape, target):
        return shape
    if role == "column" and len(shape) <= len(target) and _broadcasts_to(shape, target) \
            and (len(shape) < 2 or shape[-2] == 1):
        return shape
    b.fail(f"'{name}' of shape {shape} is neither per tensor nor per {role} for shape {target}")


def _laid_out(b: Builder, name: str, target: tuple, role: str) -> str:
    layout = _param_layout(b, name, target, role)
    return name if layout == b.static_shape(name) else _reshape(b, name, layout)


def _shifted(b: Builder, x: str, zero_point: str, shape: tuple, role: str) -> str:
    """x - zero_point in int32 (exact for 8-bit operands)."""
    zp = _laid_out(b, zero_point, shape, role)
    return b.op("Sub", [_cast(b, x, _elem_type(b, x), _INT32), _cast(b, zp, _elem_type(b, zero_point), _INT32)])


@rewrite("QLinearMatMul")
def _qlinear_matmul(node, b: Builder) -> bool:
    """y = saturate(round_half_even(((a - a_zp) @ (b - b_zp)) * (a_scale * b_scale / y_scale) + y_zp)), the
    product exact in int32 (accumulation may wrap, as the spec allows), the rest in float32; y_zp is added before
    rounding, as onnx's reference does."""
    a, a_scale, a_zp, bm, b_scale, b_zp, y_scale, y_zp = node.input[:8]
    out = node.output[0]
    ashape, bshape, oshape = b.static_shape(a), b.static_shape(bm), b.static_shape(out)
    out_type = _elem_type(b, y_zp)
    if out_type not in (_UINT8, _INT8):
        b.fail(f"y_zero_point of element type {out_type} is not int8 or uint8")
    lhs, rhs = _shifted(b, a, a_zp, ashape, "row"), _shifted(b, bm, b_zp, bshape, "column")
    acc = b.op("Cast", [b.op("MatMul", [lhs, rhs])], to=_FLOAT)
    scale = _requant_scale(b, [(a_scale, ashape, "row"), (b_scale, bshape, "column"), (y_scale, oshape, "column")])
    zero = b.op("Cast", [_laid_out(b, y_zp, oshape, "column")], to=_FLOAT)
    shifted = b.op("Add", [b.op("Mul", [acc, scale]), zero])
    info = np.iinfo(_QUANTIZED[out_type])
    low, high = (b.constant(np.array(v, np.float32), "bound") for v in (info.min, info.max))
    b.op("Cast", [b.op("Clip", [b.op("Round", [shifted]), low, high])], [out], to=out_type)
    return True


def _requant_scale(b: Builder, params: list) -> str:
    """a_scale * b_scale / y_scale in the scales' own type (the reference rounds it there), then float32; constant
    scales are combined at compile time. `params`: (name, shape it broadcasts against, role) of each scale."""
    layouts = [_param_layout(b, name, target, role) for name, target, role in params]
    values = [b.const(name) for name, _, _ in params]
    scale_type = _elem_type(b, params[0][0])
    if all(v is not None for v in values) and scale_type != _BF16:
        sa, sb, sy = (np.asarray(v).reshape(layout) for v, layout in zip(values, layouts))
        with np.errstate(all="ignore"):
            combined = sa * sb / sy
        return b.constant(np.asarray(combined).astype(np.float32), "scale")
    sa, sb, sy = (_laid_out(b, name, target, role) for name, target, role in params)
    return _cast(b, b.op("Div", [b.op("Mul", [sa, sb]), sy]), scale_type, _FLOAT)


# ----------------------------------------------------------------------------------- DequantizeLinear
@rewrite("DequantizeLinear")
def _dequantize_linear(node, b: Builder) -> bool:
    """y = (float32(x) - float32(x_zero_point)) * float32(x_scale), cast to the output type: exact for 8- and
    16-bit x, and what onnx's reference computes for int32 x. Per tensor, per axis or per block."""
    x, scale, out = node.input[0], node.input[1], node.output[0]
    x_type = _elem_type(b, x)
    if x_type not in _QUANTIZED:
        return False  # float8/4-bit types stop at the dtype checks; nothing else reaches here
    shape = b.static_shape(x)
    out_type = _elem_type(b, out)
    axis = int(b.attr("axis", 1))
    block = int(b.attr("block_size", 0) or 0)
    if block < 0:
        b.fail(f"block_size={block} must be positive")
    dx = b.op("Cast", [x], to=_FLOAT)
    if _given(node, 2):
        zp = _quant_param(b, node.input[2], shape, axis, block)
        dx = b.op("Sub", [dx, _cast(b, zp, _elem_type(b, node.input[2]), _FLOAT)])
    s = _quant_param(b, scale, shape, axis, block)
    y = b.op("Mul", [dx, _cast(b, s, _elem_type(b, scale), _FLOAT)])
    if out_type == _FLOAT:
        b.op("Identity", [y], [out])
    else:
        b.op("Cast", [y], [out], to=out_type)
    return True


def _quant_param(b: Builder, name: str, xshape: tuple, axis: int, block: int) -> str:
    """A scale or zero point broadcast to x: per tensor (one element), per axis (1-D along `axis`) or blocked
    (x's rank, each element repeated `block` times along `axis`, the last block cut to fit)."""
    shape = b.static_shape(name)
    if _per_tensor(shape) and len(shape) <= 1:
        return _reshape(b, name, [])
    rank = len(xshape)
    axis = _norm_axis(b, axis, rank)
    if not block:
        if len(shape) != 1 or shape[0] != xshape[axis]:
            b.fail(f"'{name}' of shape {shape} is not per axis {axis} of an input of shape {xshape}")
        return _reshape(b, name, [xshape[axis] if i == axis else 1 for i in range(rank)])
    length = xshape[axis]
    if len(shape) != rank or any(s != d for i, (s, d) in enumerate(zip(shape, xshape)) if i != axis) \
            or not -(-length // block) <= shape[axis]:
        b.fail(f"'{name}' of shape {shape} does not block an input of shape {xshape} along axis {axis} in "
                 f"blocks of {block}")
    picks = np.arange(length, dtype=np.int64) // block
    value = b.const(name)
    if value is not None:
        return b.constant(np.take(value, picks, axis=axis), "blocked")
    return b.op("Gather", [name, b.constant(picks, "blocks")], axis=axis)


@rewrite("QuantizeLinear")
def _quantize_linear(node, b: Builder) -> bool:
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), as onnx's reference computes it (the zero point
    added after rounding), per tensor, per axis or per block; integer outputs only."""
    x, scale, out = node.input[0], node.input[1], node.output[0]
    out_type = _elem_type(b, out)
    if out_type not in (_UINT8, _INT8, _INT16):
        return False  # float8 and 4-bit outputs stop at the dtype checks
    shape = b.static_shape(x)
    axis, block = int(b.attr("axis", 1)), int(b.attr("block_size", 0) or 0)
    if block < 0:
        b.fail(f"block_size={block} must be positive")
    x_type, s_type = _elem_type(b, x), _elem_type(b, scale)
    # x / y_scale in opset 23's `precision`, else in numpy's promotion of the two types (as the reference divides).
    work = int(b.attr("precision", 0) or 0)
    if not work:
        work = x_type if x_type == s_type else _DOUBLE if _DOUBLE in (x_type, s_type) else _FLOAT
    s = _cast(b, _quant_param(b, scale, shape, axis, block), s_type, work)
    q = b.op("Cast", [b.op("Round", [b.op("Div", [_cast(b, x, x_type, work), s])])], to=_FLOAT)
    if _given(node, 2):
        zp = _quant_param(b, node.input[2], shape, axis, block)
        q = b.op("Add", [q, b.op("Cast", [zp], to=_FLOAT)])
    info = np.iinfo(_QUANTIZED[out_type])
    low, high = (b.constant(np.array(v, np.float32), "bound") for v in (info.min, info.max))
    q = b.op("Clip", [q, low, high])
    if out_type == _INT16:
        # torch-mlir lowers no Cast to int16, but does lower a per-tensor QuantizeLinear to it: with scale 1 and
        # zero point 0 it converts these integral, in-range values exactly.
        one, zero = b.constant(np.array(1, np.float32), "one"), b.constant(np.array(0, np.int16), "zero")
        b.op("QuantizeLinear", [q, one, zero], [out])
    else:
        b.op("Cast", [q], [out], to=out_type)
    return True


# --------------------------------------------------------------------------------------- ConvTranspose
def _string_attr(b: Builder, name: str, default: str) -> str:
    value = b.attr(name, default)
    return value.decode() if isinstance(value, bytes) else value


@rewrite("ConvTranspose")
def _conv_transpose(node, b: Builder) -> bool:
    """What torch-mlir cannot lower (auto_pad other than NOTSET, begin pads != end pads, depthwise) as an
    unpadded ConvTranspose: output position o of an axis is position o + begin of its full result, zero outside
    it (output_padding, or an output_shape past the full size), plus the bias."""
    x, w, out = node.input[0], node.input[1], node.output[0]
    xshape, wshape, oshape = b.static_shape(x), b.static_shape(w), b.static_shape(out)
    spatial = len(xshape) - 2
    if spatial < 1 or len(wshape) != len(xshape):
        b.fail(f"input shape {xshape} and weight shape {wshape} are not an N-D convolution")
    auto_pad = _string_attr(b, "auto_pad", "NOTSET")
    pads = [int(p) for p in b.attr("pads", [0] * (2 * spatial))]
    group = int(b.attr("group", 1))
    if auto_pad == "NOTSET" and pads[:spatial] == pads[spatial:] and not _depthwise(xshape, wshape, group):
        return False  # torch-mlir lowers these
    kernel = [int(k) for k in b.attr("kernel_shape", wshape[2:])]
    strides = [int(s) for s in b.attr("strides", [1] * spatial)]
    dilations = [int(d) for d in b.attr("dilations", [1] * spatial)]
    if kernel != list(wshape[2:]):
        b.fail(f"kernel_shape {kernel} differs from the weight's spatial shape {list(wshape[2:])}")
    full = [s * (i - 1) + (k - 1) * d + 1 for s, i, k, d in zip(strides, xshape[2:], kernel, dilations)]
    begin = _output_begin(b, auto_pad, pads, full, oshape[2:], spatial)
    y = _grouped_conv_transpose(b, x, w, xshape, wshape, group, kernel, strides, dilations)
    y = _window(b, y, begin, oshape[2:], full)
    if _given(node, 2):
        bias = _reshape(b, node.input[2], [oshape[1]] + [1] * spatial)
        y = b.op("Add", [y, bias])
    b.op("Identity", [y], [out])
    return True


def _output_begin(b: Builder, auto_pad: str, pads: list, full, out_sizes, spatial) -> list:
    """Per spatial axis, the position in the unpadded result of output position 0: the begin pad given, or the
    SAME_* split of the total padding (onnx's reference). For SAME_*, the output size is the inferred one: ONNX
    shape inference (and onnxruntime) take no negative total padding where the stride exceeds the kernel."""
    output_padding = [int(p) for p in b.attr("output_padding", [0] * spatial)]
    output_shape = [int(s) for s in b.attr("output_shape", [])][-spatial:] if b.attr("output_shape") else None
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        b.fail(f"auto_pad '{auto_pad}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    begin = []
    for i in range(spatial):
        size = full[i] + output_padding[i]  # unpadded, with output_padding
        if auto_pad.startswith("SAME"):
            total = size - out_sizes[i]
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
            continue
        begin.append(pads[i] if auto_pad == "NOTSET" else 0)
        if output_shape:
            want = output_shape[i]
        else:
            want = size - (pads[i] + pads[i + spatial] if auto_pad == "NOTSET" else 0)
        if want != out_sizes[i]:
            b.fail(f"the output size {want} of spatial axis {i} differs from the inferred {out_sizes[i]}")
    return begin


def _depthwise(xshape, wshape, group: int) -> bool:
    """One input and one output channel per group: torch-mlir's lowering builds an invalid collapse_shape."""
    return group > 1 and xshape[1] == group and wshape[1] == 1


def _grouped_conv_transpose(b: Builder, x: str, w: str, xshape, wshape, group: int, kernel, strides,
                            dilations) -> str:
    """The unpadded ConvTranspose. A depthwise one (one channel in and out per group) gets a second, all-zero
    output channel per group, dropped after: torch-mlir lowers that form."""
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "group": group}
    if xshape[1] != wshape[0] or xshape[1] % group:
        b.fail(f"{xshape[1]} input channels do not split into {group} groups of weight shape {wshape}")
    if not _depthwise(xshape, wshape, group):
        return b.op("ConvTranspose", [x, w], **attrs)
    value, w_type = b.const(w), _elem_type(b, w)
    if value is not None and w_type != _BF16:
        wide = b.constant(np.concatenate([value, np.zeros_like(value)], axis=1), "weight")
    else:
        wide = b.op("Concat", [w, _typed(b, np.zeros(wshape), w_type, "zeros")], axis=1)
    y = b.op("ConvTranspose", [x, wide], **attrs)
    return b.op("Slice", [y, _ints(b, [0]), _ints(b, [2 * group]), _ints(b, [1]), _ints(b, [2])])


def _window(b: Builder, y: str, begin: list, out_sizes, full) -> str:
    """Output positions [begin, begin + size) of each spatial axis of `y` (sizes `full`); zeros outside it."""
    spatial = len(begin)
    lo = [max(s, 0) for s in begin]
    hi = [min(s + n, f) for s, n, f in zip(begin, out_sizes, full)]
    if any(h <= low for low, h in zip(lo, hi)):
        b.fail("the output window does not overlap the convolution's result")
    axes = [2 + i for i in range(spatial) if (lo[i], hi[i]) != (0, full[i])]
    if axes:
        y = _slice(b, y, axes, [lo[a - 2] for a in axes], [hi[a - 2] for a in axes])
    front = [max(-s, 0) for s in begin]
    back = [max(s + n - f, 0) for s, n, f in zip(begin, out_sizes, full)]
    if any(front) or any(back):
        y = b.op("Pad", [y, _ints(b, [0, 0] + front + [0, 0] + back)])
    return y


__all__ = ["MAX_LU_DET"]
