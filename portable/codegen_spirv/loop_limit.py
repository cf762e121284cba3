"""Kernels within a driver's limit on loop iterations per invocation (a profile's `max_loop_iterations`).

Mesa 22.3's llvmpipe (lavapipe) counts every loop iteration an invocation runs, over all its loops, and leaves
every loop once the count reaches 65535 (LP_MAX_TGSI_LOOP_ITERATIONS): the kernel goes on with whatever it has
accumulated, so a sum over 3 x 65535 elements by one thread comes back as the sum of the first 65535. The
strategies keep reductions they can split within the limit (compiler/strategy.py); this pass is the check on
every kernel that reaches SPIR-V. Loops that run at most once (a thread's share of a tile that is one element or
none) become an scf.if. Then it counts the iterations of the loops whose bounds it can bound (thread and block ids
range over the workgroup and the grid, ir/bounds.py), and where they pass the limit unrolls the loops that run most
often (an unrolled loop of n iterations by u runs n/u of them and at most u-1 more in its remainder loop), up to
MAX_UNROLL per loop. A kernel still past the limit is refused at compile time, not run to a wrong result. Loops
whose bounds are unknown (grid-stride loops over a run-time count) are counted as one iteration: the count is then
a lower bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CompileError
from ..ir.bounds import Bounds
from ..ir.mlir import arith, ir, passmanager, scf
from ..ir.util import clone_body, constant_int, find_ops

MAX_UNROLL = 16
UNROLL = "portable.unroll"


@dataclass
class _Loop:
    op: ir.Operation
    trips: int  # iterations per entry (1 where the bounds are not constants)
    entries: int  # how often the loop is entered per invocation: the product of its enclosing loops' trips
    depth: int
    factor: int = 1
    children: list[_Loop] = field(default_factory=list)

    def iterations(self, factor: int | None = None) -> int:
        """Iterations per invocation once unrolled by `factor` (the main loop and its remainder loop)."""
        u = factor or self.factor
        return self.entries * (self.trips // u + self.trips % u)


def _bounds(func: ir.Operation) -> Bounds:
    def size(name: str) -> tuple[int, int, int] | None:
        if name not in func.attributes:
            return None
        x, y, z = (int(v) for v in ir.DenseI32ArrayAttr(func.attributes[name]))
        return x, y, z
    return Bounds(size("known_block_size") or (1024, 1024, 1024), size("known_grid_size"))


def _max_trips(op: ir.Operation, bounds: Bounds) -> int | None:
    """The most iterations scf.for `op` runs per entry; None where its bounds are unknown."""
    lb, ub, step = (bounds.of(op.operands[i]) for i in range(3))
    if lb is None or ub is None or step is None or step[0] <= 0:
        return None
    return max(0, -(-(ub[1] - lb[0]) // step[0]))


def _single_trips_to_ifs(func: ir.Operation) -> None:
    """Every scf.for that runs at most once becomes an scf.if on lb < ub running its body at lb."""
    bounds = _bounds(func)
    for op in find_ops(func, ("scf.for",)):  # post-order: inner loops first
        trips = _max_trips(op, bounds)
        if trips is None or trips > 1 or constant_int(op.operands[2]) is None:
            continue
        lb, ub, *_ = op.operands
        inits = list(op.operands)[3:]
        with ir.InsertionPoint(op), op.location:
            cond = arith.CmpIOp(arith.CmpIPredicate.slt, lb, ub).result
            branch = scf.IfOp(cond, [v.type for v in op.results], has_else=bool(inits))
            with ir.InsertionPoint(branch.then_block):
                scf.YieldOp(clone_body(op.regions[0].blocks[0], [lb, *inits]))
            if inits:
                with ir.InsertionPoint(branch.else_block):
                    scf.YieldOp(inits)
        for old, new in zip(op.results, branch.results):
            old.replace_all_uses_with(new)
        op.erase()


def _loops(region_op: ir.Operation, entries: int, depth: int, out: list[_Loop],
           bounds: Bounds) -> list[_Loop]:
    """The scf.for loops directly nested in `region_op` (through any non-loop ops), collected into `out`."""
    found = []
    for region in region_op.regions:
        for block in region.blocks:
            for op in block.operations:
                op = op.operation
                if op.name == "scf.for":
                    trips = _max_trips(op, bounds)
                    loop = _Loop(op, 1 if trips is None else trips, entries, depth)
                    out.append(loop)
                    found.append(loop)
                    loop.children = _loops(op, entries * loop.trips, depth + 1, out, bounds)
                else:
                    found += _loops(op, entries, depth, out, bounds)
    return found


def loop_iterations(func: ir.Operation) -> int:
    """Loop iterations one invocation of gpu.func `func` runs at most, over all its loops with known bounds."""
    loops: list[_Loop] = []
    _loops(func, 1, 0, loops, _bounds(func))
    return sum(lp.iterations() for lp in loops)


def limit_loop_iterations(gpu_module: ir.Operation, limit: int, profile_name: str = "") -> int:
    """Unroll loops of each gpu.func in `gpu_module` until it runs at most `limit` loop iterations per invocation;
    returns how many loops were unrolled. Raises CompileError where MAX_UNROLL per loop is not enough."""
    if not limit:
        return 0
    unrolled = 0
    for func in [op.operation for op in gpu_module.regions[0].blocks[0].operations]:
        if func.name != "gpu.func" or loop_iterations(func) <= limit:
            continue
        _single_trips_to_ifs(func)
        loops: list[_Loop] = []
        _loops(func, 1, 0, loops, _bounds(func))
        total = sum(lp.iterations() for lp in loops)
        while total > limit:
            # The loop whose unrolling by two more saves the most iterations.
            best = max((lp for lp in loops if lp.factor < MAX_UNROLL and lp.trips >= 2 * lp.factor),
                       key=lambda lp: lp.iterations() - lp.iterations(lp.factor * 2), default=None)
            if best is None or best.iterations() == best.iterations(best.factor * 2):
                break
            total += best.iterations(best.factor * 2) - best.iterations()
            best.factor *= 2
        if total > limit:
            name = ir.StringAttr(func.attributes["sym_name"]).value
            raise CompileError(
                f"kernel {name} runs {total} loop iterations per invocation (after unrolling loops by up to "
                f"{MAX_UNROLL}); the Vulkan driver of profile {profile_name or '?'} stops an invocation after "
                f"{limit} (max_loop_iterations in device_profiles/), which would return a wrong result: compile "
                "this graph for OpenCL, or split the tensor that this kernel reduces or loops over", stage="spirv")
        chosen = [lp for lp in loops if lp.factor > 1]
        # Innermost first: an outer loop unrolled later copies its inner loops already unrolled.
        for depth in sorted({lp.depth for lp in chosen}, reverse=True):
            for lp in chosen:
                if lp.depth == depth:
                    lp.op.attributes[UNROLL] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), lp.factor)
            _unroll_marked(gpu_module, sorted({lp.factor for lp in chosen if lp.depth == depth}))
        unrolled += len(chosen)
    return unrolled


def _unroll_marked(gpu_module: ir.Operation, factors: list[int]) -> None:
    """transform.loop.unroll every scf.for marked with UNROLL = u by u (the mark goes with it)."""
    any_op = "!transform.any_op"
    body = "\n".join(
        f"    %l{u} = transform.structured.match ops{{[\"scf.for\"]}} attributes{{{UNROLL} = {u} : i64}} in %root "
        f": ({any_op}) -> {any_op}\n"
        f"    transform.loop.unroll %l{u} {{factor = {u}}} : {any_op}" for u in factors)
    script = f"""
module attributes {{transform.with_named_sequence}} {{
  transform.named_sequence @__transform_main(%root: {any_op} {{transform.readonly}}) {{
{body}
    transform.yield
  }}
}}"""
    module = gpu_module.parent
    while module.name != "builtin.module":
        module = module.parent
    parsed = ir.Module.parse(script)
    seq = parsed.body.operations[0].operation.clone()
    module.regions[0].blocks[0].append(seq)
    had = "transform.with_named_sequence" in module.attributes
    module.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    try:
        passmanager.PassManager.parse("builtin.module(transform-interpreter)").run(module)
    except ir.MLIRError as e:
        raise CompileError(f"unrolling loops within the driver's loop limit failed: {e}", stage="spirv") from e
    finally:
        seq.erase()
        if not had:
            del module.attributes["transform.with_named_sequence"]
    for region in gpu_module.regions:
        for block in region.blocks:
            for op in block.operations:
                op.operation.walk(_drop_mark)


def _drop_mark(op: ir.Operation) -> ir.WalkResult:
    if UNROLL in op.attributes:
        del op.attributes[UNROLL]
    return ir.WalkResult.ADVANCE
