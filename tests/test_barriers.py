"""Barrier fences (compiler/lowering/barriers.py): a barrier orders global memory only where a write to it before the
barrier may be read or written by another thread after it."""

from __future__ import annotations

import portable
from portable import profiles
from portable.compiler.pipeline import compile_module


def _reduction():
    g = portable.Graph()
    g.output(g.relu(g.sum(g.input((8, 65536), "float32"), axis=-1)))
    return g


def test_reduction_into_global_output_keeps_global_fences():
    """A workgroup reduction zeroes its output in global memory, then one thread accumulates into it: both
    barriers fence global memory. (The plain workgroup reduction: without row chains, which now take a lone
    reduction, and without split_rows.)"""
    opts = dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]), row_fusion_shared_bytes=0,
                fill_threads=0)
    exe = compile_module(_reduction().to_mlir(), opts, ("opencl",))
    src = exe.kernels[0].opencl
    assert src.count("barrier(") == 2 and src.count("CLK_GLOBAL_MEM_FENCE") == 2, src



def test_copy_reads_its_source():
    """A memref.copy writes its target and reads its source: a barrier before a copy out of a buffer written
    earlier keeps its global fence."""
    from portable.compiler.lowering import barriers
    from portable.ir.mlir import ir

    text = """
    func.func @k(%a: memref<4xf32>, %b: memref<4xf32>, %x: f32) {
      %c0 = arith.constant 0 : index
      memref.store %x, %a[%c0] : memref<4xf32>
      gpu.barrier
      memref.copy %a, %b : memref<4xf32> to memref<4xf32>
      gpu.barrier
      return
    }"""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        body = [op.operation for op in module.body.operations[0].regions[0].blocks[0].operations]
        barriers.mark(body)
        fences = [op for op in body if op.name == "gpu.barrier"]
        assert "address_spaces" not in fences[0].attributes  # %a written before, read by the copy after
        assert "address_spaces" in fences[1].attributes  # nothing touches %a or %b after the last one
