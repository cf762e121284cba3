"""Row scales factored out of matmuls with constant weights: (x * r * g) @ W = r * (x @ (g * W)).

RMSNorm in front of a projection computes x * r[m] * g[k], r = 1/sqrt(mean(x^2) + eps), and the matmul then waits
for the whole normalization: at decode time the norm is one more kernel on a chain of dependent kernels, each a
few microseconds of mostly launch and drain. r does not depend on k, so it leaves the sum over k: the matmul reads
x itself against weights with g folded in (a constant, folded while compiling), the sum of squares runs as a
small kernel beside it instead of before it, and r multiplies the matmul's output in its epilogue. The
normalized activation is never written. Only f32 weights fold (g * W rounded to f16 would add an error the
unfolded graph does not have).
"""

from __future__ import annotations

import numpy as np

from ...ir.linalg_info import (
    body_op_names,
    classify,
    fill_value,
    indexing_maps,
    is_identity,
    iterator_types,
    num_inputs,
)
from ...ir.mlir import arith, ir, linalg, tensor
from ...ir.util import as_operation, clone_mapped, keep_groups, reassociation_attr, reassociation_groups
from .horizontal import dense_attr, dense_constant


def _zero_fill(v: ir.Value) -> bool:
    """Whether `v` is the result of a fill (named or generic) with the constant 0.0."""
    if not isinstance(v, ir.OpResult):
        return False
    op = v.owner.operation
    scalar = op.operands[0] if op.name == "linalg.fill" else fill_value(v)
    if not isinstance(scalar, ir.OpResult) or scalar.owner.operation.name != "arith.constant":
        return False
    attr = scalar.owner.operation.attributes["value"]
    return isinstance(attr, ir.FloatAttr) and ir.FloatAttr(attr).value == 0.0


def _map(n: int, dims) -> ir.AffineMap:
    return ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(i) for i in dims])


def _matmul_maps(p: int) -> list[ir.AffineMap]:
    """x[rows, k] @ W[k, n] over loops (rows..., n, k): p parallel loops, the last of them n."""
    return [_map(p + 1, list(range(p - 1)) + [p]), _map(p + 1, (p, p - 1)), _map(p + 1, range(p))]


def _plain_matmul(op: ir.Operation) -> bool:
    """x @ W over a constant W, nothing else in the body."""
    if num_inputs(op) != 2 or body_op_names(op) != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    return indexing_maps(op) == _matmul_maps(len(iterator_types(op)) - 1) and dense_attr(op.operands[1]) is not None


def _summed_product(op: ir.Operation) -> ir.Value | None:
    """For a matmul-like generic (parallel loops rows..., n, then k summed into a zero-filled f32 output over
    the parallel loops): the product its body adds to the sum; None for any other op."""
    if op.name != "linalg.generic" or len(op.results) != 1:
        return None
    its = iterator_types(op)
    p = len(its) - 1
    if p < 2 or its != ["parallel"] * p + ["reduction"]:
        return None
    out_t = ir.RankedTensorType(op.results[0].type)
    if not isinstance(out_t.element_type, ir.F32Type) or indexing_maps(op)[-1] != _map(p + 1, range(p)):
        return None
    if not _zero_fill(op.operands[num_inputs(op)]):
        return None
    block = op.regions[0].blocks[0]
    ops = list(block.operations)
    add = ops[-1].operands[0]
    if not isinstance(add, ir.OpResult) or add.owner.operation.name != "arith.addf" or len(list(add.uses)) != 1:
        return None
    a, b = add.owner.operation.operands
    out = block.arguments[len(block.arguments) - 1]
    if a == out and b != out:
        return b
    if b == out and a != out:
        return a
    return None


