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
slice (8 for a short K, while that takes no more than 32 slices).

Matmuls with more rows get the same rewrite when their outputs are too few for the device, counting `thread_tile`
outputs per thread: a batch-1 convolution deep in a CNN (ResNet-50's 7x7x512 3x3 layer: 512 x 49 outputs over K =
4608) is 784 threads, each a K loop of 4608 steps, on a GPU that holds 270k.
"""

from __future__ import annotations

from ...ir.linalg_info import fill_value, indexing_maps, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...profiles import Options
from ..strategy import fusion_cost
from .generics import rebuild_generic

MAX_ROWS = 8  # up to this many output rows: a matrix-vector product, threads of 4-wide columns
MIN_SLICE = 16  # rows of the weight per slice: fewer and the partial sums cost more than they save
# ...except for a short K that splits anyway, which may go down to SHORT_SLICE rows while that takes at most
# SHORT_SLICES slices.
# H200 Vulkan, benchmarks/results/h200/session14/min_slice/: the small decoder's projections (K = 384 and 256,
# 16 -> 32 slices) decode 3767 -> 3905 tokens/s (medians of 6 alternating runs), while classifier heads taken to
# 8 rows per slice got slower (ResNet-50's 2048 -> 1000, 128 -> 256 slices, 10.6 -> 13.2 us on the device clock;
# MobileNetV2's 1280 -> 1000, 64 -> 128 slices, 9.4 -> 10.4 us): the sum over many slices costs more than it saves.
SHORT_SLICE, SHORT_SLICES = 8, 32
# A matmul of more rows splits only this long a K, into slices of MATMUL_MIN_SLICE rows at least: the second
# kernel costs more than a short K loop. H200, ResNet-50's batch-1 1x1 convolutions, whole -> split, device clock
# (benchmarks/results/h200/session10/layers_min_k.json): K = 64 at 56x56 17.3 -> 17.9-23.5 us Vulkan, 16.8 ->
# 19.7-20.6 us OpenCL; K = 128 at 28x28 37.6-41.3 -> 28.6-30.0 us, 22.8-23.5 -> 19.6-20.1 us; MobileNetV2's K = 96
# at 14x14 (3528 threads) 20.5-25.1 -> 14.6-16.1 us Vulkan, 23.8-24.7 -> 14.5-16.3 us OpenCL (mnv2_variants_*.json).
# Only f32 ones: that is what was measured, and f16 ones take cooperative matrices where a device has them.
MATMUL_MIN_K = 96
MATMUL_MIN_SLICE = 32
# A matrix-vector product with fused producers splits whatever its K once its weight is this large: the
# workgroup-per-output form reads the [K, N] weight a column at a time, and past what neighbouring workgroups
# share through the cache it fetches each 32-byte sector for one float. H200, 140M decoder step (profile of
# benchmarks/results/gpu-host-2026-12-07-llm-profile): the down projection after SwiGLU, K = 2816, N = 1024
# (11.5 MB), 30 us at 380 GB/s in that form, while the Q/K/V projections split read 4 MB in 7-8 us. H100 OpenCL,
# 440M decoder (gpu-host-2026-12-07-h100-session4): 277.2 -> 320.9 tokens/s split (one run each; at 140M two calls
# disagreed).
FUSED_SPLIT_BYTES = 4 << 20


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


def _as_shape(value: ir.Value, shape: list[int]) -> ir.Value:
    """`value` (the same non-unit dims as `shape`) as `shape`."""
    if list(ir.RankedTensorType(value.type).shape) == shape:
        return value
    value = _drop_units(value)
    if list(ir.RankedTensorType(value.type).shape) != shape:
        value = _expand(value, _unit_groups(shape), shape)
    return value


def _replace(op: ir.Operation, value: ir.Value) -> None:
    """Replace `op` by `value`, reshaped to its result's shape (the same non-unit dims)."""
    with ir.InsertionPoint(op), op.location:
        result = _as_shape(value, list(ir.RankedTensorType(op.results[0].type).shape))
    op.results[0].replace_all_uses_with(result)
    op.erase()


