"""Small IR rewrites that put the graph into the shapes dispatch formation and tiling expect.

- one-row matmuls that share their left operand become one over concatenated weights (horizontal.py), whose
  slices stay views;
- a matmul over constant weights that reads x * r[row] * g[k] (RMSNorm) reads x against g * W, r applied in
  its epilogue (norm_factor.py);
- pads, concats and static slices become gather generics (see gathers.py), kernels of their own;
- reductions with no parallel loop (a full reduction to a 0-d tensor) get a unit parallel loop, so the
  op can be distributed to a workgroup like every other;
- ops summing into a constant start from zero and add it as an epilogue; scalar constant casts fold;
  importer asserts go; min/max on booleans become or/and; scalars computed at the top level move into the
  kernels that use them (host_scalars.py).
"""

from __future__ import annotations

from ...errors import UnsupportedOp
from ...ir.linalg_info import classify, fill_value, indexing_maps, iterator_types, num_inputs
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import find_ops, reassociation_attr
from .gather_fusion import fuse_gathers
from .gathers import collapse_of_broadcast_to_generic, concat_to_generic, extract_slice_to_generic, pad_to_generic
from .generics import broadcast_constant, rebuild_generic
from .horizontal import VIEW, fuse_shared_lhs_matmuls
from .host_scalars import sink_host_scalars
from .norm_factor import factor_row_scales


def _shift(amap: ir.AffineMap, lead: bool) -> ir.AffineMap:
    """Same map over one more, leading, dim; with `lead` the new dim also leads the results."""
    n = amap.n_dims + 1
    exprs = [e.shift_dims(amap.n_dims, 1) for e in amap.results]
    if lead:
        exprs = [ir.AffineDimExpr.get(0)] + exprs
    return ir.AffineMap.get(n, 0, exprs)


def _reassociation(rank: int) -> ir.ArrayAttr:
    """Old rank-r shape S <-> new shape [1] + S: the new unit dim joins the old first dim."""
    if rank == 0:
        return ir.ArrayAttr.get([])
    return reassociation_attr([[0, 1]] + [[d + 1] for d in range(1, rank)])


def _shift_index_ops(block: ir.Block) -> None:
    """linalg.index d -> linalg.index d + 1 in a body whose loops got a new leading one."""
    i64 = ir.IntegerType.get_signless(64)
    for o in block.operations:
        if o.operation.name == "linalg.index":
            dim = ir.IntegerAttr(o.operation.attributes["dim"]).value
            o.operation.attributes["dim"] = ir.IntegerAttr.get(i64, dim + 1)
        for r in o.operation.regions:
            for b in r.blocks:
                _shift_index_ops(b)


def expand_rank0_reduction(op: ir.Operation) -> None:
    """A linalg.generic with only reduction loops (a full reduction, to a 0-d or all-ones tensor) gets a
    leading unit parallel loop and output dim, so it maps to a workgroup like every other op."""
    nin = num_inputs(op)
    outs = list(op.operands)[nin:]
    if len(outs) != 1:
        raise UnsupportedOp(f"a full reduction with {len(outs)} outputs is not supported yet")
    init = outs[0]
    it = ir.RankedTensorType(init.type)
    elem, shape = it.element_type, list(it.shape)
    t1 = ir.RankedTensorType.get([1] + shape, elem)
    reassoc = _reassociation(len(shape))
    scalar = fill_value(init)
    with ir.InsertionPoint(op), op.location:
        if scalar is not None:
            # Re-create the fill at the new shape so it fuses into the reduction's kernel.
            new_init = linalg.fill(scalar, outs=[tensor.EmptyOp([1] + shape, elem).result])
        else:
            new_init = tensor.ExpandShapeOp(t1, init, reassoc, [], [1] + shape).result
    maps = [_shift(m, False) for m in indexing_maps(op)[:nin]] + [_shift(indexing_maps(op)[nin], True)]
    its = ["parallel"] + iterator_types(op)
    nargs = len(op.regions[0].blocks[0].arguments)
    new = rebuild_generic(op, list(op.operands)[:nin], [new_init], maps, its, list(range(nargs)), [t1])
    _shift_index_ops(new.regions[0].blocks[0])  # loop d is now loop d + 1 (a gather's linalg.index reads it)
    with ir.InsertionPoint(op), op.location:
        back = tensor.CollapseShapeOp(init.type, new.results[0], reassoc).result
    op.results[0].replace_all_uses_with(back)
    op.erase()


def _drop_asserts(func_op: ir.Operation) -> None:
    """cf.assert (shape checks the ONNX importer leaves behind) has no GPU lowering; shapes are static and
    checked on the host before a run, so the asserts are dropped."""
    for a in find_ops(func_op, ("cf.assert",)):
        a.erase()


