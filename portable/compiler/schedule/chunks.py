"""Dispatch groups moved into functions of a few groups each while the transform script tiles and fuses them, then
put back in place.

Upstream's fuse_into_containing_op prints the ops it fuses into a diagnostic whether or not the fusion fails, and
printing an op verifies and numbers the whole function around it (its nearest isolated-from-above ancestor). With
every group in the one graph function that is quadratic in the network's size: ViT-Tiny's 762 fusions took 31 s
of a 46 s script. In a function of its own a fusion costs in the size of that function. Only the groups' part of
the script runs on these functions (transform_script.Script.groups_text); the ops go back before bufferization and
GPU mapping, in their order, so the kernels do not change.

A chunk is a run of consecutive ops of the graph function that no group straddles; its function takes the values
it reads from before it and returns those read after it. Ops without operands (constants, empty tensors) that later
ops read too stay in the graph function and are cloned into each chunk that reads them, so the groups see the same
constants as before; `restore` gives their users the originals back.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.mlir import func, ir
from ..dispatch.groups import tagged_group

GROUPS_PER_CHUNK = 8
PREFIX = "__portable_chunk"


@dataclass
class Chunk:
    call: ir.Operation
    fn: ir.Operation
    clones: list[tuple[ir.Operation, ir.Operation]]  # (clone in fn, the original in the graph function)


def _free(op: ir.Operation) -> bool:
    """An op that reads nothing (a constant, an empty tensor): cloned where it is read."""
    return len(op.operands) == 0 and len(op.regions) == 0 and tagged_group(op) is None


def _owner(use) -> ir.Operation:
    return use.owner.operation if hasattr(use.owner, "operation") else use.owner


def _top(op: ir.Operation, block_owner: ir.Operation) -> ir.Operation | None:
    """The ancestor of `op` (or `op`) directly in the block of `block_owner`; None if it is elsewhere."""
    while op is not None:
        parent = op.parent
        if parent is None:
            return None
        if parent == block_owner:
            return op
        op = parent.operation if hasattr(parent, "operation") else parent
    return None


def _sink_producers(main: ir.Operation) -> None:
    """Ops of a group read only by their own group move down to just before their first reader: a producer the
    frontend placed far ahead of its group (ViT's position embedding) would keep every op in between in one chunk.
    The fusion takes them into the group's loops wherever they were."""
    ops = [op.operation for op in main.regions[0].blocks[0].operations]
    for op in reversed(ops[:-1]):
        k = tagged_group(op)
        if k is None:
            continue
        users = [_top(_owner(u), main) for r in op.results for u in r.uses]
        if not users or any(u is None or tagged_group(u) != k for u in users):
            continue
        if len(set(users)) > 1:  # rare: positions only then
            index = {o.operation: i for i, o in enumerate(main.regions[0].blocks[0].operations)}
            users = [min(users, key=lambda u: index[u])]
        op.move_before(users[0])


def _spans(ops: list[ir.Operation]) -> list[tuple[int, int]]:
    """[start, end) index ranges of consecutive ops, each with about GROUPS_PER_CHUNK groups, no group cut."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        k = tagged_group(op)
        if k is not None:
            first.setdefault(k, i)
            last[k] = i
    inside = [0] * (len(ops) + 1)  # groups open across the cut before index i
    for k in first:
        inside[first[k] + 1] += 1
        inside[last[k] + 1] -= 1
    open_now, spans, start, groups = 0, [], 0, set()
    for i, op in enumerate(ops):
        open_now += inside[i]
        k = tagged_group(op)
        if k is not None:
            groups.add(k)
        if len(groups) >= GROUPS_PER_CHUNK and open_now + inside[i + 1] == 0:
            spans.append((start, i + 1))
            start, groups = i + 1, set()
    if groups:
        spans.append((start, len(ops)))
    return spans


def outline(main: ir.Operation) -> list[Chunk]:
    """Move the groups of `main` (the graph function, on tensors) into private functions of a few groups each;
    returns the chunks for `restore` (none where the function holds too few groups to gain anything)."""
    _sink_producers(main)
    block = main.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    body, terminator = ops[:-1], ops[-1]
    spans = _spans(body)
    if len(spans) < 2:
        return []
    chunks = []
    for n, (a, b) in enumerate(spans):
        span = set(body[a:b])
        # Ops that read nothing move along where only this chunk reads them (so every op keeps its place).
        members = [op for op in body[a:b] if not _free(op) or all(_top(_owner(u), main) in span
                                                                    for r in op.results for u in r.uses)]
        if not any(tagged_group(op) is not None for op in members):
            continue
        chunks.append(_outline_one(main, members, body[b] if b < len(body) else terminator, f"{PREFIX}_{n}"))
    return chunks


def _outline_one(main: ir.Operation, members: list[ir.Operation], after: ir.Operation, name: str) -> Chunk:
    inside = set(members)
    reads: list[ir.Value] = []  # values from outside the chunk, in first-use order
    seen: set = set()

    def collect(op):
        for v in op.operands:
            if isinstance(v, ir.OpResult) and _top(ir.OpResult(v).owner.operation, main) in inside:
                continue
            if isinstance(v, ir.BlockArgument) and ir.BlockArgument(v).owner.owner != main:
                continue  # a region argument inside a member
            if v not in seen:
                seen.add(v)
                reads.append(v)
        return ir.WalkResult.ADVANCE

    for op in members:
        op.walk(collect)
    written = [r for op in members for r in op.results if any(_top(_owner(u), main) not in inside for u in r.uses)]
    free = [v for v in reads if isinstance(v, ir.OpResult) and _free(ir.OpResult(v).owner.operation)]
    args = [v for v in reads if v not in set(free)]
    with ir.InsertionPoint(main):
        fn = func.FuncOp(name, ir.FunctionType.get([v.type for v in args], [v.type for v in written]),
                         visibility="private")
    entry = fn.add_entry_block()
    with ir.InsertionPoint(entry):
        ret = func.ReturnOp(written)
    with ir.InsertionPoint(after):
        call = func.CallOp([v.type for v in written], ir.FlatSymbolRefAttr.get(name), args)
    for op in members:
        op.move_before(ret.operation)
    replace = dict(zip(args, entry.arguments))
    clones: dict = {}
    with ir.InsertionPoint.at_block_begin(entry):
        for v in free:
            original = ir.OpResult(v).owner.operation
            if original not in clones:
                clones[original] = original.clone()
            replace[v] = clones[original].results[ir.OpResult(v).result_number]
    for old, new in replace.items():
        for use in list(old.uses):
            owner = _owner(use)
            if _top(owner, fn.operation) is not None:
                owner.operands[use.operand_number] = new
    for old, new in zip(written, call.results):
        for use in list(old.uses):
            owner = _owner(use)
            if _top(owner, fn.operation) is None:
                owner.operands[use.operand_number] = new
    return Chunk(call.operation, fn.operation, [(c.operation, o) for o, c in clones.items()])


def restore(chunks: list[Chunk]) -> None:
    """Put every chunk's ops back in place of its call (the inverse of `outline`)."""
    for ch in chunks:
        entry = ch.fn.regions[0].blocks[0]
        ops = [op.operation for op in entry.operations]
        ret = ops[-1]
        for clone, original in ch.clones:  # the originals again, where they were
            for a, b in zip(clone.results, original.results):
                a.replace_all_uses_with(b)
        cloned = {c for c, _ in ch.clones}
        for op in ops[:-1]:
            if op in cloned:
                op.erase()
            else:
                op.move_before(ch.call)
        for arg, value in zip(entry.arguments, ch.call.operands):
            arg.replace_all_uses_with(value)
        for result, value in zip(ch.call.results, ret.operands):
            result.replace_all_uses_with(value)
        ch.call.erase()
        ch.fn.erase()


__all__ = ["GROUPS_PER_CHUNK", "Chunk", "outline", "restore"]