def _init_as(value: ir.Value, shape: list[int]) -> ir.Value:
    """A matmul's init as `shape`: a fill made anew at that shape (a fill reshaped on its way to its consumer
    would stay out of every dispatch group), anything else reshaped."""
    scalar = fill_value(value)
    if scalar is None or ir.RankedTensorType(value.type).shape == shape:
        return _as_shape(value, shape)
    elem = ir.RankedTensorType(value.type).element_type
    return linalg.fill(scalar, outs=[tensor.EmptyOp(shape, elem).result])


def matmul_form(op: ir.Operation) -> tuple[int, int, int, int, list[list[str]]] | None:
    """(b, m, k, n, roles): see _form."""
    form = _form(op)
    return None if form is None else form[:5]


def _form(op: ir.Operation) -> tuple[int, int, int, int, list[list[str]], dict[int, str]] | None:
    """(b, m, k, n, roles, role of each non-unit loop) when `op` is a matmul [m, k] x [k, n] -> [m, n], or a batch of b
    of them ([b, m, k] x [b, k, n]: attention's products over a cache, one per head), up to unit loops and to fused
    producers, else None; b = 0 without a batch loop. m may be a unit loop (a flattened pooling's matrix-vector
    product keeps its batch and pixel dims of 1); inputs besides x and w are what a fused producer of x reads (a
    norm's row scale and weight). roles[i] names input i's non-unit dims, in order: "b", "m", "k" or "n"."""
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
    if len(ks) != 1 or not out or {i for i, r in enumerate(ranges) if r != 1} != {*out, *ks}:
        return None
    # A batch loop: an output loop besides n that the weight (the input reading k and n) reads too.
    ws = [ds for ds in dims[:-1] if ks[0] in ds and out[-1] in ds]
    batch = [d for d in out[:-1] if len(ws) == 1 and d in ws[0]]
    if len(batch) > 1 or len(out) - len(batch) not in (1, 2):
        return None
    role = {ks[0]: "k", out[-1]: "n", **{d: "b" for d in batch},
            **({out[-2]: "m"} if len(out) - len(batch) == 2 else {})}
    if any(d not in role for ds in dims[:-1] for d in ds if ranges[d] != 1):
        return None  # a loop that is none of b, m, n, k (an output loop before the batch one)
    roles = [[role[d] for d in ds if ranges[d] != 1] for ds in dims[:-1]]
    if any(len(set(r)) != len(r) for r in roles) or [r for r in roles if "n" in r] != [["b"] * len(batch) + ["k", "n"]]:
        return None
    if "m" in role.values() and [] in roles:
        return None  # a scalar operand of a matmul with rows: no unit loop to read it by
    if batch and (out[0] != batch[0] or any(r[:1] != ["b"] for r in roles)):
        return None  # the batch loop leads every operand
    m = ranges[out[-2]] if "m" in role.values() else 1
    return (ranges[batch[0]] if batch else 0), m, ranges[ks[0]], ranges[out[-1]], roles, role


def _fused_x(op: ir.Operation, roles: list[list[str]], nb: int) -> bool:
    """A matmul form whose x is computed in the body from inputs of its own (a norm's or SwiGLU's), not read."""
    return num_inputs(op) != 2 or roles[0] not in (["b"] * nb + ["k"], ["b"] * nb + ["m", "k"])


def _x_producer(op: ir.Operation, roles: list[list[str]], nb: int):
    """(weight input, x-side inputs, the value f multiplying w, the body ops computing it) of a matmul form that
    computes out + f(x-side inputs) * w, else None."""
    nin = num_inputs(op)
    block = op.regions[0].blocks[0]
    args, ops = list(block.arguments), list(block.operations)
    w = roles.index(["b"] * nb + ["k", "n"])
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
    indices = [ir.IntegerAttr(o.attributes["dim"]).value for o in needed if o.name == "linalg.index"]
    if indices and any(_form(op)[5].get(d) == "n" for d in indices):
        return None  # f reads the output column's index: it is no producer of x
    return w, xs, factor[0], needed


