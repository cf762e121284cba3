"""Reductions kept with their size-1 dims and broadcast back are read as lower-rank operands: `(d0, d1, d2) ->
(d0, d1, 0)` becomes `(d0, d1)` on the reduction's result collapsed to drop that dim.

A keepdims reduction broadcast back (a norm's mean [1, 1, 1] scaling x [1, 1, 768]) is indexed with a constant 0,
and a map with a constant is not a projected permutation: upstream's fusion of reshapes by expansion then refuses
the whole op. An RMSNorm fused into a decode matvec so kept the matvec from expanding its K dim to take in the
dequantization of block-quantized weights (int8 codes times a scale per block of 32): the float32 weight matrix was
written and read back every step (a 32000 x 768 head: 98 MB a token). Dropping the unit dim makes every map of such
an op a projected permutation; the iteration space and the body stay as they are. Other broadcasts (a convolution's
bias, constants) keep their form, which the graph rewrites match.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.linalg_info import indexing_maps, iterator_types, num_inputs
from ...ir.mlir import ir, tensor
from ...ir.util import find_ops, keep_groups, reassociation_attr


def _unit_constant(expr: ir.AffineExpr, size: int) -> bool:
    return size == 1 and isinstance(expr, ir.AffineConstantExpr) and expr.value == 0


def _reduced(value: ir.Value, depth: int = 8) -> bool:
    """Whether `value` comes from a linalg.generic with a reduction loop, directly or through elementwise generics
    (a mean, then + eps, sqrt, reciprocal)."""
    owner = value.owner
    op = owner if isinstance(owner, ir.Operation) else getattr(owner, "operation", None)
    if op is None or op.name != "linalg.generic" or depth == 0:
        return False
    if "reduction" in iterator_types(op):
        return True
    return any(_reduced(v, depth - 1) for v in list(op.operands)[:num_inputs(op)])


def drop_unit_broadcasts(func_op: ir.Operation) -> int:
    """Rewrite every linalg.generic input that is a reduction's result read through a constant-0 index on a size-1
    dim; returns how many."""
    return sum(drop_unit_indices(op, _reduced) for op in find_ops(func_op, ("linalg.generic",)))


def drop_unit_indices(op: ir.Operation, which: Callable[[ir.Value], bool] = lambda v: True) -> int:
    """Rewrite the inputs of `op` (a linalg.generic) that `which` selects and that are read through a constant-0
    index on a size-1 dim as lower-rank operands; returns how many."""
    changed = 0
    maps = indexing_maps(op)
    new_maps = list(maps)
    for i in range(num_inputs(op)):
        value = op.operands[i]
        t = value.type
        if not isinstance(t, ir.RankedTensorType) or not which(value):
            continue
        results = list(maps[i].results)
        if not t.has_static_shape or len(results) != t.rank:
            continue
        keep = [not _unit_constant(e, t.shape[d]) for d, e in enumerate(results)]
        if all(keep):
            continue
        shape = [t.shape[d] for d in range(t.rank) if keep[d]]
        with ir.InsertionPoint(op), op.location:
            collapsed = tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, t.element_type), value,
                                               reassociation_attr(keep_groups(keep))).result
        op.operands[i] = collapsed
        new_maps[i] = ir.AffineMap.get(maps[i].n_dims, maps[i].n_symbols, [e for e, k in zip(results, keep) if k])
        changed += 1
    if changed:
        op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in new_maps])
    return changed
