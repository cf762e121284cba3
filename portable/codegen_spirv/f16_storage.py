"""f16 buffers on a Vulkan device with 16-bit storage but no f16 arithmetic (no Float16 capability: Mali v9 under
panvk, the arm-mali-valhall profile).

SPV_KHR_16bit_storage lets a kernel load 16-bit values from a storage buffer, store them, and convert them; it
allows no 16-bit constant, composite, phi or arithmetic. Upstream's type converter instead turns every f16
value into f32 while the buffer stays f16, and the loads it writes do not type-check. So, before
convert-gpu-to-spirv (after arith-emulate-unsupported-floats computed every f16 op in f32, rounding to f16 after
each, as the OpenCL path does without cl_khr_fp16):
- every f16 value in registers (scalars, vectors, loop-carried values, constants) becomes f32 holding the same
  number; private and workgroup arrays of f16 become f32 arrays (twice the bytes: arm-mali-valhall stages no
  tiles in workgroup memory, so its strategies' sizes still hold);
- a load from an f16 buffer is followed by an extf, a store into one is preceded by a truncf;
- a truncf to f16 (a rounding step) becomes truncf then extf: the value stays f32, rounded.
The conversion then runs with Float16 in its target so that the buffers keep their f16 type, and the serializer
drops the capability from the binary: spirv-val checks that no other use of f16 remains.

bf16 kernels, which hold bf16 as i16 bits (bf16_values.py), get the same treatment without Int16
(`i16_registers_as_i32`): the bits zero-extended in i32 registers, only moved, stored and extended there.
int16 tensors themselves (arithmetic on i16) still need Int16.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.mlir import arith, ir
from ..ir.util import with_element

# Ops that only move values: retyping their f16 registers to f32 keeps their meaning.
_MOVES = {"arith.select", "ub.poison", "vector.broadcast", "vector.splat", "vector.extract", "vector.insert",
          "vector.shuffle", "vector.from_elements", "vector.to_elements", "vector.shape_cast",
          "vector.extract_strided_slice", "vector.insert_strided_slice", "scf.for", "scf.if", "scf.yield",
          "scf.while", "scf.condition", "memref.alloca", "memref.alloc", "memref.subview", "memref.cast",
          "memref.reinterpret_cast", "gpu.subgroup_reduce", "gpu.shuffle"}
_LOADS = {"memref.load", "vector.load"}
_STORES = {"memref.store", "vector.store"}


def _storage_buffer(t: ir.Type) -> bool:
    """A kernel argument's buffer (no memory space, or the storage buffer class): the f16 that 16-bit storage
    covers. Private (alloca) and workgroup arrays have a memory space of their own."""
    return isinstance(t, ir.MemRefType) and (t.memory_space is None or "StorageBuffer" in str(t.memory_space))


def f16_registers_as_f32(gpu_module: ir.Operation) -> None:
    """Rewrite the module's kernels so that f16 stays in storage buffers only (module docstring). Raises
    CompileError on an op that would still compute on f16 (the emulation passes must have run)."""
    f16, f32 = ir.F16Type.get(), ir.F32Type.get()

    def constant(attr: ir.Attribute, t: ir.Type) -> ir.Attribute:
        if isinstance(t, ir.VectorType):
            dense = ir.DenseFPElementsAttr(attr)
            if not dense.is_splat:
                raise CompileError("a non-splat f16 vector constant on a device without f16 arithmetic", stage="spirv")
            return ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(f32, dense.get_splat_value().value))
        return ir.FloatAttr.get(f32, ir.FloatAttr(attr).value)

    _registers_widened(gpu_module, f16, f32, "arith.extf", "arith.truncf", arith.ExtFOp, arith.TruncFOp, constant,
                       "f16 arithmetic")


def i16_registers_as_i32(gpu_module: ir.Operation) -> None:
    """The same for 16-bit integers on a device with 16-bit storage but no Int16 (bf16 kernels hold their values
    as i16 bits, codegen_spirv/bf16_values.py): registers hold the 16 bits zero-extended in an i32, a zero
    extension from i16 is the value itself and a truncation to i16 a mask. Arithmetic on i16 stays an error."""
    i16, i32 = ir.IntegerType.get_signless(16), ir.IntegerType.get_signless(32)

    def constant(attr: ir.Attribute, t: ir.Type) -> ir.Attribute:
        if isinstance(t, ir.VectorType):
            dense = ir.DenseIntElementsAttr(attr)
            if not dense.is_splat:
                raise CompileError("a non-splat i16 vector constant on a device without Int16", stage="spirv")
            return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i32, dense.get_splat_value().value & 0xFFFF))
        return ir.IntegerAttr.get(i32, ir.IntegerAttr(attr).value & 0xFFFF)

    def mask(t: ir.Type, v: ir.Value) -> arith.AndIOp:  # a truncation to 16 bits, kept in 32
        if isinstance(v.type, ir.VectorType):
            m = arith.ConstantOp(v.type, ir.DenseElementsAttr.get_splat(v.type, ir.IntegerAttr.get(i32, 0xFFFF)))
        else:
            m = arith.ConstantOp(i32, ir.IntegerAttr.get(i32, 0xFFFF))
        return arith.AndIOp(v, m.result)

    _registers_widened(gpu_module, i16, i32, "arith.extui", "arith.trunci", arith.ExtUIOp, arith.TruncIOp, constant,
                       "int16 arithmetic", rounding=mask, only_moved=True)


def _registers_widened(gpu_module: ir.Operation, narrow: ir.Type, wide: ir.Type, ext_name: str, trunc_name: str,
                       ext_op, trunc_op, constant, what: str, rounding=None, only_moved: bool = False) -> None:
    """`narrow` values live in storage buffers only; registers hold them as `wide` (module docstring). Loads
    are followed by `ext_op`, stores preceded by `trunc_op`; `ext_name` ops from `narrow` become their operand,
    `trunc_name` ops to `narrow` are kept and widened back (or, with `rounding`, replaced by what it builds).
    `only_moved`: a widened register may only be moved, stored or extended (a zero-extended i16 read by a signed
    op would be a different number), else CompileError."""
    loads, stores, truncs, extends, constants = [], [], [], [], []
    widened: set = set()  # registers retyped so far (only_moved)

    def visit(op):
        op = op.operation
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    nt = with_element(arg.type, narrow, wide)
                    if nt is not None and not _storage_buffer(arg.type):
                        arg.set_type(nt)
                        widened.add(arg)
        name = op.name
        if name.startswith("arith.ext") and name != ext_name and op.operands[0].type == op.results[0].type:
            raise CompileError(f"'{name}' from {narrow}: the device has 16-bit storage but no {what}", stage="spirv")
        if name in _LOADS and _storage_buffer(op.operands[0].type) and op.operands[0].type.element_type == narrow:
            loads.append(op)
            return ir.WalkResult.ADVANCE
        if name in _STORES and _storage_buffer(op.operands[1].type) and op.operands[1].type.element_type == narrow:
            stores.append(op)
            return ir.WalkResult.ADVANCE
        if name == trunc_name and with_element(op.results[0].type, narrow, wide) is not None:
            truncs.append(op)
            return ir.WalkResult.ADVANCE
        if name == ext_name and with_element(op.operands[0].type, narrow, wide) is not None:
            extends.append(op)
            return ir.WalkResult.ADVANCE
        if name == "arith.constant" and with_element(op.results[0].type, narrow, wide) is not None:
            constants.append(op)
            return ir.WalkResult.ADVANCE
        touched = [r for r in op.results if with_element(r.type, narrow, wide) is not None]
        if name == "gpu.func" or name == "gpu.return":
            return ir.WalkResult.ADVANCE
        if only_moved and name not in _MOVES and name not in _STORES and name not in (ext_name, trunc_name) and \
                any(v in widened for v in op.operands):
            raise CompileError(f"'{name}' reads {narrow} bits: the device has 16-bit storage but no {what}",
                               stage="spirv")
        reads = any(with_element(v.type, narrow, wide) is not None and not _storage_buffer(v.type)
                    for v in op.operands)
        if touched or reads:
            if name not in _MOVES and name not in _LOADS and name not in _STORES:
                raise CompileError(f"{narrow} left on '{name}': the device has 16-bit storage but no {what}",
                                   stage="spirv")
        for r in touched:
            if not _storage_buffer(r.type):
                r.set_type(with_element(r.type, narrow, wide))
                widened.add(r)
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    for op in loads:  # from the buffer, widened where it is read
        r = op.results[0]
        with ir.InsertionPoint.after(op), op.location:
            widened = ext_op(with_element(r.type, narrow, wide), r).result
        r.replace_all_uses_with(widened)
        widened.owner.operands[0] = r  # replace_all_uses_with redirected the extension's own operand too
    for op in truncs:  # a rounding (or truncating) step; the value stays in a wide register
        r = op.results[0]
        if rounding is not None:
            with ir.InsertionPoint(op), op.location:
                kept = rounding(r.type, op.operands[0]).result
            r.replace_all_uses_with(kept)
            op.erase()
            continue
        with ir.InsertionPoint.after(op), op.location:
            widened = ext_op(with_element(r.type, narrow, wide), r).result
        r.replace_all_uses_with(widened)
        widened.owner.operands[0] = r
    for op in stores:  # wide registers narrowed (already exact: canonicalize folds such pairs) where written
        v = op.operands[0]
        if v.type == narrow or (isinstance(v.type, ir.VectorType) and v.type.element_type == narrow):
            # A constant written as it is: SPIR-V has no 16-bit constant without the arithmetic capability.
            raise CompileError(f"a {narrow} constant stored to a buffer on a device with 16-bit storage but no {what}",
                               stage="spirv")
        with ir.InsertionPoint(op), op.location:
            op.operands[0] = trunc_op(with_element(v.type, wide, narrow), v).result
    for op in extends:  # its operand is wide now
        src, r = op.operands[0], op.results[0]
        if src.type == r.type:
            r.replace_all_uses_with(src)
            op.erase()
    for op in constants:
        r = op.results[0]
        t = with_element(r.type, narrow, wide)
        with ir.InsertionPoint(op), op.location:
            new = arith.ConstantOp(t, constant(op.attributes["value"], t)).result
        r.replace_all_uses_with(new)
        op.erase()
