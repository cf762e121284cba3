"""Matmuls whose loops an exporter's reshapes split are given their loops back: adjacent loops that every operand
indexes together, in order and contiguously (or not at all), become one loop.

Elementwise fusion folds a reshape into the op next to it by expanding that op's iteration space. A transformer's
Q/K/V projection `[b, s, k] x [k, h*d]` followed by the split into heads becomes a matmul over (b, s, h, d, k)
whose output is `[b, s, h, d]` and whose weight is `[k, h, d]`: five loops that the matmul strategies do not know
as a matmul's (BERT-base at batch 8 on the H100: 0.39 ms a projection, 3 TFLOP/s). Here (h, d) become one loop
again and so do (b, s): a plain `[b*s, k] x [k, h*d]` matmul whose operands are collapse_shape views and whose
result an expand_shape gives back in the shape its users read. Loops are joined only where every map has them as
consecutive dim results in order, or none of them, so the collapsed operands are views of the same memory."""

from __future__ import annotations

from ...ir.linalg_info import (
    classify,
    indexing_maps,
    iterator_types,
    loop_dims,
    loop_ranges,
    num_inputs,
    static_shape,
)
from ...ir.mlir import ir, tensor
from ...ir.util import as_operation, find_ops, keep_groups, reassociation_attr
from .contraction_layout import is_product
from .generics import rebuild_generic


def _positions(amap: ir.AffineMap) -> dict[int, int] | None:
    """loop -> result position, for a map whose results are all loop dims (None otherwise)."""
    dims = loop_dims(amap)
    return None if dims is None else {d: p for p, d in enumerate(dims)}


def _joinable(op: ir.Operation, groups: list[list[int]], maps: list[ir.AffineMap] | None = None) -> bool:
    """Whether every map of `op` (or `maps`) has each group's loops as consecutive dim results in order, or none of
    them."""
    its = iterator_types(op)
    for m in maps or indexing_maps(op):
        pos = _positions(m)
        if pos is None:
            return False
        for g in groups:
            if len({its[d] for d in g}) > 1:
                return False
            at = [pos.get(d) for d in g]
            if all(a is None for a in at):
                continue
            if any(a is None for a in at) or at != list(range(at[0], at[0] + len(g))):
                return False
    return True


def loop_groups(op: ir.Operation, maps: list[ir.AffineMap] | None = None) -> list[list[int]] | None:
    """The op's loops in runs that can be one loop (None when no two can), with `maps` in the place of its own."""
    n = len(iterator_types(op))
    maps = maps or indexing_maps(op)
    if any(_positions(m) is None for m in maps):
        return None
    groups = [[0]]
    for i in range(n - 1):
        if _joinable(op, [[i, i + 1]], maps):
            groups[-1].append(i + 1)
        else:
            groups.append([i + 1])
    return groups if len(groups) < n else None


def _reassociation(amap: ir.AffineMap, loop_of: dict[int, int]) -> list[list[int]]:
    """An operand's dims grouped as the loops that index them are (consecutive dims of one loop group together)."""
    dims = [e.position for e in amap.results]
    reassoc: list[list[int]] = []
    for p, d in enumerate(dims):
        if reassoc and loop_of[d] == loop_of[dims[p - 1]]:
            reassoc[-1].append(p)
        else:
            reassoc.append([p])
    return reassoc


