"""1-d vectors of more than 4 elements split into vec4 pieces (and the rest: 7 = 4 + 3), the widest SPIR-V vector
(CPU Vulkan drivers: lavapipe; any Vulkan device for a channelwise convolution's whole 7-column rows).

An elementwise thread tile of 8 lets wide_buffers.py read and write 32 bytes per access (vector<4xi64>): on
llvmpipe every buffer access is a loop over the lanes whose cost is mostly per access, so fewer, wider accesses
pay. The arithmetic stays on vec4: every op on vector<8xT> becomes two ops on the halves. Handled: elementwise
arith/math ops and vector.fma, constants, broadcasts of scalars, bitcasts, 1-d minor-identity transfers, and
the halves taken from and joined into 8-element vectors (subgroup_rows.py: vector.extract_strided_slice of a half,
vector.shuffle of two halves in order). A function with any other op on 8-element vectors is left whole, and its
SPIR-V lowering fails: groups whose ops `plain_elementwise` does not vouch for get tiles of 4 instead (pipeline).
"""

from __future__ import annotations

import numpy as np

from ...ir.mlir import arith, ir, vector

WIDE, HALF = 8, 4


def plain_elementwise(ops: list[ir.Operation]) -> bool:
    """Whether a group's ops vectorize to nothing but the ops split here: linalg.generics whose bodies hold only
    arith and math ops (no linalg.index, no tensor.extract: those vectorize to steps, gathers and insert loops)
    and whose operands run along the innermost loop or not at all (a transposed read is no minor-identity
    transfer: lavapipe failed to compile transpose(relu(a @ b)))."""
    return all(op.name == "linalg.generic" and
               all(b.name.startswith(("arith.", "math.")) or b.name == "linalg.yield"
                   for b in op.regions[0].blocks[0].operations) and
               all(_along_innermost(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"]))
               for op in ops)


def _along_innermost(amap: ir.AffineMap) -> bool:
    """The map's last result is the innermost loop, or no result names that loop (a broadcast along it)."""
    inner = amap.n_dims - 1
    if amap.results and str(amap.results[-1]) == f"d{inner}":
        return True
    return all(f"d{inner}" not in str(e) for e in amap.results)


def split_wide_vectors(gpu_module: ir.Operation) -> bool:
    """Split the 8-element vectors of every gpu.func in `gpu_module`, in place; whether any function was."""
    changed = False
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name == "gpu.func" and _splittable(fn.operation):
            changed |= _split_func(fn.operation)
    return changed


def _wide(t: ir.Type) -> bool:
    return isinstance(t, ir.VectorType) and ir.VectorType(t).rank == 1 and ir.VectorType(t).shape[0] > HALF


def _eight(t: ir.Type) -> bool:
    return _wide(t) and ir.VectorType(t).shape[0] == WIDE


def _sizes(t: ir.Type) -> list[int]:
    """The pieces a wide vector splits into: vec4s, then the rest (a 7-column convolution row: 4 + 3)."""
    n = ir.VectorType(t).shape[0]
    return [HALF] * (n // HALF) + ([n % HALF] if n % HALF else [])


def _starts(t: ir.Type) -> list[int]:
    return [HALF * i for i in range(len(_sizes(t)))]


def _piece_types(t: ir.Type) -> list[ir.Type]:
    et = ir.VectorType(t).element_type
    return [ir.VectorType.get([n], et) for n in _sizes(t)]


def _touches(op: ir.Operation) -> bool:
    return any(_wide(v.type) for v in list(op.operands) + list(op.results))


def _elementwise(op: ir.Operation) -> bool:
    return (op.name.startswith(("arith.", "math.")) or op.name == "vector.fma") and op.name != "arith.constant" and \
        not op.regions and all(_wide(v.type) or not isinstance(v.type, ir.VectorType)
                               for v in list(op.operands) + list(op.results))


def _handled(op: ir.Operation) -> bool:
    if _elementwise(op):
        return True
    if op.name == "arith.constant":
        return isinstance(op.attributes["value"], ir.DenseElementsAttr)
    if op.name == "vector.broadcast":
        return not isinstance(op.operands[0].type, ir.VectorType)
    if op.name == "vector.bitcast":
        src, dst = ir.VectorType(op.operands[0].type), ir.VectorType(op.results[0].type)
        return src.rank == dst.rank == 1 and src.shape[0] % 2 == 0 and dst.shape[0] % 2 == 0 and \
            all(_eight(t) or not _wide(t) for t in (src, dst))
    if op.name == "vector.extract_strided_slice":
        return _half_slice(op) is not None
    if op.name == "vector.shuffle":
        return _joined(op)
    if op.name in ("vector.transfer_read", "vector.transfer_write"):
        seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
        return seg[-1] == 0 and len(amap.results) == 1 and str(amap.results[0]) == f"d{amap.n_dims - 1}"
    return False


def _half_slice(op: ir.Operation) -> int | None:
    """Which half (0, 1) a 1-d extract_strided_slice of an 8-element vector takes, when it takes one."""
    offsets = [int(x) for x in ir.ArrayAttr(op.attributes["offsets"])]
    sizes = [int(x) for x in ir.ArrayAttr(op.attributes["sizes"])]
    strides = [int(x) for x in ir.ArrayAttr(op.attributes["strides"])]
    if not _eight(op.operands[0].type) or sizes != [HALF] or strides != [1] or offsets not in ([0], [HALF]):
        return None
    return offsets[0] // HALF


def _joined(op: ir.Operation) -> bool:
    """A vector.shuffle that puts two 4-element vectors one after the other."""
    mask = [int(x) for x in ir.DenseI64ArrayAttr(op.attributes["mask"])]
    return mask == list(range(WIDE)) and all(ir.VectorType(v.type).shape == [HALF] for v in op.operands)


def _splittable(fn: ir.Operation) -> bool:
    ops = []
    fn.walk(lambda o: (ops.append(o.operation), ir.WalkResult.ADVANCE)[1])
    wide = [op for op in ops if _touches(op)]
    return bool(wide) and all(_handled(op) for op in wide)


def _half_type(t: ir.Type) -> ir.Type:
    vt = ir.VectorType(t)
    return ir.VectorType.get([vt.shape[0] // 2], vt.element_type)


def _split_func(fn: ir.Operation) -> bool:
    ops = []
    fn.walk(lambda o: (ops.append(o.operation), ir.WalkResult.ADVANCE)[1])
    halves: dict = {}
    for op in [o for o in ops if _touches(o)]:
        with ir.InsertionPoint(op), op.location:
            _split_op(op, halves)
    # Every wide value now has halves; its ops go, users first.
    for op in reversed([o for o in ops if _touches(o)]):
        op.erase()
    return True


def _parts(v: ir.Value, halves: dict) -> tuple[ir.Value, ...]:
    if v in halves:
        return halves[v]
    return (v,) * 8  # a scalar operand is used by every piece


def _split_op(op: ir.Operation, halves: dict) -> None:
    name = op.name
    if name == "arith.constant":
        attr = ir.DenseElementsAttr(op.attributes["value"])
        t = op.results[0].type
        if attr.is_splat:
            parts = [ir.DenseElementsAttr.get_splat(pt, attr.get_splat_value()) for pt in _piece_types(t)]
        else:
            values = np.array(attr)
            parts = [ir.DenseElementsAttr.get(np.ascontiguousarray(values[s:s + ir.VectorType(pt).shape[0]]), type=pt)
                     for s, pt in zip(_starts(t), _piece_types(t))]
        halves[op.results[0]] = tuple(arith.ConstantOp(p.type, p).result for p in parts)
    elif name == "vector.broadcast":
        halves[op.results[0]] = tuple(vector.BroadcastOp(pt, op.operands[0]).result
                                      for pt in _piece_types(op.results[0].type))
    elif name == "vector.bitcast":
        _split_bitcast(op, halves)
    elif name == "vector.extract_strided_slice":
        op.results[0].replace_all_uses_with(halves[op.operands[0]][_half_slice(op)])
    elif name == "vector.shuffle":
        halves[op.results[0]] = (op.operands[0], op.operands[1])
    elif name == "vector.transfer_read":
        _split_read(op, halves)
    elif name == "vector.transfer_write":
        _split_write(op, halves)
    else:  # elementwise
        results = []
        for i, pt in enumerate(_piece_types(next(v.type for v in list(op.operands) + list(op.results)
                                                 if _wide(v.type)))):
            operands = [_parts(v, halves)[i] for v in op.operands]
            types = [ir.VectorType.get(ir.VectorType(pt).shape, ir.VectorType(r.type).element_type)
                     if _wide(r.type) else r.type for r in op.results]
            new = ir.Operation.create(name, results=types, operands=operands,
                                      attributes={k: op.attributes[k] for k in op.attributes})
            results.append(new.results[0])
        halves[op.results[0]] = tuple(results)


def _split_bitcast(op: ir.Operation, halves: dict) -> None:
    src, res = op.operands[0], op.results[0]
    if _wide(src.type):
        s0, s1 = halves[src]
    else:  # e.g. vector<4xi64> from wide_buffers.py: its halves are slices
        n = ir.VectorType(src.type).shape[0] // 2
        s0, s1 = (vector.ExtractStridedSliceOp(_half_type(src.type), src, [i * n], [n], [1]).result
                  for i in range(2))
    parts = tuple(vector.BitCastOp(_half_type(res.type), s).result for s in (s0, s1))
    if _wide(res.type):
        halves[res] = parts
    else:  # back to vector<4xi64> for a store
        n = ir.VectorType(res.type).shape[0] // 2
        zero = arith.ConstantOp(res.type, ir.DenseElementsAttr.get_splat(
            res.type, ir.IntegerAttr.get(ir.VectorType(res.type).element_type, 0))).result
        low = vector.InsertStridedSliceOp(parts[0], zero, [0], [1]).result
        full = vector.InsertStridedSliceOp(parts[1], low, [n], [1]).result
        res.replace_all_uses_with(full)


def _offset(idx: list[ir.Value], i: int) -> list[ir.Value]:
    if not i:
        return idx
    return idx[:-1] + [arith.AddIOp(idx[-1], arith.ConstantOp(ir.IndexType.get(), i * HALF).result).result]


def _split_read(op: ir.Operation, halves: dict) -> None:
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    mem, idx, pad = operands[0], operands[1:1 + seg[1]], operands[1 + seg[1]]
    pieces = _piece_types(op.results[0].type)
    halves[op.results[0]] = tuple(
        vector.TransferReadOp(pt, mem, _offset(idx, i), op.attributes["permutation_map"], pad,
                              op.attributes["in_bounds"]).result for i, pt in enumerate(pieces))


def _split_write(op: ir.Operation, halves: dict) -> None:
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    operands = list(op.operands)
    value, mem, idx = operands[0], operands[1], operands[2:2 + seg[2]]
    for i, part in enumerate(halves[value]):
        vector.TransferWriteOp(None, part, mem, _offset(idx, i), op.attributes["permutation_map"],
                               op.attributes["in_bounds"])
