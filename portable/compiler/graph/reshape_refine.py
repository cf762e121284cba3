"""A reshape that merges dims and splits them again another way goes through the finer shape both refine.

`expand(collapse(x))` with a dim formed as 24 x 32 and split as 12 x 64 (a 4-bit weight's K in blocks of 32, read
by an attention output of 12 heads of 64) is a pair upstream's reshape propagation cannot move: neither side's
loops can take the other's factors, so the producer's result is materialized (the dequantized float weight of
every attention output projection, each decode step). Both factorizations refine 12 x 2 x 32, so the pair becomes
`collapse(expand(x))` through it: the expansion folds into the producer and the collapse into the consumer by
expansion, as any reshape would (upstream's elementwise fusion, run again after this).
"""

from __future__ import annotations

from math import prod

from ...ir.mlir import ir, tensor
from ...ir.util import find_ops, reassociation_attr, reassociation_groups
from .unit_broadcasts import drop_unit_indices


def _refine(a: list[int], b: list[int]) -> list[int] | None:
    """The coarsest sizes that both factorizations `a` and `b` (of one product) are groupings of; None where there
    is none (24 x 32 against 16 x 48)."""
    cuts = sorted({prod(a[:i]) for i in range(1, len(a) + 1)} | {prod(b[:i]) for i in range(1, len(b) + 1)})
    out, last = [], 1
    for c in cuts:
        if c % last:
            return None
        out.append(c // last)
        last = c
    return out


def _spans(sizes: list[int], fine: list[int]) -> list[int]:
    """How many consecutive sizes of `fine` (a refinement of `sizes`) each of `sizes` spans."""
    counts, k = [], 0
    for size in sizes:
        n, acc = 0, 1
        while acc < size:
            acc *= fine[k + n]
            n += 1
        counts.append(n)
        k += n
    return counts


def _units_away(shape: list[int], groups: list[list[int]]) -> tuple[list[int], list[list[int]], list[list[int]]]:
    """(the shape without the size-1 dims of multi-dim groups, its groups, the reassociation from `shape` to it):
    each unit joins a neighbour of its group; a group of units only keeps one."""
    kept: list[int] = []
    new_groups: list[list[int]] = []
    reassoc: list[list[int]] = []
    for g in groups:
        big = [i for i in g if shape[i] != 1] or [g[0]]
        mine: list[int] = []
        for i in big:
            reassoc.append([i])
            mine.append(len(kept))
            kept.append(shape[i])
        for i in g:  # units join the dim after them in the group, the last ones the dim before
            if i not in big:
                after = [j for j, b in enumerate(big) if b > i]
                reassoc[len(kept) - len(big) + (after[0] if after else len(big) - 1)].append(i)
        new_groups.append(mine)
    for r in reassoc:
        r.sort()
    return kept, new_groups, reassoc


def _through(src: list[int], out: list[int], cg: list[list[int]], eg: list[list[int]]):
    """(the fine shape, per source dim its fine dims, per output dim its fine dims) of collapse groups `cg` of
    `src` split again by `eg` into `out` (neither with size-1 dims in a group of several); None where a dim has no
    common refinement or nothing differs."""
    fine: list[int] = []
    to_src: list[list[int]] = []
    to_out: list[list[int]] = []
    changed = False
    for c, e in zip(cg, eg):
        a, b = [src[i] for i in c], [out[i] for i in e]
        if a == b:
            r = a
        elif (r := _refine(a, b)) is None:
            return None
        else:
            changed = True
        for sizes, dims in ((a, to_src), (b, to_out)):
            start = len(fine)
            for n in ([1] * len(a) if a == b else _spans(sizes, r)):
                dims.append(list(range(start, start + n)))
                start += n
        fine += r
    return (fine, to_src, to_out) if changed else None


def refine_reshapes(func_op: ir.Operation) -> int:
    """Rewrite every expand_shape of a collapse_shape whose groups factor a dim differently but have a common
    refinement; returns how many."""
    done = 0
    for expand in find_ops(func_op, ("tensor.expand_shape",)):
        collapse = expand.operands[0].owner if isinstance(expand.operands[0], ir.OpResult) else None
        if collapse is None or collapse.name != "tensor.collapse_shape":
            continue
        src_t = ir.RankedTensorType(collapse.operands[0].type)
        out_t = ir.RankedTensorType(expand.results[0].type)
        if not (src_t.has_static_shape and out_t.has_static_shape):
            continue
        # Size-1 dims first leave both sides (reshapes of their own, which canonicalization folds into the rest).
        src, cg, src_in = _units_away(list(src_t.shape), reassociation_groups(collapse))
        out, eg, out_in = _units_away(list(out_t.shape), reassociation_groups(expand))
        plan = _through(src, out, cg, eg)
        if plan is None:
            continue
        fine, to_src, to_out = plan
        et = src_t.element_type
        with ir.InsertionPoint(expand), expand.location:
            x = collapse.operands[0]
            if len(src) != len(src_t.shape):
                x = tensor.CollapseShapeOp(ir.RankedTensorType.get(src, et), x, reassociation_attr(src_in)).result
            wide = tensor.ExpandShapeOp(ir.RankedTensorType.get(fine, et), x, reassociation_attr(to_src), [],
                                        fine).result
            new = tensor.CollapseShapeOp(ir.RankedTensorType.get(out, et), wide, reassociation_attr(to_out)).result
            if len(out) != len(out_t.shape):
                new = tensor.ExpandShapeOp(out_t, new, reassociation_attr(out_in), [], list(out_t.shape)).result
        expand.results[0].replace_all_uses_with(new)
        expand.erase()
        if not list(collapse.results[0].uses):
            collapse.erase()
        # The expansion folds into a producer whose maps are projected permutations: a block scale read at a
        # constant 0 of its unit dim is read as a lower-rank operand instead.
        x = wide.owner.operands[0]
        while isinstance(x, ir.OpResult) and x.owner.name == "tensor.collapse_shape":
            x = x.owner.operands[0]
        if isinstance(x, ir.OpResult) and x.owner.name == "linalg.generic":
            drop_unit_indices(x.owner)
        done += 1
    return done


__all__ = ["refine_reshapes"]
