"""Small IR rewrites that put the graph into the shapes dispatch formation and tiling expect.

- reductions with no parallel loop (a full reduction to a 0-d tensor) get a unit parallel loop, so the
  op can be distributed to a workgroup like every other;
- tensor.pad becomes an elementwise linalg.generic over the padded shape (read in bounds, else the pad
  value), its own kernel: tiling then never has to fuse a pad, which would leave per-thread temporaries.
"""

from __future__ import annotations

from ..errors import UnsupportedOp
from .linalg_info import classify, indexing_maps, iterator_types, num_inputs
from .mlir import arith, ir, linalg, tensor


def rebuild_generic(old: ir.Operation, ins: list[ir.Value], outs: list[ir.Value], maps: list[ir.AffineMap],
                    iterators: list[str], arg_map: list[int], result_types: list[ir.Type]) -> ir.Operation:
    """A new linalg.generic with `old`'s body moved in. arg_map[i] = the new block argument that old block
    argument i becomes."""
    with ir.InsertionPoint(old), old.location:
        new = linalg.GenericOp(
            result_types, ins, outs,
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]),
        )
    block = old.regions[0].blocks[0]
    types = [ir.RankedTensorType(v.type).element_type for v in ins + outs]
    new_block = new.regions[0].blocks.append(*types)
    for i, a in enumerate(list(block.arguments)):
        a.replace_all_uses_with(new_block.arguments[arg_map[i]])
    for op in list(block.operations):
        new_block.append(op.detach_from_parent())
    return new.operation


def _shift(amap: ir.AffineMap, extra_result: bool) -> ir.AffineMap:
    """Same map over one more (leading) dim; optionally the new dim as the only result."""
    n = amap.n_dims + 1
    if extra_result:
        return ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(0)])
    exprs = [ir.AffineExpr.shift_dims(e, amap.n_dims, 1) if hasattr(ir.AffineExpr, "shift_dims")
             else e.shift_dims(amap.n_dims, 1) for e in amap.results]
    return ir.AffineMap.get(n, 0, exprs)


def expand_rank0_reduction(op: ir.Operation) -> None:
    """linalg.generic with only reduction loops and one 0-d output -> unit parallel loop + 1-d output."""
    nin = num_inputs(op)
    outs = list(op.operands)[nin:]
    if len(outs) != 1:
        raise UnsupportedOp(f"a full reduction with {len(outs)} outputs is not supported yet")
    init = outs[0]
    elem = ir.RankedTensorType(init.type).element_type
    t1 = ir.RankedTensorType.get([1], elem)
    producer = init.owner.operation if isinstance(init, ir.OpResult) else None
    with ir.InsertionPoint(op), op.location:
        if producer is not None and producer.name == "linalg.generic" and classify(producer).kind == "fill":
            # Re-create the fill at rank 1 so it fuses into the reduction's kernel.
            scalar = list(producer.regions[0].blocks[0].operations)[-1].operands[0]
            new_init = linalg.fill(scalar, outs=[tensor.EmptyOp([1], elem).result])
        else:
            new_init = tensor.ExpandShapeOp(t1, init, ir.ArrayAttr.get([]), [], [1]).result
    maps = [_shift(m, False) for m in indexing_maps(op)[:nin]] + [_shift(indexing_maps(op)[nin], True)]
    its = ["parallel"] + iterator_types(op)
    nargs = len(op.regions[0].blocks[0].arguments)
    new = rebuild_generic(op, list(op.operands)[:nin], [new_init], maps, its, list(range(nargs)), [t1])
    with ir.InsertionPoint(op), op.location:
        back = tensor.CollapseShapeOp(init.type, new.results[0], ir.ArrayAttr.get([])).result
    op.results[0].replace_all_uses_with(back)
    op.erase()


