"""Building blocks the ONNX rewrites share (onnx_decomp_index/_topk, onnx_decomp_signal/_grid/_spectral): ONNX
element-type codes and the mask size limit, axes passed the way the model's opset takes them, Reshape and
Transpose that skip a no-op, typed constants, a node's constant and optional inputs, numpy compute dtypes.

Two ways to fail live side by side: the index rewrites call `Builder.fail`; the signal rewrites
`raise unsupported(node, why)`.
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedOp
from .onnx_decompose import Builder

MAX_MASK = 1 << 26  # elements of the biggest mask (or masked intermediate) a rewrite may build

BOOL, INT32, INT64, BF16 = 9, 6, 7, 16  # onnx.TensorProto element types
FLOATS = {1, 10, 11, 16}  # float32, float16, float64, bfloat16
UINT16, INT16 = 4, 5


# ------------------------------------------------------------------------------------ sizes, axes, shapes
def check_size(b: Builder, shape, what: str) -> None:
    n = int(np.prod(shape, dtype=np.int64))
    if n > MAX_MASK:
        dims = "x".join(str(int(d)) for d in shape)
        b.fail(f"this rewrite would build a {dims} {what} ({n} elements), over its limit of {MAX_MASK} (2^26) "
                 f"elements")


def norm_axis(b: Builder, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        b.fail(f"axis {axis} is out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


def opset(b: Builder) -> int:
    return next((o.version for o in b.m.opset_import if o.domain in ("", "ai.onnx")), 1)


def with_axes(b: Builder, op: str, x: str, axes, since: int, **attrs) -> str:
    """`op` over `axes`, passed as an input from opset `since` on and as an attribute before it."""
    axes = [int(a) for a in axes]
    if opset(b) >= since:
        return b.op(op, [x, b.constant(np.array(axes, np.int64), "axes")], **attrs)
    return b.op(op, [x], axes=axes, **attrs)


def unsqueeze(b: Builder, x: str, axes) -> str:
    return with_axes(b, "Unsqueeze", x, axes, 13)


def squeeze(b: Builder, x: str, axes) -> str:
    return with_axes(b, "Squeeze", x, axes, 13)


_AXES_AS_INPUT_SINCE = {"ReduceSum": 13, "ReduceProd": 18, "ReduceMax": 18, "ReduceMin": 18}


def reduce(b: Builder, op: str, x: str, axes, keepdims: int = 0) -> str:
    return with_axes(b, op, x, axes, _AXES_AS_INPUT_SINCE[op], keepdims=keepdims)


def reduce_sum(b: Builder, x: str, axis: int, keepdims: int = 0) -> str:
    if opset(b) >= 13:
        return b.op("ReduceSum", [x, b.constant(np.array([axis], np.int64), "axes")], keepdims=keepdims)
    return b.op("ReduceSum", [x], axes=[axis], keepdims=keepdims)


def reshape(b: Builder, x: str, shape, have=None) -> str:
    if have is not None and tuple(have) == tuple(shape):
        return x
    return b.op("Reshape", [x, b.constant(np.array(shape, np.int64), "shape")])


def transpose(b: Builder, x: str, perm) -> str:
    if list(perm) == sorted(perm):
        return x
    return b.op("Transpose", [x], perm=[int(p) for p in perm])


# ---------------------------------------------------------------------------------- constants, inputs
def typed_const(b: Builder, value, elem_type: int, hint: str = "const") -> str:
    """A constant of ONNX element type `elem_type` (bfloat16 has no numpy dtype: made in float32 and cast)."""
    if elem_type == BF16:
        return b.op("Cast", [b.constant(np.asarray(value, np.float32), hint)], to=BF16)
    from onnx import helper

    return b.constant(np.asarray(value, helper.tensor_dtype_to_np_dtype(elem_type)), hint)


def f32(b: Builder, value: float, hint: str = "c") -> str:
    return b.constant(np.array(value, np.float32), hint)


def arith(b: Builder):
    """add, sub, mul, div: each emits one elementwise node; Python numbers become float32 constants."""
    def emit(op: str):
        def apply(x, y) -> str:
            return b.op(op, [f32(b, v) if isinstance(v, (int, float)) else v for v in (x, y)])
        return apply
    return emit("Add"), emit("Sub"), emit("Mul"), emit("Div")


def elem_type_of(b: Builder, name: str) -> int:
    t = b.elem_type(name)
    if t is None:
        b.fail(f"the element type of '{name}' is not known")
    return t


def const_int(b: Builder, name: str, what: str) -> np.ndarray:
    value = b.const(name)
    if value is None:
        b.fail(f"its {what} ('{name}') is computed at run time; portable compiles per shape and needs it as a "
                 f"constant: pass it in input_values= to fold it")
    return np.asarray(value).astype(np.int64)


def unsupported(node, why: str) -> UnsupportedOp:
    return UnsupportedOp(f"node '{node.name}' (op {node.op_type}): {why}")


def input_name(node, i: int) -> str:
    """Name of optional input i, '' when absent."""
    return node.input[i] if len(node.input) > i else ""


def const_input(node, b: Builder, i: int, what: str) -> np.ndarray | None:
    """Value of optional input i (None when absent); raises when it is only known at run time."""
    name = input_name(node, i)
    if not name:
        return None
    value = b.const(name)
    if value is None:
        raise unsupported(node, f"its {what} input '{name}' is computed at run time; portable compiles per shape "
                                f"and needs it constant (pass it in input_values= to fold it)")
    return value


def finish(b: Builder, node, y: str) -> bool:
    b.op("Identity", [y], [node.output[0]])
    return True


# ------------------------------------------------------------------------------------------ numpy dtypes
def cast(b: Builder, x: str, to_np, from_np) -> str:
    from onnx import helper

    if np.dtype(to_np) == np.dtype(from_np):
        return x
    return b.op("Cast", [x], to=helper.np_dtype_to_tensor_dtype(np.dtype(to_np)))


def is_float(dt: np.dtype | None) -> bool:
    return dt is not None and (dt.kind == "f" or dt.name == "bfloat16")  # ml_dtypes' bfloat16 has kind 'V'


def compute_dtype(dt: np.dtype) -> np.dtype:
    """Float type to interpolate values of type `dt` in: float32 unless they are float64."""
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


__all__ = ["MAX_MASK", "BOOL", "INT32", "INT64", "BF16", "FLOATS", "UINT16", "INT16", "check_size", "norm_axis",
           "opset", "with_axes", "unsqueeze", "squeeze", "reduce", "reduce_sum", "reshape", "transpose", "typed_const",
           "f32", "arith", "elem_type_of", "const_int", "unsupported", "input_name", "const_input", "finish", "cast",
           "is_float", "compute_dtype"]
