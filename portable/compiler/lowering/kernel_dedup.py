"""Repeated layers keep one kernel: right after outlining, gpu.modules that differ only in their names become one,
so the kernel stages after it and codegen see each distinct kernel once."""

from __future__ import annotations

from ...ir.mlir import ir
from ...ir.util import find_ops
from ..compilation import public_func


def structure(gm: ir.Operation) -> tuple:
    """What `gm`'s body computes, as a hashable key, equal exactly where the bodies print the same: every op in
    order, recursively, with its name, attributes (symbol names included: the gpu.func's own, globals') and
    result types, which the context uniques (compared by identity, never printed); operands, successors and
    blocks as numbers given in order of first appearance; locations left out, as printing does."""
    key: list = []
    values: dict[ir.Value, int] = {}
    blocks: dict[ir.Block, int] = {}
    for op in gm.regions[0].blocks[0].operations:
        _describe(op.operation, key, values, blocks)
    return tuple(key)


def _describe(op: ir.Operation, key: list, values: dict[ir.Value, int], blocks: dict[ir.Block, int]) -> None:
    key.append((op.name, tuple(op.attributes.items()),
                tuple((values.setdefault(r, len(values)), r.type) for r in op.results),
                tuple(values.setdefault(v, len(values)) for v in op.operands),
                tuple(blocks.setdefault(b, len(blocks)) for b in op.successors), len(op.regions)))
    for region in op.regions:
        key.append(len(region.blocks))
        for block in region.blocks:
            key.append((blocks.setdefault(block, len(blocks)),
                        tuple((values.setdefault(a, len(values)), a.type) for a in block.arguments)))
            for inner in block.operations:
                _describe(inner.operation, key, values, blocks)


def drop_repeats(module: ir.Module) -> bool:
    """Repeated layers outline to gpu.modules that differ only in their names: each launch of a repeat goes to
    the first copy and the copies are erased, so the kernel stages after this and codegen see each distinct
    kernel once (ResNet-50: 131 modules, 59 distinct)."""
    by_signature: dict[tuple[ir.Attribute, ir.Attribute], list[tuple[ir.Operation, str, str]]] = {}
    for gm in [op for op in module.body.operations if op.operation.name == "gpu.module"]:
        fns = [op for op in gm.regions[0].blocks[0].operations if op.operation.name == "gpu.func"]
        if len(fns) == 1:
            fn = fns[0]
            # Only modules whose kernels take the same arguments on the same workgroup are walked and compared.
            sig = (fn.attributes["function_type"], fn.attributes["known_block_size"])
            by_signature.setdefault(sig, []).append((gm.operation, ir.StringAttr(gm.attributes["sym_name"]).value,
                                                     ir.StringAttr(fn.attributes["sym_name"]).value))
    redirect: dict[tuple[str, str], tuple[str, str]] = {}
    for same in by_signature.values():
        first: dict[tuple, tuple[str, str]] = {}
        for gm, gname, fname in same if len(same) > 1 else ():
            body = structure(gm)
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


__all__ = ["drop_repeats", "structure"]
