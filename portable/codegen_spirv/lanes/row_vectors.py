"""2-d elementwise thread tiles unrolled into their rows (CPU Vulkan drivers: lavapipe; and any Vulkan device whose
workgroup count a grid of rows passes, where strategy.choose gives each thread several rows).

With `elementwise_rows_per_thread` (strategy.py) a thread of an elementwise kernel takes R rows of 8 columns, so
an operand broadcast along the rows (a bias) is read once for R rows: on llvmpipe every buffer access is a loop
over the SIMD lanes, and the bias is a quarter of a bias-GELU-residual kernel's accesses. Vectorization leaves
vector<R x 8> values, which SPIR-V cannot hold; here every op on them becomes R ops on vector<8> rows (then
split_vectors.py halves those): elementwise arith/math, constants, broadcasts, 2-d transfers along the innermost
dim (a broadcast read once), and the from_elements that repeats one row's elements. A function with any other
op on a 2-d vector is left as it is.
"""

from __future__ import annotations

import numpy as np

from ...ir.linalg_info import indexing_maps
from ...ir.mlir import arith, ir, vector
from ...ir.util import all_in_bounds


def row_tiles_ok(ops: list[ir.Operation]) -> bool:
    """Whether a group's elementwise generics vectorize over 2-d tiles to nothing but what is unrolled here: 32-bit
    operands read along both innermost loops, along the innermost one only (a bias), or along neither."""
    for op in ops:
        for v in list(op.operands) + list(op.results):
            t = v.type
            et = ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t
            if not (isinstance(et, ir.F32Type) or isinstance(et, ir.IntegerType) and et.width == 32):
                return False
        for amap in indexing_maps(op):
            n = amap.n_dims
            dims = [str(e) for e in amap.results]
            row, col = f"d{n - 2}", f"d{n - 1}"
            if row in dims and dims[-2:] != [row, col] or col in dims and dims[-1] != col or \
                    any(not d.startswith("d") for d in dims):
                return False
    return True


def unroll_rows(gpu_module: ir.Operation) -> bool:
    """Unroll the 2-d vectors of every gpu.func in `gpu_module` into rows, in place; whether any was."""
    changed = False
    for fn in gpu_module.regions[0].blocks[0].operations:
        fn = fn.operation
        if fn.name != "gpu.func":
            continue
        ops = []
        fn.walk(lambda o, ops=ops: (ops.append(o.operation), ir.WalkResult.ADVANCE)[1])
        two_d = [op for op in ops if _touches(op)]
        if two_d and all(_handled(op) for op in two_d):
            rows: dict = {}
            for op in two_d:
                with ir.InsertionPoint(op), op.location:
                    _unroll(op, rows)
            for op in reversed(two_d):
                op.erase()
            changed = True
    return changed


def _two_d(t: ir.Type) -> bool:
    return isinstance(t, ir.VectorType) and ir.VectorType(t).rank == 2


def _touches(op: ir.Operation) -> bool:
    return any(_two_d(v.type) for v in list(op.operands) + list(op.results))


def _row_type(t: ir.Type) -> ir.Type:
    vt = ir.VectorType(t)
    return ir.VectorType.get([vt.shape[1]], vt.element_type)


def _segments(op: ir.Operation) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _transfer_rows(op: ir.Operation) -> str | None:
    """'rows' for a 2-d in-bounds transfer whose dims are the memref's last two, 'broadcast' for a read whose
    first dim is a broadcast of the innermost one (the same row each time), else None."""
    if _segments(op)[-1] != 0 or not all_in_bounds(op):
        return None
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    n = amap.n_dims
    res = [str(e) for e in amap.results]
    if res == [f"d{n - 2}", f"d{n - 1}"]:
        return "rows"
    if op.name == "vector.transfer_read" and res == ["0", f"d{n - 1}"]:
        return "broadcast"
    return None