def _unfuse(op: ir.Operation, roles: list[list[str]], b: int, m: int, k: int, n: int) -> ir.Operation | None:
    """A matmul that computes out + f(x-side inputs) * w (producers of x fused into it) as an elementwise
    kernel computing f over [m, k] (per batch: [b, m, k]) and a plain matmul of that with w, which replaces `op`;
    None when its body is not of that form. f then runs once per (m, k), not once per output (a norm's rsqrt n
    times over)."""
    lead = [b] if b else []
    nb = len(lead)
    nin = num_inputs(op)
    found = _x_producer(op, roles, nb)
    if found is None:
        return None
    w, xs, f, needed = found
    factor = [f]
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    elem = ir.RankedTensorType(op.operands[w].type).element_type
    out_t = ir.RankedTensorType(op.operands[nin].type)
    e = [ir.AffineDimExpr.get(i) for i in range(nb + 3)]
    loop = {"b": e[0], "m": e[nb], "k": e[nb + 1]}  # of the pre-kernel: (b, m, k)
    par, red = (ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in ("parallel", "reduction"))
    with ir.InsertionPoint(op), op.location:
        ins = [_drop_units(op.operands[i]) for i in xs]
        maps = [ir.AffineMap.get(nb + 2, 0, [loop[r] for r in roles[i]] or [e[nb]]) for i in xs]
        maps.append(ir.AffineMap.get(nb + 2, 0, e[:nb + 2]))
        pre = linalg.GenericOp([ir.RankedTensorType.get(lead + [m, k], elem)], ins,
                               [tensor.EmptyOp(lead + [m, k], elem).result],
                               ir.ArrayAttr.get([ir.AffineMapAttr.get(mp) for mp in maps]),
                               ir.ArrayAttr.get([par] * (nb + 2)))
    pre_block = pre.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type for v in ins], elem)
    new = {j: pre_block.arguments[n_] for n_, j in enumerate(xs)}
    mapped = []  # (old value, new value)

    def lookup(v):
        if isinstance(v, ir.BlockArgument) and v.owner == block:
            return new[v.arg_number]
        return next((new_v for old_v, new_v in mapped if old_v == v), v)

    role = _form(op)[5]
    dim_of = {"b": 0, "m": nb, "k": nb + 1}  # a loop index f reads, in the pre-kernel's (b, m, k)
    with ir.InsertionPoint(pre_block), op.location:
        for o in ops:
            if o.name == "linalg.index" and any(o == x for x in needed):
                r = role.get(ir.IntegerAttr(o.attributes["dim"]).value)
                c = (linalg.IndexOp(dim_of[r]) if r else arith.ConstantOp(ir.IndexType.get(), 0)).operation
                mapped.extend(zip(o.results, c.results))
            elif any(o == x for x in needed):
                c = o.clone()
                for j, v in enumerate(list(c.operands)):
                    c.operands[j] = lookup(v)
                mapped.extend(zip(o.results, c.results))
        linalg.YieldOp([lookup(factor[0])])
    bm, bn, bk = e[:nb] + [e[nb]], e[:nb] + [e[nb + 1]], e[:nb] + [e[nb + 2]]  # the matmul's (b, m, n, k)
    with ir.InsertionPoint(op), op.location:
        mm = linalg.GenericOp([ir.RankedTensorType.get(lead + [m, n], out_t.element_type)],
                              [pre.results[0], _as_shape(op.operands[w], lead + [k, n])],
                              [_init_as(op.operands[nin], lead + [m, n])],
                              ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(nb + 3, 0, x))
                                                for x in (bm + bk[nb:], bk + bn[nb:], bm + bn[nb:])]),
                              ir.ArrayAttr.get([par] * (nb + 2) + [red]))
    mm_block = mm.regions[0].blocks.append(elem, elem, out_t.element_type)
    with ir.InsertionPoint(mm_block), op.location:
        a, b_, o = mm_block.arguments
        mul = (arith.MulFOp if isinstance(elem, ir.FloatType) else arith.MulIOp)(a, b_)
        acc = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(o, mul.result)
        linalg.YieldOp([acc.result])
    _replace(op, mm.results[0])
    return mm.operation


