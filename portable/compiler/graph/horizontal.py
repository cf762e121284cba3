"""Horizontal fusion of matmuls that share their left operand: one matmul over the concatenated weights.

A decoder layer multiplies the same normalized activation by the Q, K and V weights, and by the gate and up
weights of its MLP: at decode time each is a matrix-vector product of a few microseconds whose cost is mostly
its dispatch (and, split over K, a second dispatch that sums the partial products). Matmuls that read the same
left operand, whose right operands are constants of the same depth and whose outputs start from the same fill,
become one matmul over the weights concatenated along N (what a serving stack does by hand with a `qkv_proj`).
Only products of one row (matrix-vector, where the dispatch is the cost) merge: each former result is then a
contiguous slice of the output, marked as a view: dispatch formation passes over it like a reshape and
bufferization makes it a subview, so the kernels after it read the fused output in place, at an offset. (A slice
of several rows is strided, and a reshape that merges its rows is no view; such matmuls stay apart.) A matmul
whose result is returned (an output needs a buffer of its own: a copy kernel) or goes to one elementwise op
(which would run in its kernel) stays apart too: merging it saves no kernel; unless every matmul of the group
goes to the same elementwise computation (same body, same other operands, none of them read along the columns:
an RMSNorm's row scale factored out of a gate and an up projection), which then runs once over the merged output,
in the merged kernel. The decoder step on the nvidia profile: 98 -> 74 dispatches.

It runs twice: among the graph rewrites, and again once the loops of projections into heads are joined
(collapse-loops), where the Q/K/V projections of an exported decoder first look like plain one-row matmuls.
"""

from __future__ import annotations

import numpy as np

from ...ir.linalg_info import (
    body_op_names,
    classify,
    fill_value,
    indexing_maps,
    is_identity,
    iterator_types,
    num_inputs,
)
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import as_operation
from .generics import rebuild_generic

VIEW = "portable.view"  # a slice left for bufferization to make a view of its source (no copy kernel)
MAX_BYTES = 1 << 30  # weights concatenated up to this size (the concatenation is a copy made while compiling)


def dense_attr(v: ir.Value) -> ir.DenseElementsAttr | None:
    """The attribute of a non-splat f32/f16 constant tensor (None otherwise); nothing is copied."""
    if not isinstance(v, ir.OpResult) or v.owner.operation.name != "arith.constant":
        return None
    attr = v.owner.operation.attributes["value"]
    if not isinstance(attr, ir.DenseElementsAttr):
        return None
    dense = ir.DenseElementsAttr(attr)
    et = ir.RankedTensorType(v.type).element_type
    if dense.is_splat or not isinstance(et, (ir.F32Type, ir.F16Type)):
        return None
    return dense


def dense_constant(v: ir.Value) -> np.ndarray | None:
    """The value of a non-splat float constant tensor (None otherwise)."""
    dense = dense_attr(v)
    return None if dense is None else np.array(dense, copy=True).reshape(ir.RankedTensorType(v.type).shape)


def _key(op: ir.Operation) -> tuple | None:
    """What two matmuls must share to merge: their left operand, maps, body, weight depth and type, fill value;
    None for an op this rewrite leaves alone."""
    if op.name != "linalg.generic" or num_inputs(op) != 2 or len(op.results) != 1:
        return None
    kind = classify(op)
    if kind.kind != "matmul" or not kind.contiguous_b:
        return None
    maps = indexing_maps(op)
    out_t = ir.RankedTensorType(op.results[0].type)
    b = op.operands[1]
    b_t = ir.RankedTensorType(b.type)
    if b_t.rank != 2 or str(maps[1]) != "(d0, d1, d2) -> (d2, d1)" or str(maps[2]) != "(d0, d1, d2) -> (d0, d1)":
        return None
    if str(maps[0]) != "(d0, d1, d2) -> (d0, d2)" or out_t.rank != 2 or out_t.shape[0] != 1:
        return None  # one row: the slices are contiguous, so every reshape of them is a view too
    fill = fill_value(op.operands[2])
    if fill is None or not isinstance(fill, ir.OpResult) or fill.owner.operation.name != "arith.constant":
        return None
    if not isinstance(b, ir.OpResult) or b.owner.operation.name != "arith.constant":
        return None
    return (op.operands[0], str(b_t.element_type), b_t.shape[0], str(out_t.element_type), tuple(body_op_names(op)),
            str(fill.owner.operation.attributes["value"]))


def _returned(v: ir.Value) -> bool:
    """Whether `v`, or a reshape of it, is returned by the function."""
    for use in v.uses:
        owner = as_operation(use.owner)
        if owner.name == "func.return":
            return True
        if owner.name in ("tensor.collapse_shape", "tensor.expand_shape") and _returned(owner.results[0]):
            return True
    return False


def _has_own_epilogue(op: ir.Operation, group: list[ir.Operation]) -> bool:
    """Whether the result of `op` goes to a single elementwise op over as many loops, reading no other result of
    `group`: that op would run in the matmul's kernel (dispatch.py joins it in place), where after a merge it
    would be a kernel of its own."""
    users = [as_operation(use.owner) for use in op.results[0].uses]
    if len(users) != 1 or users[0].name != "linalg.generic":
        return False
    kind = classify(users[0])
    if kind.kind != "elementwise" or len(kind.ranges) != ir.RankedTensorType(op.results[0].type).rank:
        return False
    return not any(m != op and m.results[0] == v for m in group for v in users[0].operands)


