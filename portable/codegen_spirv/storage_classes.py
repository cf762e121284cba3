"""Workgroup memory and barrier fences as convert-gpu-to-spirv takes them, edited on the IR.

This build's convert-gpu-to-spirv crashes on gpu.func workgroup attributions, and its memory-space map (like
map-memref-spirv-storage-class) does not take #gpu.address_space: workgroup memory stays a memref.alloc whose type
names the storage class directly, which MemRefToSPIRV turns into a Workgroup variable. A barrier's memfence list
does not survive that retyping either, so it is read first and dropped (serialize._barriers_cover_buffers puts the
semantics back on the SPIR-V barriers)."""

from __future__ import annotations

from ..ir.mlir import ir
from ..ir.util import find_ops


def take_barrier_fences(gm: ir.Operation) -> list[bool]:
    """One flag per gpu.barrier of `gm`, in order: whether its memfence names workgroup memory alone. The memfence
    lists are removed."""
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    flags = []
    for op in find_ops(gm, ("gpu.barrier",)):
        fences = []
        if "address_spaces" in op.attributes:
            fences = list(ir.ArrayAttr(op.attributes["address_spaces"]))
            del op.attributes["address_spaces"]
        flags.append(bool(fences) and all(f == workgroup for f in fences))
    return flags


def workgroup_memory_as_storage_class(gm: ir.Operation) -> None:
    """Every memref value in #gpu.address_space<workgroup> retyped to #spirv.storage_class<Workgroup>."""
    workgroup = ir.Attribute.parse("#gpu.address_space<workgroup>")
    storage = ir.Attribute.parse("#spirv.storage_class<Workgroup>")

    def retype(v: ir.Value) -> None:
        t = v.type
        if isinstance(t, ir.MemRefType) and t.memory_space is not None and t.memory_space == workgroup:
            v.set_type(ir.MemRefType.get(t.shape, t.element_type, t.layout, storage))

    def visit(op):
        for r in op.results:
            retype(r)
        for region in op.regions:
            for block in region.blocks:
                for a in block.arguments:
                    retype(a)
        return ir.WalkResult.ADVANCE

    gm.walk(visit)


__all__ = ["take_barrier_fences", "workgroup_memory_as_storage_class"]