def pad_to_generic(pad: ir.Operation) -> None:
    """tensor.pad with static sizes -> linalg.generic that reads the source in bounds, else the pad value."""
    src = pad.operands[0]
    src_t = ir.RankedTensorType(src.type)
    out_t = ir.RankedTensorType(pad.results[0].type)
    if not (src_t.has_static_shape and out_t.has_static_shape):
        raise UnsupportedOp("tensor.pad with dynamic sizes is not supported yet")
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    if any(v < -(2**62) for v in low):
        raise UnsupportedOp("tensor.pad with dynamic padding amounts is not supported yet")
    yield_op = list(pad.regions[0].blocks[0].operations)[-1]
    pad_value = yield_op.operands[0]
    rank = out_t.rank
    elem = out_t.element_type
    with ir.InsertionPoint(pad), pad.location:
        empty = tensor.EmptyOp(list(out_t.shape), elem).result
        ident = ir.AffineMap.get_identity(rank)
        gen = linalg.GenericOp(
            [out_t], [], [empty], ir.ArrayAttr.get([ir.AffineMapAttr.get(ident)]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank),
        )
    block = gen.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block), pad.location:
        # The pad value may be defined inside the pad's region (a constant): rebuild it here.
        if isinstance(pad_value, ir.OpResult) and pad_value.owner.operation.parent == pad.operation:
            pv = arith.ConstantOp(elem, pad_value.owner.attributes["value"]).result
        else:
            pv = pad_value
        idx_t = ir.IndexType.get()
        inb = None
        idxs = []
        for d in range(rank):
            i = linalg.IndexOp(d).result
            lo = arith.ConstantOp(idx_t, low[d]).result
            size = arith.ConstantOp(idx_t, src_t.shape[d]).result
            zero = arith.ConstantOp(idx_t, 0).result
            j = arith.SubIOp(i, lo).result
            ok = arith.AndIOp(arith.CmpIOp(arith.CmpIPredicate.sge, j, zero).result,
                              arith.CmpIOp(arith.CmpIPredicate.slt, j, size).result).result
            inb = ok if inb is None else arith.AndIOp(inb, ok).result
            # Clamp so the read stays in bounds even where its value is discarded.
            top = arith.ConstantOp(idx_t, src_t.shape[d] - 1).result
            idxs.append(arith.MinSIOp(arith.MaxSIOp(j, zero).result, top).result)
        v = tensor.ExtractOp(src, idxs).result
        linalg.YieldOp([arith.SelectOp(inb, v, pv).result])
    pad.results[0].replace_all_uses_with(gen.results[0])
    pad.erase()


def apply(func_op: ir.Operation) -> None:
    block = func_op.regions[0].blocks[0]
    for op in list(block.operations):
        if op.name == "tensor.pad":
            pad_to_generic(op)
        elif op.name == "linalg.generic" and classify(op).kind != "fill" \
                and "parallel" not in iterator_types(op):
            expand_rank0_reduction(op)


def workgroup_allocs_to_attributions(module: ir.Module) -> None:
    """memref.alloc in workgroup memory inside a kernel -> a workgroup attribution of its gpu.func, the form
    both code generators lower (SPIR-V Workgroup variables, OpenCL __local arrays)."""
    for gm in module.body.operations:
        if gm.operation.name != "gpu.module":
            continue
        for fn in gm.regions[0].blocks[0].operations:
            if fn.operation.name != "gpu.func":
                continue
            allocs = []

            def visit(op):
                if op.name == "memref.alloc" and "workgroup" in str(op.results[0].type):
                    allocs.append(op)
                return ir.WalkResult.ADVANCE

            fn.operation.walk(visit)
            if not allocs:
                continue
            if "private_attributions" in fn.attributes:
                raise UnsupportedOp("kernel with private attributions and workgroup allocations")
            entry = fn.regions[0].blocks[0]
            n = int(ir.IntegerAttr(fn.attributes["workgroup_attributions"]).value) \
                if "workgroup_attributions" in fn.attributes else 0
            for alloc in allocs:
                arg = entry.add_argument(alloc.results[0].type, alloc.location)
                alloc.results[0].replace_all_uses_with(arg)
                alloc.erase()
                n += 1
            fn.attributes["workgroup_attributions"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), n)
