"""MLIR types and constants -> OpenCL C type names and literals.

`index` is 32-bit `int`, as on the SPIR-V path. A scalar `i1` is `bool`; a vector of `i1` is an `intN` mask
holding -1 (true) or 0 (false), which is what OpenCL's vector comparisons produce and `select` consumes.
In memory an `i1` element is a `uchar` (numpy's bool layout).

`half` names the C type of f16 values: "half" (cl_khr_fp16 arithmetic) or "float" (devices without
cl_khr_fp16: f16 lives in memory only and values are computed in float, see emitter.py).

bf16 has no OpenCL C type (cl_intel_bfloat16 is one vendor's): its values are C floats holding bf16 values,
its buffers `ushort` arrays of the upper 16 bits of the f32 encoding (the runtime's 2-byte bfloat16 layout);
see bf16.py and storage.py.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from ..ir.util import bf16_bits

VECTOR_WIDTHS = (2, 3, 4, 8, 16)

INT_NAMES = {8: "char", 16: "short", 32: "int", 64: "long"}
_FLOAT_NAMES = {16: "half", 32: "float", 64: "double"}
_INT_OF_FLOAT = {"half": "short", "float": "int", "double": "long"}


def element_type(t: ir.Type) -> ir.Type:
    """The lane type of a vector; a scalar type itself."""
    return t.element_type if isinstance(t, ir.VectorType) else t


def width(t: ir.Type) -> int:
    """C vector width of a type: 0 for scalars and for one-lane vectors (vector<1xf32>, vector<1x1xi32>, which
    are plain scalars in C), N for a vector with one dimension of N in (2, 3, 4, 8, 16) and any unit dims."""
    n = lanes(t)
    if n == 1:
        return 0
    if n not in VECTOR_WIDTHS or sum(d != 1 for d in t.shape) > 1 or any(t.scalable_dims):
        raise UnsupportedOp(f"vector type {t}: only vectors with one dimension of {VECTOR_WIDTHS} lanes map to "
                            "OpenCL")
    return n


def lanes(t: ir.Type) -> int:
    """Number of elements of a vector type; 1 for a scalar."""
    if not isinstance(t, ir.VectorType):
        return 1
    n = 1
    for d in t.shape:
        n *= d
    return n


def is_float(t: ir.Type) -> bool:
    return isinstance(element_type(t), (ir.F16Type, ir.BF16Type, ir.F32Type, ir.F64Type))


def is_f16(t: ir.Type) -> bool:
    return isinstance(element_type(t), ir.F16Type)


def is_bf16(t: ir.Type) -> bool:
    return isinstance(element_type(t), ir.BF16Type)


def is_index(t: ir.Type) -> bool:
    return isinstance(element_type(t), ir.IndexType)


def bits(t: ir.Type) -> int:
    """Bit width of the element type (index counts as 32)."""
    e = element_type(t)
    if isinstance(e, ir.IndexType):
        return 32
    if isinstance(e, ir.IntegerType):
        return e.width
    if isinstance(e, (ir.F16Type, ir.BF16Type)):
        return 16
    if isinstance(e, ir.F32Type):
        return 32
    if isinstance(e, ir.F64Type):
        return 64
    raise UnsupportedOp(f"element type {e} has no OpenCL C equivalent")


def is_i1(t: ir.Type) -> bool:
    e = element_type(t)
    return isinstance(e, ir.IntegerType) and e.width == 1


def scalar_name(t: ir.Type, unsigned: bool = False, half: str = "half") -> str:
    """C name of a scalar element type: `float`, `int`, `uchar` (unsigned=True), `bool` for i1, `float` for
    bf16."""
    e = element_type(t)
    if isinstance(e, ir.IntegerType) and not e.is_signless:
        raise UnsupportedOp(f"signed/unsigned integer type {e}: only signless integers are expected")
    if is_i1(e):
        return "bool"
    if isinstance(e, (ir.IntegerType, ir.IndexType)):
        name = INT_NAMES.get(bits(e))
        if name is None:
            raise UnsupportedOp(f"integer type {e} has no OpenCL C equivalent")
        return "u" + name if unsigned else name
    if is_bf16(e):
        return "float"
    if is_float(e):
        return half if is_f16(e) else _FLOAT_NAMES[bits(e)]
    raise UnsupportedOp(f"element type {e} has no OpenCL C equivalent")


def c_type(t: ir.Type, unsigned: bool = False, half: str = "half") -> str:
    """C type of a value: `float`, `float4`, `int4` for vector<4xi1>, `uint4` with unsigned=True."""
    n = width(t)
    if n == 0:
        return scalar_name(t, unsigned, half)
    if is_i1(t):
        return ("uint" if unsigned else "int") + str(n)
    return scalar_name(t, unsigned, half) + str(n)


def int_type_of_float(ctype: str) -> str:
    """The same-width signed integer C type of a float C type (`float4` -> `int4`)."""
    base = ctype.rstrip("0123456789")
    return _INT_OF_FLOAT[base] + ctype[len(base):]


def lane_bits(t: ir.Type, half: str = "half") -> int:
    """Bits of a lane of t's C type: 32 for i1 masks and for f16 (without cl_khr_fp16) and bf16 held in floats."""
    if is_i1(t) or is_bf16(t) or (is_f16(t) and half == "float"):
        return 32
    return bits(t)


