"""Apply upstream rewrite-pattern sets that have no pass of their own, through a one-op transform script."""

from __future__ import annotations

from .mlir import ir, passmanager


def apply_patterns(module: ir.Module, patterns: list[str]) -> None:
    """Run `transform.apply_patterns.<p>` for each p on every func-like op of `module`, in place."""
    any_op = "!transform.any_op"
    body = "\n".join(f"        transform.apply_patterns.{p}" for p in patterns)
    script = f"""
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: {any_op} {{transform.readonly}}) {{
    %f = transform.structured.match ops{{["gpu.func", "func.func"]}} in %root : ({any_op}) -> {any_op}
    transform.apply_patterns to %f {{
{body}
    }} : {any_op}
    transform.yield
  }}
}}"""
    parsed = ir.Module.parse(script)  # kept alive until the clone is inserted
    seq = parsed.body.operations[0].operation.clone()
    module.body.append(seq)
    had = "transform.with_named_sequence" in module.operation.attributes
    module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    try:
        passmanager.PassManager.parse("builtin.module(transform-interpreter)").run(module.operation)
    finally:
        seq.erase()
        if not had:
            del module.operation.attributes["transform.with_named_sequence"]
