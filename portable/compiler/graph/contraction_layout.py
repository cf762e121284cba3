"""Contractions in a layout no matmul strategy reads are given batch-matmul operands: copies in (batch, m, k) and
(batch, k, n) order.

An exported attention reads Q and K as the projections wrote them, (b, s, h, d), while its product runs over
(b, h) batches: Q.K^T is a contraction over loops (b, h, i, j, d) with Q read as (b, i, h, d) and K as (b, j, h, d),
which the strategies take for a plain reduction (one output per thread: BERT-base at batch 8 on the H100, 0.45 ms
a layer, 0.5 TFLOP/s). Its output projection reads the heads back through two reduction loops that are not adjacent
in its operand. Here the body `out + x * y` is split into its two sides: each side (the inputs it reads and the
elementwise work fusion left on them: a scale, a bias, a softmax's division) is computed once into that order by a
generic of its own (one pass over the operand, small next to the product, where the fused form redid that work for
every output column), the contraction is rebuilt as a pure product over (batch..., m..., n..., k...), and
collapse_dims.py then makes a plain (batched) matmul of it. Loop roles follow the maps: batch loops index both sides
and the output, m loops the first side and the output, n loops the second and the output, k loops both sides only;
a contraction with a loop of any other role, or without m, n and k loops, is left as it is, and so are products too
small for the copies to pay (m or n under MIN_EXTENT). Matmuls the strategies already know are not touched.

On the CPU drivers (`keep_ragged`: profiles that vectorize a thread's loops, loop_vectorize) a product whose n extent
is no multiple of VECTOR (attention scores over 127 tokens) takes its second side in (batch, n, k) order instead:
in (batch, k, n) order n is the vector dimension, and a ragged one leaves only scalar or one-column tiles, where
both sides read along k are contiguous. BERT-Mini at seq 127, Q.K^T per layer: 1.2 -> 0.6 ms on PoCL, 25 -> 2.5 ms
on lavapipe (the product left in its exported (b, s, h, d) layout took 0.9 and 11.5 ms). GPUs keep (batch, k, n),
whose staged tiles were 29x faster than the exported layout at seq 128 (H100)."""

from __future__ import annotations

import math

from ...ir.linalg_info import classify, indexing_maps, iterator_types, loop_dims, loop_ranges, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import clone_mapped, find_ops

MIN_EXTENT = 16  # m and n below this: a matrix-vector product, which its own strategies serve
VECTOR = 4  # the narrowest column vector of the matmul strategies


def _defining(v: ir.Value, order: list[ir.Operation]) -> ir.Operation | None:
    """The body op (of `order`) that defines `v`, else None."""
    if not isinstance(v, ir.OpResult):
        return None
    owner = v.owner.operation
    return owner if any(owner == o for o in order) else None


def _factors(op: ir.Operation) -> tuple[ir.Value, ir.Value] | None:
    """(x, y) where the body ends in `yield out + x * y` (out the output's block argument), else None."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    body = op.regions[0].blocks[0]
    order = [o.operation for o in body.operations]
    out = body.arguments[len(body.arguments) - 1]
    acc = _defining(order[-1].operands[0], order) if len(order[-1].operands) == 1 else None
    if acc is None or acc.name != "arith.addf" or out not in list(acc.operands):
        return None
    prod = [v for v in acc.operands if v != out]
    mul = _defining(prod[0], order) if len(prod) == 1 else None
    if mul is None or mul.name != "arith.mulf":
        return None
    return mul.operands[0], mul.operands[1]


def is_product(op: ir.Operation) -> bool:
    """A generic whose body only accumulates the product of two of its inputs (a contraction, whatever its layout)."""
    f = _factors(op)
    return f is not None and all(isinstance(v, ir.BlockArgument) for v in f) and \
        len(list(op.regions[0].blocks[0].operations)) == 3


def _cone(value: ir.Value, body: ir.Block) -> tuple[list[ir.Operation], set[int]] | None:
    """The body ops `value` is computed by (in body order) and the block arguments they read."""
    order = [o.operation for o in body.operations]
    ops, args, work = [], set(), [value]
    while work:
        v = work.pop()
        if isinstance(v, ir.BlockArgument):
            if v.owner == body:
                args.add(v.arg_number)
            continue
        owner = _defining(v, order)
        if owner is None or any(owner == o for o in ops):
            continue  # defined outside the body (a constant of the function), or already taken
        if len(owner.regions):
            return None
        ops.append(owner)
        work.extend(owner.operands)
    ops.sort(key=lambda o: [i for i, x in enumerate(order) if x == o][0])
    return ops, args


def _plan(op: ir.Operation):
    """The contraction's two sides and loop roles, or None when it is no product of two sides of that form:
    (x, its ops, its inputs, y, its ops, its inputs, batch, m, n, k) with batch, m and n in the output's order and
    k in the order of the first side's first input."""
    f = _factors(op)
    if f is None:
        return None
    body = op.regions[0].blocks[0]
    nin = num_inputs(op)
    sides = [_cone(v, body) for v in f]
    if any(c is None for c in sides) or any(a >= nin for c in sides for a in c[1]):
        return None
    (xops, xin), (yops, yin) = sides
    if not xin or not yin or any(any(o == p for p in yops) for o in xops):
        return None  # (an input both sides read, equal biases made one constant, goes to both)
    maps = indexing_maps(op)
    dims = [loop_dims(m) for m in maps]
    if any(d is None or len(set(d)) != len(d) for d in dims):
        return None
    a = {d for i in xin for d in dims[i]}
    b = {d for i in yin for d in dims[i]}
    # A side that reads a loop index (Funnel's relative-position attention) reads one of its own loops.
    if any(o.name == "linalg.index" and ir.IntegerAttr(o.attributes["dim"]).value not in loops
           for ops, loops in ((xops, a), (yops, b)) for o in ops):
        return None
    out = dims[nin]
    its = iterator_types(op)
    batch = [d for d in out if d in a and d in b]
    m = [d for d in out if d in a and d not in b]
    n = [d for d in out if d in b and d not in a]
    first = dims[min(xin)] + [d for i in sorted(xin) for d in dims[i]]
    k = list(dict.fromkeys(d for d in first if d in b and d not in out))
    if sorted(batch + m + n + k) != list(range(len(its))) or not (m and n and k):
        return None
    if any(its[d] != "reduction" for d in k) or any(its[d] != "parallel" for d in batch + m + n):
        return None
    if out != batch + m + n or len(a) != len(batch + m + k) or len(b) != len(batch + k + n):
        return None
    return f[0], xops, sorted(xin), f[1], yops, sorted(yin), batch, m, n, k