def _repeated_row(op: ir.Operation) -> ir.Value | None:
    """The 1-d vector whose elements a 2-d from_elements repeats in every row (vector.to_elements of it)."""
    vt = ir.VectorType(op.results[0].type)
    elems = list(op.operands)
    width = vt.shape[1]
    first = elems[:width]
    src = first[0].owner.operation if isinstance(first[0], ir.OpResult) else None
    if src is None or src.name != "vector.to_elements" or list(src.results) != first or \
            ir.VectorType(src.operands[0].type).shape != [width]:
        return None
    if any(elems[r * width:(r + 1) * width] != first for r in range(vt.shape[0])):
        return None
    return src.operands[0]


def _handled(op: ir.Operation) -> bool:
    name = op.name
    if name == "arith.constant":
        return isinstance(op.attributes["value"], ir.DenseElementsAttr)
    if name in ("vector.transfer_read", "vector.transfer_write"):
        return _transfer_rows(op) is not None
    if name == "vector.from_elements":
        return _repeated_row(op) is not None
    if name == "vector.broadcast":
        src = op.operands[0].type
        return not isinstance(src, ir.VectorType) or ir.VectorType(src).rank == 1
    return (name.startswith(("arith.", "math.")) or name == "vector.fma") and not op.regions and \
        all(_two_d(v.type) or not isinstance(v.type, ir.VectorType) for v in list(op.operands) + list(op.results))


def _get(v: ir.Value, rows: dict, r: int) -> ir.Value:
    return rows[v][r] if v in rows else v  # a scalar operand serves every row


def _unroll(op: ir.Operation, rows: dict) -> None:
    name = op.name
    if name == "vector.transfer_write":
        seg = _segments(op)
        value, mem, idx = op.operands[0], op.operands[1], list(op.operands)[2:2 + seg[2]]
        for r in range(ir.VectorType(value.type).shape[0]):
            vector.TransferWriteOp(None, rows[value][r], mem, _at_row(idx, r), _row_map(op), [True])
        return
    res = op.results[0]
    count = ir.VectorType(res.type).shape[0]
    rt = _row_type(res.type)
    if name == "arith.constant":
        attr = ir.DenseElementsAttr(op.attributes["value"])
        if attr.is_splat:
            c = arith.ConstantOp(rt, ir.DenseElementsAttr.get_splat(rt, attr.get_splat_value())).result
            rows[res] = [c] * count
        else:
            values = np.array(attr)
            rows[res] = [arith.ConstantOp(rt, ir.DenseElementsAttr.get(np.ascontiguousarray(values[r]), type=rt)).result
                         for r in range(count)]
    elif name == "vector.transfer_read":
        seg = _segments(op)
        mem, idx, pad = op.operands[0], list(op.operands)[1:1 + seg[1]], op.operands[1 + seg[1]]
        if _transfer_rows(op) == "broadcast":
            one = vector.TransferReadOp(rt, mem, idx, _row_map(op), pad, [True]).result
            rows[res] = [one] * count
        else:
            rows[res] = [vector.TransferReadOp(rt, mem, _at_row(idx, r), _row_map(op), pad, [True]).result
                         for r in range(count)]
    elif name == "vector.from_elements":
        rows[res] = [_repeated_row(op)] * count
    elif name == "vector.broadcast":
        src = op.operands[0]
        one = src if isinstance(src.type, ir.VectorType) else vector.BroadcastOp(rt, src).result
        rows[res] = [one] * count
    else:
        rows[res] = [ir.Operation.create(name, results=[rt], operands=[_get(v, rows, r) for v in op.operands],
                                         attributes={k: op.attributes[k] for k in op.attributes}).results[0]
                     for r in range(count)]


def _at_row(idx: list, r: int) -> list:
    """Indices of row r: the second-innermost index plus r."""
    if not r:
        return idx
    return idx[:-2] + [arith.AddIOp(idx[-2], arith.ConstantOp(ir.IndexType.get(), r).result).result, idx[-1]]


def _row_map(op: ir.Operation) -> ir.AffineMap:
    n = ir.AffineMapAttr(op.attributes["permutation_map"]).value.n_dims
    return ir.AffineMap.get_minor_identity(n, 1)
