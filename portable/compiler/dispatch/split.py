"""Splitting a dispatch whose buffers are larger than the largest range a kernel can bind, or whose rows do not
divide into its register tiles.

A kernel binds at most `max_bind_bytes` of a buffer (Vulkan maxStorageBufferRange, 128 MiB on lavapipe; OpenCL
max_mem_alloc_size). A dispatch group that touches a larger tensor is split along a parallel loop of its last op
that is the leading (outermost non-unit, so contiguous) dimension of every operand indexed by it, followed through
every op of the group by the indexing maps: the group is rebuilt for `rows` rows of that loop, starting at row 0
(tensor.extract_slice in, tensor.insert_slice out), and the plan runs that one kernel once per chunk, binding each
split operand at the chunk's byte offset; operands that do not depend on the loop are bound whole. A constant
indexed by the loop in another dimension (a classifier's weight folded into (K, N) order) is stored with that
dimension first for the split. A remainder shorter than a chunk is a second group compiled for its own row count.
Where no loop allows it (the big operand is indexed by a reduction loop, one row alone is over the limit, ...),
OutOfDeviceMemory names the buffer, its size and the limit. Which loop, and how many rows: split_choice.py.

The same cut peels a matmul whose row count has no divisor near the rows a thread's register tile takes (127
tokens, a prime): its tiles would take one row each (or ragged scalar tiles), reading every column of B once per
row. The first rows, a multiple of the tile, run as one kernel with the full tile, the few left as a second.

Only chunk 0 exists in the IR: every chunk's kernel addresses its operands from their binding's start, so
one kernel serves all chunks and the host function never sees a non-zero offset. Bufferization folds input
slices into the kernel's reads (the kernel then takes the whole buffer and reads its first rows), so the plan
finds the chunked buffers by where they come from (`Split.chunked`), not by their types.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...ir.linalg_info import classify, indexing_maps, iterator_types, num_inputs
from ...ir.mlir import arith, bufferization, ir, tensor
from ..graph.generics import rebuild_generic
from ..graph.horizontal import dense_constant
from .groups import TAG, Group
from .split_choice import (
    Choice,
    Namer,
    choose_loop,
    choose_peel,
    defined_in,
    is_empty,
    oversized,
    raise_unsplittable,
)

DEFAULT_OFFSET_ALIGNMENT = 256  # the largest minStorageBufferOffsetAlignment Vulkan allows; OpenCL's is 128 mostly


@dataclass(frozen=True)
class Split:
    """A group compiled for `rows` rows of its split loop, run once per entry of `starts` (the first row of each
    run). `chunked` says which buffers advance with the chunk and by how many bytes per row, each as
    (where, groups, bytes per row): ("input", (i,)) function argument i, ("written", (g, ...)) the buffer the
    kernels of groups g write, ("result", ()) the buffer this group's kernel writes, ("constant", (n,)) the constant
    of n bytes. The rest are bound whole."""

    rows: int
    starts: tuple[int, ...]
    chunked: tuple[tuple[str, tuple[int, ...], int], ...]


def _group_ops(g: Group, ordered: bool = True) -> list[ir.Operation]:
    """Every op of the group, in block order (definitions before uses) when `ordered`."""
    chain = getattr(g, "chain", None)
    ops = list(chain) + list(g.producers) if chain else [g.root] + list(g.consumers) + list(g.producers)
    if not ordered:
        return ops
    block = g.target.parent.regions[0].blocks[0]
    order = [op.operation for op in block.operations]
    return sorted(ops, key=lambda op: next(i for i, x in enumerate(order) if x == op))


def _permute_constants(choice: Choice, before: ir.Operation) -> list[tuple[ir.Value, ir.Value]]:
    """(old, new) for each constant of `choice.permuted`: a new constant with the chunked dimension first."""
    out = []
    with ir.InsertionPoint(before), before.location:
        for v, dim in choice.permuted:
            data = np.ascontiguousarray(np.moveaxis(dense_constant(v), dim, 0))
            t = ir.RankedTensorType(v.type)
            nt = ir.RankedTensorType.get(list(data.shape), t.element_type)
            out.append((v, arith.ConstantOp(nt, ir.DenseElementsAttr.get(data, type=nt)).result))
    return out


def _permuted_map(m: ir.AffineMap, dim: int) -> ir.AffineMap:
    r = list(m.results)
    return ir.AffineMap.get(m.n_dims, m.n_symbols, [r[dim]] + r[:dim] + r[dim + 1:])


def _slice(v: ir.Value, dim: int, rows: int) -> ir.Value:
    t = ir.RankedTensorType(v.type)
    shape = list(t.shape)
    sizes = shape[:dim] + [rows] + shape[dim + 1:]
    rt = ir.RankedTensorType.get(sizes, t.element_type, t.encoding)
    return tensor.ExtractSliceOp(rt, v, [], [], [], [0] * len(shape), sizes, [1] * len(shape)).result


def _destination(g: Group, ops: list[ir.Operation]) -> tuple[ir.Value, tuple[int, int]]:
    """The tensor the group's result is built in, found by following `outs` operands back from the target
    through ops of the group, and where it is used: (op position, operand number)."""
    i = next(i for i, op in enumerate(ops) if op == g.target)
    while True:
        k = num_inputs(ops[i])
        v = list(ops[i].operands)[k]
        j = defined_in(v, ops)
        if j is None:
            return v, (i, k)
        i = j


def _emit(g: Group, ops: list[ir.Operation], choice: Choice, rows: int, acc: ir.Value,
          dest: tuple[int, int], permuted: list[tuple[ir.Value, ir.Value]]) -> tuple[Group, ir.Value]:
    """The group's ops rebuilt for `rows` rows of the split loop, before its target; returns the new group
    and `acc` with the chunk's result inserted at row 0. The operand `dest` (where the result is built) is
    sliced from `acc`, so every chunk writes in place into one buffer. `permuted`: (constant, the same with
    the chunked dimension first), read in its place."""
    new: list[ir.Operation] = []
    with ir.InsertionPoint(g.target), g.target.location:
        for i, op in enumerate(ops):
            nin = num_inputs(op)
            ins, outs = [], []
            maps = indexing_maps(op)
            for k, v in enumerate(op.operands):
                dim = choice.sliced.get((i, k))
                j = defined_in(v, ops)
                swap = next((nv for old, nv in permuted if old == v), None) if dim is not None else None
                if j is not None:
                    nv = new[j].results[0]
                elif swap is not None:
                    nv = _slice(swap, 0, rows)
                    maps[k] = _permuted_map(maps[k], dim)
                elif dim is None:
                    nv = v
                elif (i, k) == dest:
                    nv = _slice(acc, dim, rows)
                elif is_empty(v):  # a scratch tensor: a new one of the chunk's shape
                    shape = list(ir.RankedTensorType(v.type).shape)
                    shape[dim] = rows
                    nv = tensor.EmptyOp(shape, ir.RankedTensorType(v.type).element_type).result
                else:
                    nv = _slice(v, dim, rows)
                (ins if k < nin else outs).append(nv)
            tmp = op.clone()
            nargs = len(op.regions[0].blocks[0].arguments)
            new.append(rebuild_generic(tmp, ins, outs, maps, iterator_types(op), list(range(nargs)),
                                       [outs[0].type]))
            tmp.erase()
        target = next(i for i, op in enumerate(ops) if op == g.target)
        out = new[target].results[0]
        rank = ir.RankedTensorType(acc.type).rank
        acc = tensor.InsertSliceOp(out, acc, [], [], [], [0] * rank, list(ir.RankedTensorType(out.type).shape),
                                   [1] * rank).result

    def same(op: ir.Operation) -> ir.Operation:
        return new[next(i for i, x in enumerate(ops) if x == op)]

    changes = {"root": same(g.root), "consumers": [same(c) for c in g.consumers],
               "producers": [same(p) for p in g.producers]}
    if getattr(g, "chain", None):
        changes["chain"] = [same(c) for c in g.chain]
    ng = dataclasses.replace(g, **changes)
    t = classify(ng.target if changes.get("chain") else ng.root)
    ng.kind = dataclasses.replace(g.kind, ranges=t.ranges)  # the rest (contiguous_b, channelwise) as it was
    return ng, acc


def split_groups(func_op: ir.Operation, groups: list[Group], limit: int, alignment: int = DEFAULT_OFFSET_ALIGNMENT,
                 peel: Callable[[Group], int] | None = None) -> tuple[list[Group], dict[int, Split]]:
    """Groups with a tensor over `limit` bytes rebuilt for a chunk of rows, and groups whose outermost loop
    `peel(g)` (rows a thread takes at once; 0: none) does not divide, cut in two; returns the new group list
    (indices renumbered, ops retagged) and the Split of each chunked group by its index."""
    if not limit and peel is None:
        return groups, {}
    name = Namer(func_op)
    args = list(func_op.regions[0].blocks[0].arguments)
    out: list[tuple[Group, Split | None]] = []
    produced: list[tuple[ir.Value, tuple[int, ...]]] = []  # tensor -> indices of the groups that write it
    for g in groups:
        ops = _group_ops(g)
        big = oversized(ops, g, limit) if limit else []
        cut = None
        if big:
            choice, rows, chunked, reasons = choose_loop(g, ops, limit, alignment, args, produced, name)
            if choice is None:
                raise_unsplittable(big, limit, name, reasons)
            cut = choice, rows, chunked
        elif peel is not None:
            cut = choose_peel(g, ops, peel(g), alignment, args, produced, name)
        if cut is None:
            produced.append((g.target.results[0], (len(out),)))
            out.append((g, None))
            continue
        choice, rows, chunked = cut
        full, tail = divmod(choice.extent, rows)
        acc, dest = _destination(g, ops)
        if is_empty(acc):
            # A buffer of its own that every chunk writes in place: tensor.empty ops of one type are merged
            # by CSE, and a shared one would make bufferization copy each chunk into a fresh buffer.
            with ir.InsertionPoint(g.target), g.target.location:
                acc = bufferization.AllocTensorOp(acc.type, []).result
        first = len(out)
        permuted = _permute_constants(choice, ops[0])
        ng, acc = _emit(g, ops, choice, rows, acc, dest, permuted)
        out.append((ng, Split(rows, tuple(i * rows for i in range(full)), tuple(chunked))))
        if tail:
            ng, acc = _emit(g, ops, choice, tail, acc, dest, permuted)
            out.append((ng, Split(tail, (full * rows,), tuple(chunked))))
        g.target.results[0].replace_all_uses_with(acc)
        produced.append((acc, tuple(range(first, len(out)))))
        for op in reversed(ops):
            op.erase()
        for old, _ in permuted:
            if not list(old.uses):
                old.owner.operation.erase()
    # The plan launches the groups' kernels in block order, and a Split (like the profiler's records) belongs to
    # its group's launch: the list follows the block, and the groups a chunked buffer comes from are renumbered.
    position = {}
    for i, op in enumerate(func_op.regions[0].blocks[0].operations):
        position.setdefault(op.operation, i)
    order = sorted(range(len(out)), key=lambda i: position[out[i][0].target])
    renumber = {old: new for new, old in enumerate(order)}
    out = [(out[i][0], _renumbered(out[i][1], renumber)) for i in order]
    new_groups, splits = [], {}
    for i, (g, s) in enumerate(out):
        g.index = i
        for j, op in enumerate([g.target] + g.fused()):
            op.attributes[TAG] = ir.StringAttr.get(f"g{i}_{j}")
        new_groups.append(g)
        if s is not None:
            splits[i] = s
    return new_groups, splits


def _renumbered(s: Split | None, renumber: dict[int, int]) -> Split | None:
    if s is None:
        return None
    return dataclasses.replace(s, chunked=tuple((kind, tuple(renumber[i] for i in groups) if kind == "written"
                                                 else groups, rb) for kind, groups, rb in s.chunked))