def _factors(v: ir.Value, block: ir.Block) -> list[ir.Value] | None:
    """The leaves of the product tree that yields `v` (mulf ops of one use each, inside `block`)."""
    if isinstance(v, ir.OpResult) and v.owner.operation.name == "arith.mulf" and \
            v.owner.operation.parent.operation == block.owner.operation and len(list(v.uses)) == 1:
        out = []
        for o in v.owner.operation.operands:
            sub = _factors(o, block)
            if sub is None:
                return None
            out += sub
        return out
    return [v]


def _cone(v: ir.Value, block: ir.Block, ops: set, args: set) -> bool:
    """Collect the body ops and block arguments `v` is computed from; False where it reads an index."""
    if isinstance(v, ir.BlockArgument):
        if v.owner == block:
            args.add(v.arg_number)
        return True
    op = v.owner.operation
    if op.parent.operation != block.owner.operation:
        return True  # defined above the body: the epilogue sees it too
    if op.name == "linalg.index" or op.regions:
        return False
    ops.add(op)
    return all(_cone(o, block, ops, args) for o in op.operands)


def _dims(amap: ir.AffineMap) -> set[int]:
    """The loops a map reads (-1 for a compound expression)."""
    out = set()
    for e in amap.results:
        if isinstance(e, ir.AffineDimExpr):
            out.add(ir.AffineDimExpr(e).position)
        elif not isinstance(e, ir.AffineConstantExpr):
            out.add(-1)
    return out


class _Split:
    """The product x[rows, k] * g[k] * r[rows] (* W[k, n]) that `holder`'s body computes as `root`, over loops
    (rows..., n, k) in the matmul or (rows..., k) in an elementwise producer: which input is x, the constant
    k-vectors g (and W) to fold, the row factors (body values) with the ops and inputs they read. `rows_at[i]`:
    the matmul's output loop that holder's row loop i runs along (None: a unit loop a reshape drops)."""

    def __init__(self, holder: ir.Operation, root: ir.Value, rows_at: list[int | None], with_weight: bool):
        self.holder, self.rows_at = holder, rows_at
        self.x: ir.Value | None = None
        self.w: ir.Value | None = None
        self.g: list[np.ndarray] = []
        self.rows: list[ir.Value] = []
        self.row_ops: set = set()
        self.row_args: set[int] = set()
        self.reshape: ir.Operation | None = None  # the collapse_shape between an elementwise holder and its users
        self.ok = self._read(root, len(rows_at), with_weight) and self.x is not None and \
            (self.w is not None) == with_weight

    def _read(self, root: ir.Value, rows: int, with_weight: bool) -> bool:
        op = self.holder
        maps = indexing_maps(op)
        n = maps[0].n_dims
        k = n - 1
        nin = num_inputs(op)
        block = op.regions[0].blocks[0]
        leaves = _factors(root, block)
        if leaves is None:
            return False
        x_map, g_map, w_map = _map(n, list(range(rows)) + [k]), _map(n, [k]), _map(n, (k, k - 1))
        for leaf in leaves:
            if isinstance(leaf, ir.BlockArgument) and leaf.owner == block and leaf.arg_number < nin:
                i = leaf.arg_number
                v = op.operands[i]
                const = dense_attr(v) is not None
                f32 = const and isinstance(ir.RankedTensorType(v.type).element_type, ir.F32Type)
                if maps[i] == x_map and self.x is None and not const:
                    self.x = v
                    continue
                if maps[i] == g_map and f32:
                    self.g.append(dense_constant(v))
                    continue
                if with_weight and maps[i] == w_map and f32 and self.w is None:
                    self.w = v
                    continue
            ops: set = set()
            args: set[int] = set()
            if not _cone(leaf, block, ops, args) or any(a >= nin or not _dims(maps[a]) <= set(range(rows))
                                                        for a in args):
                return False
            self.rows.append(leaf)
            self.row_ops |= ops
            self.row_args |= args
        return bool(self.g or self.rows)


