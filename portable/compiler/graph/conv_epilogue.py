"""A convolution rewritten as a matmul (or another product): the product's result reshaped back to the
convolution's, its init added, and the elementwise consumers (bias, folded BatchNorm scale/shift, ReLU/Clip, residual
add) rebuilt on the product's layout (`sink_expand`), so that dispatch formation fuses them in place into the
product's kernel. Shared by conv_gemm.py and winograd.py."""

from __future__ import annotations

from ...ir.linalg_info import fill_value, indexing_maps, is_identity, iterator_types, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import reassociation_attr, reassociation_groups
from .generics import broadcast_constant, rebuild_generic


def collapse(v: ir.Value, groups: list[list[int]]) -> ir.Value:
    """v viewed with each group of dims as one (a reshape, no kernel); v itself when nothing changes."""
    t = ir.RankedTensorType(v.type)
    if len(groups) == t.rank:
        return v
    shape = [prod(t.shape[d] for d in g) for g in groups]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, t.element_type), v,
                                  reassociation_attr(groups)).result


def prod(xs) -> int:
    p = 1
    for x in xs:
        p *= x
    return p


def zero_attr(elem: ir.Type) -> ir.Attribute:
    return ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)


def fill_accumulator(init: ir.Value, shape: list[int], elem: ir.Type) -> tuple[ir.Value, ir.Value | None]:
    """(accumulator of `shape` for the matmul, what remains to add to the convolution's result or None).
    A fill becomes a fresh fill at the matmul's shape (it fuses into the matmul's kernel); any other init is
    added afterwards by an elementwise epilogue, which then fuses too."""
    scalar = fill_value(init)
    if scalar is not None:
        return linalg.fill(scalar, outs=[tensor.EmptyOp(shape, elem).result]), None
    zero = arith.ConstantOp(elem, zero_attr(elem)).result
    return linalg.fill(zero, outs=[tensor.EmptyOp(shape, elem).result]), init


def add_init(res: ir.Value, init: ir.Value) -> ir.Value:
    """res + init elementwise at res's shape; a broadcast constant (an ONNX Conv's bias) is read through the
    broadcast's map, so it costs neither a kernel nor a buffer of its own."""
    t = ir.RankedTensorType(res.type)
    elem = t.element_type
    ident = ir.AffineMap.get_identity(t.rank)
    bcast = broadcast_constant(init)
    other, other_map = bcast if bcast is not None else (init, ident)
    gen = linalg.GenericOp([t], [res, other], [tensor.EmptyOp(list(t.shape), elem).result],
                           ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (ident, other_map, ident)]),
                           ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * t.rank))
    body = gen.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(body):
        add = arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp
        linalg.YieldOp([add(body.arguments[0], body.arguments[1]).result])
    return gen.results[0]


def finish(conv: ir.Operation, mm: ir.Value, groups: list[list[int]] | None, rest: ir.Value | None) -> None:
    """Reshape the matmul's result `mm` to the convolution's (`groups`; None: `mm` has its shape already), add what
    the accumulator left out, replace the convolution, and rebuild the elementwise consumers on the matmul's
    layout."""
    out_t = ir.RankedTensorType(conv.results[0].type)
    with ir.InsertionPoint(conv), conv.location:
        res = mm if groups is None else \
            tensor.ExpandShapeOp(out_t, mm, reassociation_attr(groups), [], list(out_t.shape)).result
        if rest is not None:
            res = add_init(res, rest)
    init = conv.operands[2]
    conv.results[0].replace_all_uses_with(res)
    conv.erase()
    if isinstance(init, ir.OpResult) and not list(init.uses) and init.owner.operation.name == "linalg.generic":
        init.owner.operation.erase()  # the broadcast bias, now read by the epilogue
    if groups is not None:
        # With an add of the init, the add's input is the reshape: the add and what follows move to the matmul's
        # layout.
        sink_expand((list(res.owner.operation.operands)[0] if rest is not None else res).owner.operation)


