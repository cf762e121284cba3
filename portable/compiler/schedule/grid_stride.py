"""Elementwise kernels over more workgroup tiles than the grid takes run as a grid-stride loop.

A 1-d elementwise kernel gives each thread one vector (strategy.choose); its grid is one workgroup per tile. Past
the device's workgroup count in x (65535 on the Mali, Adreno and Intel profiles: 32 Mi floats at 128 threads x 4),
or past the profile's `elementwise_grid_workgroups`, the launch takes that many workgroups G instead and its body
runs in a loop `for (b = block_id; b < tiles; b += G)`, reading b where it read the block id: each pass of the
workgroups covers G adjacent tiles, so the threads' accesses stay contiguous, one vector each, in one dispatch.

No profile sets `elementwise_grid_workgroups`: on the H200 an add of 64 Mi floats ran 186 us as 65536 workgroups
against 191-202 us as 8448-1056 workgroups looping (benchmarks/results/h200/session21/grid_stride_add.json), so
the loop is for grids past the device's limit, where it replaces dispatches in chunks.

The rewrite is made on the gpu.launch that thread mapping leaves (strategy.Strategy.grid_stride marks it), before
the kernel passes. The body has no barrier and no workgroup memory (an elementwise kernel), and every thread of a
workgroup runs the same passes.
"""

from __future__ import annotations

from ...ir.mlir import arith, ir, scf
from ...ir.util import find_ops, launch_grid, marked_launches

ATTR = "portable.grid_stride"  # on a gpu.launch: its value, the workgroups to launch


def run_grid_stride(module: ir.Module) -> None:
    for launch, workgroups in marked_launches(module, ATTR):
        _stride(launch, workgroups)


def _stride(launch: ir.Operation, workgroups: int) -> None:
    first, grid = launch_grid(launch)
    if grid[1:] != [1, 1] or grid[0] is None or grid[0] <= workgroups:
        return  # not a grid along x, or one that fits: a workgroup per tile
    body = launch.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    if find_ops(launch, ("gpu.barrier", "memref.alloc")):
        return
    tiles = grid[0]
    index = ir.IndexType.get()
    with ir.InsertionPoint(launch), launch.location:
        launch.operands[first] = arith.ConstantOp(index, workgroups).result
    bid = body.arguments[0]
    with ir.InsertionPoint.at_block_begin(body), launch.location:
        body.arguments[6].replace_all_uses_with(arith.ConstantOp(index, tiles).result)  # the grid size in x
        loop = scf.ForOp(bid, arith.ConstantOp(index, tiles).result, arith.ConstantOp(index, workgroups).result)
        with ir.InsertionPoint(loop.body):
            step_end = scf.YieldOp([])
    for op in ops[:-1]:  # all but the terminator, in order, into the loop
        op.move_before(step_end)
    tile = loop.induction_variable
    for use in list(bid.uses):
        if use.owner != loop.operation:
            use.owner.operands[use.operand_number] = tile
    for op in find_ops(loop.operation, ("gpu.block_id",), lambda o: str(o.attributes["dimension"]) == "#gpu<dim x>"):
        op.results[0].replace_all_uses_with(tile)
        op.erase()