def _rows_through(shape: list[int], groups: list[list[int]]) -> list[int | None] | None:
    """Where each row dim of `shape` (all but the last) goes through a collapse by `groups`: the collapsed dim, or
    None for a unit dim; None when a dim of size > 1 joins another one, or joins k."""
    out: list[int | None] = [None] * (len(shape) - 1)
    for j, group in enumerate(groups):
        wide = [d for d in group if shape[d] != 1]
        if len(wide) > 1 or (j == len(groups) - 1) != (len(shape) - 1 in group):
            return None
        for d in group:
            if d < len(shape) - 1:
                out[d] = j if shape[d] != 1 and j < len(groups) - 1 else None
    return out


def _plans(block: ir.Block):
    """(split, the matmuls to rewrite with it) for every product that factors: a matmul with the scaled x in its
    own body (the importer fused the producer in), or an elementwise producer all of whose users (through one
    collapse of unit dims, if any) are matmuls reading it as x."""
    for op in block.operations:
        op = op.operation
        root = _summed_product(op)
        if root is not None and not _plain_matmul(op):
            split = _Split(op, root, list(range(len(iterator_types(op)) - 2)), True)
            if split.ok:
                yield split, [op]
            continue
        if op.name != "linalg.generic" or len(op.results) != 1 or classify(op).kind != "elementwise" or \
                not is_identity(indexing_maps(op)[-1]):
            continue
        shape = list(ir.RankedTensorType(op.results[0].type).shape)
        lhs, reshape, rows_at = op.results[0], None, list(range(len(shape) - 1))
        uses = [as_operation(u.owner) for u in lhs.uses]
        if len(uses) == 1 and uses[0].name == "tensor.collapse_shape":
            reshape, lhs = uses[0], uses[0].results[0]
            rows_at = _rows_through(shape, reassociation_groups(reshape))
            if rows_at is None:
                continue
        p = ir.RankedTensorType(lhs.type).rank
        users = [as_operation(u.owner) for u in lhs.uses]
        if not users or any(_summed_product(u) is None or not _plain_matmul(u) or u.operands[0] != lhs
                            or len(iterator_types(u)) != p + 1 for u in users):
            continue
        split = _Split(op, list(op.regions[0].blocks[0].operations)[-1].operands[0], rows_at, False)
        split.reshape = reshape
        if split.ok:
            yield split, users


def factor_row_scales(func_op: ir.Operation) -> int:
    """Rewrite every matmul of func_op's top level that reads such a scaled x; returns how many."""
    done = 0
    for split, matmuls in list(_plans(func_op.regions[0].blocks[0])):
        fused = split.holder in matmuls
        for mm in matmuls:
            _rewrite(mm, split, split.w if fused else mm.operands[1])
            mm.erase()
            done += 1
        if split.reshape is not None:
            split.reshape.erase()
        if not fused:
            split.holder.erase()
    return done


def _row_groups(shape: list[int]) -> list[list[int]]:
    """Reassociation of an output [rows..., n] that drops its unit rows, keeping n and at least one row: each
    kept dim with the unit dims before it."""
    rows = len(shape) - 1
    kept = [i for i in range(rows) if shape[i] != 1] or [rows - 1]
    return keep_groups([i in kept or i == rows for i in range(len(shape))])


