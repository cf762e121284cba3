"""ir/bounds.py on hand-written kernels: exact bounds of values of a few ids, intervals for the rest."""

from __future__ import annotations

import pytest

from portable.ir.bounds import Bounds
from portable.ir.mlir import ir

KERNEL = """
gpu.module @m {
  gpu.func @k(%n: index) kernel attributes {known_block_size = array<i32: 8, 8, 1>,
                                            known_grid_size = array<i32: 36864, 1, 1>} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c8 = arith.constant 8 : index
    %c28 = arith.constant 28 : index
    %c32 = arith.constant 32 : index
    %cm8 = arith.constant -8 : index
    %true = arith.constant true
    %bx = gpu.block_id x
    %ty = gpu.thread_id y
    %a = arith.muli %bx, %cm8 : index
    %q = arith.divsi %bx, %c4 : index
    %b = arith.muli %q, %c32 : index
    %s = arith.addi %a, %b : index
    %t = arith.addi %s, %c28 : index
    %extent = arith.minsi %t, %c8 : index
    %share = arith.subi %extent, %ty : index
    %lt = arith.cmpi slt, %ty, %c4 : index
    %flip = arith.xori %lt, %true : i1
    %pick = arith.select %flip, %c1, %c0 : index
    %byzero = arith.divsi %c8, %ty : index
    %withn = arith.addi %bx, %n : index
    scf.for %i = %c0 to %extent step %c1 {
      %ivplus = arith.addi %i, %c1 : index
      "test.use"(%ivplus) : (index) -> ()
    }
    "test.use"(%s, %extent, %share, %flip, %pick, %byzero, %withn)
      : (index, index, index, i1, index, index, index) -> ()
    gpu.return
  }
}
"""


@pytest.fixture()
def values():
    with ir.Context() as ctx, ir.Location.unknown():
        ctx.allow_unregistered_dialects = True
        module = ir.Module.parse(KERNEL)
        func = module.body.operations[0].regions[0].blocks[0].operations[0]
        ops = list(func.regions[0].blocks[0].operations)
        use = ops[-2]
        named = dict(zip(("s", "extent", "share", "flip", "pick", "byzero", "withn"), use.operands))
        loop = next(op for op in ops if op.name == "scf.for")
        named["iv"] = loop.regions[0].blocks[0].arguments[0]
        named["ivplus"] = loop.regions[0].blocks[0].operations[0].results[0]
        yield Bounds((8, 8, 1), (36864, 1, 1)), named


def test_a_tile_extent_of_one_id_is_exact(values):
    """28 - 8 * (bx mod 4) spelled with a product and a quotient of bx: intervals alone give a bound past 70000."""
    bounds, v = values
    assert bounds.of(v["s"]) == (-24, 0)
    assert bounds.of(v["extent"]) == (4, 8)
    assert bounds.of(v["share"]) == (-3, 8)


def test_i1_values_follow_mlir(values):
    bounds, v = values
    assert bounds.of(v["flip"]) == (0, 1)
    assert bounds.of(v["pick"]) == (0, 1)


def test_loop_variables_and_arguments_fall_back_to_intervals(values):
    bounds, v = values
    assert bounds.of(v["iv"]) == (0, 7)  # the loop's bounds, exact: at most 8
    assert bounds.of(v["ivplus"]) == (1, 8)
    assert bounds.of(v["withn"]) is None  # a kernel argument: unknown


def test_a_division_by_zero_somewhere_is_not_evaluated(values):
    bounds, v = values
    assert bounds.of(v["byzero"]) is None  # thread 0 divides by zero: the interval rule refuses it too
