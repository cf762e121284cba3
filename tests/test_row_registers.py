"""compiler/lowering/row_registers.py on hand-written kernels: what it keeps in registers, and what it must leave
alone."""

from __future__ import annotations

from portable.compiler.lowering.row_registers import keep_rows_in_registers
from portable.ir.mlir import ir

KERNEL = """
module attributes {{gpu.container_module}} {{
  gpu.module @k {{
    gpu.func @k(%in: memref<4x{cols}xf32>, %out: memref<4x{cols}xf32>) kernel
        attributes {{known_block_size = array<i32: 64, 1, 1>}} {{
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      %cols = arith.constant {cols} : index
      %zero = arith.constant 0.0 : f32
      %row = gpu.block_id x
      %t = gpu.thread_id x
      %buf = memref.alloc() : memref<1x{cols}xf32, #gpu.address_space<workgroup>>
      %acc = memref.alloc() : memref<1xf32>
      memref.store %zero, %acc[%c0] : memref<1xf32>
      scf.for %i = %c0 to %cols step %c64 {{
        %j = arith.addi %t, %i : index
        %x = memref.load %in[%row, %j] : memref<4x{cols}xf32>
        %y = arith.mulf %x, %x : f32
        memref.store %y, %buf[%c0, %j] : memref<1x{cols}xf32, #gpu.address_space<workgroup>>
      }}
      gpu.barrier
      scf.for %i = %c0 to %cols step %c64 {{
        %j = arith.addi %t, %i : index
        %y = memref.load %buf[%c0, %j] : memref<1x{cols}xf32, #gpu.address_space<workgroup>>
        %a = memref.load %acc[%c0] : memref<1xf32>
        %s = arith.addf %a, %y : f32
        memref.store %s, %acc[%c0] : memref<1xf32>
        memref.store %y, %out[%row, %j] : memref<4x{cols}xf32>
      }}
      gpu.return
    }}
  }}
}}
"""


def _run(cols: int, limit: int = 32) -> str:
    with ir.Context(), ir.Location.unknown():
        m = ir.Module.parse(KERNEL.format(cols=cols))
        keep_rows_in_registers(m, limit)
        m.operation.verify()
        return str(m)


def test_a_row_only_its_thread_touches_leaves_workgroup_memory():
    text = _run(256)  # 4 columns per thread
    assert "scf.for" not in text and "address_space<workgroup>" not in text and "gpu.barrier" not in text
    assert text.count("memref.load %arg0") == 4 and text.count("memref.store") == 4  # the output only


def test_long_rows_and_long_loops_are_left_alone():
    """64 columns per thread is past the limit: neither the row nor the private accumulator (at a constant index
    inside the 64-iteration loop) is unrolled into registers."""
    text = _run(4096)
    assert text.count("scf.for") == 2 and "address_space<workgroup>" in text and "memref<1xf32>" in text
