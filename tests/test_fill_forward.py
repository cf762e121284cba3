"""Reads of a thread's own fill take the fill's constant; the fill nest goes only when it is dead
(compiler/lowering/constant_init.py, forward_fills). The kernels here have the shape a promoted matmul has after
loop_registers: a fill nest over the thread's 4x4 output block, a barrier, the reads of the block, a write-back."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.api import CompiledGraph
from portable.codegen_spirv import disassemble
from portable.compiler.lowering import constant_init
from portable.compiler.pipeline import compile_module
from portable.devices import open_device
from portable.ir.mlir import ir

RNG = np.random.default_rng(3)

KERNEL = """
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @main_kernel(%out: memref<64x64xf32>, %other: memref<64x64xf32>) kernel {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %cst = arith.constant 0.0 : f32
      %pad = ub.poison : f32
      %tx = gpu.thread_id x
      %r = arith.muli %tx, %c4 : index
      scf.for %i = %c0 to %c4 step %c1 {
        %row = arith.addi %r, %i : index
        scf.for %j = %c0 to %c4 step %c1 {
          memref.store %cst, %out[%row, %j] : memref<64x64xf32>
        }
      }
      gpu.barrier
      BETWEEN
      %r1 = arith.addi %r, %c1 : index
      %r2 = arith.addi %r, %c2 : index
      %r3 = arith.addi %r, %c3 : index
      %v0 = vector.transfer_read %out[%r, %c0], %pad {in_bounds = [true]} : memref<64x64xf32>, vector<4xf32>
      %v1 = vector.transfer_read %out[READ1, %c0], %pad {in_bounds = [true]} : memref<64x64xf32>, vector<4xf32>
      %x = vector.transfer_read %other[%r, %c0], %pad {in_bounds = [true]} : memref<64x64xf32>, vector<4xf32>
      %w0 = arith.addf %v0, %x : vector<4xf32>
      %w1 = arith.addf %v1, %x : vector<4xf32>
      vector.transfer_write %w0, %out[%r, %c0] {in_bounds = [true]} : vector<4xf32>, memref<64x64xf32>
      vector.transfer_write %w1, %out[%r1, %c0] {in_bounds = [true]} : vector<4xf32>, memref<64x64xf32>
      vector.transfer_write %x, %out[%r2, %c0] {in_bounds = [true]} : vector<4xf32>, memref<64x64xf32>
      LAST_WRITE
      gpu.return
    }
  }
}
"""
ROW3 = "vector.transfer_write %x, %out[%r3, %c0] {in_bounds = [true]} : vector<4xf32>, memref<64x64xf32>"


def _run(read1: str = "%r1", between: str = "", last: str = ROW3) -> str:
    text = KERNEL.replace("READ1", read1).replace("BETWEEN", between).replace("LAST_WRITE", last)
    text = text.replace("%c0 = arith.constant 0 : index", "%c0 = arith.constant 0 : index\n"
                        "      %c2 = arith.constant 2 : index\n      %c3 = arith.constant 3 : index\n"
                        "      %c5 = arith.constant 5 : index")
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        constant_init.forward_fills(module)
        module.operation.verify()
        return str(module)


def _reads_of_out(text: str) -> int:
    return text.count("vector.transfer_read %arg0[")  # the printer names %out %arg0


def test_own_fill_forwarded_and_dead_nest_removed():
    out = _run()
    assert _reads_of_out(out) == 0 and "arith.constant dense<0.000000e+00> : vector<4xf32>" in out
    assert "memref.store" not in out and "gpu.barrier" not in out  # every filled row is written back later


def test_rows_never_written_back_keep_the_fill():
    out = _run(last="")
    assert _reads_of_out(out) == 0  # still the thread's own zeros
    assert "memref.store" in out and "gpu.barrier" in out  # row 3 keeps its zeros only through the fill


@pytest.mark.parametrize("read1", ["%r5", "%tx"])
def test_reads_beyond_the_own_fill_stay(read1):
    """Row r + 5 is another thread's block; row tx is not provably inside this thread's rows."""
    between = "%r5 = arith.addi %r, %c5 : index" if read1 == "%r5" else ""
    out = _run(read1=read1, between=between)
    assert _reads_of_out(out) == 1  # row r is still forwarded, the other read stays
    assert "memref.store" in out and "gpu.barrier" in out


def test_a_write_between_fill_and_read_stops_forwarding():
    between = "vector.transfer_write %pad4, %out[%r, %c0] {in_bounds = [true]} : vector<4xf32>, memref<64x64xf32>"
    between = "%pad4 = arith.constant dense<1.0> : vector<4xf32>\n      " + between
    out = _run(between=between)
    assert _reads_of_out(out) == 2 and "memref.store" in out


def _output_accesses(kernel) -> int:
    """Accesses through the output buffer (the first argument) in one kernel's OpenCL C or SPIR-V."""
    if kernel.opencl:
        return kernel.opencl.split("{", 1)[1].count("a0")
    return disassemble(kernel.spirv).count("%main_kernel_arg_0 ")


@pytest.mark.parametrize("promoted", [False, True])
def test_matmul_output_written_once(device, monkeypatch, promoted):
    """On every device: a batch matmul's register-blocked kernel (vector fill) and a promoted matmul (fill nest
    and barrier) touch their output only to write the result once; the result is right."""
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info))
    g = portable.Graph()
    if promoted:
        g.output(g.matmul(g.input((64, 96)), g.input((96, 128))))
        opts.update(vectorize=True, thread_tile=[8, 4], matmul_promote_tile=[32, 64], matmul_promote_k=32)
    else:
        g.output(g.matmul(g.input((4, 64, 64)), g.input((4, 64, 32))))
    xs = [RNG.standard_normal(t.shape).astype(np.float32) for t in g.inputs]
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    monkeypatch.setattr(constant_init, "forward_fills", lambda module: None)
    before = compile_module(g.to_mlir(), opts, (live.info.api,))
    assert len(exe.kernels) == len(before.kernels) == 1
    assert _output_accesses(exe.kernels[0]) < _output_accesses(before.kernels[0])
    np.testing.assert_allclose(CompiledGraph(exe, live)(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)
