"""Producers taken back out of the reductions that upstream fusion put them in, where fusion_cost says so.

A product-accumulating reduction (a convolution, a contraction of any layout) computes out += f(x-side inputs)
* w; f is what an elementwise producer became inside it (squeeze-and-excitation's x * sigmoid(s) before a 1x1
projection, a swish before a convolution). f then runs once per iteration of the loops its inputs do not read
(reuse: the output channels of a convolution). Taken out, f runs once per value in an elementwise kernel of its
own, over the loops its inputs read, and the reduction reads its result. Matmul forms are split_k's
(`unfuse_producers`), which this leaves alone.
"""

from __future__ import annotations

from math import prod

from ...errors import CompileError
from ...ir.linalg_info import indexing_maps, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import ir, linalg, tensor
from ..strategy import fusion_cost
from .generics import rebuild_generic
from .split_k import matmul_form  # matmul forms: split_k.unfuse_producers decides those


def _factors(op: ir.Operation):
    """Each (factor value, the body ops computing it, the x-side inputs they read) for a
    body `yield out + factor * w` whose factor is computed from inputs other than those of w: w an input, or a
    value computed from constants of its own (int8 codes times their block scales: a quantized weight)."""
    nin = num_inputs(op)
    block = op.regions[0].blocks[0]
    args, ops = list(block.arguments), list(block.operations)
    yielded = ops[-1].operands
    if len(yielded) != 1 or not isinstance(yielded[0], ir.OpResult):
        return
    add = yielded[0].owner
    if add.name not in ("arith.addf", "arith.addi") or args[nin] not in list(add.operands):
        return
    prods = [v for v in add.operands if v != args[nin]]
    if len(prods) != 1 or not isinstance(prods[0], ir.OpResult) or prods[0].owner.name not in ("arith.mulf",
                                                                                                "arith.muli"):
        return
    mul = prods[0].owner
    operands = list(mul.operands)
    for side in range(len(operands)):
        wside = _inputs_read(operands[side], block, ops)
        if wside is None or not wside or any(a >= nin for a in wside) or len(operands) != 2:
            continue
        if isinstance(operands[side], ir.BlockArgument):
            if len(list(operands[side].uses)) != 1:
                continue
        elif not all(_constant(op.operands[a]) for a in wside):
            continue  # a computed weight side is a weight's (constants): two computed activations stay as they are
        factor = operands[1 - side]
        needed, xs, stack = [], set(), [factor]
        ok = True
        while stack and ok:
            v = stack.pop()
            if isinstance(v, ir.OpResult) and any(v.owner == o for o in ops):
                if v.owner.regions:
                    ok = False
                elif not any(v.owner == o for o in needed):
                    needed.append(v.owner)
                    stack.extend(v.owner.operands)
            elif isinstance(v, ir.BlockArgument) and v.owner == block:
                if v.arg_number >= nin or v.arg_number in wside:
                    ok = False
                xs.add(v.arg_number)
        if not ok or not needed:
            continue
        # Checks on f's values (torch-mlir's assert that a divisor is not zero) go with it.
        for o in ops:
            if o.name == "cf.assert" and not any(o == n for n in needed):
                chain = _checks(o, needed, xs, block, ops)
                if chain is not None:
                    needed.extend(chain)
        # Every use of an x-side input is inside f: the reduction keeps no other use of it. So is every use of
        # what f computes on the way (a loop index the body reads elsewhere too: Funnel's pooled attention).
        if any(not any(u.owner == o for o in needed) for x in xs for u in args[x].uses):
            continue
        if any(not any(u.owner == n for n in needed) for o in needed for r in o.results if r != factor
               for u in r.uses):
            continue
        yield factor, needed, sorted(xs)


def _checks(check: ir.Operation, needed: list, xs: set, block: ir.Block, ops: list) -> list | None:
    """`check` and the ops computing its condition when they read only f's values and inputs (None otherwise)."""
    chain, stack = [check], list(check.operands)
    while stack:
        v = stack.pop()
        if isinstance(v, ir.BlockArgument) and v.owner == block:
            if v.arg_number not in xs:
                return None
        elif isinstance(v, ir.OpResult) and any(v.owner == o for o in ops):
            if any(v.owner == n for n in needed) or any(v.owner == c for c in chain):
                continue
            if v.owner.regions or any(not any(u.owner == c for c in chain) for r in v.owner.results
                                      for u in r.uses):
                return None
            chain.append(v.owner)
            stack.extend(v.owner.operands)
    return chain


