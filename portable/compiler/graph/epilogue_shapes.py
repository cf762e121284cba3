"""Elementwise consumers of a reduction or matmul taken into the shape of its result, so they fuse as its epilogue.

Dispatch formation joins an elementwise op to the kernel of the op producing one of its inputs when it reads that
result as it is (dispatch/groups.py). An exported decoder reshapes in between: the output projection of attention
and the down projection of the MLP give [1, hidden], and the residual Add reads them expanded to the graph's
[1, 1, hidden] beside the residual stream; the Add then ran as a kernel of its own after each (after the split
product's partial sums, whose kernel it could have joined): two dispatches a layer of a decode step.

Here the elementwise ops reading such an expand_shape of a reduction's result (used nowhere else) are rebuilt over
the result's own shape, as convolutions lowered to matmuls do with theirs (conv_epilogue.sink_expand): their other
operands are read through collapsed maps, and their result is expanded back for its users. The arithmetic is the
same per element; only the loops' shape changes. Runs before reduction-inputs, which leaves alone a producer
that dispatch formation will fuse into its input's kernel: seen through the reshape, the residual Add was not one,
and was computed again inside the next norm's reduction as well.
"""

from __future__ import annotations

from ...ir.linalg_info import iterator_types, num_inputs
from ...ir.mlir import ir
from ...ir.util import as_operation, unreshaped
from .conv_epilogue import sink_expand


def _expands_a_reduction(op: ir.Operation) -> bool:
    """Whether `op` is an expand_shape of the one result of a linalg.generic with a reduction loop, used only here,
    read by one op that reads none of the reduction's inputs: an op that does is a step of a row chain (a norm's
    x - mean(x)), which dispatch formation keeps in the rows' shape (row_chains.py)."""
    if op.name != "tensor.expand_shape":
        return False
    src = op.operands[0]
    if not isinstance(src, ir.OpResult) or src.owner.operation.name != "linalg.generic":
        return False
    producer = src.owner.operation
    if len(producer.results) != 1 or "reduction" not in iterator_types(producer) or len(list(src.uses)) != 1:
        return False
    users = [as_operation(u.owner) for u in op.results[0].uses]
    inputs = {unreshaped(v) for v in list(producer.operands)[:num_inputs(producer)]}
    return len(users) == 1 and not any(unreshaped(v) in inputs for v in users[0].operands)


def take_epilogues_into_result_shapes(func_op: ir.Operation) -> int:
    """Sink every expand_shape of func_op's top level that `_expands_a_reduction` matches through the elementwise
    ops that read it; returns how many reshapes moved."""
    moved = 0
    for op in list(func_op.regions[0].blocks[0].operations):
        op = op.operation
        if _expands_a_reduction(op) and sink_expand(op) is not op:  # (op is erased once it moved)
            moved += 1
    return moved


__all__ = ["take_epilogues_into_result_shapes"]
