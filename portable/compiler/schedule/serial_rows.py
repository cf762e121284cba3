"""Several rows of a row chain run one after the other by one workgroup (profile key `row_workgroup_columns`).

A row chain on one workgroup per row (transform_script._row_chain_workgroup) over short rows makes a grid of many
small workgroups, and the GPU starts workgroups only so fast. H200, softmax over 65536 rows of 256 written by hand
in portable's form (session12/short_rows_256.json, OpenCL events): one row per workgroup 61.3% of 4.8 TB/s, two
rows one after the other 71.7%, four 70.7%, against 75.6% for a plain copy of the same bytes; rows of 384 were
best one per workgroup (71.8%, two 69.8%; copy 73.0%). tiles.serial_rows chooses how many.

The rewrite is made on the gpu.launch that thread mapping leaves, before the kernel passes: its body is repeated R
times, copy k taking block b * R + k where the body read block b (b: the grid's one dim of more than one
workgroup), with a barrier between copies (they share the workgroup memory), and that dim of the grid shrinks R
times. The copies stay straight-line code at the kernel's top level, the form row_registers.py and
row_columns.py read; a barrier that then orders nothing goes there too. The rows were separate workgroups,
unordered, so a copy's barriers fence global memory only where the first copy's do (barriers.mark, before the
copies are made).
"""

from __future__ import annotations

from ...ir.mlir import arith, gpu, ir
from ...ir.util import clone_mapped, launch_grid, marked_launches
from ..lowering import barriers

ATTR = "portable.serial_rows"  # on a gpu.launch: its value, the rows each workgroup takes


def run_rows_serially(module: ir.Module) -> None:
    for launch, rows in marked_launches(module, ATTR):
        _serialize(launch, rows)


def _serialize(launch: ir.Operation, rows: int) -> None:
    first, grid = launch_grid(launch)
    wide = [d for d, n in enumerate(grid) if n != 1]
    if len(wide) != 1 or grid[wide[0]] is None or grid[wide[0]] % rows:
        return  # not rows along one grid dim (tiles.serial_rows chose R for one): left a row per workgroup
    dim = wide[0]
    index = ir.IndexType.get()
    with ir.InsertionPoint(launch), launch.location:
        launch.operands[first + dim] = arith.ConstantOp(index, grid[dim] // rows).result
    body = launch.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    bid = body.arguments[dim]
    name = f"#gpu<dim {'xyz'[dim]}>"
    reads = [op.results[0] for op in ops if op.name == "gpu.block_id" and str(op.attributes["dimension"]) == name]
    with ir.InsertionPoint.at_block_begin(body), launch.location:
        base = arith.MulIOp(bid, arith.ConstantOp(index, rows).result).result
        body.arguments[6 + dim].replace_all_uses_with(arith.ConstantOp(index, grid[dim]).result)  # the grid size
    for v in [bid] + reads:
        for use in list(v.uses):
            if use.owner != base.owner:
                use.owner.operands[use.operand_number] = base
    barriers.mark(ops)
    shared = [op for op in ops if op.name in ("memref.alloc", "memref.alloca")]
    term = ops[-1]
    for k in range(1, rows):
        with ir.InsertionPoint(term), launch.location:
            gpu.BarrierOp().operation.attributes["address_spaces"] = ir.Attribute.parse(barriers.WORKGROUP_ONLY)
            mapping = {base: arith.AddIOp(base, arith.ConstantOp(index, k).result).result}
            for op in ops[:-1]:
                if any(op == s for s in shared) or op.name == "gpu.block_id" and \
                        str(op.attributes["dimension"]) == name:
                    continue  # buffers serve every copy; block reads were replaced by `base`
                clone_mapped(op, mapping)
