"""Scalars computed at the top level of the function (host scalars) moved into the kernels that use them.

A `tensor.extract` at the top level (DynamicQuantizeLinear's scale and zero point, MelWeightMatrix's and
STFT's scalar inputs), and the arith/math ops on its result, would run on the host between kernels, which
the plan cannot do. Each linalg.generic that uses such a scalar (as an operand, or captured in its body)
gets its own copy of the scalar's computation at the start of its body; an extract at constant indices
becomes an input of the generic instead, read through a constant indexing map (a broadcast), so the op
stays elementwise; other extracts are read in the body (a gather). The top-level ops then have no uses left
and go.
"""

from __future__ import annotations

from ...errors import UnsupportedOp
from ...ir.linalg_info import indexing_maps, iterator_types, num_inputs
from ...ir.mlir import ir
from .generics import rebuild_generic


def is_host_scalar_op(op: ir.Operation) -> bool:
    """A top-level op computing a scalar on the host: tensor.extract, or an arith/math op (not a constant)
    with only scalar results."""
    if op.name == "tensor.extract":
        return True
    if not op.name.startswith(("arith.", "math.")) or op.name == "arith.constant" or not len(op.results):
        return False
    return all(not isinstance(r.type, ir.ShapedType) for r in op.results)


def sink_host_scalars(func_op: ir.Operation) -> None:
    """Move host scalars into the linalg.generic ops that use them; drop the host ops left without uses."""
    block = func_op.regions[0].blocks[0]
    ops = [op.operation for op in block.operations]
    order = {op: n for n, op in enumerate(ops)}
    host_ops = [op for op in ops if is_host_scalar_op(op)]
    if not host_ops:
        return
    host = set(host_ops)
    for op in ops:
        if op.name == "linalg.generic":
            _sink_into(op, host, order)
    for op in reversed(host_ops):
        if all(not list(r.uses) for r in op.results):
            op.erase()
        elif op.name == "tensor.extract":
            user = _top_level_user(op, block)
            raise UnsupportedOp(
                f"a scalar read from a tensor on the top level ({_line(op)}) is used by '{user.name}' ({_line(user)}): "
                f"only scalars used inside linalg ops can move into kernels (a loop bound, shape or slice offset "
                f"that depends on tensor values is not supported)")


def _top_level_user(op: ir.Operation, block: ir.Block) -> ir.Operation:
    """The op of `block` that (itself, or an op nested in it) uses a result of `op` or of the host ops computed
    from it; the first found."""
    todo, seen = [op], set()
    while todo:
        o = todo.pop()
        if o in seen:
            continue
        seen.add(o)
        for r in o.results:
            for u in r.uses:
                user = u.owner.operation
                while user.parent is not None and user.parent.operation != block.owner.operation:
                    user = user.parent.operation
                if is_host_scalar_op(user):
                    todo.append(user)
                else:
                    return user
    return op


def _line(op: ir.Operation) -> str:
    return str(op).splitlines()[0].strip()[:160]


def _host_value(v: ir.Value, host: set) -> bool:
    return isinstance(v, ir.OpResult) and v.owner.operation in host


def _constant_index(v: ir.Value) -> int | None:
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.constant":
        return ir.IntegerAttr(v.owner.attributes["value"]).value
    return None


def _used_host_values(gen: ir.Operation, host: set) -> list[ir.Value]:
    """Host values `gen` uses: as an input operand or anywhere in its body."""
    found: list[ir.Value] = [v for v in list(gen.operands)[:num_inputs(gen)] if _host_value(v, host)]

    def visit(o):
        found.extend(v for v in o.operands if _host_value(v, host))
        return ir.WalkResult.ADVANCE

    for o in gen.regions[0].blocks[0].operations:
        o.operation.walk(visit)
    return found


def _closure(values: list[ir.Value], host: set, order: dict) -> list[ir.Operation]:
    """The host ops computing `values`, in block order."""
    seen: set = set()
    todo = [v.owner.operation for v in values]
    while todo:
        op = todo.pop()
        if op in seen:
            continue
        seen.add(op)
        todo.extend(v.owner.operation for v in op.operands if _host_value(v, host))
    return sorted(seen, key=lambda op: order[op])


def _as_input(op: ir.Operation) -> list[int] | None:
    """The constant indices of a tensor.extract that can become an input of the generic, else None."""
    if op.name != "tensor.extract":
        return None
    idx = [_constant_index(v) for v in list(op.operands)[1:]]
    return None if any(i is None for i in idx) else idx


def _sink_into(gen: ir.Operation, host: set, order: dict) -> None:
    used = _used_host_values(gen, host)
    if not used:
        return
    nin = num_inputs(gen)
    ins, outs = list(gen.operands)[:nin], list(gen.operands)[nin:]
    maps, n_loops = indexing_maps(gen), len(iterator_types(gen))
    block = gen.regions[0].blocks[0]
    first = list(block.operations)[0]
    # New inputs (the extracted tensor, read at constant indices) become block arguments after the outputs,
    # until the generic is rebuilt with them among its inputs.
    new_ins: list[ir.Value] = []
    new_maps: list[ir.AffineMap] = []
    mapping: dict = {}
    inputs_at: dict = {}
    for op in _closure(used, host, order):
        idx = _as_input(op)
        if idx is not None:
            key = (op.operands[0], tuple(idx))
            if key not in inputs_at:
                t = ir.RankedTensorType(op.operands[0].type)
                inputs_at[key] = block.add_argument(t.element_type, op.location)
                new_ins.append(op.operands[0])
                new_maps.append(ir.AffineMap.get(n_loops, 0, [ir.AffineConstantExpr.get(i) for i in idx]))
            mapping[op.results[0]] = inputs_at[key]
            continue
        clone = op.clone(ir.InsertionPoint(first)).operation
        for i, v in enumerate(list(clone.operands)):
            if v in mapping:
                clone.operands[i] = mapping[v]
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    # Uses in the body (nested regions too), then scalar input operands, which the rebuild drops.
    _remap_uses(block, mapping)
    kept = [i for i, v in enumerate(ins) if not _host_value(v, host)]
    for i, v in enumerate(ins):
        if i not in kept:
            block.arguments[i].replace_all_uses_with(mapping[v])
    n_kept = len(kept)
    arg_map = [kept.index(i) if i in kept else 0 for i in range(nin)]
    arg_map += [n_kept + len(new_ins) + j for j in range(len(outs))]
    arg_map += [n_kept + k for k in range(len(new_ins))]
    all_ins = [ins[i] for i in kept] + new_ins
    all_maps = [maps[i] for i in kept] + new_maps + maps[nin:]
    new = rebuild_generic(gen, all_ins, outs, all_maps, iterator_types(gen), arg_map, [r.type for r in gen.results])
    for old, r in zip(gen.results, new.results):
        old.replace_all_uses_with(r)
    gen.erase()


def _remap_uses(block: ir.Block, mapping: dict) -> None:
    def visit(o):
        for i, v in enumerate(list(o.operands)):
            if v in mapping:
                o.operands[i] = mapping[v]
        return ir.WalkResult.ADVANCE

    for o in block.operations:
        o.operation.walk(visit)
