"""Small helpers over the MLIR Python bindings shared by the compiler and the code generators."""

from __future__ import annotations

from collections.abc import Callable

from .mlir import ir


def find_ops(root: ir.Operation, names: set[str] | tuple[str, ...],
             where: Callable[[ir.Operation], bool] | None = None) -> list[ir.Operation]:
    """Every op nested in `root` named in `names` (and passing `where`), in walk order; collected first so
    callers may rewrite or erase them."""
    found = []

    def visit(op):
        if op.name in names and (where is None or where(op)):
            found.append(op)
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return found
