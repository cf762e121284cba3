"""Dispatch formation: which linalg ops become one kernel.

A group is a root op (matmul, conv, reduction, elementwise, ...) plus what is fused into its kernel:
the fills that produce its operands, and elementwise consumers of its result (epilogues such as
bias + activation). Consumers are rewritten to update the root's result in place, so that tiling the last
consumer and fusing the rest into its loops gives one kernel with no temporary buffer.
On profiles that allow it (`row_fusion_private_bytes` on CPU drivers, `row_fusion_shared_bytes` on GPUs), a
row chain (row_chains.py: a row reduction with the elementwise ops and reductions that consume it, such as
softmax or layernorm) is one group, tiled by whole rows; rows the device's memory cannot hold are computed again
where they are read (row_chains.recompute).
Every op of a group is tagged `portable.op = "g<group>_<order>"`: order 0 is the op that is tiled, the rest
are fused into it in increasing order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import UnsupportedOp
from ...ir import locations
from ...ir.linalg_info import OpKind, classify, indexing_maps, is_identity, is_structured, iterator_types, num_inputs
from ...ir.mlir import ir
from ...profiles import Options
from ..graph.generics import rebuild_generic
from ..graph.horizontal import VIEW
from ..strategy import tiles
from .row_chains import find_chains, private_bytes, shared_bytes

# Ops allowed in the function body outside linalg: they bufferize to views, constants or nothing.
_PASSIVE = {
    "arith.constant", "tensor.empty", "tensor.collapse_shape", "tensor.expand_shape", "func.return",
}


@dataclass
class Group:
    index: int
    root: ir.Operation
    kind: OpKind
    consumers: list[ir.Operation] = field(default_factory=list)
    producers: list[ir.Operation] = field(default_factory=list)
    # A row chain (see row_chains.py): its ops in block order, the last one tiled; kind.kind is "row".
    chain: list[ir.Operation] = field(default_factory=list)

    @property
    def target(self) -> ir.Operation:
        if self.chain:
            return self.chain[-1]
        return self.consumers[-1] if self.consumers else self.root

    def fused(self) -> list[ir.Operation]:
        """Ops fused into the target's loops, in the order fusion must happen (consumers first)."""
        if self.chain:
            return list(reversed(self.chain[:-1])) + self.producers
        return list(reversed(self.consumers[:-1])) + ([self.root] if self.consumers else []) + self.producers


TAG = "portable.op"  # on every op of a group: "g<group>_<order>"


def _defining_op(value: ir.Value) -> ir.Operation | None:
    if not isinstance(value, ir.OpResult):
        return None  # a block argument
    return ir.OpResult(value).owner.operation


def _uses(value: ir.Value) -> list[ir.Operation]:
    return [u.owner.operation for u in value.uses]


def _make_in_place(consumer: ir.Operation, operand_index: int) -> ir.Operation | None:
    """Rewrite elementwise `consumer` so input `operand_index` becomes its output (updated in place).
    Returns the new op, or None when the shapes or body do not allow it."""
    nin = num_inputs(consumer)
    maps = indexing_maps(consumer)
    ins = list(consumer.operands)[:nin]
    outs = list(consumer.operands)[nin:]
    if len(outs) != 1 or len(consumer.results) != 1:
        return None
    src = ins[operand_index]
    if src.type != outs[0].type or not is_identity(maps[operand_index]) or not is_identity(maps[nin]):
        return None
    block = consumer.regions[0].blocks[0]
    out_arg = block.arguments[nin]
    if len(list(out_arg.uses)) != 0:
        return None
    new_ins = [v for i, v in enumerate(ins) if i != operand_index]
    new_maps = [m for i, m in enumerate(maps) if i != operand_index]  # the output map stays last
    # Old block arguments -> new: other inputs keep their order, the consumed input becomes the output.
    others = iter(range(len(new_ins)))
    arg_map = [len(new_ins) if i in (operand_index, nin) else next(others) for i in range(nin + 1)]
    new = rebuild_generic(consumer, new_ins, [src], new_maps, iterator_types(consumer), arg_map,
                          [consumer.results[0].type])
    consumer.results[0].replace_all_uses_with(new.results[0])
    consumer.erase()
    return new