def _expand(value: ir.Value, groups: list[list[int]], shape: list[int]) -> ir.Value:
    elem = ir.RankedTensorType(value.type).element_type
    return tensor.ExpandShapeOp(ir.RankedTensorType.get(shape, elem), value, groups, [], shape).result


def _slice_view(v: ir.Value) -> bool:
    """`v` is a tensor.extract_slice of something, through reshapes."""
    while isinstance(v, ir.OpResult):
        name = ir.OpResult(v).owner.operation.name
        if name == "tensor.extract_slice":
            return True
        if name not in ("tensor.expand_shape", "tensor.collapse_shape"):
            return False
        v = ir.OpResult(v).owner.operation.operands[0]
    return False


def _split_fused(op: ir.Operation, roles: list[list[str]], b: int, m: int, k: int, n: int, s: int,
                 launch_ops: int) -> bool:
    """Split matrix-vector product `op` with its producers of x kept in the partial sums, where fusion_cost says
    computing them once per 4-wide column thread costs less than a kernel of their own (`launch_ops`, the
    profile's); whether it did. Only where that kernel would be one more: some x-side input is a view into
    another op's result (SwiGLU's gate and up, two column ranges of one product), not that op's result itself, of
    which the producers would become the epilogue (a softmax's division joins its row chain, a GELU the sum of
    the product before it). Not where the body reads a loop index (the split renumbers the loops)."""
    found = _x_producer(op, roles, 1 if b else 0)
    block = op.regions[0].blocks[0]
    if found is None or any(o.name == "linalg.index" for o in block.operations):
        return False
    if not any(_slice_view(op.operands[i]) for i in found[1]):
        return False
    elem_bytes = max(1, ir.RankedTensorType(op.operands[found[0]].type).element_type.width // 8)
    if not fusion_cost.keep_fused(fusion_cost.body_cost(found[3]), n // 4, elem_bytes, max(b, 1) * m * k, launch_ops):
        return False
    lead = [b] if b else []
    nb = len(lead)
    nin = num_inputs(op)
    size = {"b": b, "m": m, "k": k, "n": n}
    d = [ir.AffineDimExpr.get(i) for i in range(nb + 4)]  # loops (s, b, m, n, k) of the partial sums
    loop = {"b": d[1:1 + nb], "m": [d[1 + nb]], "n": [d[2 + nb]], "k": [d[0], d[3 + nb]]}
    elem = ir.RankedTensorType(op.operands[nin].type).element_type
    ins, maps = [], []
    with ir.InsertionPoint(op), op.location:
        for v, r in zip(list(op.operands)[:nin], roles):
            if not r:  # a scalar read by every iteration (an epsilon)
                ins.append(v)
                maps.append(ir.AffineMap.get(nb + 4, 0, []))
                continue
            base = _as_shape(v, [size[x] for x in r])
            groups, shape, j = [], [], 0
            for x in r:
                groups.append([j, j + 1] if x == "k" else [j])
                shape += [s, k // s] if x == "k" else [size[x]]
                j += len(groups[-1])
            ins.append(_expand(base, groups, shape))
            maps.append(ir.AffineMap.get(nb + 4, 0, [e for x in r for e in loop[x]]))
        zero = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)
        partial_init = linalg.fill(arith.ConstantOp(elem, zero).result,
                                   outs=[tensor.EmptyOp([s] + lead + [m, n], elem).result])
        init = _init_as(op.operands[nin], lead + [m, n])
    maps.append(ir.AffineMap.get(nb + 4, 0, [d[0]] + d[1:1 + nb] + [d[1 + nb], d[2 + nb]]))
    partial = rebuild_generic(op, ins, [partial_init], maps, ["parallel"] * (nb + 3) + ["reduction"],
                              list(range(nin + 1)), [ir.RankedTensorType.get([s] + lead + [m, n], elem)])
    _sum_slices(op, partial, init, lead, m, n, elem)
    return True


def _sum_slices(op: ir.Operation, partial: ir.Operation, init: ir.Value, lead: list[int], m: int, n: int,
                elem: ir.Type) -> None:
    """Replace `op` by the sum over the slices of `partial` ([s, *lead, m, n]) added to `init` (op's, reshaped)."""
    nb = len(lead)
    e = [ir.AffineDimExpr.get(i) for i in range(nb + 3)]  # loops (b, m, n, s) of the reduction
    with ir.InsertionPoint(op), op.location:
        total = linalg.GenericOp(
            [ir.RankedTensorType.get(lead + [m, n], elem)], [partial.results[0]], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get(nb + 3, 0, [e[nb + 2]] + e[:nb + 2])),
                              ir.AffineMapAttr.get(ir.AffineMap.get(nb + 3, 0, e[:nb + 2]))]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ["parallel"] * (nb + 2) + ["reduction"]]))
    body = total.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(body), op.location:
        add = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(body.arguments[0], body.arguments[1])
        linalg.YieldOp([add.result])
    _replace(op, total.results[0])


