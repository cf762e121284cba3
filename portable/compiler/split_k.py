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

from .linalg_info import indexing_maps, iterator_types, loop_ranges, num_inputs
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


def _dims(amap: ir.AffineMap) -> list[int] | None:
    if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
        return None
    return [ir.AffineDimExpr(e).position for e in amap.results]


def _slices(outputs: int, per_thread: int, k: int, threads: int, min_slice: int) -> int:
    s = 1
    while (outputs // per_thread) * s < threads and k % (2 * s) == 0 and k // (2 * s) >= min_slice:
        s *= 2
    return s


def _accumulates(op: ir.Operation) -> bool:
    """The body yields out + f(in0, in1) with a multiplication in f: a sum over the reduction of anything of
    the two operands (the mean's division a fused producer leaves on an input stays per element)."""
    block = op.regions[0].blocks[0]
    out = block.arguments[2]
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


def _as_2d(value: ir.Value, shape2d: list[int]) -> ir.Value:
    """`value` (the same non-unit dims as `shape2d`) as `shape2d`."""
    t = ir.RankedTensorType(value.type)
    shape = list(t.shape)
    if shape == shape2d:
        return value
    groups = _unit_groups(shape)
    kept = [max(shape[i] for i in g) for g in groups]
    if len(groups) != len(shape):
        value = tensor.CollapseShapeOp(ir.RankedTensorType.get(kept, t.element_type), value, groups).result
    if len(kept) == 1:
        value = _expand(value, [[0, 1]], shape2d)
    return value


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


def _matmul_form(op: ir.Operation) -> tuple[int, int, int] | None:
    """(m, k, n) when `op` is a matmul [m, k] x [k, n] -> [m, n] up to unit loops (m may be such a loop: a
    flattened pooling's matrix-vector product keeps its batch and pixel dims of 1), else None."""
    if op.name != "linalg.generic" or num_inputs(op) != 2 or len(op.results) != 1 or not _accumulates(op):
        return None
    ranges = loop_ranges(op)
    dims = [_dims(mp) for mp in indexing_maps(op)]
    if ranges is None or any(d is None for d in dims):
        return None
    its = iterator_types(op)
    ks = [i for i, r in enumerate(ranges) if r != 1 and its[i] == "reduction"]
    if len(ks) != 1:
        return None
    x, w, out = ([d for d in ds if ranges[d] != 1] for ds in dims)
    (k,) = ks
    if len(out) == 2 and x == [out[0], k] and w == [k, out[1]]:
        return ranges[out[0]], ranges[k], ranges[out[1]]
    if len(out) == 1 and x == [k] and w == [k, out[0]]:
        return 1, ranges[k], ranges[out[0]]
    return None


def _expand(value: ir.Value, groups: list[list[int]], shape: list[int]) -> ir.Value:
    elem = ir.RankedTensorType(value.type).element_type
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, elem), value, groups, [], shape).result


def split_matmul(op: ir.Operation, threads: int, per_thread: int) -> bool:
    """Rewrite one linalg.generic matmul [m, k] x [k, n] -> [m, n] (up to unit loops) as partial sums over K
    slices plus their reduction when it has fewer than `threads` threads (`per_thread` outputs each; 4-wide
    columns for a matrix-vector product); False when it does not apply."""
    form = _matmul_form(op)
    if form is None:
        return False
    m, k, n = form
    gemv = m <= MAX_ROWS
    f32 = all(ir.RankedTensorType(v.type).element_type == ir.F32Type.get() for v in op.operands)
    if (gemv and n % 4) or (not gemv and (k < MATMUL_MIN_K or not f32)):
        return False
    s = _slices(m * n, 4 if gemv else per_thread, k, threads, MIN_SLICE if gemv else MATMUL_MIN_SLICE)
    if s < 2:
        return False
    out_t = ir.RankedTensorType(op.operands[2].type)
    elem = out_t.element_type
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # loops (s, m, n, k) of the partial sums
    with ir.InsertionPoint(op), op.location:
        a, b, init = (_as_2d(v, sh) for v, sh in zip(op.operands, ([m, k], [k, n], [m, n])))
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
    return sum(split_matmul(op.operation, threads, tm * tn) for op in list(func_op.regions[0].blocks[0].operations))
