"""Builders of linalg.generic ops shared by the graph rewrites: a generic rebuilt over new operands with the old
body moved in, and the recognition of a broadcast constant."""

from __future__ import annotations

from ...ir.linalg_info import indexing_maps, is_identity, iterator_types, num_inputs
from ...ir.mlir import ir, linalg


def rebuild_generic(old: ir.Operation, ins: list[ir.Value], outs: list[ir.Value], maps: list[ir.AffineMap],
                    iterators: list[str], arg_map: list[int], result_types: list[ir.Type]) -> ir.Operation:
    """A new linalg.generic with `old`'s body moved in. arg_map[i] = the new block argument that old block
    argument i becomes (None: the caller replaces its uses)."""
    with ir.InsertionPoint(old), old.location:
        new = linalg.GenericOp(
            result_types, ins, outs,
            ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
            ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{it}>") for it in iterators]),
        )
        types = [ir.ShapedType(v.type).element_type if isinstance(v.type, ir.ShapedType) else v.type
                 for v in ins + outs]
        new_block = new.regions[0].blocks.append(*types)
    block = old.regions[0].blocks[0]
    for i, a in enumerate(list(block.arguments)):
        if arg_map[i] is not None:
            a.replace_all_uses_with(new_block.arguments[arg_map[i]])
    for op in list(block.operations):
        new_block.append(op.detach_from_parent())
    return new.operation


def broadcast_constant(v: ir.Value) -> tuple[ir.Value, ir.AffineMap] | None:
    """(constant, its indexing map) when `v` is a constant broadcast by a linalg.generic that only copies it
    (an ONNX Conv's bias broadcast over N, H, W), else None."""
    if not (isinstance(v, ir.OpResult) and v.owner.operation.name == "linalg.generic"):
        return None
    b = v.owner.operation
    if num_inputs(b) != 1 or len(b.results) != 1 or any(i != "parallel" for i in iterator_types(b)):
        return None
    src, maps = b.operands[0], indexing_maps(b)
    ops = list(b.regions[0].blocks[0].operations)
    if not (isinstance(src, ir.OpResult) and src.owner.operation.name == "arith.constant") or len(ops) != 1 \
            or list(ops[0].operands) != [b.regions[0].blocks[0].arguments[0]] or not is_identity(maps[1]):
        return None
    return src, maps[0]
