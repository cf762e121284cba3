"""Streaming stores: a kernel that moves more bytes than the device's cache holds stores with nontemporal hints.

A plain store first brings its cache line in (write-allocate), so a kernel streaming past the last-level cache
reads every line it writes. A nontemporal store writes the line without reading it. PoCL on a 2-core EPYC (32 MiB
L3), an add of float16 per work-item, back to back: 4 Mi floats (48 MiB moved) 1.24 -> 0.95 ms, 8 Mi 3.8 -> 3.0
ms; 1-2 Mi (12-24 MiB, in cache) no gain. The hint goes on vector stores of at least 16 bytes into the kernel's
buffers (upstream's `nontemporal` attribute), which the OpenCL C emitter writes as `__builtin_nontemporal_store`
where the address is aligned; a code generator may drop the hint. Only the PoCL profile sets the threshold:
lavapipe's add of 4 Mi floats took the same 17-19 ms with SPIR-V's `Nontemporal` on its stores (llvmpipe's
per-lane access loop sets its rate), and streaming hints on the H200 gained nothing (h200/session10).
"""

from __future__ import annotations

from ..ir.mlir import ir
from ..ir.util import base_buffer, find_ops

MIN_STORE_BYTES = 16  # narrower streaming stores would each fill a write-combining buffer partway


def _bits(t: ir.Type) -> int:
    """Bits of a scalar or vector type (0 where unknown)."""
    if isinstance(t, ir.VectorType):
        vt = ir.VectorType(t)
        n = 1
        for d in vt.shape:
            n *= d
        return n * _bits(vt.element_type)
    return int(getattr(t, "width", 0) or 0)


def _nbytes(t: ir.Type) -> int | None:
    """Bytes of a statically shaped memref (None otherwise)."""
    if not isinstance(t, ir.MemRefType) or not t.has_static_shape:
        return None
    mt = ir.MemRefType(t)
    n = 1
    for d in mt.shape:
        n *= d
    return n * _bits(mt.element_type) // 8


def mark(gpu_module: ir.Operation, min_kernel_bytes: int) -> int:
    """Set `nontemporal` on the wide vector stores into the buffer arguments of every kernel in `gpu_module`
    whose buffer arguments total at least `min_kernel_bytes` (0: never). Returns how many stores were marked."""
    if min_kernel_bytes <= 0:
        return 0
    marked = 0
    for fn in find_ops(gpu_module, ("gpu.func",)):
        args = list(fn.regions[0].blocks[0].arguments)
        sizes = [_nbytes(a.type) for a in args if isinstance(a.type, ir.MemRefType)]
        if None in sizes or sum(sizes) < min_kernel_bytes:
            continue  # a dynamic size is not known to stream
        for st in find_ops(fn, ("vector.store",)):
            value, memref = st.operands[0], st.operands[1]
            if _bits(value.type) < 8 * MIN_STORE_BYTES:
                continue
            base = base_buffer(memref)
            if any(base == a for a in args):
                st.attributes["nontemporal"] = ir.BoolAttr.get(True)
                marked += 1
    return marked
