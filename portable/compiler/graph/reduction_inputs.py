"""Elementwise kernels computed again inside the small reductions that read them.

In a decode step, attention's scores (q . K over the cache) read two elementwise kernels: the rotated q, and the
cache with this step's rotated k written at its position (also a graph output, the next step's cache). Both
sit between the Q/K/V projection and the scores, so the scores waited one more dispatch per layer.

Here, before dispatch groups form, such a producer is computed where the reduction reads it: elementwise fusion
as upstream's linalg-fuse-elementwise-ops does it, which leaves producers with other users alone. The reduction
reads the producer's inputs through the producer's maps; the producer stays only for its other users. The
rotated q's kernel goes, and the scores run beside the cache writes. Values are unchanged: the same scalar ops
on the same elements. The small decoder's greedy step goes from 78 kernels (54 deep) to 74 (50 deep). On the
H200 its Vulkan speed did not move (5437-5614 vs 5464-5642 tokens/s, benchmarks/results/h200/session16/); on
NVIDIA's OpenCL, where every kernel is an enqueue, it ran 1672-1760 vs 1008-1755.

Only where that pays: on GPU profiles (a CPU driver has arithmetic to save, not dispatches), where the reduction is
small (decode-sized) and is not a convolution or a matmul whose B rows run along n. Those keep their
register-blocked strategies, which read plain operands; a product against B's rows along k, such as q . K^T,
is a row of dot products. The producer must be a kernel of its own: an elementwise op that dispatch formation
would fuse into its input's kernel, such as a norm's last step, is left alone.
"""

from __future__ import annotations

import math

from ...ir.linalg_info import classify, indexing_maps, iterator_types, loop_ranges, num_inputs
from ...ir.mlir import ir
from ...ir.util import clone_at, reassociation_groups
from ...profiles import Options
from .gather_fusion import fuse_gathers, loop_index, map_indices, pointwise
from .generics import rebuild_generic

# Iterations of the reduction at most (scores over a 256-long cache for 6 heads of 64: 98304; a prefill's
# scores over 128 tokens for 32 heads of 128: 67M would be too many to recompute a producer in).
MAX_ITERATIONS = 1 << 20


def _producer(v: ir.Value) -> ir.Operation | None:
    if not isinstance(v, ir.OpResult):
        return None
    op = ir.OpResult(v).owner.operation
    return op if op.name == "linalg.generic" else None


def _unit_reshape(v: ir.Value) -> ir.Operation | None:
    """The tensor.collapse_shape / expand_shape producing `v` when it only drops or adds unit dims (each group of
    its reassociation holds at most one dim longer than 1: an attention's batch of heads seen without its leading
    batch of 1), its source a generic's result; else None."""
    if not isinstance(v, ir.OpResult):
        return None
    op = ir.OpResult(v).owner.operation
    if op.name not in ("tensor.collapse_shape", "tensor.expand_shape") or _producer(op.operands[0]) is None:
        return None
    big = op.operands[0] if op.name == "tensor.collapse_shape" else op.results[0]
    shape = ir.RankedTensorType(big.type).shape
    if any(sum(shape[d] != 1 for d in g) > 1 for g in reassociation_groups(op)):
        return None
    return op


def _source_map(reshape: ir.Operation, amap: ir.AffineMap) -> ir.AffineMap:
    """`amap` (a consumer's loops to `reshape`'s result dims) as a map to its source's dims (a _unit_reshape)."""
    groups = reassociation_groups(reshape)
    src_shape = ir.RankedTensorType(reshape.operands[0].type).shape
    zero = ir.AffineConstantExpr.get(0)
    exprs = []
    if reshape.name == "tensor.collapse_shape":  # source dim s in group k: the result's dim k, or 0 where unit
        for k, g in enumerate(groups):
            exprs += [amap.results[k] if src_shape[s] != 1 else zero for s in g]
    else:  # source dim k: the one long result dim of group k, or 0
        out_shape = ir.RankedTensorType(reshape.results[0].type).shape
        for g in groups:
            long = [d for d in g if out_shape[d] != 1]
            exprs.append(amap.results[long[0]] if long else zero)
    return ir.AffineMap.get(amap.n_dims, 0, exprs)


def _input(consumer: ir.Operation, i: int) -> tuple[ir.Operation | None, ir.AffineMap, ir.Operation | None]:
    """The generic computing `consumer`'s input `i`, the map from the consumer's loops to that generic's result,
    and the unit-dim reshape between them (see _unit_reshape) or None."""
    v = consumer.operands[i]
    amap = indexing_maps(consumer)[i]
    reshape = _unit_reshape(v)
    if reshape is not None:
        return _producer(reshape.operands[0]), _source_map(reshape, amap), reshape
    return _producer(v), amap, None


def _own_kernel(op: ir.Operation) -> bool:
    """An elementwise op dispatch formation leaves on its own: none of its inputs is another linalg op's result
    used only here (that op's kernel would take it in as an epilogue)."""
    for v in list(op.operands)[:num_inputs(op)]:
        p = _producer(v)
        if p is not None and classify(p).kind != "fill" and len(list(v.uses)) == 1:
            return False
    return True


