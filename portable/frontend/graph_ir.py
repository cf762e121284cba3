"""The Graph builder's internal IR: nodes, dtypes, and the scalar ops inside elementwise nodes.

Each scalar op has its MLIR body text and its numpy meaning side by side, so the emitted IR and
`Graph.reference` cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .graph import Graph

# dtype name -> MLIR element type. Tensors of these element types are all the builder makes.
DTYPES = {"float32": "f32", "float16": "f16", "int32": "i32", "int64": "i64"}


def is_float(dtype: str) -> bool:
    return dtype.startswith("float")


def tensor_type(shape: tuple[int, ...], dtype: str) -> str:
    """`tensor<3x4xf32>`; rank 0 is `tensor<f32>`."""
    return "tensor<" + "".join(f"{d}x" for d in shape) + DTYPES[dtype] + ">"


class Tensor:
    """A value of a Graph: a light handle with a static `shape` and a `dtype` string.
    Arithmetic operators build ops of its graph (`a + b`, `a * 2.0`, `a @ b`, `-a`)."""

    __slots__ = ("graph", "id")

    def __init__(self, graph: Graph, nid: int):
        self.graph, self.id = graph, nid

    @property
    def shape(self) -> tuple[int, ...]:
        return self.graph._nodes[self.id].shape

    @property
    def dtype(self) -> str:
        return self.graph._nodes[self.id].dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor(%{self.id} {self.graph._nodes[self.id].kind}, shape={self.shape}, dtype={self.dtype})"

    def __add__(self, o) -> Tensor:
        return self.graph.add(self, o)

    def __radd__(self, o) -> Tensor:
        return self.graph.add(o, self)

    def __sub__(self, o) -> Tensor:
        return self.graph.sub(self, o)

    def __rsub__(self, o) -> Tensor:
        return self.graph.sub(o, self)

    def __mul__(self, o) -> Tensor:
        return self.graph.mul(self, o)

    def __rmul__(self, o) -> Tensor:
        return self.graph.mul(o, self)

    def __truediv__(self, o) -> Tensor:
        return self.graph.div(self, o)

    def __rtruediv__(self, o) -> Tensor:
        return self.graph.div(o, self)

    def __matmul__(self, o) -> Tensor:
        return self.graph.matmul(self, o)

    def __neg__(self) -> Tensor:
        return self.graph.neg(self)


@dataclass(frozen=True)
class Node:
    """One op of a graph; it has one result, identified by the node's index in the graph.

    kind: input | constant | elementwise | reduce | matmul | batch_matmul | conv2d | pad | reshape |
    transpose. attrs by kind:
      input: index; constant: value (np.ndarray of this dtype)
      elementwise: prog (tuple of Instr, last is the result), dims (per input: for each input dim the
        output dim it indexes, or None for a size-1 dim that broadcasts and is collapsed away),
        src (dtype of the inputs; the result dtype is `dtype`, differing only for a cast)
      reduce: kind (sum | max | min), axes (sorted tuple; the result drops them)
      conv2d: layout (NHWC | NCHW), stride (sh, sw), dilation (dh, dw)
      pad: low, high (tuples), value (python number)
      transpose: perm
    """

    kind: str
    inputs: tuple[int, ...]
    shape: tuple[int, ...]
    dtype: str
    attrs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Instr:
    """One scalar op of an elementwise body. op: arg (attr = input index) | const (attr = number) |
    a name in UNARY or BINARY | cast; args index earlier Instrs of the same prog."""

    op: str
    args: tuple[int, ...] = ()
    attr: object = None


UNARY = ("neg", "abs", "exp", "log", "tanh", "sqrt", "rsqrt", "erf")
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")
FLOAT_ONLY = ("exp", "log", "tanh", "sqrt", "rsqrt", "erf", "pow")

_FLOAT_OPS = {
    "add": "arith.addf", "sub": "arith.subf", "mul": "arith.mulf", "div": "arith.divf",
    "max": "arith.maximumf", "min": "arith.minimumf", "pow": "math.powf", "neg": "arith.negf",
    "abs": "math.absf", "exp": "math.exp", "log": "math.log", "tanh": "math.tanh",
    "sqrt": "math.sqrt", "rsqrt": "math.rsqrt", "erf": "math.erf",
}
_INT_OPS = {
    "add": "arith.addi", "sub": "arith.subi", "mul": "arith.muli", "div": "arith.divsi",
    "max": "arith.maxsi", "min": "arith.minsi", "abs": "math.absi",
}

# identity of each reduction, per dtype class
REDUCE_OP = {"sum": "add", "max": "max", "min": "min"}


def reduce_identity(kind: str, dtype: str) -> float | int:
    if kind == "sum":
        return 0.0 if is_float(dtype) else 0
    info = None if is_float(dtype) else np.iinfo(dtype)
    if kind == "max":
        return -np.inf if info is None else int(info.min)
    return np.inf if info is None else int(info.max)


def literal(value: float, dtype: str) -> str:
    """Scalar attribute text without the type, exact for the dtype (`0.5`, `-7`, `0xFF800000`)."""
    if not is_float(dtype):
        return str(int(value))
    v = np.asarray(value, dtype=dtype)
    if not np.isfinite(v):
        bits = v.view(f"uint{v.itemsize * 8}").item()
        return f"0x{bits:0{v.itemsize * 2}X}"
    s = repr(float(v))  # shortest repr of the exact value; MLIR needs a '.' in float literals
    if "." not in s:
        mant, _, exp = s.partition("e")
        s = f"{mant}.0" + (f"e{exp}" if exp else "")
    return s


def dense_literal(arr: np.ndarray, dtype: str) -> str:
    """`dense<...>` for a constant: splat, short literal list, or exact little-endian hex bytes."""
    flat = arr.reshape(-1)
    bits = flat.view(f"uint{flat.itemsize * 8}")
    if np.all(bits == bits[0]):
        return f"dense<{literal(flat[0], dtype)}>"
    if arr.size <= 16 and (not is_float(dtype) or np.all(np.isfinite(arr))):
        def nest(a: np.ndarray) -> str:
            if a.ndim == 0:
                return literal(a.item(), dtype)
            return "[" + ", ".join(nest(x) for x in a) + "]"
        return f"dense<{nest(arr)}>"
    data = arr.astype(np.dtype(dtype).newbyteorder("<")).tobytes()  # C order
    return f'dense<"0x{data.hex().upper()}">'


def cast_op(src: str, dst: str) -> str:
    """The arith op that converts src to dst element type."""
    fs, fd = is_float(src), is_float(dst)
    if fs and fd:
        return "arith.extf" if np.dtype(dst).itemsize > np.dtype(src).itemsize else "arith.truncf"
    if fs:
        return "arith.fptosi"
    if fd:
        return "arith.sitofp"
    return "arith.extsi" if np.dtype(dst).itemsize > np.dtype(src).itemsize else "arith.trunci"


def emit_instr(ins: Instr, args: list[str], src: str, dst: str, name: str) -> list[str]:
    """MLIR lines defining %name for one scalar op; src is the operands' dtype, dst the cast target."""
    t = DTYPES[src]
    if ins.op == "const":
        return [f"{name} = arith.constant {literal(ins.attr, src)} : {t}"]
    if ins.op == "cast":
        return [f"{name} = {cast_op(src, dst)} {args[0]} : {t} to {DTYPES[dst]}"]
    if ins.op == "neg" and not is_float(src):
        return [f"{name}_zero = arith.constant 0 : {t}", f"{name} = arith.subi {name}_zero, {args[0]} : {t}"]
    op = (_FLOAT_OPS if is_float(src) else _INT_OPS)[ins.op]
    return [f"{name} = {op} {', '.join(args)} : {t}"]


def _trunc_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """arith.divsi: quotient rounded toward zero (numpy's // rounds toward -inf)."""
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


_NP_FLOAT = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
    "min": np.minimum, "pow": np.power, "neg": np.negative, "abs": np.abs, "exp": np.exp,
    "log": np.log, "tanh": np.tanh, "sqrt": np.sqrt,
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x.astype(np.float64))),  # rounded once, like an exact rsqrt
}
_NP_INT = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _trunc_div, "max": np.maximum,
    "min": np.minimum, "neg": np.negative, "abs": np.abs,
}


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def eval_instr(ins: Instr, args: list[np.ndarray], src: str, dst: str) -> np.ndarray:
    """numpy meaning of one scalar op: every op rounds to its dtype, ints wrap like arith does."""
    if ins.op == "const":
        return np.asarray(ins.attr, dtype=src)
    if ins.op == "cast":
        return args[0].astype(dst)
    if ins.op == "erf":
        return _erf(args[0])
    fn = (_NP_FLOAT if is_float(src) else _NP_INT)[ins.op]
    return np.asarray(fn(*args), dtype=src)