def split_constant_init(op: ir.Operation) -> None:
    """An op that sums into a constant (e.g. a conv whose init is the broadcast bias) would make
    bufferization copy the constant on the host, and a broadcast of a constant would be a kernel of its own.
    When its combiner is an add, start from zero instead and add the constant afterwards (read through the
    broadcast's map): an elementwise epilogue that dispatch formation fuses in place."""
    nin = num_inputs(op)
    outs = list(op.operands)[nin:]
    if len(outs) != 1 or len(op.results) != 1:
        return
    c = outs[0]
    bcast = broadcast_constant(c)
    if not (isinstance(c, ir.OpResult) and c.owner.operation.name == "arith.constant") and bcast is None:
        return
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    acc = block.arguments[nin]
    combiner = ops[-1].operands[0].owner if len(ops) >= 2 and isinstance(ops[-1].operands[0], ir.OpResult) else None
    if combiner is None or combiner.operation.name not in ("arith.addf", "arith.addi") or \
            acc not in list(combiner.operands) or len(list(acc.uses)) != 1:
        return
    t = ir.RankedTensorType(c.type)
    elem = t.element_type
    zero = ir.FloatAttr.get(elem, 0.0) if isinstance(elem, ir.FloatType) else ir.IntegerAttr.get(elem, 0)
    ident = ir.AffineMap.get_identity(t.rank)
    const, const_map = bcast if bcast is not None else (c, ident)
    with ir.InsertionPoint(op), op.location:
        filled = linalg.fill(arith.ConstantOp(elem, zero).result, outs=[tensor.EmptyOp(list(t.shape), elem).result])
    op.operands[nin] = filled
    if bcast is not None and not list(c.uses):
        c.owner.operation.erase()
    with ir.InsertionPoint.after(op), op.location:
        add = linalg.GenericOp(
            [t], [op.results[0], const], [tensor.EmptyOp(list(t.shape), elem).result],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in (ident, const_map, ident)]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * t.rank))
    body = add.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(body), op.location:
        s_ = (arith.AddFOp if isinstance(elem, ir.FloatType) else arith.AddIOp)(body.arguments[0], body.arguments[1])
        linalg.YieldOp([s_.result])
    op.results[0].replace_all_uses_except(add.results[0], add.operation)


_SCALAR_CASTS = {"arith.truncf", "arith.extf", "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"}


def _fold_scalar_casts(func_op: ir.Operation) -> None:
    """A cast of a scalar constant at the top level (an importer's f64 literal turned f32) would stay a host
    computation; fold it into a constant of the result type."""
    for op in list(func_op.regions[0].blocks[0].operations):
        if op.name not in _SCALAR_CASTS or isinstance(op.results[0].type, ir.ShapedType):
            continue
        src = op.operands[0]
        if not (isinstance(src, ir.OpResult) and src.owner.operation.name == "arith.constant"):
            continue
        a = src.owner.attributes["value"]
        value = ir.FloatAttr(a).value if isinstance(a, ir.FloatAttr) else ir.IntegerAttr(a).value
        t = op.results[0].type
        attr = ir.FloatAttr.get(t, float(value)) if isinstance(t, ir.FloatType) else ir.IntegerAttr.get(t, int(value))
        with ir.InsertionPoint(op), op.location:
            new = arith.ConstantOp(t, attr).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def _refill_reshape(op: ir.Operation) -> None:
    """A reshape of a fill (a softmax's -inf init, expanded to keepdim form) would be a host copy after
    bufferization: fill the reshaped tensor directly, so dispatch formation fuses the fill into its user."""
    value = fill_value(op.operands[0])
    if value is None:
        return
    t = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op), op.location:
        filled = linalg.fill(value, outs=[tensor.EmptyOp(list(t.shape), t.element_type).result])
    op.results[0].replace_all_uses_with(filled)
    op.erase()


# min/max on i1 as logic: unsigned, true (1) is the larger; signed, true (-1) is the smaller.
_I1_MINMAX = {"arith.maxui": arith.OrIOp, "arith.minsi": arith.OrIOp, "arith.minui": arith.AndIOp,
              "arith.maxsi": arith.AndIOp}


def _i1_minmax_to_logic(func_op: ir.Operation) -> None:
    """arith min/max on booleans (ONNX ReduceMax/ReduceMin on bool) -> or/and, which every code generator
    takes (OpenCL C has no min/max on its bool type)."""
    def is_i1(op):
        t = op.results[0].type
        elem = ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t
        return isinstance(elem, ir.IntegerType) and ir.IntegerType(elem).width == 1

    for op in find_ops(func_op, tuple(_I1_MINMAX), is_i1):
        with ir.InsertionPoint(op), op.location:
            new = _I1_MINMAX[op.name](op.operands[0], op.operands[1]).result
        op.results[0].replace_all_uses_with(new)
        op.erase()


def apply(func_op: ir.Operation, vector_gathers: bool = False, recompute: bool = True) -> None:
    """`vector_gathers`: the profile vectorizes gathers (float pads then read unpadded dims unchecked);
    `recompute`: values may be computed again where many positions read them (GPU profiles)."""
    _drop_asserts(func_op)
    _fold_scalar_casts(func_op)
    fuse_shared_lhs_matmuls(func_op)  # before the slices it leaves become gathers
    factor_row_scales(func_op)  # after the merge: one folded weight and one epilogue per merged matmul
    _i1_minmax_to_logic(func_op)
    block = func_op.regions[0].blocks[0]
    for op in list(block.operations):
        if op.name in ("tensor.expand_shape", "tensor.collapse_shape"):
            _refill_reshape(op)
    for op in list(block.operations):
        if op.name == "tensor.pad":
            pad_to_generic(op, vectorizable=vector_gathers)
        elif op.name == "tensor.concat":
            concat_to_generic(op)
        elif op.name == "tensor.extract_slice" and VIEW not in op.attributes:
            extract_slice_to_generic(op)
        elif op.name == "tensor.collapse_shape":
            collapse_of_broadcast_to_generic(op)
    fuse_gathers(func_op, recompute)
    # After the gathers (a pad value may be such a scalar), before 0-d ops get their unit loop (so do the
    # inputs it adds).
    sink_host_scalars(func_op)
    for op in list(block.operations):
        if op.name == "linalg.generic" and classify(op).kind != "fill" and "parallel" not in iterator_types(op):
            expand_rank0_reduction(op)
    for op in list(block.operations):
        if op.name == "linalg.generic" and classify(op).kind != "fill":
            split_constant_init(op)
