"""How element values move between C variables and memory, for the element types not stored as their C type.

- i1: a `uchar` 0/1 in memory (numpy's bool layout); a `bool`, or an `intN` -1/0 mask, in registers.
- f16 without cl_khr_fp16 (encoding "half"): `half` in global memory, read with vload_half and written with
  vstore_half_rte; a float in registers.
- bf16 (encoding "bf16", every device: OpenCL C has no bfloat16 type): the `ushort` upper half of the f32
  encoding in global memory, the runtime's 2-byte bfloat16 layout; a float in registers (bf16.py). A load
  shifts the bits into a float, a store takes them back (both exact: the stored value is a bf16 value).

Local and private arrays hold elements as their register C type (float for f16 without cl_khr_fp16 and bf16),
except a local f16 array that matrix fragments are loaded from (encoding "bits16", matrix.py): its `ushort`
elements are the f16 bits, read and written through a `__local half*` like a "half" buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.mlir import ir
from . import bf16
from . import types as T


@dataclass(frozen=True)
class Mem:
    """A memref the kernel addresses: C array or pointer name, element type and static strides.
    `encoding`: "" (the element's C type), "half" (f16 read with vload_half, fp16=False), "bf16" (ushort
    bits) or "bits16" (a local array of f16 bits, see above)."""

    name: str
    element: ir.Type
    strides: tuple[int, ...]
    offset: int = 0
    encoding: str = ""
    space: str = "global"  # "global", "workgroup" or "private"


def encoding_of(element: ir.Type, fp16: bool) -> str:
    """The encoding of a global buffer of `element` on a device with (fp16) or without cl_khr_fp16."""
    if T.is_bf16(element):
        return "bf16"
    if T.is_f16(element) and not fp16:
        return "half"
    return ""


def pointer(mem: Mem, idx: str) -> str:
    return mem.name if idx == "0" else f"{mem.name} + {idx}"


def _halves(mem: Mem) -> Mem:
    """A "bits16" local array seen as the "half" memory that vload_half reads."""
    return Mem(f"((__local half*){mem.name})", mem.element, mem.strides, mem.offset, "half", mem.space)


def load(mem: Mem, idx: str) -> str:
    """One element at linear offset idx, as its register value."""
    if mem.encoding == "bits16":
        return load(_halves(mem), idx)
    if mem.encoding == "half":
        return f"vload_half({idx}, {mem.name})"
    if mem.encoding == "bf16":
        return bf16.float_of_bits(0, f"{mem.name}[{idx}]")
    return f"({mem.name}[{idx}] != 0)" if T.is_i1(mem.element) else f"{mem.name}[{idx}]"


def vload(mem: Mem, n: int, idx: str, aligned: str | None = None) -> str:
    """n contiguous elements from linear offset idx, as a C vector (an intN mask for i1). `aligned`: the C vector
    type, where the address is known to be a multiple of its size (Emitter.aligned_vector)."""
    if mem.encoding == "bits16":
        return vload(_halves(mem), n, idx)
    ptr = pointer(mem, idx)
    if aligned:
        return f"(*(__global const {aligned}*)({ptr}))"
    if mem.encoding == "half":
        return f"vload_half{n}(0, {ptr})"
    if mem.encoding == "bf16":
        return bf16.float_of_bits(n, f"vload{n}(0, {ptr})")
    if T.is_i1(mem.element):  # bytes 0/1 in memory, an intN mask of -1/0 in registers
        return f"(-convert_int{n}(vload{n}(0, {ptr})))"
    return f"vload{n}(0, {ptr})"


def store(mem: Mem, idx: str, x: str) -> str:
    """The statement storing the scalar register value x at linear offset idx."""
    if mem.encoding == "bits16":
        return store(_halves(mem), idx, x)
    if mem.encoding == "half":
        return f"vstore_half_rte({x}, {idx}, {mem.name});"
    if mem.encoding == "bf16":
        return f"{mem.name}[{idx}] = {bf16.bits(0, x)};"
    return f"{mem.name}[{idx}] = {'(uchar)' + x if T.is_i1(mem.element) else x};"


def vstore(mem: Mem, n: int, idx: str, x: str, aligned: str | None = None, streaming: bool = False) -> str:
    """The statement storing the n-lane register vector x at linear offset idx, contiguously (`aligned`: as in
    vload). `streaming` (a nontemporal store, codegen_opencl/nontemporal.py) needs the aligned address: clang's
    builtin becomes an aligned nontemporal store (movntps faults on an unaligned one)."""
    if mem.encoding == "bits16":
        return vstore(_halves(mem), n, idx, x)
    ptr = pointer(mem, idx)
    if aligned and streaming:
        return f"__builtin_nontemporal_store({x}, (__global {aligned}*)({ptr}));"
    if aligned:
        return f"*(__global {aligned}*)({ptr}) = {x};"
    if mem.encoding == "half":
        return f"vstore_half{n}_rte({x}, 0, {ptr});"
    if mem.encoding == "bf16":
        return f"vstore{n}({bf16.bits(n, x)}, 0, {ptr});"
    if T.is_i1(mem.element):
        return f"vstore{n}(convert_uchar{n}({x} & 1), 0, {ptr});"
    return f"vstore{n}({x}, 0, {ptr});"