def _collapse(op: ir.Operation, groups: list[list[int]]) -> None:
    """Rebuild `op` over one loop per group of its loops (each group consecutive loops in order)."""
    loop_of = {d: g for g, members in enumerate(groups) for d in members}
    maps = indexing_maps(op)
    nin = num_inputs(op)
    for i, (v, m) in enumerate(zip(list(op.operands)[nin:], maps[nin:])):
        fill = v.owner.operation if isinstance(v, ir.OpResult) else None
        if fill is not None and fill.name == "linalg.generic" and classify(fill).kind == "fill":
            # The output's fill (a copy of its own where others share it) is collapsed alike, so it stays the op's
            # own init, fused into its kernel: the collapse of its expand folds away.
            if len(list(v.uses)) > 1:
                fill = fill.clone(ip=ir.InsertionPoint(op))
                op.operands[nin + i] = fill.results[0]
            reassoc = _reassociation(m, loop_of)
            if len(reassoc) < len(m.results):
                _collapse(fill, reassoc)
    maps = indexing_maps(op)
    new_maps, operands = [], []
    for v, m in zip(op.operands, maps):
        reassoc = _reassociation(m, loop_of)
        results = [ir.AffineDimExpr.get(loop_of[m.results[r[0]].position]) for r in reassoc]
        new_maps.append(ir.AffineMap.get(len(groups), 0, results))
        if not isinstance(v.type, ir.RankedTensorType) or len(reassoc) == ir.RankedTensorType(v.type).rank:
            operands.append((v, None))
            continue
        t = ir.RankedTensorType(v.type)
        shape = []
        for r in reassoc:
            n = 1
            for p in r:
                n *= t.shape[p]
            shape.append(n)
        with ir.InsertionPoint(op), op.location:
            collapsed = tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, t.element_type), v,
                                               reassociation_attr(reassoc)).result
        operands.append((collapsed, reassoc))
    ins = [v for v, _ in operands[:nin]]
    outs = [v for v, _ in operands[nin:]]
    its = iterator_types(op)
    block = op.regions[0].blocks[0]
    expanded: list[tuple[ir.Value, list[list[int]]]] = []
    new = rebuild_generic(op, ins, outs, new_maps, [its[g[0]] for g in groups], list(range(len(block.arguments))),
                          [v.type for v in outs])
    for name in op.attributes:
        if name not in ("indexing_maps", "iterator_types", "operandSegmentSizes"):
            new.attributes[name] = op.attributes[name]
    for old_result, new_result, (_, reassoc) in zip(op.results, new.results, operands[nin:]):
        if reassoc is None:
            old_result.replace_all_uses_with(new_result)
            continue
        t = ir.RankedTensorType(old_result.type)
        with ir.InsertionPoint(op), op.location:
            back = tensor.ExpandShapeOp(t, new_result, reassociation_attr(reassoc), [], list(t.shape)).result
        old_result.replace_all_uses_with(back)
        expanded.append((back, reassoc))
    op.erase()
    for back, reassoc in expanded:
        _collapse_consumers(back, reassoc)


def _constant(v: ir.Value) -> bool:
    """A constant, or a reshape of one."""
    while isinstance(v, ir.OpResult) and v.owner.operation.name in ("tensor.expand_shape", "tensor.collapse_shape"):
        v = v.owner.operation.operands[0]
    return isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant"


def _collapse_consumers(value: ir.Value, reassoc: list[list[int]]) -> None:
    """Elementwise users of `value` (an expand_shape by `reassoc` of a collapsed op's result) are collapsed alike
    where they can be, so they read the collapsed result itself and stay that op's epilogue."""
    for use in list(value.uses):
        user = as_operation(use.owner)
        if user.name != "linalg.generic" or len(user.results) != 1 or classify(user).kind != "elementwise" or \
                find_ops(user, ("linalg.index",)):
            continue
        nin = num_inputs(user)
        others = [v for i, v in enumerate(list(user.operands)[:nin]) if v != value]
        if user.operands[nin] != value and not all(_constant(v) for v in others):
            # Only an epilogue that updates the product in place, or reads nothing else but constants (a bias, an
            # activation): one that writes a new tensor from another computed one (a residual read by a
            # LayerNorm's row chain next) is left as it is.
            continue
        if any(_positions(m) is None for m in indexing_maps(user)):
            continue  # it reads a row chain's rows at a constant index: left to dispatch (drop_unit_indices)
        m = indexing_maps(user)[use.operand_number]
        pos = _positions(m)
        if pos is None:
            continue
        dims = [e.position for e in m.results]
        joined = [[dims[p] for p in r] for r in reassoc]
        if any(g != list(range(g[0], g[0] + len(g))) for g in joined):
            continue
        first = {g[0]: g for g in joined}
        inside = {d for g in joined for d in g}
        groups = [first[d] if d in first else [d] for d in range(len(iterator_types(user)))
                  if d in first or d not in inside]
        if len(groups) < len(iterator_types(user)) and _joinable(user, groups):
            _collapse(user, groups)


