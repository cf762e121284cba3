"""bf16 kernels on SPIR-V without a bfloat16 type: arithmetic in f32, values and buffers as 16-bit integers.

Upstream's SPIR-V type converter turns bf16 into f32, so a bf16 buffer would be read as an f32 array (wrong
bytes, silently). Instead, before convert-gpu-to-spirv:
1. `math-extend-to-supported-types` and `arith-emulate-unsupported-floats` compute every bf16 op in f32,
   leaving bf16 only in extf/truncf, loads, stores, constants, selects and vector shuffling;
2. `arith-expand{include-bf16}` makes extf/truncf integer code around `arith.bitcast` bf16 <-> i16;
3. `bf16_as_i16` (here) retypes every remaining bf16 value, buffer and constant to i16 (the same bits), so
   those bitcasts vanish and the runtime's 2-byte bfloat16 buffers are read as they are laid out.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.mlir import arith, ir
from ..ir.util import bf16_bits, with_element

BF16_TO_F32 = ("math-extend-to-supported-types,arith-emulate-unsupported-floats{source-types=bf16 target-type=f32},"
               "arith-expand{include-bf16=true}")

# Ops that only move bf16 bits around: retyping their bf16 operands/results to i16 keeps their meaning.
_MOVES = {"memref.load", "memref.store", "vector.load", "vector.store", "memref.alloca", "memref.alloc",
          "memref.subview", "memref.reinterpret_cast", "memref.cast", "arith.select", "arith.constant",
          "arith.bitcast", "ub.poison", "vector.broadcast", "vector.splat", "vector.extract", "vector.insert",
          "vector.shuffle", "vector.from_elements", "vector.to_elements", "vector.shape_cast",
          "vector.extract_strided_slice", "vector.insert_strided_slice", "scf.for", "scf.if", "scf.yield",
          "scf.while", "scf.condition", "gpu.func", "gpu.return"}


def _bits(x: float) -> int:
    """The bf16 bits of x as a signed 16-bit value: f32 rounded to nearest even, as arith-expand's truncf."""
    import numpy as np

    if x != x:
        return 0x7FC0
    v = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    b = ((v + 0x7FFF + ((v >> 16) & 1)) >> 16) & 0xFFFF
    return b - 0x10000 if b >= 0x8000 else b


def _bits_attr(attr: ir.Attribute, t: ir.Type, i16: ir.Type) -> ir.Attribute:
    """A bf16 constant (scalar or dense) as the i16 constant of the same bits."""
    if not isinstance(t, ir.VectorType):
        return ir.IntegerAttr.get(i16, _bits(ir.FloatAttr(attr).value))
    dense = ir.DenseFPElementsAttr(attr)
    if dense.is_splat:
        return ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(i16, _bits(dense.get_splat_value().value)))
    import numpy as np

    # Element access on non-splat bf16 attributes fails in these bindings: read the printed bits.
    bits = np.array(bf16_bits(attr), dtype=np.uint16).view(np.int16).reshape(list(t.shape))
    return ir.DenseElementsAttr.get(bits, type=t)


def bf16_as_i16(gpu_module: ir.Operation) -> None:
    """Every bf16 value, block argument, buffer and constant of the module's kernels becomes i16 in place;
    bitcasts between bf16 and i16 disappear. Raises CompileError for an op that would compute on bf16
    (the emulation passes must have run)."""
    bf16, i16 = ir.BF16Type.get(), ir.IntegerType.get_signless(16)
    bitcasts, constants = [], []

    def visit(op):
        op = op.operation
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    nt = with_element(arg.type, bf16, i16)
                    if nt is not None:
                        arg.set_type(nt)
        touched = [r for r in op.results if with_element(r.type, bf16, i16) is not None]
        uses_bf16 = touched or any(with_element(v.type, bf16, i16) is not None for v in op.operands)
        if uses_bf16 and op.name not in _MOVES:
            raise CompileError(f"bf16 left on '{op.name}' after bf16 emulation (SPIR-V has no bf16 type)",
                               stage="spirv")
        if op.name == "arith.constant" and touched:
            constants.append(op)
        for r in touched:
            r.set_type(with_element(r.type, bf16, i16))
        if op.name == "arith.bitcast":
            bitcasts.append(op)
        if op.name == "gpu.func":
            ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
            ins = [with_element(t, bf16, i16) or t for t in ftype.inputs]
            op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(ins, list(ftype.results)))
        return ir.WalkResult.ADVANCE

    gpu_module.walk(visit, ir.WalkOrder.PRE_ORDER)
    for op in constants:
        t = op.results[0].type
        with ir.InsertionPoint(op), op.location:
            new = arith.ConstantOp(t, _bits_attr(op.attributes["value"], t, i16)).result
        op.results[0].replace_all_uses_with(new)
        op.erase()
    for op in bitcasts:
        if op.operands[0].type == op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
