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


KERNEL = """
gpu.module @k {
  gpu.func @f(%a: memref<4xf32>) kernel {
    %w = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
    %s = memref.subview %w[1] [2] [1] : memref<4xf32, #gpu.address_space<workgroup>>
                                      to memref<2xf32, strided<[1], offset: 1>, #gpu.address_space<workgroup>>
    %c0 = arith.constant 0 : index
    %v = memref.load %a[%c0] : memref<4xf32>
    memref.store %v, %s[%c0] : memref<2xf32, strided<[1], offset: 1>, #gpu.address_space<workgroup>>
    gpu.barrier memfence [#gpu.address_space<workgroup>]
    %u = memref.load %w[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    memref.store %u, %a[%c0] : memref<4xf32>
    gpu.barrier memfence [#gpu.address_space<global>, #gpu.address_space<workgroup>]
    gpu.barrier
    gpu.return
  }
}
"""


def test_spirv_takes_fences_and_workgroup_memory_from_the_ir():
    """codegen_spirv/storage_classes.py: one flag per barrier in order (workgroup memory alone or not), the memfence
    lists gone, and every workgroup memref (views too) typed with the Workgroup storage class."""
    from portable.codegen_spirv.storage_classes import take_barrier_fences, workgroup_memory_as_storage_class
    from portable.ir.mlir import ir
    from portable.ir.util import find_ops

    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse("module attributes {gpu.container_module} {" + KERNEL + "}")
        gm = module.body.operations[0].operation
        assert take_barrier_fences(gm) == [True, False, False]
        assert all("address_spaces" not in b.attributes for b in find_ops(gm, ("gpu.barrier",)))
        workgroup_memory_as_storage_class(gm)
        module.operation.verify()
        storage = ir.Attribute.parse("#spirv.storage_class<Workgroup>")
        for op in find_ops(gm, ("memref.alloc", "memref.subview")):
            assert op.results[0].type.memory_space == storage
        assert "address_space<workgroup>" not in str(gm)
