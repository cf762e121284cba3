"""Matmuls with few outputs and a long K split along K into partial sums.

Matrix-vector products (decode: a few rows times a [K, N] weight): with one output row, a matmul has only N
outputs: N/4 threads of 4-wide columns are far too few to keep a GPU's memory busy, and a workgroup per output
splitting K across its threads reads the weight column-wise, one scalar from each of 256 rows (measured on the
H200: 0.13 ms on OpenCL, 0.40 ms on Vulkan for 1x4096 @ 4096x4096, where streaming the 64 MiB takes ~0.02 ms).
Split K into S slices instead:

    partial[s, m, n] = sum over k of x[m, s, k] * w[s, k, n]      (a batch matmul: one batch per slice)
    out[m, n]        = init[m, n] + sum over s of partial[s, m, n]

The first is a batch matmul the register-blocked strategy runs with threads along n (coalesced 4-wide rows of
the weight, S times more threads); the second a small reduction whose epilogue the consumers fuse into. S is the
smallest power of two that gives the profile's `fill_threads` column threads, with at least 16 rows per
slice.

Matmuls with more rows get the same rewrite when their outputs are too few for the device, counting `thread_tile`
outputs per thread: a batch-1 convolution deep in a CNN (ResNet-50's 7x7x512 3x3 layer: 512 x 49 outputs over K =
4608) is 784 threads, each a K loop of 4608 steps, on a GPU that holds 270k.
"""

from __future__ import annotations

from .linalg_info import fill_value, indexing_maps, iterator_types, loop_ranges, num_inputs
from .mlir import arith, ir, linalg, tensor
from .rewrites import rebuild_generic

MAX_ROWS = 8  # up to this many output rows: a matrix-vector product, threads of 4-wide columns
MIN_SLICE = 16  # rows of the weight per slice: fewer and the partial sums cost more than they save
# A matmul of more rows splits only this long a K, into slices of MATMUL_MIN_SLICE rows at least: the second
# kernel costs more than a short K loop. H200, ResNet-50's batch-1 1x1 convolutions, whole -> split, device clock
# (benchmarks/results/h200/session10/layers_min_k.json): K = 64 at 56x56 17.3 -> 17.9-23.5 us Vulkan, 16.8 ->
# 19.7-20.6 us OpenCL; K = 128 at 28x28 37.6-41.3 -> 28.6-30.0 us, 22.8-23.5 -> 19.6-20.1 us; MobileNetV2's K = 96
# at 14x14 (3528 threads) 20.5-25.1 -> 14.6-16.1 us Vulkan, 23.8-24.7 -> 14.5-16.3 us OpenCL (mnv2_variants_*.json).
# Only f32 ones: that is what was measured, and f16 ones take cooperative matrices where a device has them.
MATMUL_MIN_K = 96
MATMUL_MIN_SLICE = 32


def _loop_dims(amap: ir.AffineMap, value: ir.Value) -> list[int] | None:
    """The loops `value`'s dims follow through `amap`, leaving out its unit dims read at a constant 0 (a
    broadcast row scale: (d0, d1, d2) -> (d0, 0)); None for any other expression."""
    shape = ir.RankedTensorType(value.type).shape
    out = []
    for e, size in zip(amap.results, shape):
        if isinstance(e, ir.AffineDimExpr):
            out.append(ir.AffineDimExpr(e).position)
        elif not (isinstance(e, ir.AffineConstantExpr) and ir.AffineConstantExpr(e).value == 0 and size == 1):
            return None
    return out


