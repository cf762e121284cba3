"""Rewrites of the spectral ops (DFT, STFT, MelWeightMatrix) into ONNX ops that torch-mlir lowers to plain linalg:
DFT and STFT are MatMuls with compile-time cos/sin matrices (frames gathered, a constant window folded in);
MelWeightMatrix is computed on the device from its run-time scalar inputs with broadcasting elementwise ops.
"""

from __future__ import annotations

import math

import numpy as np

from .onnx_decomp_nodes import (
    arith,
    cast,
    compute_dtype,
    const_input,
    f32,
    finish,
    input_name,
    is_float,
    opset,
    reshape,
    unsupported,
)
from .onnx_decompose import Builder, rewrite


def _scalar_input(node, b: Builder, i: int, what: str) -> int | None:
    value = const_input(node, b, i, what)
    if value is None:
        return None
    if value.size != 1:
        raise unsupported(node, f"its {what} must be a scalar, got shape {value.shape}")
    return int(value.reshape(-1)[0])


def _dft_matrix(length: int, parts: int, n: int, inverse: bool, onesided: bool) -> np.ndarray:
    """Real [length * parts, bins * out_parts] matrix of the DFT of `length` samples (interleaved real and
    imaginary parts when parts == 2) zero-padded or truncated to n: a row-vector of samples times it gives the
    interleaved complex spectrum (forward, inverse), or the real signal of a one-sided spectrum (inverse and
    onesided: the spectrum's other half is the conjugate mirror)."""
    if inverse and onesided:
        used = min(length, n // 2 + 1)
        j = np.arange(used)[:, None]
        angle = 2 * np.pi * ((j * np.arange(n)[None, :]) % n) / n
        # Bins 1 .. ceil(n/2)-1 stand for themselves and their mirror; 0 and the Nyquist bin (even n) once.
        twice = np.where((j == 0) | (2 * j == n), 1.0, 2.0)
        re, im = twice * np.cos(angle) / n, -twice * np.sin(angle) / n
        mat = np.stack([re, im], axis=1)[:, :parts]  # [used, parts, n]: the imaginary row only for complex input
        out = np.zeros((length, parts, n))
        out[:used] = mat
        return out.reshape(length * parts, n)
    bins = n // 2 + 1 if onesided else n
    used = min(length, n)
    sign = 1.0 if inverse else -1.0
    j, k = np.arange(used)[:, None], np.arange(bins)[None, :]
    # (j * k) % n keeps the angles small, so the float64 cos/sin stay exact to the last bits for long signals.
    w = np.exp(sign * 2j * np.pi * ((j * k) % n) / n) / (n if inverse else 1)
    p, q = w.real, w.imag
    # (a + ib)(p + iq) = (ap - bq) + i(aq + bp): row a -> [p, q], row b -> [-q, p], per output bin.
    rows = [np.stack([p, q], axis=2), np.stack([-q, p], axis=2)][:parts]  # each [used, bins, 2]
    mat = np.stack(rows, axis=1)  # [used, parts, bins, 2]
    out = np.zeros((length, parts, bins, 2))
    out[:used] = mat
    return out.reshape(length * parts, bins * 2)


def _apply_dft(b: Builder, x: str, shape: tuple, axis: int, mat: np.ndarray, bins: int, out_parts: int,
               dtype: np.dtype) -> str:
    """x [..., length (at axis), ..., parts] times `mat` along `axis` -> [..., bins (at axis), ..., out_parts]."""
    rank = len(shape)
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    moved = perm != list(range(rank))
    y = b.op("Transpose", [x], perm=perm) if moved else x
    rest = [shape[i] for i in perm[:-2]]
    compute = compute_dtype(dtype)
    y = cast(b, reshape(b, y, [math.prod(rest), mat.shape[0]]), compute, dtype)
    y = b.op("MatMul", [y, b.constant(mat.astype(compute), "dft")])
    y = cast(b, reshape(b, y, rest + [bins, out_parts]), dtype, compute)
    return b.op("Transpose", [y], perm=[perm.index(i) for i in range(rank)]) if moved else y


@rewrite("DFT")
def _dft(node, b: Builder) -> bool:
    x = node.input[0]
    shape = b.static_shape(x)
    dtype = b.np_dtype(x)
    rank = len(shape)
    inverse, onesided = bool(b.attr("inverse", 0)), bool(b.attr("onesided", 0))
    if opset(b) >= 20:
        axis = _scalar_input(node, b, 2, "axis")
        axis = -2 if axis is None else axis
    else:
        axis = b.attr("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if rank < 2 or not 0 <= axis <= rank - 2 or shape[-1] not in (1, 2):
        raise unsupported(node, f"axis {axis} of an input of shape {shape}: the input must end in 1 (real) or 2 "
                          f"(complex) and the axis must be another one")
    if not is_float(dtype):
        raise unsupported(node, f"input type {dtype} is not a float type")
    length = shape[axis]
    n = _scalar_input(node, b, 1, "dft_length")
    if n is None:
        n = 2 * (length - 1) if inverse and onesided else length
    if n < 1:
        raise unsupported(node, f"dft_length {n} is not positive")
    mat = _dft_matrix(length, shape[-1], n, inverse, onesided)
    bins, out_parts = (n, 1) if inverse and onesided else (n // 2 + 1 if onesided else n, 2)
    return finish(b, node, _apply_dft(b, x, shape, axis, mat, bins, out_parts, dtype))


@rewrite("STFT")
def _stft(node, b: Builder) -> bool:
    signal, window = node.input[0], input_name(node, 2)
    shape = b.static_shape(signal)
    dtype = b.np_dtype(signal)
    if len(shape) != 3 or shape[-1] not in (1, 2) or not is_float(dtype):
        raise unsupported(node, f"signal of shape {shape} and type {dtype}: expected [batch, length, 1 or 2] floats")
    step = _scalar_input(node, b, 1, "frame_step")
    frame = _scalar_input(node, b, 3, "frame_length")
    wlen = b.static_shape(window)[0] if window else None
    frame = frame if frame is not None else wlen if wlen is not None else shape[1]
    if step is None or step < 1 or not 1 <= frame <= shape[1] or (wlen is not None and wlen != frame):
        raise unsupported(node, f"frame_step {step}, frame_length {frame} and window length {wlen} do not fit a signal "
                          f"of length {shape[1]}")
    onesided = bool(b.attr("onesided", 1))
    frames = (shape[1] - frame) // step + 1
    parts = shape[-1]
    taps = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    y = b.op("Gather", [signal, b.constant(taps.astype(np.int64), "frames")], axis=1)  # [B, frames, frame, parts]
    mat = _dft_matrix(frame, parts, frame, False, onesided)
    wvalue = b.const(window) if window else None
    if wvalue is not None:  # a constant window scales the matrix rows
        mat = mat * np.repeat(wvalue.astype(np.float64), parts)[:, None]
    elif window:
        y = b.op("Mul", [y, reshape(b, window, [1, 1, frame, 1])])
    bins = frame // 2 + 1 if onesided else frame
    recorded = b.shape(node.output[0])
    if recorded is not None and tuple(recorded) != (shape[0], frames, bins, 2):
        # onnx's STFT shape inference reads a missing `onesided` as 0, not the schema's default 1 (which the
        # reference and onnxruntime follow): the recorded shape is then the two-sided one.
        raise unsupported(node, f"ONNX shape inference recorded output shape {tuple(recorded)}, but the op computes "
                          f"{(shape[0], frames, bins, 2)} (onesided={int(onesided)}); set `onesided` explicitly")
    y = _apply_dft(b, y, (shape[0], frames, frame, parts), 2, mat, bins, 2, dtype)
    return finish(b, node, y)


# --------------------------------------------------------------------------------------- MelWeightMatrix
@rewrite("MelWeightMatrix")
def _mel_weight_matrix(node, b: Builder) -> bool:
    """Triangular mel filters [dft_length // 2 + 1, num_mel_bins], computed on the device from the (possibly
    run-time) scalar inputs with broadcasting elementwise ops; the shape comes from the inferred output."""
    from onnx import TensorProto, helper

    out_shape = b.static_shape(node.output[0])
    spectrum, mels = out_shape
    names = list(node.input[:5])
    if len(names) < 5 or not all(names):
        raise unsupported(node, "it needs its five inputs")

    def scalar(name: str) -> str:
        dt = b.np_dtype(name)
        if dt is None:
            raise unsupported(node, f"the type of '{name}' is not known")
        return reshape(b, cast(b, name, np.float32, dt), [])

    expected = (("num_mel_bins", {mels}), ("dft_length", {2 * spectrum - 2, 2 * spectrum - 1}))
    for i, (what, expect) in enumerate(expected):
        value = b.const(names[i])
        if value is not None and int(value.reshape(-1)[0]) not in expect:
            raise unsupported(node, f"{what} {int(value.reshape(-1)[0])} does not match the output shape {out_shape}")
    _, dft_length, rate, lower, upper = (scalar(n) for n in names)

    add, sub, mul, div = arith(b)

    def mel(hz: str) -> str:  # 2595 * log10(1 + hz / 700)
        return mul(b.op("Log", [add(1.0, div(hz, 700.0))]), 2595 / math.log(10))

    low = mel(lower)
    step = div(sub(mel(upper), low), mels + 2.0)
    points = add(mul(b.constant(np.arange(mels + 2, dtype=np.float32), "points"), step), low)
    hz = mul(sub(b.op("Exp", [mul(points, math.log(10) / 2595)]), 1.0), 700.0)
    # The filters' corners are whole spectrum bins: floor((dft_length + 1) * hz / sample_rate).
    corner = b.op("Floor", [div(mul(add(dft_length, 1.0), hz), rate)])

    def corners(first: int) -> str:
        picked = b.op("Gather", [corner, b.constant(np.arange(first, first + mels, dtype=np.int64), "pick")])
        return reshape(b, picked, [1, mels])

    left, centre, right = corners(0), corners(1), corners(2)
    j = b.constant(np.arange(spectrum, dtype=np.float32).reshape(spectrum, 1), "bins")
    rise = div(sub(j, left), b.op("Max", [sub(centre, left), f32(b, 1.0)]))
    fall = div(sub(right, j), b.op("Max", [sub(right, centre), f32(b, 1.0)]))
    rising = b.op("And", [b.op("GreaterOrEqual", [j, left]), b.op("Less", [j, centre])])
    falling = b.op("And", [b.op("Greater", [j, centre]), b.op("Less", [j, right])])
    y = b.op("Where", [falling, fall, f32(b, 0.0)])
    y = b.op("Where", [rising, rise, y])
    y = b.op("Where", [b.op("Equal", [j, centre]), f32(b, 1.0), y])
    out_type = b.attr("output_datatype", TensorProto.FLOAT)
    return finish(b, node, cast(b, y, helper.tensor_dtype_to_np_dtype(out_type), np.float32))
