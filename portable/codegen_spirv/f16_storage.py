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
"""

from __future__ import annotations

from ..compiler.ir_util import with_element
from ..compiler.mlir import arith, ir
from ..errors import CompileError

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
    loads, stores, truncs, extends, constants = [], [], [], [], []

    def visit(op):
        op = op.operation
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    nt = with_element(arg.type, f16, f32)
                    if nt is not None and not _storage_buffer(arg.type):
                        arg.set_type(nt)
        name = op.name
        if name in _LOADS and _storage_buffer(op.operands[0].type) and op.operands[0].type.element_type == f16:
            loads.append(op)
            return ir.WalkResult.ADVANCE
        if name in _STORES and _storage_buffer(op.operands[1].type) and op.operands[1].type.element_type == f16:
            stores.append(op)
            return ir.WalkResult.ADVANCE
        if name == "arith.truncf" and with_element(op.results[0].type, f16, f32) is not None:
            truncs.append(op)
            return ir.WalkResult.ADVANCE
        if name == "arith.extf" and with_element(op.operands[0].type, f16, f32) is not None:
            extends.append(op)
            return ir.WalkResult.ADVANCE
        if name == "arith.constant" and with_element(op.results[0].type, f16, f32) is not None:
            constants.append(op)
            return ir.WalkResult.ADVANCE
        touched = [r for r in op.results if with_element(r.type, f16, f32) is not None]
        if name == "gpu.func" or name == "gpu.return":
            return ir.WalkResult.ADVANCE
        reads = any(with_element(v.type, f16, f32) is not None and not _storage_buffer(v.type) for v in op.operands)
        if touched or reads:
            if name not in _MOVES and name not in _LOADS and name not in _STORES:
                raise CompileError(f"f16 left on '{name}' after f16 emulation (the device has 16-bit storage but "
                                   "no f16 arithmetic)", stage="spirv")
        for r in touched:
            if not _storage_buffer(r.type):
                r.set_type(with_element(r.type, f16, f32))
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    for op in loads:  # f16 from the buffer, widened where it is read
        r = op.results[0]
        with ir.InsertionPoint.after(op), op.location:
            wide = arith.ExtFOp(with_element(r.type, f16, f32), r).result
        r.replace_all_uses_with(wide)
        wide.owner.operands[0] = r  # replace_all_uses_with redirected the extf's own operand too
    for op in truncs:  # a rounding step: to f16 and back, the value stays in an f32 register
        r = op.results[0]
        with ir.InsertionPoint.after(op), op.location:
            wide = arith.ExtFOp(with_element(r.type, f16, f32), r).result
        r.replace_all_uses_with(wide)
        wide.owner.operands[0] = r
    for op in stores:  # f32 registers rounded (already exact f16 values: canonicalize folds the pair) when written
        v = op.operands[0]
        with ir.InsertionPoint(op), op.location:
            op.operands[0] = arith.TruncFOp(with_element(v.type, f32, f16), v).result
    for op in extends:  # its operand is f32 now
        src, r = op.operands[0], op.results[0]
        if src.type == r.type:
            r.replace_all_uses_with(src)
            op.erase()
    for op in constants:
        r = op.results[0]
        t = with_element(r.type, f16, f32)
        attr = op.attributes["value"]
        with ir.InsertionPoint(op), op.location:
            if isinstance(t, ir.VectorType):
                dense = ir.DenseFPElementsAttr(attr)
                if not dense.is_splat:
                    raise CompileError("a non-splat f16 vector constant on a device without f16 arithmetic",
                                       stage="spirv")
                value = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(f32, dense.get_splat_value().value))
            else:
                value = ir.FloatAttr.get(f32, ir.FloatAttr(attr).value)
            new = arith.ConstantOp(t, value).result
        r.replace_all_uses_with(new)
        op.erase()
