"""Repeated layers keep one kernel: right after outlining, gpu.modules that differ only in their names become one,
so the kernel stages after it and codegen see each distinct kernel once."""

from __future__ import annotations

from ...ir.mlir import ir
from ...ir.util import find_ops
from ..compilation import public_func


def drop_repeats(module: ir.Module) -> bool:
    """Repeated layers outline to gpu.modules that differ only in their names: each launch of a repeat goes to
    the first copy and the copies are erased, so the kernel stages after this and codegen see each distinct
    kernel once (ResNet-50: 131 modules, 59 distinct)."""
    by_signature: dict[str, list[tuple[ir.Operation, str, str]]] = {}
    for gm in [op for op in module.body.operations if op.operation.name == "gpu.module"]:
        fns = [op for op in gm.regions[0].blocks[0].operations if op.operation.name == "gpu.func"]
        if len(fns) == 1:
            fn = fns[0]
            # Printing is what costs: only modules whose kernels take the same arguments on the same workgroup
            # are compared as text.
            sig = f"{fn.attributes['function_type']} {fn.attributes['known_block_size']}"
            by_signature.setdefault(sig, []).append((gm.operation, ir.StringAttr(gm.attributes["sym_name"]).value,
                                                     ir.StringAttr(fn.attributes["sym_name"]).value))
    redirect: dict[tuple[str, str], tuple[str, str]] = {}
    for same in by_signature.values():
        first: dict[str, tuple[str, str]] = {}
        for gm, gname, fname in same if len(same) > 1 else ():
            # The whole module body (globals included); verified by the stages, verifying again costs more.
            body = "\n".join(op.operation.get_asm(assume_verified=True) for op in gm.regions[0].blocks[0].operations)
            if body in first:
                redirect[(gname, fname)] = first[body]
                gm.erase()
            else:
                first[body] = (gname, fname)
    if not redirect:
        return False
    for op in find_ops(public_func(module), ("gpu.launch_func",)):
        sym = tuple(ir.SymbolRefAttr(op.attributes["kernel"]).value)
        if sym in redirect:
            op.attributes["kernel"] = ir.SymbolRefAttr.get(list(redirect[sym]))
    return True


__all__ = ["drop_repeats"]