def _constant(v: ir.Value) -> bool:
    return isinstance(v, ir.OpResult) and v.owner.name == "arith.constant"


def _inputs_read(v: ir.Value, block: ir.Block, ops: list) -> set[int] | None:
    """The block arguments `v` is computed from inside the body (None where an op on the way has regions)."""
    found: set[int] = set()
    stack, seen = [v], []
    while stack:
        x = stack.pop()
        if isinstance(x, ir.BlockArgument) and x.owner == block:
            found.add(x.arg_number)
        elif isinstance(x, ir.OpResult) and any(x.owner == o for o in ops):
            if x.owner.regions:
                return None
            if not any(x.owner == o for o in seen):
                seen.append(x.owner)
                stack.extend(x.owner.operands)
    return found


def _zero(e) -> bool:
    return isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0


def _unfuse_one(op: ir.Operation) -> bool:
    if op.name != "linalg.generic" or len(op.results) != 1 or "reduction" not in iterator_types(op):
        return False
    ranges = loop_ranges(op)
    return ranges is not None and any(_unfuse_factor(op, ranges, *found) for found in _factors(op))


def _unfuse_factor(op: ir.Operation, ranges: list[int], factor: ir.Value, needed: list[ir.Operation],
                   xs: list[int]) -> bool:
    """f (`factor`, computed by `needed` from inputs `xs`) out of `op` where the cost model says so."""
    if any(o.name == "linalg.index" for o in needed):
        return _unfuse_over_loops(op, ranges, factor, needed, xs)
    maps = indexing_maps(op)
    # f is materialized over the index space of the largest x-side input (a convolution's image, its windows'
    # overlap included); the others must read along its indices (or at 0: broadcast, unit dims).
    main = max(xs, key=lambda x: prod(ir.RankedTensorType(op.operands[x].type).shape))
    if ir.RankedTensorType(op.operands[main].type).element_type != factor.type:
        return False  # f takes that input's place in the body: a widened f16 input keeps its form
    shape = list(ir.RankedTensorType(op.operands[main].type).shape)
    exprs = [str(e) for e in maps[main].results]
    local = {}
    for x in xs:
        res = []
        for e in maps[x].results:
            if _zero(e):
                res.append(e)
            elif str(e) in exprs:
                res.append(ir.AffineDimExpr.get(exprs.index(str(e))))
            else:
                return False
        local[x] = ir.AffineMap.get(len(shape), 0, res)
    if not _pays(ranges, factor, needed, shape):
        return False
    nin = num_inputs(op)
    pre = _materialize(op, factor, needed, xs, shape, [local[x] for x in xs])
    # f's result takes the largest x-side input's place: operand order is what convolution matching reads.
    order = [i for i in range(nin) if i not in xs or i == main]
    new_ins = [pre.results[0] if i == main else op.operands[i] for i in order]
    new_maps = [maps[i] for i in order] + [maps[nin]]
    arg_map = [order.index(i) if i in order and i != main else None for i in range(nin)] + [len(new_ins)]
    new = rebuild_generic(op, new_ins, [op.operands[nin]], new_maps, iterator_types(op), arg_map,
                          [op.results[0].type])
    factor.replace_all_uses_with(new.regions[0].blocks[0].arguments[order.index(main)])
    _erase_unused(needed)
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()
    return True


