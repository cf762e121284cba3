"""ArgMax / ArgMin as two single-result reductions, so that GPUs share each across a workgroup.

The importer lowers ArgMax to one reduction with two results, the running value and its index. A workgroup cannot
split that (its combiner would have to carry both), so on a GPU it ran as one thread per output: a greedy decode
step's ArgMax over 2048 logits took 42 us on the H200 (benchmarks/results/h200/session15/greedy_on_device/), a
fifth of the step. Here it becomes

    m   = max over k of x[k]                                    (the op's value result, as before)
    idx = min over k of (x[k] == m or x[k] is NaN ? k : K)      (the first index of the maximum)

each a plain reduction the workgroup strategy takes. The index is the first occurrence of the extreme value, as
before; where x holds a NaN it is the first NaN's (as numpy's and PyTorch's argmax), where the importer's one-pass
form kept the index of the maximum before it. On CPU drivers, where a reduction is a thread's loop anyway, ArgMax
stays one pass, its index moved to the first NaN there too, so every device gives the same index.
"""

from __future__ import annotations

from ...ir.linalg_info import indexing_maps, iterator_types, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor

# The comparison that moves the index -> the op that keeps the value: ArgMax, ArgMin.
_EXTREME = {int(arith.CmpFPredicate.OGT): "arith.maximumf", int(arith.CmpFPredicate.OLT): "arith.minimumf"}


def _match(op: ir.Operation) -> ir.Operation | None:
    """The value op (maximumf / minimumf) when `op` is an ArgMax/ArgMin of the importer's form, else None:
    v' = extreme(x, v); i' = x <cmp> v ? index : i."""
    if op.name != "linalg.generic" or num_inputs(op) != 1 or len(op.results) != 2:
        return None
    its = iterator_types(op)
    if its.count("reduction") != 1:
        return None
    red = its.index("reduction")
    block = op.regions[0].blocks[0]
    x, out_v, out_i = block.arguments
    ops = list(block.operations)
    if not isinstance(out_v.type, ir.FloatType) or not isinstance(out_i.type, ir.IntegerType) or len(ops) != 6:
        return None
    index, cast, value, cmp, select, yield_ = ops
    if index.name != "linalg.index" or ir.IntegerAttr(index.attributes["dim"]).value != red:
        return None
    if cast.name != "arith.index_cast" or cast.operands[0] != index.results[0] or cmp.name != "arith.cmpf":
        return None
    if value.name != _EXTREME.get(ir.IntegerAttr(cmp.attributes["predicate"]).value) or \
            list(cmp.operands) != [x, out_v] or set(value.operands) != {x, out_v}:
        return None
    if select.name != "arith.select" or list(select.operands) != [cmp.results[0], cast.results[0], out_i]:
        return None
    if list(yield_.operands) != [value.results[0], select.results[0]]:
        return None
    return value


def arg_reductions(func_op: ir.Operation, split: bool) -> int:
    """Each ArgMax/ArgMin of the function as two reductions (`split`, GPUs), else as one whose index also moves to
    the first NaN; returns how many."""
    count = 0
    for op in list(func_op.regions[0].blocks[0].operations):
        value_op = _match(op.operation)
        if value_op is None:
            continue
        # The split form writes a per-element candidate shaped like x: x's loops must be its dims, in some order.
        x_map = indexing_maps(op.operation)[0]
        (_split if split and x_map.is_permutation else _first_nan)(op.operation, value_op)
        count += 1
    return count


def _first_nan(op: ir.Operation, value_op: ir.Operation) -> None:
    """The one-pass form, its index moved also by the first NaN (the value turns NaN there and stays so)."""
    block = op.regions[0].blocks[0]
    x, v, _ = block.arguments
    cmp, select = list(block.operations)[3:5]
    with ir.InsertionPoint(select), op.location:
        nan_now = arith.AndIOp(arith.CmpFOp(arith.CmpFPredicate.UNO, x, x).result,
                               arith.CmpFOp(arith.CmpFPredicate.ORD, v, v).result).result
        take = arith.OrIOp(cmp.results[0], nan_now).result
    select.operands[0] = take


