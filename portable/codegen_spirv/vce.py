"""Edits of a spirv.module's version-capabilities-extensions triple after spirv-update-vce has computed it."""

from __future__ import annotations

import re

from ..ir.mlir import ir


def pin_version(spv: ir.Operation, version: str) -> None:
    """spirv-update-vce picks the lowest version the ops need, but lowering already used features of the
    target version (e.g. NoSignedWrap decorations, core in 1.4): keep the target's version in the header."""
    vce = str(spv.attributes["vce_triple"])
    spv.attributes["vce_triple"] = ir.Attribute.parse(re.sub(r"v1\.\d", version, vce, count=1))


def add_capability(spv: ir.Operation, cap: str) -> None:
    """Declare capability `cap` (one no extension brings) in the triple, after Shader (first where there is none)."""
    vce = str(spv.attributes["vce_triple"])
    start = vce.index("[") + 1
    caps = [c.strip() for c in vce[start:vce.index("]", start)].split(",") if c.strip()]
    if cap in caps:
        return
    at = caps.index("Shader") + 1 if "Shader" in caps else 0
    caps.insert(at, cap)
    spv.attributes["vce_triple"] = ir.Attribute.parse(f"{vce[:start]}{', '.join(caps)}{vce[vce.index(']', start):]}")
