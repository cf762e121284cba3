"""Large constants travel beside the MLIR text, not inside it.

A model's weights printed into MLIR text as hex cost twice their size in text, and the text is printed, hashed,
encoded and parsed again by the compiler: a 140M-parameter decoder's text is 1.3 GB. The frontend instead
outlines every large dense constant: the text holds `dense_resource<pw_HASH>` (HASH: a digest of the values, so
the compile cache's key, which hashes the text, still covers them) and the values ride along on the text
object (`ModuleText.weights`). `parse` puts them back as the dense attributes they were, so every pass sees the
same module as before.

    text = outline(module)               # frontend: a ModuleText, small
    module = parse(text)                 # compiler: the full module again
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

import numpy as np

from ..errors import CompileError
from .mlir import ir

OUTLINE_BYTES = 1 << 14  # constants of at least this many bytes leave the text
_PREFIX = "pw_"
# A context that already holds a resource of that name (the text parsed where it was outlined) suffixes `_N`.
_NAME = re.compile(r"dense_resource<(" + _PREFIX + r"[0-9a-f]{32})(?:_\d+)?>")
# Element types whose values numpy reads and writes exactly through the buffer protocol.
_ELEMENTS = {"f16", "f32", "f64", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64"}


class ModuleText(str):
    """MLIR text whose large constants are held beside it: `weights` maps each placeholder's name to its values.
    It is a str everywhere else (hashing, caching, pickling to a worker process keeps `weights`)."""

    weights: dict[str, np.ndarray]

    def __new__(cls, text: str, weights: dict[str, np.ndarray]):
        obj = super().__new__(cls, text)
        obj.weights = weights
        return obj

    def __reduce__(self):
        return ModuleText, (str(self), self.weights)


def _constants(module) -> list:
    found: list = []

    def visit(op):
        if op.name == "arith.constant":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def _digest(values: np.ndarray) -> str:
    h = hashlib.blake2b(np.ascontiguousarray(values).reshape(-1).view(np.uint8), digest_size=16)
    h.update(f"{values.dtype.str}{values.shape}".encode())
    return h.hexdigest()


def outline(module, arrays: Iterable[np.ndarray] = ()) -> ModuleText:
    """The module's text with each large dense constant replaced by a named placeholder (the module is changed).
    A constant equal to one of `arrays` (the model's weights as the frontend holds them) is held as that array;
    any other is copied out of the module."""
    held = {_digest(a): a for a in arrays if a.nbytes >= OUTLINE_BYTES}
    weights: dict[str, np.ndarray] = {}
    for op in _constants(module):
        attr = op.attributes["value"]
        if not isinstance(attr, ir.DenseElementsAttr) or attr.is_splat:
            continue
        t = ir.ShapedType(attr.type)
        if str(t.element_type) not in _ELEMENTS or not t.has_static_shape:
            continue
        values = np.asarray(attr)  # a view of the attribute's storage: valid while the module lives
        if values.nbytes < OUTLINE_BYTES:
            continue
        digest = _digest(values)
        name = _PREFIX + digest
        if name not in weights:
            weights[name] = held[digest] if digest in held else values.copy()
        op.attributes["value"] = ir.Attribute.parse(f"dense_resource<{name}> : {t}")
    return ModuleText(module.operation.get_asm(enable_debug_info=True), weights)


def known(by_digest: Mapping[str, np.ndarray]):
    """A lookup `find(values) -> array or None`: the array of `by_digest` (digest -> array) equal to `values` (same
    bytes, dtype and shape), so values read out of a module can be the caller's array instead of a copy."""

    def find(values: np.ndarray) -> np.ndarray | None:
        if not by_digest or values.nbytes < OUTLINE_BYTES:
            return None
        return by_digest.get(_digest(values))

    return find


def by_digest(weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A ModuleText's weights keyed by their digests (their names already hold them: nothing is hashed again)."""
    return {name.removeprefix(_PREFIX): values for name, values in weights.items()}


def holding(text: str, arrays: Iterable[np.ndarray]) -> ModuleText:
    """`text` whose compile reads the values of its constants out of `arrays` where they are equal (the plan's
    `known` lookup) instead of copying them out of the module: a build's later targets reuse an earlier target's
    transformed weights. The text itself is unchanged (its compile cache key too)."""
    weights = dict(getattr(text, "weights", {}))
    for a in arrays:
        if a.nbytes >= OUTLINE_BYTES:
            weights.setdefault(_PREFIX + _digest(a), a)
    return ModuleText(str(text), weights)


def inline(module, weights: dict[str, np.ndarray]) -> None:
    """Put the outlined values back into `module` as dense attributes. A placeholder with no values (text saved
    without its weights) is an error that says so."""
    for op in _constants(module):
        attr = op.attributes["value"]
        if isinstance(attr, ir.DenseElementsAttr):  # never printed: it may be large
            continue
        found = _NAME.match(str(attr))
        if not found:
            continue
        values = weights.get(found.group(1))
        if values is None:
            raise CompileError(f"constant {found.group(1)} is outlined but its values are not given: MLIR text from "
                               f"the ONNX frontend keeps its weights on the text object (ModuleText.weights); pass "
                               f"that object to compile, not a copy of its characters", stage="parse")
        op.attributes["value"] = ir.DenseElementsAttr.get(values, type=attr.type)


def parse(text: str) -> ir.Module:
    """`ir.Module.parse` of text from `outline` (or any MLIR text), with outlined constants put back; needs a
    current context."""
    module = ir.Module.parse(text)
    inline(module, getattr(text, "weights", {}))
    return module


__all__ = ["ModuleText", "OUTLINE_BYTES", "by_digest", "holding", "known", "outline", "inline", "parse"]
