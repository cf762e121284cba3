"""Workgroup memory as gpu.func attributions, the form the OpenCL C emitter prints as __local arrays."""

from __future__ import annotations

from ..errors import UnsupportedOp
from ..ir.mlir import ir
from ..ir.util import find_ops, memory_space


def workgroup_allocs_to_attributions(module: ir.Module) -> None:
    """memref.alloc in workgroup memory inside a kernel -> a workgroup attribution of its gpu.func, the form
    the OpenCL C emitter lowers to __local arrays (SPIR-V keeps the allocs: codegen_spirv/serialize.py)."""
    for gm in module.body.operations:
        if gm.operation.name != "gpu.module":
            continue
        for fn in gm.regions[0].blocks[0].operations:
            if fn.operation.name != "gpu.func":
                continue
            allocs = find_ops(fn.operation, ("memref.alloc",), lambda op: memory_space(op.results[0]) == "workgroup")
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