def _slices(outputs: int, per_thread: int, k: int, threads: int, min_slice: int) -> int:
    s = 1
    while (outputs // per_thread) * s < threads and k % (2 * s) == 0 and k // (2 * s) >= min_slice:
        s *= 2
    return s


def _accumulates(op: ir.Operation) -> bool:
    """The body yields out + f(inputs) with a multiplication in f: a sum over the reduction of anything of the
    inputs (the mean's division a fused pooling leaves on x stays per element)."""
    block = op.regions[0].blocks[0]
    out = list(block.arguments)[-1]
    ops = list(block.operations)
    value = ops[-1].operands[0] if len(ops[-1].operands) == 1 else None
    if not isinstance(value, ir.OpResult) or value.owner.name not in ("arith.addf", "arith.addi"):
        return False
    if out not in list(value.owner.operands) or len(list(out.uses)) != 1:
        return False
    return any(o.name in ("arith.mulf", "arith.muli") for o in ops)


def _unit_groups(shape: list[int]) -> list[list[int]]:
    """Reassociation dropping the unit dims of `shape`: each joins the next non-unit dim (trailing ones the
    last)."""
    groups, pending = [], []
    for i, d in enumerate(shape):
        pending.append(i)
        if d != 1:
            groups.append(pending)
            pending = []
    if groups:
        groups[-1].extend(pending)
    return groups


def _drop_units(value: ir.Value) -> ir.Value:
    """`value` without its unit dims ([1] when it has nothing else)."""
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    groups = _unit_groups(shape) or [list(range(len(shape)))]
    if len(groups) == len(shape):
        return value
    kept = [max(shape[i] for i in g) for g in groups]
    return tensor.CollapseShapeOp(ir.RankedTensorType.get(kept, t.element_type), value, groups).result


def _as_2d(value: ir.Value, shape2d: list[int]) -> ir.Value:
    """`value` (the same non-unit dims as `shape2d`) as `shape2d`."""
    if list(ir.RankedTensorType(value.type).shape) == shape2d:
        return value
    value = _drop_units(value)
    if ir.RankedTensorType(value.type).rank == 1:
        value = _expand(value, [[0, 1]], shape2d)
    return value


def _init_2d(value: ir.Value, m: int, n: int) -> ir.Value:
    """A matmul's init as [m, n]: a fill made anew at that shape (a fill reshaped on its way to its consumer
    would stay out of every dispatch group), anything else reshaped."""
    scalar = fill_value(value)
    if scalar is None or ir.RankedTensorType(value.type).shape == [m, n]:
        return _as_2d(value, [m, n])
    elem = ir.RankedTensorType(value.type).element_type
    return linalg.fill(scalar, outs=[tensor.EmptyOp([m, n], elem).result])


def _from_2d(value: ir.Value, like: ir.RankedTensorType) -> ir.Value:
    """[m, n] (m possibly 1) back to the shape `like`, which has the same non-unit dims."""
    shape = list(like.shape)
    groups = _unit_groups(shape)
    if len(groups) == 1:
        value = tensor.CollapseShapeOp(ir.RankedTensorType.get([max(shape)], like.element_type), value,
                                       [[0, 1]]).result
    if len(groups) != len(shape):
        value = _expand(value, groups, shape)
    return value


def _matmul_form(op: ir.Operation) -> tuple[int, int, int, list[list[str]]] | None:
    """(m, k, n, roles) when `op` is a matmul [m, k] x [k, n] -> [m, n] up to unit loops and to fused
    producers, else None. m may be a unit loop (a flattened pooling's matrix-vector product keeps its batch and
    pixel dims of 1); inputs besides x and w are what a fused producer of x reads (a norm's row scale and
    weight). roles[i] names input i's non-unit dims, in order: "m", "k" or "n"."""
    if op.name != "linalg.generic" or len(op.results) != 1 or num_inputs(op) < 2 or not _accumulates(op):
        return None
    ranges = loop_ranges(op)
    if ranges is None:
        return None
    dims = [_loop_dims(mp, v) for mp, v in zip(indexing_maps(op), op.operands)]
    if any(d is None for d in dims):
        return None
    its = iterator_types(op)
    ks = [i for i, r in enumerate(ranges) if r != 1 and its[i] == "reduction"]
    out = [d for d in dims[-1] if ranges[d] != 1]
    if len(ks) != 1 or len(out) not in (1, 2) or {i for i, r in enumerate(ranges) if r != 1} != {*out, *ks}:
        return None
    role = {ks[0]: "k", out[-1]: "n", **({out[0]: "m"} if len(out) == 2 else {})}
    roles = [[role[d] for d in ds if ranges[d] != 1] for ds in dims[:-1]]
    if any(len(set(r)) != len(r) for r in roles) or [r for r in roles if "n" in r] != [["k", "n"]]:
        return None
    if len(out) == 2 and [] in roles:
        return None  # a scalar operand of a matmul with rows: no unit loop to read it by
    return (ranges[out[0]] if len(out) == 2 else 1), ranges[ks[0]], ranges[out[-1]], roles


def _unfuse(op: ir.Operation, roles: list[list[str]], m: int, k: int, n: int) -> ir.Operation | None:
    """A matmul that computes out + f(x-side inputs) * w (producers of x fused into it) as an elementwise
    kernel computing f over [m, k] and a plain matmul of that with w, which replaces `op`; None when its body
    is not of that form. f then runs once per (m, k), not once per output (a norm's rsqrt n times over)."""
    nin = num_inputs(op)
    block = op.regions[0].blocks[0]
    args, ops = list(block.arguments), list(block.operations)
    w = roles.index(["k", "n"])
    xs = [i for i in range(nin) if i != w]
    add = ops[-1].operands[0].owner
    prod = [v for v in add.operands if v != args[-1]]
    if len(prod) != 1 or not isinstance(prod[0], ir.OpResult):
        return None
    if prod[0].owner.name not in ("arith.mulf", "arith.muli"):
        return None
    factor = [v for v in prod[0].owner.operands if v != args[w]]
    if len(factor) != 1 or len(list(args[w].uses)) != 1:
        return None
    needed, stack = [], [factor[0]]  # the body ops f needs; none may read w or out
    while stack:
        v = stack.pop()
        if isinstance(v, ir.OpResult) and any(v.owner == o for o in ops):
            if not any(v.owner == o for o in needed):
                needed.append(v.owner)
                stack.extend(v.owner.operands)
        elif isinstance(v, ir.BlockArgument) and v.owner == block and v.arg_number not in xs:
            return None
    elem = ir.RankedTensorType(op.operands[w].type).element_type
    out_t = ir.RankedTensorType(op.operands[nin].type)
    e = [ir.AffineDimExpr.get(i) for i in range(3)]
    par, red = (ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in ("parallel", "reduction"))
    with ir.InsertionPoint(op), op.location:
        ins = [_drop_units(op.operands[i]) for i in xs]
        maps = [ir.AffineMap.get(2, 0, [e[0] if r == "m" else e[1] for r in roles[i]] or [e[0]]) for i in xs]
        maps.append(ir.AffineMap.get(2, 0, e[:2]))
        pre = linalg.GenericOp([ir.RankedTensorType.get([m, k], elem)], ins, [tensor.EmptyOp([m, k], elem).result],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in maps]),
                               ir.ArrayAttr.get([par, par]))
    pre_block = pre.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v in ins], elem)
    new = {j: pre_block.arguments[n_] for n_, j in enumerate(xs)}
    mapped = []  # (old value, new value)

    def lookup(v):
        if isinstance(v, ir.BlockArgument) and v.owner == block:
            return new[v.arg_number]
        return next((b for a, b in mapped if a == v), v)

    with ir.InsertionPoint(pre_block), op.location:
        for o in ops:
            if any(o == x for x in needed):
                c = o.clone()
                for j, v in enumerate(list(c.operands)):
                    c.operands[j] = lookup(v)
                mapped.extend(zip(o.results, c.results))
        linalg.YieldOp([lookup(factor[0])])
    with ir.InsertionPoint(op), op.location:
        mm = linalg.GenericOp([ir.RankedTensorType.get([m, n], out_t.element_type)],
                              [pre.results[0], _as_2d(op.operands[w], [k, n])], [_init_2d(op.operands[nin], m, n)],
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, x))
                                                for x in ([e[0], e[2]], [e[2], e[1]], [e[0], e[1]])]),
                              ir.ArrayAttr.get([par, par, red]))
    mm_block = mm.regions[0].blocks.append(elem, elem, out_t.element_type)
    with ir.InsertionPoint(mm_block), op.location:
        a, b, o = mm_block.arguments
        mul = (arith.MulFOp if isinstance(elem, ir.FloatType) else arith.MulIOp)(a, b)
        acc = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(o, mul.result)
        linalg.YieldOp([acc.result])
    with ir.InsertionPoint(op), op.location:
        result = _from_2d(mm.results[0], out_t) if list(out_t.shape) != [m, n] else mm.results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return mm.operation


