"""Row reductions with too few rows for the device, split along the row into partial results.

A softmax or layernorm runs one workgroup per row (row_chains.py). Over a few long rows (8 rows of a million
columns; one row of logits at decode) that is a few workgroups on a GPU that holds a hundred or more: on the
H200, softmax 8x1048576 took 1.8 ms (Vulkan) and 2.2 ms (OpenCL) as one kernel, where reading its 32 MiB
takes ~10 us (benchmarks/results/h200/session23). Split each row of C columns into S slices instead:

    partial[r, s] = reduce over c of f(x[r, s, c])       (a row reduction over R*S rows of C/S columns)
    total[r]      = init[r] combined with reduce over s of partial[r, s]

and run the elementwise ops over the same rows on the [R, S, C/S] view too, reading the totals by broadcast, so
the kernels that follow have R*S rows as well. A partial reduction computes the elementwise ops it reads itself
(from the chain's inputs: nothing is written between the kernels but the partials and totals) and runs as a row
chain of its own (row_chains.find_chains with `single`: the slice read coalesced, combined by subgroups).

S is the smallest power of two that gives the profile's `fill_threads` threads at `reduction_threads` per row,
each slice at least MIN_SLICE columns, for rows long and few enough (MIN_ROW, ROW_SHARE: measured below). Only on
profiles that set both (GPU profiles that say how many threads fill the device): a CPU driver's few cores are
busy with a few rows.
"""

from __future__ import annotations

import math

from ...ir.linalg_info import dims_in_order, indexing_maps, is_identity, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...profiles import Options
from .generics import rebuild_generic
from .reduction_inputs import fuse_input

# Where it pays (H200, benchmarks/results/h200/session23/split_rows_{coalesced,limits}_*.json, device-only ms, one
# kernel -> split, Vulkan / OpenCL): softmax 8x1048576 1.742 -> 0.066 / 2.129 -> 0.153, layernorm 8x1048576
# 1.976 -> 0.065 / 1.115 -> 0.067, softmax 1x131072 0.130 -> 0.012 / 0.138 -> 0.047, 1x65536 0.065 -> 0.010 /
# 0.072 -> 0.052, 64x65536 0.068 -> 0.035 / 0.082 -> 0.061. Where it does not: OpenCL's five enqueues cost more
# than short rows gain (1x16384 0.019 -> 0.049, 1x32768 0.033 -> 0.039; Vulkan even), and layernorm 1x65536 on
# OpenCL (0.025 -> 0.041; Vulkan 0.060 -> 0.011). So: rows of MIN_ROW columns or more, on at most
# fill_threads / ROW_SHARE threads.
MIN_ROW = 65536
ROW_SHARE = 2
MIN_SLICE = 2048  # columns per slice at least: with 256 threads per row, 8 elements each
ROWS = "portable.split_rows"  # marks the split elementwise ops while the reductions take them in
# The combining op of a reduction's body and its identity (the partials' initial value).
IDENTITY = {"arith.addf": 0.0, "arith.maximumf": -math.inf, "arith.maxnumf": -math.inf,
            "arith.minimumf": math.inf, "arith.minnumf": math.inf}


def _combiner(op: ir.Operation) -> ir.Operation | None:
    """The body's op yielding out (+) v, where out is the output's block argument used only there."""
    block = op.regions[0].blocks[0]
    out = list(block.arguments)[-1]
    value = list(block.operations)[-1].operands[0]
    if not isinstance(value, ir.OpResult) or value.owner.name not in IDENTITY:
        return None
    comb = value.owner
    if out not in list(comb.operands) or len(list(out.uses)) != 1:
        return None
    return comb


def _row_maps(op: ir.Operation, n: int) -> list[bool] | None:
    """Per operand, whether it is read along the row (its last dim indexed by the last loop: split with it) or
    not (a value per row or a scalar); None where a map is not the loops it reads, in order."""
    out = []
    for amap in indexing_maps(op):
        dims = dims_in_order(amap)
        if dims is None or amap.n_dims != n:
            return None
        out.append(bool(dims) and dims[-1] == n - 1)
    return out


