"""gpu.subgroup_mma_* (16x16x16 matrix fragments, compiler/schedule/coop_matrix.py) as inline PTX `wmma`.

OpenCL C has no matrix types. NVIDIA's OpenCL compiler takes inline PTX (profile `opencl_asm = "ptx"`), and
PTX's warp-level `wmma` instructions are the same fragments the gpu dialect has: a subgroup of 32 loads,
multiplies and stores a 16x16 tile together, each lane holding an opaque part of it in registers. A fragment
is a C struct of those registers:
- A and B (f16): eight `uint`s, each two halves;
- the accumulator: eight `float`s (f32) or four `uint`s (f16 pairs).
Loads and stores name the state space of the pointer (`.global` for buffers, `.shared` for `__local` arrays,
whose numeric value NVIDIA's compiler keeps as the shared-window address) and the row stride in elements.

Every load and the multiply use the row-major layout, so the fragments' lane layouts agree (wmma requires
the multiply to name the layouts its operands were loaded with); a transposed load or multiply is refused.
Staged operands arrive in workgroup tiles of 16-byte words (compiler/coop_staging.wide_copies, as on Vulkan),
whose leadDimension counts words; any other f16 tile that fragments read holds raw f16 bits (storage.py
`bits16`) however f16 is computed elsewhere in the kernel. Such tiles are 32-byte aligned, as wmma needs.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from . import storage
from . import types as T

_TYPE = re.compile(r'!gpu\.mma_matrix<16x16x(f16|f32), "(AOp|BOp|COp)">')


def is_fragment(t: ir.Type) -> bool:
    return str(t).startswith("!gpu.mma_matrix")


def _kind(t: ir.Type) -> tuple[str, str]:
    """(element, operand) of a fragment type: ("f16", "AOp")."""
    m = _TYPE.fullmatch(str(t))
    if not m or (m.group(2) != "COp" and m.group(1) != "f16"):
        raise UnsupportedOp(f"matrix fragment {t}: only 16x16 f16 A/B and f16/f32 accumulators have PTX wmma forms")
    return m.group(1), m.group(2)


def _registers(t: ir.Type) -> tuple[str, int]:
    """C type and count of the registers of a fragment of type t."""
    element, operand = _kind(t)
    return ("float", 8) if (operand, element) == ("COp", "f32") else ("uint", 8 if operand != "COp" else 4)


def c_type(em, t: ir.Type) -> str:
    reg, n = _registers(t)
    name = f"pt_frag_{reg}{n}"
    em.helper(name, f"typedef struct {{ {reg} r[{n}]; }} {name};\n")
    return name


def reads_fragments(value: ir.Value) -> bool:
    """Whether fragments are loaded from the memref `value` (its elements must then be raw f16 bits)."""
    return any(u.owner.name == "gpu.subgroup_mma_load_matrix" and u.operand_number == 0 for u in value.uses)


def _per_element(memory: ir.Type, element: str) -> int:
    """Fragment elements (`element`: "f16"/"f32") per element of the memory they are loaded from: 1, or 8 f16
    in a buffer or tile of 16-byte words (compiler/coop_staging.wide_copies), whose leadDimension counts words
    where wmma counts elements."""
    if element == "f16" and isinstance(memory, ir.VectorType) and T.lanes(memory) * T.bits(memory) == 128:
        return 8
    if str(memory) != element:
        raise UnsupportedOp(f"{element} matrix fragments loaded from memory of {memory}")
    return 1


def _check(em, op) -> None:
    if em.asm != "ptx":
        raise UnsupportedOp(f"{op.operation.name} has no OpenCL C form on this device (profile opencl_asm)")
    for flag in ("transpose", "a_transpose", "b_transpose"):
        if flag in op.attributes:
            raise UnsupportedOp(f"{op.operation.name} with {flag}: only row-major fragments are spelled")


def _regs(first: int, n: int) -> str:
    return "{" + ", ".join(f"%{first + i}" for i in range(n)) + "}"


def _state_space(em, memref: ir.Value) -> tuple[str, str]:
    """(PTX state space, C address space) of the memory behind memref."""
    space = em.mems[memref].space
    if space == "workgroup":
        return "shared", "__local"
    if space == "global":
        return "global", "__global"
    raise UnsupportedOp(f"matrix fragments in {space} memory")


def _access(em, op, memref: ir.Value, indices, ft: ir.Type) -> tuple[str, str, str, int]:
    """What a fragment load or store of type ft at memref[indices] spells: (PTX state space, C address space,
    pointer argument, row stride in elements)."""
    ss, cspace = _state_space(em, memref)
    mem, idx = em.address(memref, list(indices))
    ld = ir.IntegerAttr(op.attributes["leadDimension"]).value * _per_element(mem.element, _kind(ft)[0])
    return ss, cspace, storage.pointer(mem, idx), ld


def _constraint(reg: str) -> str:
    return "f" if reg == "float" else "r"


def load(em, op) -> None:
    _check(em, op)
    result = op.results[0]
    ft = result.type
    reg, n = _registers(ft)
    ss, cspace, ptr, ld = _access(em, op, op.operands[0], op.operands[1:], ft)
    element, frag = _kind(ft)[0], c_type(em, ft)
    letter = {"AOp": "a", "BOp": "b", "COp": "c"}[_kind(ft)[1]]
    name = f"pt_wmma_load_{letter}_{element}_{ss}"
    outs = ", ".join(f'"={_constraint(reg)}"(f.r[{i}])' for i in range(n))
    ptx = f"wmma.load.{letter}.sync.aligned.row.m16n16k16.{ss}.{element}"
    body = (f"    {frag} f;\n"
            f'    asm volatile("{ptx} {_regs(0, n)}, [%{n}], %{n + 1};"\n'
            f'                 : {outs} : "l"((ulong)p), "r"(ld));\n'
            f"    return f;\n")
    const = " const" if cspace == "__global" else ""
    em.helper(name, f"{frag} {name}({cspace}{const} void* p, int ld) {{\n{body}}}\n")
    em.define(result, f"{name}({ptr}, {ld})")


def compute(em, op) -> None:
    _check(em, op)
    a, b, c = op.operands
    d = op.results[0]
    if _kind(a.type) != ("f16", "AOp") or _kind(b.type) != ("f16", "BOp") or c.type != d.type:
        raise UnsupportedOp(f"gpu.subgroup_mma_compute of {a.type} x {b.type} + {c.type}")
    acc = _kind(d.type)[0]
    reg, n = _registers(d.type)
    frag_ab, frag_c = c_type(em, a.type), c_type(em, d.type)
    name = f"pt_wmma_mma_{acc}"
    cons = _constraint(reg)
    outs = ", ".join(f'"={cons}"(d.r[{i}])' for i in range(n))
    ins = ", ".join([f'"r"({x}.r[{i}])' for x in "ab" for i in range(8)] + [f'"{cons}"(c.r[{i}])' for i in range(n)])
    # Not volatile: a pure function of its registers, which the compiler may schedule freely.
    body = (f"    {frag_c} d;\n"
            f'    asm("wmma.mma.sync.aligned.row.row.m16n16k16.{acc}.{acc} {_regs(0, n)}, '
            f'{_regs(n, 8)}, {_regs(n + 8, 8)}, {_regs(n + 16, n)};"\n'
            f"        : {outs}\n        : {ins});\n"
            f"    return d;\n")
    em.helper(name, f"{frag_c} {name}({frag_ab} a, {frag_ab} b, {frag_c} c) {{\n{body}}}\n")
    em.define(d, f"{name}({em.val(a)}, {em.val(b)}, {em.val(c)})")


def store(em, op) -> None:
    _check(em, op)
    value = op.operands[0]
    ft = value.type
    if _kind(ft)[1] != "COp":
        raise UnsupportedOp(f"gpu.subgroup_mma_store_matrix of an {_kind(ft)[1]} fragment")
    reg, n = _registers(ft)
    ss, cspace, ptr, ld = _access(em, op, op.operands[1], op.operands[2:], ft)
    element, frag = _kind(ft)[0], c_type(em, ft)
    name = f"pt_wmma_store_{element}_{ss}"
    ptx = f"wmma.store.d.sync.aligned.row.m16n16k16.{ss}.{element}"
    ins = ", ".join(['"l"((ulong)p)'] + [f'"{_constraint(reg)}"(f.r[{i}])' for i in range(n)] + ['"r"(ld)'])
    body = (f'    asm volatile("{ptx} [%0], {_regs(1, n)}, %{n + 1};"\n'
            f"                 :: {ins});\n")
    em.helper(name, f"void {name}({cspace} void* p, {frag} f, int ld) {{\n{body}}}\n")
    em.line(f"{name}({ptr}, {em.val(value)}, {ld});")


def constant(em, op) -> None:
    _check(em, op)
    result, scalar = op.results[0], op.operands[0]
    reg, n = _registers(result.type)
    if reg == "float":
        lanes = [em.val(scalar)] * n
    else:  # f16 pairs: the constant's bits, twice per register
        if not isinstance(scalar, ir.OpResult) or scalar.owner.name != "arith.constant":
            raise UnsupportedOp("an f16 constant matrix of a value that is not a constant")
        bits = int(np.float16(ir.FloatAttr(scalar.owner.attributes["value"]).value).view(np.uint16))
        lanes = [f"{bits << 16 | bits:#010x}u"] * n
    em.define(result, f"{{{{{', '.join(lanes)}}}}}")  # an initializer: the define is a declaration


def elementwise(em, op) -> None:
    """The one elementwise op on fragments the compiler makes (compiler/schedule/coop_narrow.py): an f32 accumulator
    rounded to f16. wmma's f32 and f16 accumulators hold the same elements in the same order (eight floats; four
    registers of two halves, the lower half first), so each pair of floats becomes one register."""
    _check(em, op)
    src, result = op.operands[0], op.results[0]
    if "truncf" not in str(op.attributes["opType"]) or _kind(src.type) != ("f32", "COp") or \
            _kind(result.type) != ("f16", "COp"):
        raise UnsupportedOp(f"gpu.subgroup_mma_elementwise {op.attributes['opType']} from {src.type} to "
                            f"{result.type}: only f32 accumulators rounded to f16 are spelled")
    em.helper("pt_pack_f16x2", "uint pt_pack_f16x2(float lo, float hi) {\n    uint r;\n"
              '    asm("{ .reg .f16 l, h; cvt.rn.f16.f32 l, %1; cvt.rn.f16.f32 h, %2; mov.b32 %0, {l, h}; }"\n'
              '        : "=r"(r) : "f"(lo), "f"(hi));\n    return r;\n}\n')
    f = em.val(src)
    em.define(result, "{{" + ", ".join(f"pt_pack_f16x2({f}.r[{2 * i}], {f}.r[{2 * i + 1}])" for i in range(4)) + "}}")


HANDLERS = {
    "gpu.subgroup_mma_elementwise": elementwise,
    "gpu.subgroup_mma_load_matrix": load,
    "gpu.subgroup_mma_compute": compute,
    "gpu.subgroup_mma_store_matrix": store,
    "gpu.subgroup_mma_constant_matrix": constant,
}