def _epilogue_key(op: ir.Operation) -> tuple | None:
    """What the one elementwise consumer of matmul `op` computes, comparable across matmuls: its maps, its other
    operands (the values themselves) and its body op by op; None where it cannot run over a merged output (it reads
    another operand along the columns, accumulates into its init, or reads the matmul's result permuted)."""
    epi = as_operation(next(iter(op.results[0].uses)).owner)
    nin = num_inputs(epi)
    maps = indexing_maps(epi)
    ins = list(epi.operands)[:nin]
    block = epi.regions[0].blocks[0]
    if len(epi.results) != 1 or len(list(block.arguments[nin].uses)) or not is_identity(maps[nin]):
        return None
    own = [i for i, v in enumerate(ins) if v == op.results[0]]
    if len(own) != 1 or not is_identity(maps[own[0]]):
        return None
    others = []
    for i, (v, m) in enumerate(zip(ins, maps)):
        if i != own[0]:
            if "d1" in str(m).split("->")[1]:  # read along the columns: a slice of it per matmul
                return None
            others.append((i, v, str(m)))
    tokens: dict = {a: ("arg", i) for i, a in enumerate(block.arguments)}
    body = []
    for j, inner in enumerate(block.operations):
        refs = tuple(tokens.get(v, ("value", v)) for v in inner.operands)
        body.append((inner.name, refs, tuple((a, str(inner.attributes[a])) for a in inner.attributes),
                     tuple(str(r.type) for r in inner.results)))
        for r, res in enumerate(inner.results):
            tokens[res] = ("result", j, r)
    return own[0], tuple(others), tuple(body), str(ir.RankedTensorType(epi.results[0].type).element_type)


def fuse_shared_lhs_matmuls(func_op: ir.Operation) -> int:
    """Merge every group of matmuls (func_op's top level) that `_key` says may merge; returns how many groups
    were merged."""
    block = func_op.regions[0].blocks[0]
    groups: dict[tuple, list[ir.Operation]] = {}
    for op in block.operations:
        k = _key(op.operation)
        if k is not None:
            groups.setdefault(k, []).append(op.operation)
    merged = 0
    for ops in groups.values():
        ops = [op for op in ops if not _returned(op.results[0])]  # a returned result needs a buffer (a copy kernel)
        own = [op for op in ops if _has_own_epilogue(op, ops)]
        keys = {_epilogue_key(op) for op in own}
        shared = len(own) == len(ops) and len(keys) == 1 and None not in keys and \
            not any(_returned(as_operation(next(iter(op.results[0].uses)).owner).results[0]) for op in own)
        if not shared:
            # An elementwise consumer of its own would run in the matmul's kernel; merged, in a kernel of its own.
            ops = [op for op in ops if op not in own]
        if len(ops) < 2:
            continue
        weights = [dense_constant(op.operands[1]) for op in ops]
        if any(w is None for w in weights) or sum(w.nbytes for w in weights) > MAX_BYTES:
            continue
        _merge(ops, weights, shared)
        merged += 1
    return merged


def _merge(ops: list[ir.Operation], weights: list[np.ndarray], epilogues: bool = False) -> None:
    """One matmul over the concatenated weights; each former result (with `epilogues`: the result of each one's
    elementwise consumer, which runs once over the merged output) a slice of it."""
    first = ops[0]
    m = ir.RankedTensorType(first.results[0].type).shape[0]
    out_et = ir.RankedTensorType(first.results[0].type).element_type
    b_t = ir.RankedTensorType(first.operands[1].type)
    widths = [w.shape[1] for w in weights]
    n = sum(widths)
    cat = np.ascontiguousarray(np.concatenate(weights, axis=1))
    fill_scalar = fill_value(first.operands[2])
    own = _epilogue_key(first)[0] if epilogues else None  # the consumers' operand that is the matmul's result
    with ir.InsertionPoint(first), first.location:
        w_type = ir.RankedTensorType.get([b_t.shape[0], n], b_t.element_type)
        w = arith.ConstantOp(w_type, ir.DenseElementsAttr.get(cat, type=w_type)).result
        out_type = ir.RankedTensorType.get([m, n], out_et)
        init = linalg.fill(fill_scalar, outs=[tensor.EmptyOp([m, n], out_et).result])  # generalized after rewrites
    new = rebuild_generic(first, [first.operands[0], w], [init], indexing_maps(first),
                          ["parallel", "parallel", "reduction"], [0, 1, 2], [out_type])
    sliced, result = ops, new.results[0]
    if epilogues:
        sliced = [as_operation(next(iter(op.results[0].uses)).owner) for op in ops]
        # The merged consumer goes where the first of them is in the block, before every slice taken of it.
        epi = next(o.operation for o in first.parent.regions[0].blocks[0].operations if o.operation in sliced)
        nin = num_inputs(epi)
        et = ir.RankedTensorType(epi.results[0].type).element_type
        ins = [result if i == own else v for i, v in enumerate(list(epi.operands)[:nin])]
        with ir.InsertionPoint(epi), epi.location:
            empty = tensor.EmptyOp([m, n], et).result
        result = rebuild_generic(epi, ins, [empty], indexing_maps(epi), iterator_types(epi), list(range(nin + 1)),
                                 [ir.RankedTensorType.get([m, n], et)]).results[0]
    offset = 0
    for op, width in zip(sliced, widths):
        with ir.InsertionPoint(op), op.location:
            sl = tensor.ExtractSliceOp(ir.RankedTensorType.get([m, width],
                                                               ir.RankedTensorType(result.type).element_type),
                                       result, [], [], [], [0, offset], [m, width], [1, 1])
            sl.operation.attributes[VIEW] = ir.UnitAttr.get()
        op.results[0].replace_all_uses_with(sl.result)
        offset += width
    for op in (sliced if epilogues else []) + ops:
        op.erase()


__all__ = ["dense_attr", "dense_constant", "fuse_shared_lhs_matmuls"]