def _rewrite(mm: ir.Operation, split: _Split, weight: ir.Value) -> None:
    """x @ (g * W) into zeros, times the row factors, over the output's dims but its unit rows (so that split_k's
    sum and this epilogue meet without a reshape between them and run as one kernel); mm's uses move to it."""
    w = dense_constant(weight)
    for g in split.g:
        w = w * g[:, None]
    big = ir.RankedTensorType(mm.results[0].type)
    f32 = big.element_type
    groups = _row_groups(list(big.shape))
    p = len(groups)
    out_t = ir.RankedTensorType.get([big.shape[g[-1]] for g in groups], f32)
    at = {g[-1]: j for j, g in enumerate(groups) if big.shape[g[-1]] != 1}  # unit rows read index 0
    rows_at = [at.get(r) if r is not None else None for r in split.rows_at]
    reassoc = reassociation_attr(groups)
    with ir.InsertionPoint(mm), mm.location:
        x = split.x
        if split.reshape is not None:
            x = tensor.CollapseShapeOp(split.reshape.results[0].type, x,
                                       split.reshape.attributes["reassociation"]).result
        if p != big.rank:
            xt = ir.RankedTensorType(x.type)
            x = tensor.CollapseShapeOp(ir.RankedTensorType.get([xt.shape[g[-1]] for g in groups], f32), x, reassoc)
        w_t = ir.RankedTensorType(weight.type)
        folded = arith.ConstantOp(w_t, ir.DenseElementsAttr.get(np.ascontiguousarray(w, np.float32), type=w_t)).result
        init = linalg.fill(arith.ConstantOp(f32, 0.0).result, outs=[tensor.EmptyOp(list(out_t.shape), f32).result])
        new = linalg.GenericOp(
            [out_t], [x, folded], [init],
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in _matmul_maps(p)]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>")
                              for it in ["parallel"] * p + ["reduction"]]))
        body = new.regions[0].blocks.append(f32, f32, f32)
        with ir.InsertionPoint(body):
            linalg.YieldOp([arith.AddFOp(body.arguments[2], arith.MulFOp(body.arguments[0], body.arguments[1]))])
    result = _epilogue(new, split, out_t, rows_at) if split.rows else new.results[0]
    if p != big.rank:
        with ir.InsertionPoint(mm), mm.location:
            result = tensor.ExpandShapeOp(big, result, reassoc, [], list(big.shape)).result
    mm.results[0].replace_all_uses_with(result)


def _row_map(amap: ir.AffineMap, rows_at: list[int | None], p: int) -> ir.AffineMap:
    """A row input's map (it reads only the holder's row loops) over the matmul's p output loops."""
    exprs = []
    for e in amap.results:
        at = rows_at[ir.AffineDimExpr(e).position] if isinstance(e, ir.AffineDimExpr) else None
        exprs.append(ir.AffineDimExpr.get(at) if at is not None else
                     e if isinstance(e, ir.AffineConstantExpr) else ir.AffineConstantExpr.get(0))
    return ir.AffineMap.get(p, 0, exprs)


def _epilogue(mm: ir.Operation, split: _Split, out_t: ir.RankedTensorType, rows_at: list[int | None]) -> ir.Value:
    """out[rows, n] = p[rows, n] * the row factors, computed from the holder's row inputs."""
    h = split.holder
    args = sorted(split.row_args)
    ins = [mm.results[0]] + [h.operands[a] for a in args]
    p = out_t.rank
    ident = ir.AffineMap.get_identity(p)
    row_maps = [_row_map(indexing_maps(h)[a], rows_at, p) for a in args]
    with ir.InsertionPoint.after(mm), mm.location:
        init = tensor.EmptyOp(list(out_t.shape), out_t.element_type).result
        op = linalg.GenericOp(
            [out_t], ins, [init], ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in [ident] + row_maps + [ident]]),
            ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * p))
    old = h.regions[0].blocks[0]
    body = op.regions[0].blocks.append(*[ir.RankedTensorType(v.type).element_type if isinstance(v.type, ir.ShapedType)
                                         else v.type for v in ins + [init]])
    mapping = {old.arguments[a]: body.arguments[1 + i] for i, a in enumerate(args)}
    with ir.InsertionPoint(body), mm.location:
        for o in old.operations:  # body order is a topological order
            if o.operation in split.row_ops:
                clone_mapped(o.operation, mapping)
        value = body.arguments[0]
        for r in split.rows:
            value = arith.MulFOp(value, mapping.get(r, r)).result
        linalg.YieldOp([value])
    return op.results[0]


__all__ = ["factor_row_scales"]
