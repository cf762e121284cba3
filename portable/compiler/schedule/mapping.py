"""The dispatch and tile-and-map stages: dispatch groups with a strategy each, and the transform script that tiles,
bufferizes and maps them to the GPU, with the plain strategy a group falls back to where the script cannot carry out
its own."""

from __future__ import annotations

import dataclasses

from ...codegen_spirv.lanes.row_vectors import row_tiles_ok
from ...codegen_spirv.lanes.split_vectors import plain_elementwise
from ...errors import CompileError
from ...ir.linalg_info import OpKind, classify
from ...ir.mlir import ir
from ..compilation import Compilation
from ..dispatch import groups as dispatch
from ..dispatch import split
from ..graph import unit_broadcasts
from ..strategy import choice as strategy
from . import chunks, coop_matrix, coop_staging, grid_stride, promotion, serial_rows, subgroup_reduce, transform_script

MAX_GROUP_FALLBACKS = 4  # groups that may each fall back to their plain strategy before every group does


def dispatch_stage(c: Compilation) -> None:
    """Dispatch formation and a strategy per group; a failure falls back to plain strategies (`tile_and_map`)."""
    c.pristine = c.module.operation.clone()  # in memory: no printing and parsing of the weights
    try:
        _form(c, plain=False)
    except CompileError:
        c.module = c.pristine
        _form(c, plain=True)


def tile_and_map(c: Compilation) -> None:
    """The transform script that tiles, bufferizes and maps every group. A strategy the transform dialect cannot
    carry out on this shape (e.g. a fused op folded away while a handle still tracks it) falls back to the plain
    one, formed again from the module as it was before dispatch formation (a failed run leaves it half rewritten):
    first for the group whose script line failed, the others keeping theirs; where no one group is to blame, or
    the groups to blame keep failing, every group's (no row chains either)."""
    if c.plain:
        _map_all(c)
        return
    for _ in range(MAX_GROUP_FALLBACKS):
        try:
            _map(c)
            return
        except _GroupFailed as e:
            if e.group is None or e.group in c.plain_groups:
                break
            c.dump(f"fallback-g{e.group}", str(e.error), ".txt")
            # Groups of the same form (a layer repeated through the network) would fail the same way.
            plain_groups = c.plain_groups | {k for k, f in enumerate(c.forms) if f == c.forms[e.group]}
            c.module = c.pristine.clone()
            _form(c, plain=False, plain_groups=plain_groups)
            c.dump("dispatch", c.module)
    c.module = c.pristine
    _form(c, plain=True)
    c.dump("dispatch", c.module)
    _map_all(c)


def _map_all(c: Compilation) -> None:
    """_map where no fallback is left: its failure is the compile's."""
    try:
        _map(c)
    except _GroupFailed as e:
        raise e.error from e.error.__cause__


def _tile_rows(g, o) -> int:
    """Rows of a matmul group's register tile; 0 where the profile tiles matmuls in workgroup memory (its own
    tiles) or the group is no plain matmul."""
    if g.kind.kind != "matmul" or g.chain or o.matmul_promote_tile or o.matmul_promote_tiles:
        return 0
    return int((o.matmul_thread_tile or o.thread_tile or (4, 4))[0])


def _group_form(g, s: strategy.Strategy) -> tuple:
    """What decides whether a group's script runs: its ops, their maps and operand types, its strategy."""
    return tuple((op.name, op.attributes["indexing_maps"] if "indexing_maps" in op.attributes else None,
                  tuple(v.type for v in op.operands)) for op in [g.target] + g.fused()), s


class _GroupFailed(Exception):
    """The transform script failed; `group`: the index of the group whose line failed (None: a shared line)."""

    def __init__(self, group: int | None, error: CompileError):
        super().__init__(str(error))
        self.group, self.error = group, error


def _plain(s: strategy.Strategy) -> strategy.Strategy:
    """A group's plain strategy: scalar per-thread tiles read from global memory."""
    if s.coop:  # fragments loaded from global memory: fewer transforms to fail
        return dataclasses.replace(s, promote_k=0, coop_buffers=1)
    return dataclasses.replace(s, vectorize=False, root_k_tile=(), root_row_unroll=(0, 1), root_col_split=(0, 0, 1),
                               promote_k=0)


