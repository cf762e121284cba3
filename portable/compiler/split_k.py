"""Matmuls with few outputs and a long K split along K into partial sums.

Matrix-vector products (decode: a few rows times a [K, N] weight): with one output row, a matmul has only N outputs: N/4 threads of 4-wide columns are far too few to keep a GPU's
memory busy, and a workgroup per output splitting K across its threads reads the weight column-wise, one
scalar from each of 256 rows (measured on the H200: 0.13 ms on OpenCL, 0.40 ms on Vulkan for 1x4096 @
4096x4096, where streaming the 64 MiB takes ~0.02 ms). Split K into S slices instead:

    partial[s, m, n] = sum over k of x[m, s, k] * w[s, k, n]      (a batch matmul: one batch per slice)
    out[m, n]        = init[m, n] + sum over s of partial[s, m, n]

The first is a batch matmul the register-blocked strategy runs with threads along n (coalesced 4-wide rows of
the weight, S times more threads); the second a small reduction whose epilogue the consumers fuse into. S is the
smallest power of two that gives the profile's `split_k_threads` column threads, with at least 16 rows per
slice.

Matmuls with more rows get the same rewrite when their outputs are too few for the device, counting `thread_tile`
outputs per thread: a batch-1 convolution deep in a CNN (ResNet-50's 7x7x512 3x3 layer: 512 x 49 outputs over K =
4608) is 784 threads, each a K loop of 4608 steps, on a GPU that holds 270k.
"""

from __future__ import annotations

from .linalg_info import classify, indexing_maps, iterator_types, num_inputs
from .mlir import arith, ir, linalg, tensor
from .rewrites import rebuild_generic

MAX_ROWS = 8  # up to this many output rows: a matrix-vector product, threads of 4-wide columns
MIN_SLICE = 16  # rows of the weight per slice: fewer and the partial sums cost more than they save


def _dims(amap: ir.AffineMap) -> list[int] | None:
    if not all(isinstance(e, ir.AffineDimExpr) for e in amap.results):
        return None
    return [ir.AffineDimExpr(e).position for e in amap.results]


def _slices(outputs: int, per_thread: int, k: int, threads: int) -> int:
    s = 1
    while (outputs // per_thread) * s < threads and k % (2 * s) == 0 and k // (2 * s) >= MIN_SLICE:
        s *= 2
    return s


def _expand(value: ir.Value, groups: list[list[int]], shape: list[int]) -> ir.Value:
    elem = ir.RankedTensorType(value.type).element_type
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, elem), value, groups, [], shape).result


def split_matmul(op: ir.Operation, threads: int, per_thread: int) -> bool:
    """Rewrite one linalg.generic matmul [m, k] x [k, n] -> [m, n] as partial sums over K slices plus their
    reduction when it has fewer than `threads` threads (`per_thread` outputs each; 4-wide columns for a matrix-vector
    product); False when it does not apply."""
    if op.name != "linalg.generic" or num_inputs(op) != 2 or len(op.results) != 1:
        return False
    if iterator_types(op) != ["parallel", "parallel", "reduction"] or classify(op).kind != "matmul":
        return False
    if [_dims(mp) for mp in indexing_maps(op)] != [[0, 2], [2, 1], [0, 1]]:
        return False
    a, b, init = list(op.operands)
    (m, k), (_, n) = ir.RankedTensorType(a.type).shape, ir.RankedTensorType(b.type).shape
    if any(ir.ShapedType.is_dynamic_size(d) for d in (m, n, k)) or (m <= MAX_ROWS and n % 4):
        return False
    s = _slices(m * n, 4 if m <= MAX_ROWS else per_thread, k, threads)
    if s < 2:
        return False
    out_t = ir.RankedTensorType(init.type)
    elem = out_t.element_type
    d = [ir.AffineDimExpr.get(i) for i in range(4)]  # loops (s, m, n, k) of the partial sums
    with ir.InsertionPoint(op), op.location:
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
            [out_t], [partial.results[0]], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, [e[2], e[0], e[1]])),
                              ir.AffineMapAttr.get(ir.AffineMap.get(3, 0, [e[0], e[1]]))]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ("parallel", "parallel", "reduction")]))
    body = total.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(body), op.location:
        add = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(body.arguments[0], body.arguments[1])
        linalg.YieldOp([add.result])
    op.results[0].replace_all_uses_with(total.results[0])
    op.erase()
    return True


def split_matmuls(func_op: ir.Operation, profile: dict) -> int:
    """Every matmul of the function with too few outputs for the profile (`split_k_threads`); returns how many
    were split."""
    threads = int(profile.get("split_k_threads", 0))
    if not threads:
        return 0
    tm, tn = (int(v) for v in profile.get("thread_tile", (4, 4)))
    return sum(split_matmul(op.operation, threads, tm * tn) for op in list(func_op.regions[0].blocks[0].operations))
