"""loop_vectorize.py on IR: a reduction over two nested loops (blocks of weights with one scale each, as a
MatMulNBits decomposition gives) carries its vector partials through the outer loop and combines the lanes once.
Its values on devices: tests/test_llm_quant.py (the decode-step matvec against onnxruntime)."""

from __future__ import annotations

import pytest

from portable.compiler.lowering.loop_vectorize import vectorize_loops
from portable.ir.mlir import ir
from portable.ir.util import find_ops

NESTED = """
gpu.module @m {
  gpu.func @k(%out: memref<8xf32>, %w: memref<8x6x32xf32>, %s: memref<8x6xf32>, %x: memref<6x32xf32>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c6 = arith.constant 6 : index
    %c32 = arith.constant 32 : index
    %zero = arith.constant 0.0 : f32
    %n = gpu.thread_id x
    %sum = scf.for %b = %c0 to %c6 step %c1 iter_args(%acc = %zero) -> (f32) {
      %r = scf.for %k = %c0 to %c32 step %c1 iter_args(%a = %acc) -> (f32) {
        %wv = memref.load %w[%n, %b, %k] : memref<8x6x32xf32>
        %sv = memref.load %s[%n, %b] : memref<8x6xf32>
        %xv = memref.load %x[%b, %k] : memref<6x32xf32>
        %p = arith.mulf %wv, %sv : f32
        %q = arith.mulf %p, %xv : f32
        %t = arith.addf %a, %q : f32
        scf.yield %t : f32
      }
      scf.yield %r : f32
    }
    memref.store %sum, %out[%n] : memref<8xf32>
    gpu.return
  }
}
"""


def _module(text: str) -> ir.Module:
    return ir.Module.parse("module attributes {gpu.container_module} {" + text + "}")


def _combined_lanes(gm: ir.Operation) -> list[ir.Operation]:
    return find_ops(gm, ("vector.reduction",))


@pytest.mark.parametrize("width", [4, 16])
def test_nested_reduction_combines_lanes_once(width):
    with ir.Context(), ir.Location.unknown():
        module = _module(NESTED)
        gm = next(op for op in module.body.operations if op.operation.name == "gpu.module").operation
        assert vectorize_loops(gm, width)
        module.operation.verify()
        loops = find_ops(gm, ("scf.for",))
        assert len(loops) == 2
        outer, inner = (loops[0], loops[1]) if loops[1].parent == loops[0] else (loops[1], loops[0])
        # Both loops carry vector<width x f32>: the inner one starts from the outer one's partials.
        vt = ir.VectorType.get([width], ir.F32Type.get())
        assert [r.type for r in outer.results] == [vt] and [r.type for r in inner.results] == [vt]
        assert inner.operands[3] == outer.regions[0].blocks[0].arguments[1]
        (red,) = _combined_lanes(gm)
        assert red.operands[0] == outer.results[0]  # once, after the outer loop
        assert red.parent.name == "gpu.func"


def test_nested_reduction_with_a_scalar_tail_is_left_per_block():
    """An inner row of 30 at width 16: its last columns run in the scalar loop from the combined partials, so
    the partials cannot be carried across blocks; the rewrite leaves it."""
    with ir.Context(), ir.Location.unknown():
        module = _module(NESTED.replace("x32x", "x30x").replace("6x32", "6x30").replace("%c32 = arith.constant 32",
                                                                                          "%c32 = arith.constant 30"))
        gm = next(op for op in module.body.operations if op.operation.name == "gpu.module").operation
        assert vectorize_loops(gm, 16)
        module.operation.verify()
        (red,) = _combined_lanes(gm)
        assert red.parent.name == "scf.for"

