"""The source node an MLIR op came from, read from its location, for error messages.

The ONNX frontend prints its module with locations: torch-mlir's importer gives each op the name of the ONNX node
it lowers (`loc("pool1")`), and passes keep or fuse them. A failure at an op can then name the node it came from.
"""

from __future__ import annotations

import re

# A name location's string, not a file location's ("file.mlir":3:4); torch-mlir names the function "graph:<name>".
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(:\d+:\d+)?')
_NOT_NODES = ("graph:", "onnx_importer.")


def names(loc: object) -> list[str]:
    """Names in a location (its text or an ir.Location), in order, without repeats or importer plumbing."""
    out: list[str] = []
    for s, line_col in _QUOTED.findall(str(loc)):
        if s and not line_col and not s.startswith(_NOT_NODES) and s not in out:
            out.append(s)
    return out


def of_op(op) -> str:
    """' (from node 'x')' for an op whose location names a node, else ''."""
    found = names(op.location)
    return f" (from node '{found[0]}')" if found else ""


def of_error(e) -> str:
    """' at node 'x'' for the first node named by an MLIRError's diagnostics (or their notes), else ''."""
    for d in getattr(e, "error_diagnostics", None) or []:
        for loc in [d.location] + [n.location for n in d.notes]:
            found = names(loc)
            if found:
                return f" at node '{found[0]}'"
    return ""


__all__ = ["names", "of_error", "of_op"]