def split_matmul(op: ir.Operation, threads: int, per_thread: int, reduction_k: int | None = None,
                 launch_ops: int | None = None) -> bool:
    """Rewrite one linalg.generic matmul [m, k] x [k, n] -> [m, n] (up to unit loops and fused producers of x;
    or a batch of them, [b, m, k] x [b, k, n]) as partial sums over K slices plus their reduction when it has
    fewer than `threads` threads (`per_thread` outputs each; 4-wide columns for a matrix-vector product); False
    when it does not apply. One with fused producers only while K is under `reduction_k`, where the
    workgroup-per-output reduction starts, or, a matrix-vector product, once its weight reaches FUSED_SPLIT_BYTES."""
    form = matmul_form(op)
    if form is None:
        return False
    b, m, k, n, roles = form
    lead = [b] if b else []
    nb = len(lead)
    gemv = m <= MAX_ROWS
    f32 = all(ir.RankedTensorType(v.type).element_type == ir.F32Type.get() for v in op.operands)
    if (gemv and n % 4) or (not gemv and (k < MATMUL_MIN_K or not f32)):
        return False
    s = _slices(max(b, 1) * m * n, 4 if gemv else per_thread, k, threads, MIN_SLICE if gemv else MATMUL_MIN_SLICE)
    if gemv and s >= 2:  # thinner slices for what splits anyway (a K too short to split at all stays whole)
        s = max(s, min(_slices(max(b, 1) * m * n, 4, k, threads, SHORT_SLICE), SHORT_SLICES))
    if s < 2:
        return False
    if _fused_x(op, roles, nb):
        w_in = roles.index(["b"] * nb + ["k", "n"])
        weight_bytes = k * n * ir.RankedTensorType(op.operands[w_in].type).element_type.width // 8
        if reduction_k is not None and k >= reduction_k and not (gemv and weight_bytes >= FUSED_SPLIT_BYTES):
            return False  # the fused form runs as a workgroup per output, which does better than three kernels
        if gemv and launch_ops and _split_fused(op, roles, b, m, k, n, s, launch_ops):
            return True
        plain = _unfuse(op, roles, b, m, k, n)
        return plain is not None and split_matmul(plain, threads, per_thread)
    elem = ir.RankedTensorType(op.operands[2].type).element_type
    d = [ir.AffineDimExpr.get(i) for i in range(nb + 4)]  # loops (s, b, m, n, k) of the partial sums
    bs, dm, dn, dk = d[1:1 + nb], d[1 + nb], d[2 + nb], d[3 + nb]
    with ir.InsertionPoint(op), op.location:
        a, w2 = (_as_shape(v, sh) for v, sh in zip(op.operands, (lead + [m, k], lead + [k, n])))
        init = _init_as(op.operands[2], lead + [m, n])
        x = _expand(a, [[i] for i in range(nb)] + [[nb], [nb + 1, nb + 2]], lead + [m, s, k // s])
        w = _expand(w2, [[i] for i in range(nb)] + [[nb, nb + 1], [nb + 2]], lead + [s, k // s, n])
        zero = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)
        empty = tensor.EmptyOp([s] + lead + [m, n], elem).result
        partial_init = linalg.fill(arith.ConstantOp(elem, zero).result, outs=[empty])
    maps = [ir.AffineMap.get(nb + 4, 0, bs + [dm, d[0], dk]), ir.AffineMap.get(nb + 4, 0, bs + [d[0], dk, dn]),
            ir.AffineMap.get(nb + 4, 0, [d[0]] + bs + [dm, dn])]
    partial = rebuild_generic(op, [x, w], [partial_init], maps, ["parallel"] * (nb + 3) + ["reduction"],
                              [0, 1, 2], [ir.RankedTensorType.get([s] + lead + [m, n], elem)])
    _sum_slices(op, partial, init, lead, m, n, elem)
    return True


def split_matmuls(func_op: ir.Operation, o: Options) -> int:
    """Every matmul of the function with too few outputs for the profile (`fill_threads`); returns how many
    were split."""
    threads = o.fill_threads or 0
    if not threads:
        return 0
    tm, tn = o.thread_tile or (4, 4)
    # A matmul with fused producers splits (as its producers' kernel, then a plain matmul split in two) only
    # where its K is too short for the workgroup-per-output reduction (strategy._workgroup_reduction), which
    # the fused form gets otherwise. H200, a decoder step (session10/decoder2_*): the vocabulary projection after
    # RMSNorm, K = 384 and one thread per output, 26.5 -> 10.2 us (Vulkan) and 33.7 -> 16.9 us (OpenCL) as
    # three kernels; its MLP's down projection after SwiGLU, K = 1024 and a workgroup per output, 6.4-8.4 ->
    # 10.2-13.2 us (Vulkan) split: not split.
    reduction_k = 2 * o.reduction_threads if o.reduction_threads else None
    return sum(split_matmul(op.operation, threads, tm * tn, reduction_k, o.launch_ops)
               for op in list(func_op.regions[0].blocks[0].operations))


def unfuse_producers(func_op: ir.Operation, o: Options) -> int:
    """Matmuls (and batches of them) with producers of x fused into their body (a GELU before an FFN's down
    projection, SwiGLU, a norm, a softmax's division before its product with V) compute them once, in a kernel of
    their own, where fusion_cost says recomputing them once per output column costs more than storing them. On
    profiles that reduce over a workgroup (GPUs) matrix-vector products (<= MAX_ROWS rows) are left to split-K,
    which takes such producers out itself where it splits. Returns how many it rewrote."""
    done = 0
    for op in list(func_op.regions[0].blocks[0].operations):
        form = matmul_form(op.operation)
        if form is None:
            continue
        b, m, k, n, roles = form
        nb = 1 if b else 0
        if n < 2 or (m <= MAX_ROWS and o.reduction_threads):
            continue
        found = _x_producer(op.operation, roles, nb)
        if found is None or not found[3]:  # x read as it is: nothing computed in the product's body
            continue
        elem_bytes = max(1, ir.RankedTensorType(op.operands[found[0]].type).element_type.width // 8)
        if fusion_cost.keep_fused(fusion_cost.body_cost(found[3]), n, elem_bytes, max(b, 1) * m * k):
            continue
        if _unfuse(op.operation, roles, b, m, k, n) is not None:
            done += 1
    return done