def _form(c: Compilation, plain: bool, plain_groups: frozenset[int] = frozenset()) -> None:
    """Dispatch groups, splits and strategies (`plain`: no row chains, no vector registers: the fallback;
    `plain_groups`: the groups, by index, that take their plain strategy)."""
    c.plain, c.plain_groups = plain, frozenset(plain_groups)
    o, targets = c.options, c.targets
    if plain:
        o = o.replace(row_fusion_private_bytes=0, row_fusion_shared_bytes=0)
    groups = dispatch.form_groups(c.func, o, narrowing=lambda g: coop_matrix.eligible(g, o, targets))
    # A kernel that would bind more than the device allows runs in chunks of one of its parallel loops.
    # A matmul whose rows do not divide into its register tiles runs its first rows and the rest apart.
    groups, splits = split.split_groups(c.func, groups, o.max_bind_bytes or 0,
                                        o.bind_offset_alignment or split.DEFAULT_OFFSET_ALIGNMENT,
                                        peel=lambda g: _tile_rows(g, o))
    for g in groups:
        if g.kind.kind == "matmul" and not g.chain:
            # A matmul's epilogue is vectorized row by row: an operand read at a constant index (a row chain's
            # output read through a unit-dim reshape, row_chains.py) is read as a lower-rank operand instead.
            for op in g.consumers:
                unit_broadcasts.drop_unit_indices(op)
    strategies = []
    for g in groups:
        t = classify(g.target)
        if coop_matrix.eligible(g, o, targets):
            wg, sg = coop_matrix.group_tiles(g, o)
            # The fallback (plain) keeps fragments loaded from global memory: fewer transforms to fail.
            staged = not plain and g.index not in c.plain_groups and coop_staging.applies(g)
            kt, nbuf = coop_staging.stage_k(o, classify(g.root).ranges[2], (wg, sg)) if staged else (0, 1)
            strategies.append(strategy.Strategy((*wg, 0), (0, 0, 0), coop=sg, promote_k=kt, coop_buffers=nbuf))
            continue
        kind = OpKind(g.kind.kind, t.ranges, t.iterators, t.gathers)
        gp = o
        if (o.elementwise_per_thread or 1) > 4 and o.wide_buffers and \
                not plain_elementwise([g.target] + g.fused()):
            gp = o.replace(elementwise_per_thread=4)  # tiles of 8 only where split_vectors.py can halve them
        if "opencl" in targets and (o.matmul_k_tile or 0) > 16:
            gp = gp.replace(matmul_k_tile=16)  # a K step's A row is one vector: OpenCL C has up to 16 lanes
        if (o.elementwise_rows_per_thread or 1) > 1 and \
                ("opencl" in targets or not row_tiles_ok([g.target] + g.fused())):
            gp = gp.replace(elementwise_rows_per_thread=1)  # 2-d tiles unrolled for SPIR-V only (row_vectors.py)
        s = strategy.choose(kind, gp, g.kind)
        if s.promote_k and not promotion.applies(g):  # operands computed in the kernel: not staged
            s = strategy.choose(kind, gp.replace(matmul_promote_tile=None, matmul_promote_tiles=()), g.kind)
        if s.vectorize and kind.kind == "elementwise" and "vulkan" in targets and _rows_per_thread(s) > 1 and \
                not row_tiles_ok([g.target] + g.fused()):
            # A grid past the device's workgroup count gives threads several rows (strategy.choose): SPIR-V holds
            # those 2-d tiles only where row_vectors.py unrolls them.
            s = dataclasses.replace(s, vectorize=False)
        if s.root_taps and "vulkan" in targets and sum(it == "parallel" for it in kind.iterators) < 4:
            # A 1-d convolution's tile rows are its channels, whose filter values SPIR-V would read as a strided
            # vector (row_vectors.py holds only rows along the innermost dim): the scalar taps.
            s = strategy.choose(kind, gp.replace(conv_vector_taps=False), g.kind)
        if s.root_taps and "vulkan" in targets:
            s = dataclasses.replace(s, unroll_taps=True)  # SPIR-V: 2-d tiles unrolled in straight-line code only
        strategies.append(_plain(s) if plain or g.index in c.plain_groups else s)
    c.groups, c.splits, c.strategies = groups, splits, strategies
    c.forms = [_group_form(g, s) for g, s in zip(groups, strategies)]


def _map(c: Compilation) -> None:
    script = transform_script.build(c.groups, c.strategies, [classify(g.target).ranges for g in c.groups])
    c.dump(f"{c.stage}-script", script.text)
    try:
        # The groups' part on functions of a few groups each (chunks.py: a fusion's cost then stays local).
        parts = chunks.outline(c.func)
        run_script(c, script.groups_text, clean=False, dump=False)
        chunks.restore(parts)
        run_script(c, script.post_text, dump=False)
    except CompileError as e:
        raise _GroupFailed(_failing_group(e.__cause__, script, c.module), e) from e
    transform_script.hoist_step_barriers(c.module)
    subgroup_reduce.lower_combines(c.module)
    serial_rows.run_rows_serially(c.module)
    grid_stride.run_grid_stride(c.module)


def _failing_group(err: object, script: transform_script.Script, module: ir.Module) -> int | None:
    """The group to blame for an MLIRError of the transform script, from its first diagnostic: the group whose
    script line it names (a transform op failed), or the one group whose ops carry the location it names (a payload
    op failed, e.g. to vectorize); else None."""
    diagnostics = getattr(err, "error_diagnostics", None) or []
    if not diagnostics:
        return None
    loc = diagnostics[0].location
    try:  # a diagnostic's location is untyped: its attribute gives the file-line-column form
        line = ir.Location.from_attr(loc.attr, loc.context).start_line
    except (AttributeError, TypeError, ValueError):  # not a file location
        line = None
    if line is not None and script.owner(line) is not None:
        return script.owner(line)
    found: set[int | None] = set()

    def visit(op):
        if op.location == loc:
            found.add(dispatch.tagged_group(op))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _rows_per_thread(s: strategy.Strategy) -> int:
    """Product of a thread's tile over every loop but the innermost."""
    n = 1
    for t, th in zip(s.tile[:-1], s.threads[:-1]):
        n *= t // th if th else max(t, 1)
    return n


def run_script(c: Compilation, script: str, clean: bool = True, dump: bool = True) -> None:
    """Run a transform script on the module (then canonicalize and CSE it, where `clean`), then drop it (the script
    is dumped as `<stage>-script`, where `dump`)."""
    if dump:
        c.dump(f"{c.stage}-script", script)
    module = c.module
    body = module.body
    for op in ir.Module.parse(script).body.operations:
        body.append(op.operation.clone())
    module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    c.passes("builtin.module(transform-interpreter,canonicalize,cse)" if clean else
             "builtin.module(transform-interpreter)")
    for op in list(module.body.operations):
        if op.operation.name == "transform.named_sequence":
            op.operation.erase()
    del module.operation.attributes["transform.with_named_sequence"]


__all__ = ["dispatch_stage", "tile_and_map", "run_script", "MAX_GROUP_FALLBACKS"]
