"""What the compiler's stages share: the Compilation (the module they rewrite, the options and targets they read, what
the graph-level stages hand to the plan) and the Dumper that writes each stage's module under PORTABLE_DUMP."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from ..errors import CompileError, UnsupportedOp
from ..executable import Kernel
from ..ir import locations
from ..ir.mlir import ir, passmanager
from ..profiles import Options
from ..progress import Progress
from . import plan

DUMP_ELEMENTS = 4096  # constants with more elements print as dense_resource<__elided__> in dumps


class Dumper:
    """Writes numbered stage files under PORTABLE_DUMP/<graph hash>/ when dumping is on."""

    def __init__(self, graph_hash: str):
        root = config.dump_dir()
        self.dir = root / graph_hash[:16] if root else None
        self.n = 0
        if self.dir:
            self.dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, stage: str, text: object, suffix: str = ".mlir") -> Path | None:
        """`text`: a string, or a module printed only when dumping is on, its large constants elided (a model's
        weights would make every stage's file as large as the model, in hex)."""
        if not self.dir:
            return None
        self.n += 1
        p = self.dir / f"{self.n:02d}-{stage}{suffix}"
        if not isinstance(text, str):
            op = getattr(text, "operation", None)
            text = op.get_asm(large_elements_limit=DUMP_ELEMENTS) if op is not None else str(text)
        p.write_text(text)
        return p

    def failure(self, stage: str, text: object) -> str | None:
        p = self(f"FAILED-{stage}", text)
        return str(p) if p else None


@dataclass
class Compilation:
    """What the stages share: the module they rewrite in place, the options and targets they read, and what the
    graph-level stages hand to the plan (the int64 / f16 arguments retyped, dispatch groups and strategies)."""

    module: ir.Module
    options: Options
    targets: tuple[str, ...]
    dump: Dumper
    stage: str = ""
    narrowed: tuple[list[int], list[int]] = ([], [])
    widened: tuple[list[int], list[int]] = ([], [])
    input_ranges: dict = field(default_factory=dict)  # input position -> (lo, hi, why): pipeline._input_ranges
    pristine: ir.Operation | None = None  # the module before dispatch formation, for the plain fallback
    plain: bool = False  # strategies are the plain fallback's (no row chains, no vector registers)
    plain_groups: frozenset[int] = frozenset()  # groups that alone take their plain strategy
    forms: list = field(default_factory=list)  # per group, what its script's success depends on (_group_form)
    groups: list = field(default_factory=list)
    splits: list = field(default_factory=list)
    strategies: list = field(default_factory=list)
    builder: plan.PlanBuilder | None = None
    kernels: list[Kernel] = field(default_factory=list)
    index: dict = field(default_factory=dict)
    progress: Progress = field(default_factory=lambda: Progress(enabled=False))
    weights: dict = field(default_factory=dict)  # the text's outlined constants (ir/weights.py): the plan reuses them

    @property
    def func(self) -> ir.Operation:
        return public_func(self.module)

    def passes(self, pipeline: str) -> None:
        """Run an upstream pass pipeline on the module; a failure names the stage and dumps the module."""
        try:
            passmanager.PassManager.parse(pipeline).run(self.module.operation)
        except ir.MLIRError as e:
            path = self.dump.failure(self.stage, self.module)
            raise CompileError(f"stage '{self.stage}' failed{locations.of_error(e)}: {e}", stage=self.stage,
                               dump_path=path) from e


def public_func(module: ir.Module) -> ir.Operation:
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    public = [f for f in funcs if "sym_visibility" not in f.attributes
              or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"]
    if len(public) != 1:
        raise UnsupportedOp(f"the module must have exactly one public func.func, it has {len(public)}")
    return public[0]


__all__ = ["Compilation", "Dumper", "public_func"]
