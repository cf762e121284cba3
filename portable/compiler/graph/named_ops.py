"""Linalg named ops that front ends emit but that are neither structured ops (which PREPROCESS generalizes) nor
known to this MLIR version, brought into the compiler's contract with upstream pieces before PREPROCESS:

- linalg.softmax (an AggregatedOpInterface op): `transform.structured.decompose_interface` gives the max, exp,
  sum and divide generics, which dispatch formation then takes as one row chain.
- linalg.pack / linalg.unpack: `transform.structured.lower_pack` / `lower_unpack` give tensor.pad,
  expand/collapse_shape, extract_slice and linalg.transpose / copy.
- linalg.matmul_transpose_a/b, batch_matmul_transpose_a/b: removed upstream in favour of matmul / batch_matmul
  with `indexing_maps`; text from older front ends is read as that (`parse`).
"""

from __future__ import annotations

import re

from ...errors import CompileError, UnsupportedOp
from ...ir.mlir import ir, passmanager

_ANY = "!transform.any_op"
_LOWERINGS = {
    "linalg.softmax": """
    %s = transform.structured.match ops{["linalg.softmax"]} in %root : (!transform.any_op) -> !transform.any_op
    %sd = transform.structured.decompose_interface %s : (!transform.any_op) -> !transform.any_op""",
    "linalg.pack": """
    %p = transform.structured.match ops{["linalg.pack"]} in %root : (!transform.any_op) -> !transform.op<"linalg.pack">
    %p0, %p1, %p2 = transform.structured.lower_pack %p : (!transform.op<"linalg.pack">)
      -> (!transform.op<"tensor.pad">, !transform.op<"tensor.expand_shape">, !transform.op<"linalg.transpose">)""",
    "linalg.unpack": """
    %u = transform.structured.match ops{["linalg.unpack"]} in %root
      : (!transform.any_op) -> !transform.op<"linalg.unpack">
    %u0, %u1, %u2, %u3, %u4 = transform.structured.lower_unpack %u : (!transform.op<"linalg.unpack">)
      -> (!transform.op<"tensor.empty">, !transform.op<"linalg.transpose">, !transform.op<"tensor.collapse_shape">,
          !transform.op<"tensor.extract_slice">, !transform.op<"linalg.copy">)""",
}


def _present(module: ir.Module) -> list[str]:
    found: list[str] = []

    def visit(op):
        if op.name in _LOWERINGS and op.name not in found:
            found.append(op.name)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


def decompose(module: ir.Module) -> bool:
    """Lower the ops above in place; False when the module has none (nothing is run)."""
    ops = _present(module)
    if not ops:
        return False
    script = (f"module attributes {{transform.with_named_sequence}} {{\n"
              f"  transform.named_sequence @__transform_main(%root: {_ANY} {{transform.readonly}}) {{"
              + "".join(_LOWERINGS[o] for o in ops) + "\n    transform.yield\n  }\n}")
    parsed = ir.Module.parse(script)  # kept alive until the clone is inserted
    seq = parsed.body.operations[0].operation.clone()
    module.body.append(seq)
    attrs = module.operation.attributes
    attrs["transform.with_named_sequence"] = ir.UnitAttr.get()
    try:
        passmanager.PassManager.parse("builtin.module(transform-interpreter)").run(module.operation)
    except ir.MLIRError as e:
        raise UnsupportedOp(f"{', '.join(ops)}: upstream's decomposition failed on this op:\n{e}") from e
    finally:
        seq.erase()
        del attrs["transform.with_named_sequence"]
    left = _present(module)
    if left:
        raise UnsupportedOp(f"{', '.join(left)}: upstream's decomposition left the op in place (a form it does not "
                            f"lower, e.g. dynamic tiles)")
    return True


# Operand maps of the matmuls upstream now spells as linalg.matmul / batch_matmul with indexing_maps.
_RENAMED = {
    "matmul_transpose_a": ("matmul", "(d0, d1, d2)", ["(d2, d0)", "(d2, d1)", "(d0, d1)"]),
    "matmul_transpose_b": ("matmul", "(d0, d1, d2)", ["(d0, d2)", "(d1, d2)", "(d0, d1)"]),
    "batch_matmul_transpose_a": ("batch_matmul", "(d0, d1, d2, d3)",
                                 ["(d0, d3, d1)", "(d0, d3, d2)", "(d0, d1, d2)"]),
    "batch_matmul_transpose_b": ("batch_matmul", "(d0, d1, d2, d3)",
                                 ["(d0, d1, d3)", "(d0, d2, d3)", "(d0, d1, d2)"]),
}
_RENAMED_OP = re.compile(r"\blinalg\.(" + "|".join(sorted(_RENAMED, key=len, reverse=True)) + r")\b(?!\")")
_UNKNOWN_OP = re.compile(r"custom op '([\w.]+)' is unknown|unregistered operation '([\w.]+)'")


def parse(text: str, error: ir.MLIRError) -> ir.Module:
    """The module of `text`, which failed to parse with `error`: parsed again with the renamed ops written in their
    current form, or UnsupportedOp naming an op this MLIR does not know, or CompileError (stage 'input')."""
    def spelled(m: re.Match) -> str:
        op, dims, maps = _RENAMED[m.group(1)]
        return f"linalg.{op} indexing_maps = [{', '.join(f'affine_map<{dims} -> {r}>' for r in maps)}]"

    upgraded = _RENAMED_OP.sub(spelled, text)
    if upgraded != text:
        try:
            return ir.Module.parse(upgraded)
        except ir.MLIRError as e:
            error = e
    unknown = _UNKNOWN_OP.search(str(error))
    if unknown:
        op = unknown.group(1) or unknown.group(2)
        raise UnsupportedOp(f"op '{op}' is not an op of this MLIR version (it was renamed or removed upstream, or "
                            f"its dialect is not registered):\n{error}") from error
    raise CompileError(f"the MLIR does not parse: {error}", stage="input") from error


__all__ = ["decompose", "parse"]