def _expand(value: ir.Value, groups: list[list[int]], shape: list[int]) -> ir.Value:
    elem = ir.RankedTensorType(value.type).element_type
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, elem), value, groups, [], shape).result


def split_matmul(op: ir.Operation, threads: int, per_thread: int, reduction_k: int | None = None) -> bool:
    """Rewrite one linalg.generic matmul [m, k] x [k, n] -> [m, n] (up to unit loops and fused producers of x)
    as partial sums over K slices plus their reduction when it has fewer than `threads` threads (`per_thread`
    outputs each; 4-wide columns for a matrix-vector product); False when it does not apply. One with fused
    producers only while K is under `reduction_k`, where the workgroup-per-output reduction starts."""
    form = _matmul_form(op)
    if form is None:
        return False
    m, k, n, roles = form
    nin = num_inputs(op)
    gemv = m <= MAX_ROWS
    f32 = all(ir.RankedTensorType(v.type).element_type == ir.F32Type.get() for v in op.operands)
    if (gemv and n % 4) or (not gemv and (k < MATMUL_MIN_K or not f32)):
        return False
    s = _slices(m * n, 4 if gemv else per_thread, k, threads, MIN_SLICE if gemv else MATMUL_MIN_SLICE)
    if s < 2:
        return False
    if nin != 2 or roles[0] not in (["k"], ["m", "k"]):
        if reduction_k is not None and k >= reduction_k:
            return False  # the fused form runs as a workgroup per output, which does better than three kernels
        plain = _unfuse(op, roles, m, k, n)
        return plain is not None and split_matmul(plain, threads, per_thread)
    out_t = ir.RankedTensorType(op.operands[2].type)
    elem = out_t.element_type
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # loops (s, m, n, k) of the partial sums
    with ir.InsertionPoint(op), op.location:
        a, b = (_as_2d(v, sh) for v, sh in zip(op.operands, ([m, k], [k, n])))
        init = _init_2d(op.operands[2], m, n)
        x = _expand(a, [[0], [1, 2]], [m, s, k // s])
        w = _expand(b, [[0, 1], [2]], [s, k // s, n])
        zero = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)
        empty = tensor.EmptyOp([s, m, n], elem).result
        partial_init = linalg.fill(arith.ConstantOp(elem, zero).result, outs=[empty])
    maps = [ir.AffineMap.get(4, 0, [d[1], d[0], d[3]]), ir.AffineMap.get(4, 0, [d[0], d[3], d[2]]),
            ir.AffineMap.get(4, 0, [d[0], d[1], d[2]])]
    partial = rebuild_generic(op, [x, w], [partial_init], maps, ["parallel", "parallel", "parallel", "reduction"],
                              [0, 1, 2], [ir.RankedTensorType.get([s, m, n], elem)])
    e = [ir.AffineDimExpr.get(i) for i in range(3)]  # loops (m, n, s) of the reduction
    with ir.InsertionPoint(op), op.location:
        total = linalg.GenericOp(
            [ir.RankedTensorType.get([m, n], elem)], [partial.results[0]], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, [e[2], e[0], e[1]])),
                              ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, [e[0], e[1]]))]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ("parallel", "parallel", "reduction")]))
    body = total.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(body), op.location:
        add = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(body.arguments[0], body.arguments[1])
        linalg.YieldOp([add.result])
    with ir.InsertionPoint(op), op.location:
        result = _from_2d(total.results[0], out_t) if list(out_t.shape) != [m, n] else total.results[0]
    op.results[0].replace_all_uses_with(result)
    op.erase()
    return True


def split_matmuls(func_op: ir.Operation, profile: dict) -> int:
    """Every matmul of the function with too few outputs for the profile (`fill_threads`); returns how many
    were split."""
    threads = int(profile.get("fill_threads", 0))
    if not threads:
        return 0
    tm, tn = (int(v) for v in profile.get("thread_tile", (4, 4)))
    # A matmul with fused producers splits (as its producers' kernel, then a plain matmul split in two) only
    # where its K is too short for the workgroup-per-output reduction (strategy._workgroup_reduction), which
    # the fused form gets otherwise. H200, a decoder step (session10/decoder2_*): the vocabulary projection after
    # RMSNorm, K = 384 and one thread per output, 26.5 -> 10.2 us (Vulkan) and 33.7 -> 16.9 us (OpenCL) as
    # three kernels; its MLP's down projection after SwiGLU, K = 1024 and a workgroup per output, 6.4-8.4 ->
    # 10.2-13.2 us (Vulkan) split: not split.
    reduction_k = 2 * int(profile["reduction_threads"]) if profile.get("reduction_threads") else None
    return sum(split_matmul(op.operation, threads, tm * tn, reduction_k)
               for op in list(func_op.regions[0].blocks[0].operations))