def _unit_dims_between(op: ir.Operation):
    """(the maps, per input the positions of those dims) of `op` with each input's size-1 dims that size-1 loops index
    moved to its front, in loop order (a decode step's single token between an attention output's heads and their
    columns: (b, h, s, e) with s = 1 keeps (h, e) from being one loop; read as (b, s, h, e) they are). Size-1 dims
    may go anywhere without moving an element. None where no input has one out of place."""
    ranges = loop_ranges(op)
    if ranges is None:
        return None
    maps = indexing_maps(op)
    orders: dict[int, list[int]] = {}
    for i in range(num_inputs(op)):
        shape = static_shape(op.operands[i])
        if shape is None or len(shape) < 2 or loop_dims(maps[i]) is None:
            continue
        dims = loop_dims(maps[i])
        units = sorted((p for p, (d, size) in enumerate(zip(dims, shape)) if ranges[d] == 1 and size == 1),
                       key=lambda p: dims[p])
        order = units + [p for p in range(len(dims)) if p not in units]
        if order != list(range(len(dims))) and len(units) < len(dims):
            orders[i] = units
    if not orders:
        return None
    new = [ir.AffineMap.get(m.n_dims, 0, [m.results[p] for p in orders[i] + [q for q in range(len(m.results))
                                                                          if q not in orders[i]]])
           if i in orders else m for i, m in enumerate(maps)]
    return new, orders


def _k_groups(op: ir.Operation, groups: list[list[int]] | None) -> int:
    """How many loops of `op`'s reduction loops would be, grouped as `groups` (each loop its own where None)."""
    its = iterator_types(op)
    return sum(1 for g in groups or [[d] for d in range(len(its))] if its[g[0]] == "reduction")


def _reorder_units(op: ir.Operation, maps: list[ir.AffineMap], units: dict[int, list[int]]) -> None:
    """Read the inputs in `units` with those size-1 dims in front (a collapse that drops them, an expand that puts
    them back first: views of the same memory), through `maps`."""
    for i, moved in units.items():
        t = ir.RankedTensorType(op.operands[i].type)
        keep = [p not in moved for p in range(t.rank)]
        rest = [t.shape[p] for p in range(t.rank) if keep[p]]
        shape = [1] * len(moved) + rest
        front = [list(range(len(moved) + 1))] + [[len(moved) + 1 + j] for j in range(len(rest) - 1)]
        with ir.InsertionPoint(op), op.location:
            x = tensor.CollapseShapeOp(ir.RankedTensorType.get(rest, t.element_type), op.operands[i],
                                       reassociation_attr(keep_groups(keep))).result
            op.operands[i] = tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, t.element_type), x,
                                                  reassociation_attr(front), [], shape).result
    op.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps])


def collapse_matmul_loops(func_op: ir.Operation) -> int:
    """Collapse the joinable loops of every static matmul-like linalg.generic, and its elementwise users alike;
    returns how many matmuls changed."""
    todo = []
    for op in find_ops(func_op, ("linalg.generic",)):  # chosen before any rewrite erases an op of the list
        if not (classify(op).kind == "matmul" or is_product(op)) or len(op.results) != 1 or \
                find_ops(op, ("linalg.index",)):
            continue
        if any(static_shape(v) is None for v in op.operands):
            continue
        groups = loop_groups(op)
        moved = _unit_dims_between(op)
        if moved is not None:
            # Only where that joins reduction loops (a K in two parts): the other groups stay as they were.
            joined = loop_groups(op, moved[0])
            if joined is not None and _k_groups(op, joined) < _k_groups(op, groups):
                _reorder_units(op, *moved)
                groups = joined
        if groups is not None:
            todo.append((op, groups))
    for op, groups in todo:
        _collapse(op, groups)
    return len(todo)


__all__ = ["collapse_matmul_loops", "loop_groups"]
