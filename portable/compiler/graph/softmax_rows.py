"""A softmax's normalization taken back out of the product that reads it, so that the softmax is one kernel.

Upstream elementwise fusion moves p = e / s (e = exp(x - max) over a row, s = the sum of that row) into the
product that reads p: attention's values product becomes out[d] += e[t] / s * v[t, d]. e then has two readers,
the row's sum and the product, and a row chain (dispatch/row_chains.py) ends at an op read outside it: the
softmax ran as two kernels (max and exp; then the sum) ahead of the product. Taken out again as an elementwise op
of its own, the division ends the chain max, exp, sum, divide, one kernel, and the product reads p: one kernel
less per attention (on a GPU a dependent kernel costs a few microseconds however little it does), the same
bytes read by the product, and a division per p instead of one per product iteration.

Only that form: a reduction whose body yields out + (a / b) * w, with a read along the reduced loop and b the
result of a reduction over the rows a comes from (through reshapes), b's loops among a's.
"""

from __future__ import annotations

from ...ir.linalg_info import dims_in_order, indexing_maps, iterator_types, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import unreshaped
from ...profiles import Options
from ..dispatch.groups import row_chain_fits
from .generics import rebuild_generic


def _row_sum_of(b: ir.Value, a: ir.Value) -> bool:
    """Whether `b` is a reduction (one reduced loop) whose only input is `a`, reshapes aside."""
    b = unreshaped(b)
    if not isinstance(b, ir.OpResult) or b.owner.name != "linalg.generic":
        return False
    r = b.owner.operation
    return num_inputs(r) == 1 and iterator_types(r).count("reduction") == 1 and \
        unreshaped(r.operands[0]) == unreshaped(a)


def _match(op: ir.Operation) -> tuple[int, int, ir.Operation, list] | None:
    """(input of a, input of b, the division, b's index as exprs of a's dims) when `op`'s body is out + (a / b) * w
    as the module says."""
    if op.name != "linalg.generic" or len(op.results) != 1 or iterator_types(op).count("reduction") != 1:
        return None
    nin = num_inputs(op)
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    ops = list(block.operations)
    (value,) = ops[-1].operands
    if not isinstance(value, ir.OpResult) or value.owner.name != "arith.addf" or args[nin] not in \
            list(value.owner.operands):
        return None
    mul = next((v for v in value.owner.operands if v != args[nin]), None)
    if not isinstance(mul, ir.OpResult) or mul.owner.name != "arith.mulf":
        return None
    div = next((v.owner for v in mul.owner.operands if isinstance(v, ir.OpResult) and v.owner.name == "arith.divf"),
               None)
    if div is None or len(list(div.results[0].uses)) != 1:
        return None
    a, b = div.operands
    if not (isinstance(a, ir.BlockArgument) and isinstance(b, ir.BlockArgument)) or a.arg_number >= nin or \
            b.arg_number >= nin or a.arg_number == b.arg_number or len(list(a.uses)) != 1:
        return None
    maps = indexing_maps(op)
    red = iterator_types(op).index("reduction")
    da, db = dims_in_order(maps[a.arg_number]), dims_in_order(maps[b.arg_number])
    if da is None or db is None or red not in da or red in db or not set(db) <= set(da) or len(set(da)) != len(da):
        return None
    if not _row_sum_of(op.operands[b.arg_number], op.operands[a.arg_number]):
        return None
    return a.arg_number, b.arg_number, div, [ir.AffineDimExpr.get(da.index(d)) for d in db]


def _divide(a: ir.Value, b: ir.Value, b_index: list) -> ir.Value:
    """p = a / b elementwise over a's shape, b read at `b_index` (affine exprs of a's dims)."""
    at = ir.RankedTensorType(a.type)
    n = at.rank
    empty = tensor.EmptyOp(list(at.shape), at.element_type).result
    ident = ir.AffineMap.get_identity(n)
    bmap = ir.AffineMap.get(n, 0, b_index)
    op = linalg.GenericOp(
        [at], [a, b], [empty],
        ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (ident, bmap, ident)]),
        ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * n))
    et = at.element_type
    block = op.regions[0].blocks.append(et, ir.RankedTensorType(b.type).element_type, et)
    with ir.InsertionPoint(block):
        q = arith.DivFOp(block.arguments[0], block.arguments[1]).result
        linalg.YieldOp([q])
    return op.results[0]