def _reduction(op: ir.Operation) -> tuple[list[int], list[bool]] | None:
    """(loop ranges, operands read along the row) of a reduction over its last loop into a value per row."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    ranges = loop_ranges(op)
    its = iterator_types(op)
    if ranges is None or len(ranges) < 2 or its != ["parallel"] * (len(ranges) - 1) + ["reduction"]:
        return None
    roles = _row_maps(op, len(ranges))
    n = len(ranges)
    if roles is None or not any(roles[:-1]) or _combiner(op) is None or \
            indexing_maps(op)[-1] != ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(i) for i in range(n - 1)]):
        return None
    if not isinstance(ir.RankedTensorType(op.results[0].type).element_type, ir.FloatType):
        return None
    return ranges, roles


def _elementwise(op: ir.Operation, ranges: list[int]) -> list[bool] | None:
    """Operands read along the row of an elementwise op over exactly these loops that writes whole rows."""
    if op.name != "linalg.generic" or loop_ranges(op) != ranges or iterator_types(op) != ["parallel"] * len(ranges):
        return None
    roles = _row_maps(op, len(ranges))
    if roles is None or not all(is_identity(m) for m in indexing_maps(op)[num_inputs(op):]):
        return None
    return roles


def _slices(rows: int, cols: int, threads: int, per_row: int) -> int:
    s = 1
    while rows * s * per_row < threads and cols % (2 * s) == 0 and cols // (2 * s) >= MIN_SLICE:
        s *= 2
    return s


def _expand(value: ir.Value, s: int) -> ir.Value:
    """`value`'s last dim (the row's columns) as [s, columns / s]."""
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    new = shape[:-1] + [s, shape[-1] // s]
    source = _reshaped_from(value)
    if source is not None and _no_units(ir.RankedTensorType(source.type).shape) == _no_units(new):
        return _add_units(source, new)  # the rows of an op split before this one (keepdims' [r, 1, c] too)
    groups = [[i] for i in range(len(shape) - 1)] + [[len(shape) - 1, len(shape)]]
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(new, t.element_type), value, groups, [], new).result


def _reshaped_from(value: ir.Value) -> ir.Value | None:
    """The value `value` reshapes, through its chain of collapse_shape / expand_shape ops."""
    source = None
    while isinstance(value, ir.OpResult) and value.owner.name in ("tensor.collapse_shape", "tensor.expand_shape"):
        value = source = value.owner.operands[0]
    return source


def _no_units(shape) -> list[int]:
    return [d for d in shape if d != 1]


def _unit_groups(source: list[int], shape: list[int]) -> list[list[int]] | None:
    """Reassociation that expands `source` into `shape` by inserting unit dims only; None if it does not."""
    groups: list[list[int]] = []
    j = 0
    for i, d in enumerate(shape):
        if j < len(source) and d == source[j] and (d != 1 or len(shape) - i == len(source) - j):
            groups.append([i])
            j += 1
        elif d == 1 and groups:
            groups[-1].append(i)
        elif d == 1:
            groups.append([i])  # leading unit dims join the first source dim below
        else:
            return None
    if j != len(source):
        return None
    while len(groups) > len(source):  # leading unit-only groups merge into the next
        groups[1] = groups[0] + groups[1]
        del groups[0]
    return groups


def _add_units(value: ir.Value, shape: list[int]) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    if list(t.shape) == shape:
        return value
    groups = _unit_groups(list(t.shape), shape)
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, t.element_type), value, groups, [], shape).result


def _with_unit_loops(op: ir.Operation, shape: list[int]) -> ir.Operation:
    """A copy of elementwise `op` computing its result as `shape` (its shape with unit dims inserted): loops of 1
    added, so the op reading it can take it in directly."""
    n = len(shape)
    groups = _unit_groups(list(ir.RankedTensorType(op.results[0].type).shape), shape)
    # Old loop j -> the new loop of its dim: the one of its group that is not a unit (else the group's first).
    pos = [next((i for i in g if shape[i] != 1), g[0]) for g in groups]
    maps = [ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(pos[ir.AffineDimExpr(e).position]) for e in m.results])
            for m in indexing_maps(op)]
    nin = num_inputs(op)
    maps[nin:] = [ir.AffineMap.get_identity(n)] * (len(maps) - nin)
    with ir.InsertionPoint(op), op.location:
        outs = [_add_units(v, shape) for v in list(op.operands)[nin:]]
    copy = op.clone(ir.InsertionPoint(op))
    new = rebuild_generic(copy, list(op.operands)[:nin], outs, maps, ["parallel"] * n, list(range(len(maps))),
                          [v.type for v in outs])
    copy.erase()
    return new.operation


def _collapse(value: ir.Value) -> ir.Value:
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    n = len(shape) - 1
    groups = [[i] for i in range(n - 1)] + [[n - 1, n]]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get(shape[:-2] + [shape[-2] * shape[-1]], t.element_type),
                                  value, groups).result


def _maps(op: ir.Operation, n: int) -> list[ir.AffineMap]:
    """The operands' maps over the n + 1 loops of the split op: the row's loop n - 1 becomes (slice, column)."""
    out = []
    for amap in indexing_maps(op):
        dims = []
        for e in amap.results:
            d = ir.AffineDimExpr(e).position
            dims += [d, n] if d == n - 1 else [d]
        out.append(ir.AffineMap.get(n + 1, 0, [ir.AffineDimExpr.get(d) for d in dims]))
    return out


def _operands(op: ir.Operation, roles: list[bool], s: int) -> list[ir.Value]:
    return [_expand(v, s) if split else v for v, split in zip(op.operands, roles)]


def _split_elementwise(op: ir.Operation, roles: list[bool], s: int) -> ir.Operation:
    n = len(loop_ranges(op))
    nin = num_inputs(op)
    with ir.InsertionPoint(op), op.location:
        vals = _operands(op, roles, s)
    new = rebuild_generic(op, vals[:nin], vals[nin:], _maps(op, n), ["parallel"] * (n + 1),
                          list(range(len(roles))), [v.type for v in vals[nin:]])
    with ir.InsertionPoint(op), op.location:
        for old, res in zip(op.results, new.results):
            old.replace_all_uses_with(_collapse(res))
    op.erase()
    return new.operation


def _split_reduction(op: ir.Operation, roles: list[bool], s: int) -> ir.Operation:
    n = len(loop_ranges(op))
    nin = num_inputs(op)
    comb = _combiner(op)
    init = op.operands[nin]
    t = ir.RankedTensorType(op.results[0].type)
    elem = t.element_type
    with ir.InsertionPoint(op), op.location:
        ins = _operands(op, roles, s)[:nin]
        shape = list(t.shape) + [s]
        partial_init = linalg.fill(arith.ConstantOp(elem, IDENTITY[comb.name]).result,
                                   outs=[tensor.EmptyOp(shape, elem).result])
    maps = _maps(op, n)[:nin] + [ir.AffineMap.get(n + 1, 0, [ir.AffineDimExpr.get(i) for i in range(n)])]
    partial = rebuild_generic(op, ins, [partial_init], maps, ["parallel"] * n + ["reduction"],
                              list(range(nin + 1)), [ir.RankedTensorType.get(shape, elem)])
    d = [ir.AffineDimExpr.get(i) for i in range(n)]
    with ir.InsertionPoint(op), op.location:
        total = linalg.GenericOp(
            [t], [partial.results[0]], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(n, 0, d)),
                              ir.AffineMapAttr.get(ir.AffineMap.get(n, 0, d[:-1]))]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ["parallel"] * (n - 1) + ["reduction"]]))
    body = total.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(body), op.location:
        attrs = {name: comb.attributes[name] for name in comb.attributes}
        both = ir.Operation.create(comb.name, results=[elem], operands=[body.arguments[0], body.arguments[1]],
                                   attributes=attrs)
        linalg.YieldOp([both.results[0]])
    op.results[0].replace_all_uses_with(total.results[0])
    op.erase()
    return partial.operation


def _key(ranges: list[int]) -> tuple[int, ...]:
    """Loops over the same rows: unit loops aside (keepdims' [r, 1, c] reductions read [r, c] rows)."""
    return tuple(_no_units(ranges[:-1])) + (ranges[-1],)


def slices(func_op: ir.Operation, o: Options) -> dict[tuple[int, ...], int]:
    """Rows (_key) of the function's row reductions with too few rows for the profile -> slices per row."""
    threads, per_row = o.fill_threads or 0, o.reduction_threads or 0
    out: dict[tuple[int, ...], int] = {}
    if not threads or not per_row:
        return out
    for op in func_op.regions[0].blocks[0].operations:
        found = _reduction(op.operation)
        if found is not None:
            ranges = found[0]
            rows = math.prod(ranges[:-1])
            if ranges[-1] < MIN_ROW or rows * per_row * ROW_SHARE > threads:
                continue
            s = _slices(rows, ranges[-1], threads, per_row)
            if s > 1:
                out[_key(ranges)] = s
    return out


def split_rows(func_op: ir.Operation, o: Options) -> int:
    """Every row reduction of the function with too few rows for the profile, and the elementwise ops over its
    rows; returns how many reductions were split."""
    split = slices(func_op, o)
    if not split:
        return 0
    ops = [op.operation for op in func_op.regions[0].blocks[0].operations]
    done, partials = 0, []
    for op in ops:  # in order: each op's split producers hand it their [.., S, C/S] rows
        ranges = loop_ranges(op) if op.name == "linalg.generic" else None
        s = split.get(_key(ranges)) if ranges else None
        if s is None:
            continue
        found = _reduction(op)
        if found is not None:
            partials.append(_split_reduction(op, found[1], s))
            done += 1
        elif (roles := _elementwise(op, ranges)) is not None:
            _split_elementwise(op, roles, s).attributes[ROWS] = ir.UnitAttr.get()
    for op in partials:
        _read_inputs(op)
    for op in [o.operation for o in func_op.regions[0].blocks[0].operations]:
        if ROWS in op.attributes:
            _direct_inputs(op)
    for op in func_op.regions[0].blocks[0].operations:
        if ROWS in op.attributes:
            del op.attributes[ROWS]
    return done


def _direct_inputs(op: ir.Operation) -> None:
    """Inputs that reach `op` from a split elementwise op only through unit dims (keepdims' [r, 1, c] views) are
    read from a copy of that op computed at `op`'s shape, so the op can take it in."""
    for i, v in enumerate(list(op.operands)[:num_inputs(op)]):
        source = _reshaped_from(v)
        if source is None or not isinstance(source, ir.OpResult) or ROWS not in source.owner.attributes:
            continue
        shape = list(ir.RankedTensorType(v.type).shape)
        if _unit_groups(list(ir.RankedTensorType(source.type).shape), shape) is None:
            continue
        copy = _with_unit_loops(source.owner.operation, shape)
        copy.attributes[ROWS] = ir.UnitAttr.get()
        op.operands[i] = copy.results[0]


def _read_inputs(op: ir.Operation) -> None:
    """The split elementwise ops a partial reduction reads are computed inside it, from their own inputs (the
    ops stay for their other readers): each slice reads the chain's inputs instead of rows an earlier kernel
    wrote. An exp costs less than writing its rows and reading them back."""
    while True:
        _direct_inputs(op)
        for i, v in enumerate(list(op.operands)[:num_inputs(op)]):
            if isinstance(v, ir.OpResult) and ROWS in v.owner.attributes:
                op = fuse_input(op, i)
                break
        else:
            return