def storage_name(t: ir.Type) -> str:
    """C element type of a memref element in global memory (f16 is `half` even without cl_khr_fp16: a pointer
    to half is allowed and read with vload_half; bf16 is its bits, `ushort`). A vector element (a buffer of
    16-byte words, compiler/coop_staging.wide_copies) is its C vector type."""
    if isinstance(t, ir.VectorType):
        if bits(t.element_type) != 32 or is_i1(t):
            raise UnsupportedOp(f"memref of {t}: only vectors of 32-bit elements are buffer elements")
        return c_type(t)
    if is_bf16(t):
        return "ushort"
    return "uchar" if is_i1(t) else scalar_name(t)


def extension_of(t: ir.Type, half: str = "half") -> str | None:
    """The OpenCL extension a value of type t needs, if any."""
    e = element_type(t)
    if isinstance(e, ir.F16Type) and half == "half":
        return "cl_khr_fp16"
    if isinstance(e, ir.F64Type):
        return "cl_khr_fp64"
    return None


def int_literal(value: int, t: ir.Type) -> str:
    """A C literal of integer type `t` (value as MLIR stores it: signed)."""
    if is_i1(t):
        return "true" if value & 1 else "false"
    b = bits(t)
    value = ((value + (1 << (b - 1))) % (1 << b)) - (1 << (b - 1))  # normalise to signed range
    suffix = "L" if b == 64 else ""
    if value == -(1 << (b - 1)) and b >= 32:
        text = f"(-{(1 << (b - 1)) - 1}{suffix} - 1{suffix})"
    elif value < 0:
        text = f"(-{-value}{suffix})"
    else:
        text = f"{value}{suffix}"
    if b < 32:
        return f"(({scalar_name(t)}){text})"
    return text


def float_literal(value: float, t: ir.Type, half: str = "half") -> str:
    """A C literal of float type `t`; inf and nan through the OpenCL macros, -0.0 kept."""
    name = scalar_name(t, half=half)
    if is_f16(t) and name == "float":
        value = float(np.float16(value))
    if math.isnan(value) or math.isinf(value):
        text = "NAN" if math.isnan(value) else ("INFINITY" if value > 0 else "-INFINITY")
        if name != "float":
            return f"(({name}){text})"
        return f"({text})" if text.startswith("-") else text
    if name == "double":
        text = repr(float(value))
    else:
        # f16 values are exact in f32; the shortest f32 repr parses back to the same bits.
        text = str(np.float32(np.float16(value) if name == "half" else value))
        if not any(c in text for c in ".e"):
            text += ".0"
        text += "f"
    if name == "half":
        text = f"(half){text}"
    return f"({text})" if text.startswith("-") or name == "half" else text


def scalar_literal(attr: ir.Attribute, t: ir.Type, half: str = "half") -> str:
    if isinstance(attr, ir.BoolAttr):
        return "true" if attr.value else "false"
    if isinstance(attr, ir.IntegerAttr):
        return int_literal(attr.value, t)
    if isinstance(attr, ir.FloatAttr):
        return float_literal(attr.value, t, half)
    raise UnsupportedOp(f"constant {attr} of type {t}")


def dense_values(attr: ir.Attribute, e: ir.Type) -> list:
    """The elements of a dense constant of element type e (one for a splat), as Python numbers."""
    dense = ir.DenseElementsAttr(attr)
    if dense.is_splat:
        return [dense.get_splat_value().value]
    if is_bf16(e):
        return _bf16_elements(attr)
    if is_float(e):
        return list(ir.DenseFPElementsAttr(attr))
    return list(ir.DenseIntElementsAttr(attr))


def _bf16_elements(attr) -> list[float]:
    """Elements of a bf16 dense attribute (the Python bindings cannot read bf16 elements)."""
    return [bf16_from_bits(b) for b in bf16_bits(attr)]


def bf16_from_bits(b: int) -> float:
    """The value of the bf16 bit pattern b."""
    return float(np.array([(b & 0xFFFF) << 16], dtype=np.uint32).view(np.float32)[0])


def round_bf16(x: float) -> float:
    """x rounded to the nearest bf16 value (ties to even) through f32, as the kernels round."""
    if math.isnan(x):
        return x
    u = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    return bf16_from_bits((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


def vector_literal(attr: ir.Attribute, t: ir.Type, half: str = "half") -> str:
    """`(float4)(1.0f, 2.0f, ...)` or a splat `(float4)(0.0f)`; i1 lanes become -1/0. A one-lane vector constant
    is a scalar literal."""
    n = width(t)
    e = element_type(t)
    values = dense_values(attr, e)
    if n == 0:
        return float_literal(values[0], e, half) if is_float(e) else int_literal(int(values[0]), e)
    if is_i1(e):
        lanes = ["-1" if v else "0" for v in values]
    elif is_float(e):
        lanes = [float_literal(v, e, half) for v in values]
    else:
        lanes = [int_literal(v, e) for v in values]
    if len(lanes) not in (1, n):
        raise UnsupportedOp(f"vector constant {attr}")
    return f"({c_type(t, half=half)})({', '.join(lanes)})"