def _divide_rows(a: ir.Value, b: ir.Value) -> ir.Value | None:
    """p = a / b computed in the shape the softmax ran in, then reshaped as the product reads it, when a is a
    reshape (tensor.expand_shape) of the rows and b, reshapes aside, their sums with the reduced dim kept: the
    division then has the rows' shape and joins their row chain (a grouped-query attention's product reads the
    heads split into (KV heads, group)). None otherwise."""
    if not (isinstance(a, ir.OpResult) and a.owner.name == "tensor.expand_shape"):
        return None
    expand = a.owner.operation
    rows, sums = expand.operands[0], unreshaped(b)
    rs, ss = ir.RankedTensorType(rows.type).shape, ir.RankedTensorType(sums.type).shape
    if len(rs) != len(ss) or any(s not in (1, r) for r, s in zip(rs, ss)):
        return None
    p_rows = _divide(rows, sums, [ir.AffineDimExpr.get(j) if s == r else ir.AffineConstantExpr.get(0)
                                  for j, (r, s) in enumerate(zip(rs, ss))])
    reshaped = expand.clone()
    reshaped.operands[0] = p_rows
    return reshaped.results[0]


def _chain_fits(a: ir.Value, b: ir.Value, fits, o: Options | None) -> bool:
    """Whether the profile runs the softmax's rows as one chain once the division ends it: judged on the chain
    exp, sum, exp (the division keeps the shape of exp's rows). Rows too short to share a workgroup, or too long
    for its memory, stay kernels of their own, and a division of their own would be one kernel more. On a GPU
    profile, only where subgroups combine the reductions: the workgroup-memory combine of a chain with two
    reductions over rows read in two ranks fails to tile (the max reads the scores with one more unit dim than
    the ops after it), and the compile then drops every row chain."""
    e, s = unreshaped(a), unreshaped(b)
    if fits is None or not (isinstance(e, ir.OpResult) and e.owner.name == "linalg.generic"):
        return False
    if o is not None and o.reduction_threads and not o.subgroup_reduce:
        return False
    exp, total = e.owner.operation, s.owner.operation
    return fits([exp, total, exp])


def take_out_normalizations(func_op: ir.Operation, options: Options | None = None) -> bool:
    """Rewrite every matching product (module docstring) whose softmax the profile (`options`) then runs as one
    row chain; whether any changed."""
    o = Options.of(options) if options is not None else None
    fits = row_chain_fits(o)
    changed = False
    block = func_op.regions[0].blocks[0]
    for op in [x.operation for x in block.operations if x.operation.name == "linalg.generic"]:
        m = _match(op)
        if m is None:
            continue
        ia, ib, div, b_index = m
        maps = indexing_maps(op)
        a_val, b_val = op.operands[ia], op.operands[ib]
        if ir.RankedTensorType(a_val.type).element_type != ir.RankedTensorType(b_val.type).element_type or \
                not _chain_fits(a_val, b_val, fits, o):
            continue
        with ir.InsertionPoint(op), op.location:
            p = _divide_rows(a_val, b_val) or _divide(a_val, b_val, b_index)
        body = op.regions[0].blocks[0]
        a_arg, b_arg = body.arguments[ia], body.arguments[ib]
        div.results[0].replace_all_uses_with(a_arg)
        div.erase()
        nin = num_inputs(op)
        keep_b = len(list(b_arg.uses)) > 0
        ins = [p if i == ia else v for i, v in enumerate(list(op.operands)[:nin]) if keep_b or i != ib]
        outs = list(op.operands)[nin:]
        new_maps = [mp for i, mp in enumerate(maps) if keep_b or i != ib]
        arg_map, k = [], 0
        for i in range(len(body.arguments)):
            if i == ib and not keep_b:
                arg_map.append(None)
                continue
            arg_map.append(k)
            k += 1
        new = rebuild_generic(op, ins, outs, new_maps, iterator_types(op), arg_map, [r.type for r in op.results])
        op.results[0].replace_all_uses_with(new.results[0])
        op.erase()
        changed = True
    return changed
