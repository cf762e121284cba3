"""Kernel buffers read and written 64, 128 or 256 bits at a time become arrays of vector<1xi64>, vector<2xi64> or
vector<4xi64> (CPU Vulkan drivers: lavapipe).

llvmpipe (Mesa 22.3) loads and stores buffer memory one SIMD lane and one vector component at a time, each with a
bounds check: a vec4 of 32-bit values costs four element accesses per lane, the same 16 bytes as a vec2 of 64-bit
values two. A buffer is retyped only when every access to it is a 1-d in-bounds transfer of 4 (or every one of 8)
32-bit elements along the innermost dim at an index provably a multiple of that, or a scalar load (then a vector
load and an extract); the bytes the runtime binds stay the same. 16-bit elements likewise, 4 to an i64 (where the
kernel computes on them natively): an f16 matmul's operands were read one half per lane and component (matmul
512^3 f16, device-only CPU ms, 2026-12-01, host busy: 37.5 / 44.5 -> 21.6 / 25.1).

Measured on lavapipe (CPU ms, 2026-11-30): add 4 Mi f32 10.3 -> 8.3; bmm 8x256x64 @ 8x64x256 5.7 -> 5.1; conv 1x1
1x56x56x64->256 9.5 -> 8.6.

Where the profile reads buffers through texel buffers (texel_reads), written buffers keep vec4 stores: with the reads
on llvmpipe's image path, vector<4xi64> stores were the slower form (device-only CPU ms, Xeon host, 2026-12-01,
u64vec4 -> vec4 stores: add 4 Mi 8.0-8.2 -> 6.0, scale 2048x2048 6.0-6.3 -> 4.4-4.8, ew_chain 3.7 -> 1.4-2.8,
layernorm 1024x1024 3.5-3.6 -> 1.6, conv3x3 14.1-14.4 -> 9.9; matmul, gemv, depthwise and conv1x1 within noise).
"""

from __future__ import annotations

from ...ir.mlir import arith, ir, memref, vector
from ...ir.util import grouped_memref, multiple_of

_XFER = ("vector.transfer_read", "vector.transfer_write")


def widen_buffers(gpu_module: ir.Operation, stores: bool = True, narrow: tuple[str, ...] = ()) -> bool:
    """Retype the eligible buffer arguments of every gpu.func in `gpu_module`, in place; whether any changed.
    Transfers must be 1-d already (lane_kernels.py unrolls them). stores=False: only buffers the kernel never
    writes. `narrow`: the 16-bit element types ("f16", "i16") the kernel may compute on natively (then their
    buffers are widened too; storage-only ones are converted element by element, codegen_spirv/f16_storage.py)."""
    changed = False
    for fn in gpu_module.regions[0].blocks[0].operations:
        if fn.operation.name != "gpu.func":
            continue
        fn = fn.operation
        entry = fn.regions[0].blocks[0]
        ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        inputs = list(ftype.inputs)
        for i, arg in enumerate(list(entry.arguments)[:len(inputs)]):
            new = _retyped(fn, arg, stores, narrow)
            if new is not None:
                inputs[i] = new
                changed = True
        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(ftype.results)))
    return changed






def _segments(op: ir.Operation) -> list[int]:
    return list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))


def _indices(op: ir.Operation) -> list[ir.Value]:
    ops = list(op.operands)
    if op.name == "vector.transfer_read":  # source, indices, padding[, mask]
        return ops[1:1 + _segments(op)[1]]
    if op.name == "vector.transfer_write":  # vector, dest, indices[, mask]
        return ops[2:2 + _segments(op)[2]]
    return ops[1:]  # memref.load


def _width(op: ir.Operation) -> int:
    """Elements a 1-d, unmasked, in-bounds transfer along the innermost dim moves, when that is 4 or 8 at an
    index that is a multiple of it; else 0."""
    if _segments(op)[-1] != 0 or str(op.attributes["in_bounds"]) != "[true]":
        return 0
    vt = ir.VectorType(op.results[0].type if op.name == "vector.transfer_read" else op.operands[0].type)
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    if vt.rank != 1 or vt.shape[0] not in (4, 8) or len(amap.results) != 1 or \
            str(amap.results[0]) != f"d{amap.n_dims - 1}":
        return 0
    return vt.shape[0] if multiple_of(_indices(op)[-1], vt.shape[0]) else 0


def _retyped(fn: ir.Operation, buf: ir.Value, stores: bool, narrow: tuple[str, ...]) -> ir.Type | None:
    t = buf.type
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape or t.rank == 0:
        return None
    elem = t.element_type
    bits = 32 if isinstance(elem, ir.F32Type) else 16 if isinstance(elem, ir.F16Type) and "f16" in narrow else \
        elem.width if isinstance(elem, ir.IntegerType) and (elem.width == 32 or "i16" in narrow) else 0
    if bits not in (16, 32):
        return None
    users = [u.owner for u in buf.uses]
    if not stores and any(u.name == "vector.transfer_write" for u in users):
        return None
    widths = set()
    for u in users:
        if u.name in _XFER:
            mem = u.operands[0] if u.name == "vector.transfer_read" else u.operands[1]
            if mem != buf:
                return None
            widths.add(_width(u))
        elif u.name != "memref.load":
            return None  # a scalar store, a view or a call
    if len(widths) != 1 or 0 in widths or t.shape[-1] % min(widths):
        return None
    width = widths.pop()
    words = ir.VectorType.get([width * bits // 64], ir.IntegerType.get_signless(64))
    new_t = grouped_memref(t, width, words)
    if new_t is None:
        return None
    buf.set_type(new_t)
    vec_t = ir.VectorType.get([width], elem)
    for u in users:
        _rewrite(u, buf, words, vec_t, width)
    return new_t


def _rewrite(op: ir.Operation, mem: ir.Value, words: ir.Type, vec_t: ir.Type, width: int) -> None:
    idx_t = ir.IndexType.get()
    with ir.InsertionPoint(op), op.location:
        idx = _indices(op)
        w = arith.ConstantOp(idx_t, width).result
        outer = list(idx[:-1]) + [arith.DivUIOp(idx[-1], w).result]
        if op.name == "vector.transfer_write":
            memref.StoreOp(vector.BitCastOp(words, op.operands[0]).result, mem, outer)
        else:
            v = vector.BitCastOp(vec_t, memref.LoadOp(mem, outer).result).result
            if op.name == "memref.load":  # one element of the vector
                lane = arith.RemUIOp(idx[-1], w).result
                v = vector.ExtractOp(v, dynamic_position=[lane],
                                     static_position=[ir.ShapedType.get_dynamic_size()]).result
            op.results[0].replace_all_uses_with(v)
    op.erase()
