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

from .gather_fusion import map_indices, pointwise
from .ir_util import clone_mapped
from .linalg_info import classify, iterator_types, loop_ranges, num_inputs
from .mlir import arith, ir, linalg

# Iterations of the reduction at most (scores over a 256-long cache for 6 heads of 64: 98304; a prefill's
# scores over 128 tokens for 32 heads of 128: 67M would be too many to recompute a producer in).
MAX_ITERATIONS = 1 << 20


def _producer(v: ir.Value) -> ir.Operation | None:
    if not isinstance(v, ir.OpResult):
        return None
    op = ir.OpResult(v).owner.operation
    return op if op.name == "linalg.generic" else None


def _own_kernel(op: ir.Operation) -> bool:
    """An elementwise op dispatch formation leaves on its own: none of its inputs is another linalg op's result
    used only here (that op's kernel would take it in as an epilogue)."""
    for v in list(op.operands)[:num_inputs(op)]:
        p = _producer(v)
        if p is not None and classify(p).kind != "fill" and len(list(v.uses)) == 1:
            return False
    return True


def _size(op: ir.Operation) -> int | None:
    ranges = loop_ranges(op)
    if ranges is None:
        return None
    n = 1
    for r in ranges:
        n *= r
    return n


def _candidate(consumer: ir.Operation) -> int | None:
    """The input of reduction `consumer` whose producer is to be computed inside it, or None."""
    if consumer.name != "linalg.generic" or "reduction" not in iterator_types(consumer):
        return None
    kind = classify(consumer)
    size = _size(consumer)
    if kind.kind in ("fill", "conv") or size is None or size > MAX_ITERATIONS or len(consumer.results) != 1:
        return None
    if kind.kind == "matmul" and kind.contiguous_b:
        return None  # B's rows along n: the register-blocked strategies, which read plain operands
    maps = consumer.attributes["indexing_maps"]
    for i, v in enumerate(list(consumer.operands)[:num_inputs(consumer)]):
        p = _producer(v)
        if p is None or not pointwise(p) or classify(p).kind == "fill" or not _own_kernel(p):
            continue
        if map_indices(ir.AffineMapAttr(maps[i]).value) is None:
            continue
        return i
    return None


def _compose(inner: ir.AffineMap, outer: ir.AffineMap) -> ir.AffineMap:
    """inner after outer: `outer` maps the consumer's loops to the producer's (dims or constant 0s), `inner` the
    producer's loops to one of its inputs."""
    exprs = []
    for d in map_indices(inner):
        exprs.append(outer.results[d] if d is not None else ir.AffineConstantExpr.get(0))
    return ir.AffineMap.get(outer.n_dims, 0, exprs)


def _fuse(consumer: ir.Operation, i: int) -> ir.Operation:
    """`consumer` with its input `i` computed in its body from the producer's inputs, read through the producer's
    maps after the consumer's (classic elementwise fusion, the producer kept for its other users)."""
    producer = _producer(consumer.operands[i])
    nin, pin = num_inputs(consumer), num_inputs(producer)
    cmaps = [ir.AffineMapAttr(m).value for m in consumer.attributes["indexing_maps"]]
    pmaps = [ir.AffineMapAttr(m).value for m in producer.attributes["indexing_maps"]]
    pbody = producer.regions[0].blocks[0]
    used = [j for j in range(pin) if list(pbody.arguments[j].uses)]
    ins = [v for k, v in enumerate(list(consumer.operands)[:nin]) if k != i]
    ins += [producer.operands[j] for j in used]
    outs = list(consumer.operands)[nin:]
    maps = [m for k, m in enumerate(cmaps[:nin]) if k != i] + [_compose(pmaps[j], cmaps[i]) for j in used]
    maps += cmaps[nin:]
    types = [ir.ShapedType(v.type).element_type if isinstance(v.type, ir.ShapedType) else v.type for v in ins + outs]
    with ir.InsertionPoint(consumer), consumer.location:
        new = linalg.GenericOp(
            [r.type for r in consumer.results], ins, outs, ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            consumer.attributes["iterator_types"])
        block = new.regions[0].blocks.append(*types)
    args = list(block.arguments)
    first = nin - 1  # the producer's inputs follow the consumer's other inputs
    mapping = {pbody.arguments[j]: args[first + n] for n, j in enumerate(used)}
    at = cmaps[i].results
    with ir.InsertionPoint(block), consumer.location:
        ops = list(pbody.operations)
        for o in ops[:-1]:
            if o.name == "linalg.index":
                e = at[ir.IntegerAttr(o.attributes["dim"]).value]
                mapping[o.results[0]] = (linalg.IndexOp(ir.AffineDimExpr(e).position).result
                                         if isinstance(e, ir.AffineDimExpr)
                                         else arith.ConstantOp(ir.IndexType.get(), 0).result)
            else:
                clone_mapped(o.operation, mapping)
        value = mapping.get(ops[-1].operands[0], ops[-1].operands[0])
    old = consumer.regions[0].blocks[0]
    olds = list(old.arguments)
    for k, a in enumerate(olds):
        if k == i:
            a.replace_all_uses_with(value)
        elif k < nin:
            a.replace_all_uses_with(args[k - (k > i)])
        else:
            a.replace_all_uses_with(args[len(ins) + k - nin])
    for o in list(old.operations):
        block.append(o.detach_from_parent())
    consumer.results[0].replace_all_uses_with(new.results[0])
    consumer.erase()
    if not list(producer.results[0].uses):
        producer.erase()
    return new.operation


def fuse_into_reductions(func_op: ir.Operation, profile: dict) -> int:
    """Compute, inside each small reduction of `func_op`'s body, the elementwise kernels it reads (module
    docstring); returns how many it did. Only on GPU profiles (`reduction_threads`): on a CPU driver a kernel
    boundary inside a recording costs little and arithmetic is what runs short (PoCL, the small decoder's
    scores with the rotary embedding computed per element took 130-135 us against 51 us plus 3 us for the
    rotated q's kernel)."""
    if not profile.get("reduction_threads"):
        return 0
    block = func_op.regions[0].blocks[0]
    done = 0
    changed = True
    while changed:  # each rewrite replaces its consumer: walk again
        changed = False
        for op in [o.operation for o in block.operations if o.name == "linalg.generic"]:
            i = _candidate(op)
            if i is not None:
                _fuse(op, i)
                done += 1
                changed = True
                break
    return done