def _unfuse_over_loops(op: ir.Operation, ranges: list[int], factor: ir.Value, needed: list[ir.Operation],
                       xs: list[int]) -> bool:
    """f reading loop indices (a gather: an upsampling pool's window sums read by index before a classifier) is
    materialized over the loops it depends on, in their order; the reduction reads it there. Its x-side inputs
    must index those loops plainly (or at 0)."""
    maps = indexing_maps(op)
    dims = {ir.IntegerAttr(o.attributes["dim"]).value for o in needed if o.name == "linalg.index"}
    for x in xs:
        for e in maps[x].results:
            if isinstance(e, ir.AffineDimExpr):
                dims.add(ir.AffineDimExpr(e).position)
            elif not _zero(e):
                return False
    loops = sorted(dims)
    shape = [ranges[d] for d in loops]
    if not _pays(ranges, factor, needed, shape):
        return False

    def local(m: ir.AffineMap) -> ir.AffineMap:
        return ir.AffineMap.get(len(loops), 0, [e if _zero(e) else ir.AffineDimExpr.get(loops.index(
            ir.AffineDimExpr(e).position)) for e in m.results])

    nin = num_inputs(op)
    pre = _materialize(op, factor, needed, xs, shape, [local(maps[x]) for x in xs], loops)
    # The reduction reads f in the place of its first x-side input (or as a new first input): its other inputs
    # keep their order.
    rest = [i for i in range(nin) if i not in xs]
    new_ins = [pre.results[0]] + [op.operands[i] for i in rest]
    f_map = ir.AffineMap.get(len(ranges), 0, [ir.AffineDimExpr.get(d) for d in loops])
    new_maps = [f_map] + [maps[i] for i in rest] + [maps[nin]]
    arg_map = [1 + rest.index(i) if i in rest else None for i in range(nin)] + [len(new_ins)]
    new = rebuild_generic(op, new_ins, [op.operands[nin]], new_maps, iterator_types(op), arg_map,
                          [op.results[0].type])
    factor.replace_all_uses_with(new.regions[0].blocks[0].arguments[0])
    _erase_unused(needed)
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()
    return True


def _pays(ranges: list[int], factor: ir.Value, needed: list[ir.Operation], shape: list[int]) -> bool:
    """Whether the cost model takes f out: its values over `shape`, recomputed prod(ranges) / prod(shape) times."""
    elem = factor.type
    width = elem.width if hasattr(elem, "width") else 32
    reuse = prod(ranges) // max(1, prod(shape))
    return not fusion_cost.keep_fused(fusion_cost.body_cost(needed), reuse, max(1, width // 8), prod(shape))


def _materialize(op: ir.Operation, factor: ir.Value, needed: list[ir.Operation], xs: list[int], shape: list[int],
                 in_maps: list[ir.AffineMap], loops: list[int] | None = None) -> ir.Operation:
    """A generic before `op` computing f (`needed`, yielding `factor`) over `shape` from `op`'s inputs `xs` read
    through `in_maps`; `loops`: the loops of `op` that its dims stand for, where f reads loop indices."""
    block = op.regions[0].blocks[0]
    elem = factor.type
    par = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    with ir.InsertionPoint(op), op.location:
        ins = [op.operands[x] for x in xs]
        pre_maps = in_maps + [ir.AffineMap.get_identity(len(shape))]
        pre = linalg.GenericOp([ir.RankedTensorType.get(shape, elem)], ins, [tensor.EmptyOp(shape, elem).result],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in pre_maps]),
                               ir.ArrayAttr.get([par] * len(shape)))
    pre_block = pre.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v in ins], elem)
    mapped = {x: pre_block.arguments[i] for i, x in enumerate(xs)}
    values: list[tuple[ir.Value, ir.Value]] = []

    def lookup(v: ir.Value) -> ir.Value:
        if isinstance(v, ir.BlockArgument) and v.owner == block:
            return mapped[v.arg_number]
        return next((new for old, new in values if old == v), v)

    with ir.InsertionPoint(pre_block), op.location:
        for o in block.operations:
            if not any(o == x for x in needed):
                continue
            if o.name == "linalg.index":
                c = linalg.IndexOp(loops.index(ir.IntegerAttr(o.attributes["dim"]).value)).operation
            else:
                c = o.clone()
                for j, v in enumerate(list(c.operands)):
                    c.operands[j] = lookup(v)
            values.extend(zip(o.results, c.results))
        linalg.YieldOp([lookup(factor)])
    return pre


def _erase_unused(needed: list[ir.Operation]) -> None:
    pending = list(needed)  # erased once unused: users before what they use
    while pending:
        dead = [o for o in pending if all(not list(r.uses) for r in o.results)]
        if not dead:  # _factors admits no f whose ops the rest of the body reads
            raise CompileError("unfuse: a producer op inside the reduction is still used", stage="unfuse-producers")
        for o in dead:
            pending.remove(o)
            o.erase()


def unfuse_reductions(func_op: ir.Operation) -> int:
    """Take producers out of product-accumulating reductions that are not matmul forms, where the cost model
    says so; returns how many it rewrote."""
    done = 0
    for op in list(func_op.regions[0].blocks[0].operations):
        if op.name == "linalg.generic" and matmul_form(op.operation) is None and _unfuse_one(op.operation):
            done += 1
    return done


__all__ = ["unfuse_reductions"]