def _side(op: ir.Operation, ranges: list[int], value: ir.Value, ops: list[ir.Operation], inputs: list[int],
          order: list[int]) -> ir.Value:
    """The factor `value` of every element, computed once by a generic of its own over loops `order` (its ops
    cloned, its inputs read through their maps): a copy in the new layout, or the input itself where the factor is
    an input already in that layout."""
    body = op.regions[0].blocks[0]
    maps = indexing_maps(op)
    if not ops and len(inputs) == 1 and loop_dims(maps[inputs[0]]) == order:
        return op.operands[inputs[0]]
    n = len(order)
    pos = {d: i for i, d in enumerate(order)}
    in_maps = [ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(pos[d]) for d in loop_dims(maps[i])]) for i in inputs]
    t = value.type
    with ir.InsertionPoint(op), op.location:
        empty = tensor.EmptyOp([ranges[d] for d in order], t).result
        all_maps = in_maps + [ir.AffineMap.get_identity(n)]
        gen = linalg.GenericOp([empty.type], [op.operands[i] for i in inputs], [empty],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in all_maps]),
                               ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * n))
        types = [body.arguments[i].type for i in inputs] + [t]
        block = gen.regions[0].blocks.append(*types)
    mapping = {body.arguments[i]: block.arguments[j] for j, i in enumerate(inputs)}
    with ir.InsertionPoint(block):
        for o in ops:
            if o.name == "linalg.index":  # the same loop, at its place in `order`
                mapping[o.results[0]] = linalg.IndexOp(pos[ir.IntegerAttr(o.attributes["dim"]).value]).result
            else:
                clone_mapped(o, mapping)
        linalg.YieldOp([mapping.get(value, value)])
    return gen.results[0]


def canonical_contractions(func_op: ir.Operation, keep_ragged: bool = False) -> int:
    """Rebuild every contraction of another layout over batch-matmul operands (with `keep_ragged`, a ragged n
    takes the second side as (batch, n, k)); returns how many."""
    todo = []
    for op in find_ops(func_op, ("linalg.generic",)):
        ranges = loop_ranges(op) if classify(op).kind != "matmul" else None  # None also where a shape is dynamic
        plan = _plan(op) if ranges is not None else None
        if plan is None:
            continue
        m, n = math.prod(ranges[d] for d in plan[7]), math.prod(ranges[d] for d in plan[8])
        if min(m, n) < MIN_EXTENT:
            continue
        todo.append((op, ranges, plan, keep_ragged and n % VECTOR != 0))
    for op, ranges, (x, xops, xin, y, yops, yin, batch, m, n, k), rows_of_b in todo:
        second = batch + n + k if rows_of_b else batch + k + n
        a = _side(op, ranges, x, xops, xin, batch + m + k)
        b = _side(op, ranges, y, yops, yin, second)
        loops = batch + m + n + k
        new_dim = {d: ir.AffineDimExpr.get(i) for i, d in enumerate(loops)}
        new_maps = [ir.AffineMap.get(len(loops), 0, [new_dim[d] for d in order])
                    for order in (batch + m + k, second, batch + m + n)]
        its = iterator_types(op)
        out = op.operands[num_inputs(op)]
        acc_t = ir.RankedTensorType(out.type).element_type
        with ir.InsertionPoint(op), op.location:
            new = linalg.GenericOp([op.results[0].type], [a, b], [out],
                                   ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in new_maps]),
                                   ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{its[d]}>")
                                                     for d in loops]))
            block = new.regions[0].blocks.append(ir.RankedTensorType(a.type).element_type,
                                                 ir.RankedTensorType(b.type).element_type, acc_t)
            with ir.InsertionPoint(block):
                prod = arith.MulFOp(block.arguments[0], block.arguments[1]).result
                linalg.YieldOp([arith.AddFOp(block.arguments[2], prod).result])
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()
    return len(todo)


__all__ = ["canonical_contractions", "is_product", "MIN_EXTENT"]