def _split(op: ir.Operation, value_op: ir.Operation) -> None:
    maps = indexing_maps(op)
    its = iterator_types(op)
    red = its.index("reduction")
    x, init_v, init_i = op.operands
    k = ir.RankedTensorType(x.type).shape[[ir.AffineDimExpr(e).position for e in maps[0].results].index(red)]
    elem_v = ir.RankedTensorType(init_v.type).element_type
    out_i = ir.RankedTensorType(init_i.type)
    # The index reduces as i32 (subgroup shuffles take 32-bit values), widened after where the op's is wider.
    elem_i = ir.IntegerType.get_signless(32)
    shape = list(out_i.shape)
    iterators = ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in its])
    with ir.InsertionPoint(op), op.location:
        extreme = linalg.GenericOp([init_v.type], [x], [init_v],
                                   ir.ArrayAttr.get([ir.AffineMapAttr.get(maps[0]), ir.AffineMapAttr.get(maps[1])]),
                                   iterators)
        body = extreme.regions[0].blocks.append(elem_v, elem_v)
        with ir.InsertionPoint(body):
            v = ir.Operation.create(value_op.name, results=[elem_v], operands=list(body.arguments))
            linalg.YieldOp([v.results[0]])
        # As softmax's row: a reduction, an elementwise op reading its result, a reduction (one row chain).
        par = ir.Attribute.parse("#linalg.iterator_type<parallel>")
        x_shape = list(ir.RankedTensorType(x.type).shape)
        cand = linalg.GenericOp([ir.RankedTensorType.get(x_shape, elem_i)], [x, extreme.results[0]],
                                [tensor.EmptyOp(x_shape, elem_i).result],
                                ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (maps[0], maps[1], maps[0])]),
                                ir.ArrayAttr.get([par] * len(its)))
        body = cand.regions[0].blocks.append(elem_v, elem_v, elem_i)
        past = arith.ConstantOp(elem_i, ir.IntegerAttr.get(elem_i, k)).result
        with ir.InsertionPoint(body):
            xv, mv, _ = body.arguments
            j = arith.IndexCastOp(elem_i, linalg.IndexOp(ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                            red)).result).result
            hit = arith.OrIOp(arith.CmpFOp(arith.CmpFPredicate.OEQ, xv, mv).result,
                              arith.CmpFOp(arith.CmpFPredicate.UNO, xv, xv).result).result
            linalg.YieldOp([arith.SelectOp(hit, j, past).result])
        first_init = linalg.fill(past, outs=[tensor.EmptyOp(shape, elem_i).result])
        first = linalg.GenericOp([ir.RankedTensorType.get(shape, elem_i)], [cand.results[0]], [first_init],
                                 ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (maps[0], maps[2])]),
                                 iterators)
        body = first.regions[0].blocks.append(elem_i, elem_i)
        with ir.InsertionPoint(body):
            linalg.YieldOp([arith.MinSIOp(*body.arguments).result])
    index = first.results[0]
    if out_i.element_type != elem_i:
        with ir.InsertionPoint(op), op.location:
            n = len(shape)
            identity = ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))
            wide = linalg.GenericOp([out_i], [index], [tensor.EmptyOp(shape, out_i.element_type).result],
                                    ir.ArrayAttr.get([identity, identity]),
                                    ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * n))
            body = wide.regions[0].blocks.append(elem_i, out_i.element_type)
            with ir.InsertionPoint(body):
                linalg.YieldOp([arith.ExtSIOp(out_i.element_type, body.arguments[0]).result])
        index = wide.results[0]
    op.results[0].replace_all_uses_with(extreme.results[0])
    op.results[1].replace_all_uses_with(index)
    op.erase()