def _candidate(consumer: ir.Operation) -> int | None:
    """The input of reduction `consumer` whose producer is to be computed inside it, or None."""
    if consumer.name != "linalg.generic" or "reduction" not in iterator_types(consumer):
        return None
    kind = classify(consumer)
    ranges = loop_ranges(consumer)
    if kind.kind in ("fill", "conv") or ranges is None or math.prod(ranges) > MAX_ITERATIONS or \
            len(consumer.results) != 1:
        return None
    if kind.kind == "matmul" and kind.contiguous_b:
        return None  # B's rows along n: the register-blocked strategies, which read plain operands
    for i in range(num_inputs(consumer)):
        p, amap, _ = _input(consumer, i)
        if p is None or not pointwise(p) or classify(p).kind == "fill" or not _own_kernel(p):
            continue
        if map_indices(amap) is None or not _loops_kept(consumer, i, p, amap):
            continue
        return i
    return None


def _loops_kept(consumer: ir.Operation, i: int, producer: ir.Operation, amap: ir.AffineMap) -> bool:
    """Whether the fused op's operands still span every loop of `consumer` (its loop ranges come from them): a
    producer that reads its input with tensor.extract, not through an operand, can leave the reduced loop
    without one (ArgMax over a reversed row). `amap`: the consumer's loops to the producer's result."""
    cmaps, pmaps = indexing_maps(consumer), indexing_maps(producer)
    pbody = producer.regions[0].blocks[0]
    maps = [m for k, m in enumerate(cmaps) if k != i] + \
        [_compose(pmaps[j], amap) for j in range(num_inputs(producer)) if list(pbody.arguments[j].uses)]
    seen = {d for m in maps for d in (map_indices(m) or ()) if d is not None}
    return seen == set(range(len(iterator_types(consumer))))


def _compose(inner: ir.AffineMap, outer: ir.AffineMap) -> ir.AffineMap:
    """inner after outer: `outer` maps the consumer's loops to the producer's (dims or constant 0s), `inner` the
    producer's loops to one of its inputs."""
    exprs = []
    for d in map_indices(inner):
        exprs.append(outer.results[d] if d is not None else ir.AffineConstantExpr.get(0))
    return ir.AffineMap.get(outer.n_dims, 0, exprs)


def fuse_input(consumer: ir.Operation, i: int) -> ir.Operation:
    """`consumer` with its input `i` computed in its body from the producer's inputs, read through the producer's
    maps after the consumer's (classic elementwise fusion, the producer kept for its other users)."""
    producer, amap, reshape = _input(consumer, i)
    nin, nout = num_inputs(consumer), len(consumer.results)
    cmaps, pmaps = indexing_maps(consumer), indexing_maps(producer)
    cmaps[i] = amap
    pbody = producer.regions[0].blocks[0]
    used = [j for j in range(num_inputs(producer)) if list(pbody.arguments[j].uses)]
    # The producer's body at the head of the consumer's, at the producer position input i is read at; its inputs
    # become block arguments of their own.
    block = consumer.regions[0].blocks[0]
    added = [block.add_argument(pbody.arguments[j].type, consumer.location) for j in used]
    with ir.InsertionPoint.at_block_begin(block), consumer.location:
        at = [loop_index(d) for d in map_indices(cmaps[i])]
        value = clone_at(pbody, at, dict(zip([pbody.arguments[j] for j in used], added)))
    block.arguments[i].replace_all_uses_with(value)
    ins = [v for k, v in enumerate(list(consumer.operands)[:nin]) if k != i] + [producer.operands[j] for j in used]
    maps = [m for k, m in enumerate(cmaps[:nin]) if k != i] + [_compose(pmaps[j], cmaps[i]) for j in used]
    # Block arguments, old -> new: the other inputs in order (input i's is unused now), the producer's inputs after
    # them, the outputs last.
    arg_map = [k - (k > i) for k in range(nin)] + [len(ins) + k for k in range(nout)] + \
        [nin - 1 + a for a in range(len(used))]
    new = rebuild_generic(consumer, ins, list(consumer.operands)[nin:], maps + cmaps[nin:],
                          iterator_types(consumer), arg_map, [r.type for r in consumer.results])
    consumer.results[0].replace_all_uses_with(new.results[0])
    consumer.erase()
    if reshape is not None and not list(reshape.results[0].uses):
        reshape.erase()
    if not list(producer.results[0].uses):
        producer.erase()
    return new


def fuse_into_reductions(func_op: ir.Operation, o: Options) -> int:
    """Compute, inside each small reduction of `func_op`'s body, the elementwise kernels it reads (module
    docstring); returns how many it did. Only on GPU profiles (`reduction_threads`): on a CPU driver a kernel
    boundary inside a recording costs little and arithmetic is what runs short (PoCL, the small decoder's
    scores with the rotary embedding computed per element took 130-135 us against 51 us plus 3 us for the
    rotated q's kernel)."""
    if not o.reduction_threads:
        return 0
    block = func_op.regions[0].blocks[0]
    # Copies read only by gathers first (a decoder's q transposed into heads, read by its rotation): their readers
    # then read the projection itself, and become producers this can compute inside the scores.
    done = fuse_gathers(func_op)
    changed = True
    while changed:  # each rewrite replaces its consumer: walk again
        changed = False
        for op in [o.operation for o in block.operations if o.name == "linalg.generic"]:
            i = _candidate(op)
            if i is not None:
                fuse_input(op, i)
                done += 1
                changed = True
                break
    if done:
        # A gather left only for gathers (the concat of the cache with this step's k and v, now computed inside the
        # scores and the values product, still read by the cache write) is computed inside those too.
        done += fuse_gathers(func_op)
    return done