def sink_expand(expand: ir.Operation) -> ir.Operation:
    """While the only user of reshape `expand` (small -> big) is an elementwise op that reads it in full, rebuild
    that op over the small shape and reshape its result instead: the chain then runs on the matmul's layout,
    where dispatch formation fuses it in place. Returns the last reshape."""
    while True:
        res = expand.results[0]
        uses = list(res.uses)
        if len(uses) != 1:
            return expand
        user = uses[0].owner.operation
        if user.name != "linalg.generic" or any(it != "parallel" for it in iterator_types(user)):
            return expand
        nin = num_inputs(user)
        ops_ = list(user.operands)
        maps = indexing_maps(user)
        if len(ops_) != nin + 1 or len(user.results) != 1 or not is_identity(maps[nin]) or \
                any(o.name == "linalg.index" for o in user.regions[0].blocks[0].operations):
            return expand
        idx = next(i for i, v in enumerate(ops_) if v == res)
        if idx >= nin or not is_identity(maps[idx]):
            return expand
        groups = reassociation_groups(expand)
        big = list(ir.RankedTensorType(res.type).shape)
        small_t = ir.RankedTensorType.get(ir.RankedTensorType(expand.operands[0].type).shape,
                                          ir.RankedTensorType(user.results[0].type).element_type)
        out = ops_[nin]
        with ir.InsertionPoint(user), user.location:
            new_ins = [_collapse_operand(v, m, groups, big) for v, m in zip(ops_[:nin], maps[:nin])]
            if any(x is None for x in new_ins):
                return expand  # (the collapses built so far are dead and go with the next cleanup)
            p = out.owner.operation if isinstance(out, ir.OpResult) else None
            if p is not None and p.name == "tensor.empty":
                new_out = tensor.EmptyOp(list(small_t.shape), small_t.element_type).result
            else:
                new_out = collapse(out, groups)
        new = rebuild_generic(user, [v for v, _ in new_ins], [new_out], [m for _, m in new_ins] +
                              [ir.AffineMap.get_identity(len(groups))], ["parallel"] * len(groups),
                              list(range(nin + 1)), [small_t])
        with ir.InsertionPoint(user), user.location:
            back = tensor.ExpandShapeOp(user.results[0].type, new.results[0], reassociation_attr(groups), [], big)
        user.results[0].replace_all_uses_with(back.result)
        user.erase()
        if not list(res.uses):
            expand.erase()
        expand = back.operation


def _collapse_operand(v: ir.Value, amap: ir.AffineMap, groups: list[list[int]],
                      big: list[int]) -> tuple[ir.Value, ir.AffineMap] | None:
    """Input `v` of an elementwise op over loops `big`, read through `amap`, re-expressed over the collapsed
    loops (one per group): (operand, map), or None when its dims do not follow the groups."""
    ng = len(groups)
    if not isinstance(v.type, ir.RankedTensorType):
        return None
    t = ir.RankedTensorType(v.type)
    group_of = {d: gi for gi, g in enumerate(groups) for d in g}
    if amap.n_symbols == 0 and is_identity(amap) and t.rank == len(big):
        p = v.owner.operation if isinstance(v, ir.OpResult) else None
        if p is not None and p.name == "tensor.expand_shape" and reassociation_groups(p) == groups:
            return p.operands[0], ir.AffineMap.get_identity(ng)  # the reshape of an earlier matmul's result
        return collapse(v, groups), ir.AffineMap.get_identity(ng)
    # A broadcast: each non-unit dim of v reads one loop; every group v reads, it reads whole and in order.
    runs: list[tuple[int, list[int]]] = []  # (group, v's dims) in v's order
    for j, e in enumerate(amap.results):
        if t.shape[j] == 1:
            continue
        if not isinstance(e, ir.AffineDimExpr):
            return None
        d = ir.AffineDimExpr(e).position
        if big[d] != t.shape[j]:
            return None
        gi = group_of[d]
        if runs and runs[-1][0] == gi:
            runs[-1][1].append(j)
        else:
            runs.append((gi, [j]))
    if len({gi for gi, _ in runs}) != len(runs):
        return None
    for gi, js in runs:
        want = [d for d in groups[gi] if big[d] != 1]
        got = [ir.AffineDimExpr(amap.results[j]).position for j in js]
        if got != want:
            return None
    # v's own reassociation: each run with the unit dims before it (the last also takes those after it).
    vgroups, start = [], 0
    for i, (_, js) in enumerate(runs):
        end = js[-1] + 1 if i < len(runs) - 1 else t.rank
        vgroups.append(list(range(start, end)))
        start = end
    if not runs:
        vgroups = []
    if len(vgroups) != t.rank:
        elem = t.element_type
        shape = [prod(t.shape[d] for d in g) for g in vgroups]
        v = tensor.CollapseShapeOp(ir.RankedTensorType.get(shape, elem), v, reassociation_attr(vgroups)).result
    return v, ir.AffineMap.get(ng, 0, [ir.AffineDimExpr.get(gi) for gi, _ in runs])