def _own_fills(op: ir.Operation) -> list[ir.Operation]:
    """The fills producing `op`'s operands, to be fused into its kernel; a fill shared with other ops (CSE
    merges identical ones) is cloned so each kernel computes its own."""
    fills = []
    for v in list(op.operands):
        p = _defining_op(v)
        if p is None or p.name != "linalg.generic" or classify(p).kind != "fill":
            continue
        if len(_uses(v)) > 1:
            clone = p.clone(ir.InsertionPoint(op))
            op.operation.replace_uses_of_with(v, clone.results[0])
            p = clone.operation
        fills.append(p)
    return fills


def _own_empty_init(op: ir.Operation) -> None:
    """Give an op its own tensor.empty init: a fused producer that shared the tiled op's init would be made to
    write into the kernel's output (and, given a buffer of its own, copy it there first)."""
    init = list(op.operands)[num_inputs(op)]
    p = _defining_op(init)
    if p is None or p.name != "tensor.empty" or len(_uses(init)) == 1:
        return
    clone = p.clone(ir.InsertionPoint(op))
    op.operation.replace_uses_of_with(init, clone.results[0])


def row_chain_fits(o: Options | None) -> Callable[[list[ir.Operation]], bool] | None:
    """Which row chains (row_chains.py) this profile runs as one kernel; None: none. CPU profiles run a row per
    thread, keeping rows in private memory up to `row_fusion_private_bytes`; profiles that share reductions
    over a workgroup (`reduction_threads`, GPUs) run a row per workgroup, keeping rows in workgroup memory up to
    `row_fusion_shared_bytes`, with rows long enough to share (tiles.row_threads) and a grid the device takes.
    Rows that do not fit are computed again where they are read (row_chains.recompute)."""
    if o is None:
        return None
    t = o.reduction_threads or 0
    if not t:
        budget = o.row_fusion_private_bytes or 0
        limit = o.max_loop_iterations or 0
        width = o.loop_vectorize or 1

        def fits_private(chain: list[ir.Operation]) -> bool:
            # A thread walks its row once per op, `loop_vectorize` columns a step where they divide the row (else
            # one): lavapipe cuts an invocation off past max_loop_iterations, counted over all its loops (softmax
            # over 100000 columns, or 65537, came back wrong; 3 x 21845 steps too). An eighth is kept for the
            # kernel's other loops.
            cols = classify(chain[-1]).ranges[-1]
            passes = len(chain) * (cols // width if cols % width == 0 else cols)
            return private_bytes(chain) <= budget and (not limit or passes <= limit - limit // 8)

        return fits_private if budget else None
    shared = o.row_fusion_shared_bytes or 0
    if not shared:
        return None
    max_count = list(o.max_workgroup_count or (65535, 65535, 65535))

    def fits(chain: list[ir.Operation]) -> bool:
        ranges = classify(chain[-1]).ranges
        long = [r for r in ranges[:-1] if r > 1]  # unit row loops take no grid dim (strategy.choice)
        grid_ok = len(long) <= 3 and all(r <= m for r, m in zip(reversed(long), max_count))
        if len(long) == 1 and long[0] > max_count[0]:  # one loop of rows: workgroups take several (serial_rows.py)
            grid_ok = tiles.serial_rows(long[0], ranges[-1], 0, max_count[0]) is not None
        threads = tiles.row_threads(t, ranges[-1])
        return grid_ok and threads > 0 and shared_bytes(chain, threads) <= shared

    return fits


def narrows(consumer: ir.Operation, operand_index: int) -> bool:
    """Whether elementwise `consumer` reads input `operand_index` only to round it to its own output's narrower
    float type first (an f16 model's f32-accumulated product, then its epilogue in f16): identity maps, a fresh
    output it does not read."""
    nin = num_inputs(consumer)
    maps = indexing_maps(consumer)
    if len(consumer.results) != 1 or len(consumer.operands) != nin + 1 or not is_identity(maps[operand_index]) \
            or not is_identity(maps[nin]):
        return False
    block = consumer.regions[0].blocks[0]
    uses = [u.owner for u in block.arguments[operand_index].uses]
    out = ir.RankedTensorType(consumer.results[0].type).element_type
    init = _defining_op(consumer.operands[nin])
    return not list(block.arguments[nin].uses) and len(uses) == 1 and uses[0].name == "arith.truncf" and \
        uses[0].results[0].type == out and init is not None and init.name == "tensor.empty"


def form_groups(func_op: ir.Operation, options: Options | None = None,
                narrowing: Callable[[Group], bool] | None = None) -> list[Group]:
    """Partition the body of `func_op` (generalized linalg on tensors) into dispatch groups and tag them.
    `narrowing(group)`: whether a group whose one consumer rounds its product to a narrower type (`narrows`) is
    one kernel (cooperative-matrix matmuls round their fragments: compiler/schedule/coop_narrow.py); else such a
    consumer is a kernel of its own."""
    block = func_op.regions[0].blocks[0]
    groups: list[Group] = []
    group_of_result: dict[ir.Value, Group] = {}  # result -> group whose last op produced it
    # Row chains, found before any op is rewritten; ops are compared by identity (their hash follows their
    # contents, which fusing fills changes).
    o = None if options is None else Options.of(options)
    fits = row_chain_fits(o)
    chains = find_chains(func_op, fits, single=bool(o and o.reduction_threads)) if fits else []
    chain_group: dict[int, Group] = {}

    def key(v: ir.Value) -> ir.Value:
        # The value itself (hashed by what it refers to): its printed name numbers the whole function each time.
        # Keyed values stay alive; only the op being joined, not yet a key, is erased.
        return v

    for op in list(block.operations):
        name = op.name
        if name in _PASSIVE or (name == "tensor.extract_slice" and VIEW in op.attributes):
            continue  # bufferization makes these views of their source (horizontal.py's slices)
        if not is_structured(op):
            raise UnsupportedOp(
                f"op '{name}'{locations.of_op(op)} is not supported by the compiler yet (only linalg/tensor/arith/"
                f"math ops on tensors are): {str(op).splitlines()[0][:200]}"
            )
        kind = classify(op)
        if kind.kind == "fill":
            continue  # fused into the op that consumes it
        chain = next((c for c in chains if any(op.operation == x for x in c)), None)
        if chain is not None:
            if id(chain) not in chain_group:
                t = classify(chain[-1])
                chain_group[id(chain)] = Group(index=len(groups), root=chain[0], chain=chain,
                                               kind=OpKind("row", t.ranges, t.iterators, t.gathers))
                groups.append(chain_group[id(chain)])
            chain_group[id(chain)].producers.extend(_own_fills(op))
            if not any(op.operation == x for x in chain[-1:]):
                _own_empty_init(op)
            continue
        if not kind.ranges:
            raise UnsupportedOp(f"linalg op{locations.of_op(op)} with dynamic shapes is not supported yet: "
                                f"{str(op).splitlines()[0][:200]}")
        # An elementwise op whose input is the sole use of a group's result joins that group in place.
        if kind.kind == "elementwise":
            nin = num_inputs(op)
            joined = False
            for i, v in enumerate(list(op.operands)[:nin]):
                g = group_of_result.get(key(v))
                if g is None or len(_uses(v)) != 1 or \
                        len(kind.ranges) != len(g.kind.ranges) - g.kind.iterators.count("reduction"):
                    continue
                new = _make_in_place(op, i)
                if new is None and narrowing is not None and not g.consumers and narrows(op, i) and \
                        narrowing(Group(index=g.index, root=g.root, kind=g.kind, consumers=[op],
                                        producers=g.producers)):
                    new = op  # out of place: its output is the kernel's
                if new is None:
                    continue
                g.consumers.append(new)
                g.producers.extend(_own_fills(new))  # e.g. a constant-filled operand of the epilogue
                group_of_result[key(new.results[0])] = g
                joined = True
                break
            if joined:
                continue
        g = Group(index=len(groups), root=op, kind=kind)
        g.producers.extend(_own_fills(op))
        groups.append(g)
        group_of_result[key(op.results[0])] = g

    for g in groups:
        ops = [g.target] + g.fused()
        for j, op in enumerate(ops):
            op.attributes[TAG] = ir.StringAttr.get(f"g{g.index}_{j}")
    return groups


def tagged_group(op: ir.Operation) -> int | None:
    """The index of the group whose TAG `op` carries, if any."""
    if TAG not in op.attributes:
        return None
    return int(ir.StringAttr(op.attributes[TAG]).value[1:].split("_")[0])
