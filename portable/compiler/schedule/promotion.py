"""Matmul with operand tiles staged through workgroup memory (GPU profiles with `matmul_promote_tile`).

The register-blocked matmul (transform_script._threads) has every thread read its A rows and B columns from
global memory; neighbours re-read the same elements through the cache. Here a workgroup walks K in steps of
`promote_k`: per step its threads copy the A [TM, KT] and B [KT, TN] tiles into workgroup memory together
(each thread a few 4-wide rows, coalesced), a barrier, then each thread runs its register-blocked [tm, tn]
tile over the step from workgroup memory, a barrier. Upstream pieces: tile_using_for (the K loop), pad with
nofold + bufferize_to_allocation (workgroup buffers and the copies into them), tile_using_forall with linear
thread mapping (the copies), and map_nested_forall_to_threads with sync_after_distribute (the barriers).

The accumulators then sit inside the workgroup K loop as a read and a write of the output tile per step;
`hoist_accumulators` (after outlining) turns them into loop-carried registers. Upstream's
hoist_redundant_vector_transfers does not apply there: it takes func.func only, and before outlining the output
is still reached through subviews.
"""

from __future__ import annotations

from ...ir.mlir import arith, ir, scf
from ...ir.util import constant_int, find_ops, memory_space, pop_marked
from ..dispatch.groups import Group
from ..lowering.loop_registers import carry_in_registers, defined_outside
from ..strategy.strategy import Strategy
from .register_tiles import epilogue_rows, register_accumulators

PROMOTED_K = "portable.promoted_k"  # marks the workgroup K loop whose accumulator transfers are hoisted
UNROLL = "portable.unroll"  # marks a loop to unroll fully; the value is its trip count


def _copy_threads(rows: int, cols: int, threads: int) -> tuple[int, int]:
    """(threads on rows, threads on columns) for copying a [rows, cols] tile with 4-wide accesses per thread."""
    cx = max(1, cols // 4) if cols % 4 == 0 else cols
    cx = min(cx, threads)
    while cols % cx:
        cx -= 1
    cy = max(1, min(rows, threads // cx))
    while rows % cy:
        cy -= 1
    return cy, cx

def emit_operand_copies(emit, k: int, padding_values: str, tiles, copy_threads, lead: int = 0,
                        operand_leads: tuple[int, int] | None = None) -> None:
    """Transform lines staging the two operand tiles of group k's K step (handles %pk{k}, %pkl{k}) in workgroup
    memory: a pad that only makes each operand its own tile, bufferized to workgroup buffers filled by
    linalg.copy; each copy spread over the threads (`copy_threads(rows, cols)` -> (cy, cx)), one row at a time so
    every access is a 1-d vector, straight-line where a thread copies several rows (so prefetch can move them).
    `lead`: the loops before the matmul's own (a batch matmul's batch index); `operand_leads`: the unit leading dims
    of each operand's tile (an operand broadcast over the batch has none; default `lead` for both)."""
    any_op = "!transform.any_op"
    dims = ", ".join(str(d) for d in range(3 + lead))
    emit(f"    %pp{k}, %ppad{k}, %pcb{k} = transform.structured.pad %pk{k} {{padding_values = [{padding_values}], "
         f"padding_dimensions = [{dims}], nofold_flags = [1, 1, 0], copy_back_op = \"none\"}} "
         f": ({any_op}) -> ({any_op}, {any_op}, {any_op})")
    for i in range(2):
        emit(f"    %po{k}_{i} = transform.get_producer_of_operand %pp{k}[{i}] : ({any_op}) -> {any_op}")
        emit(f"    %pb{k}_{i}, %pn{k}_{i} = transform.structured.bufferize_to_allocation %po{k}_{i} "
             f"{{memory_space = #gpu.address_space<workgroup>, memcpy_op = \"linalg.copy\"}} : {any_op}")
    emit(f'    %pcs{k} = transform.structured.match ops{{["linalg.copy"]}} in %pkl{k} : ({any_op}) -> {any_op}')
    emit(f"    %pc{k}_0, %pc{k}_1 = transform.split_handle %pcs{k} : ({any_op}) -> ({any_op}, {any_op})")
    for i, (rows, cols) in enumerate(tiles):
        cy, cx = copy_threads(rows, cols)
        zeros = "0, " * (lead if operand_leads is None else operand_leads[i])
        emit(f"    %pct{k}_{i}, %pcf{k}_{i} = transform.structured.tile_using_forall %pc{k}_{i} "
             f"num_threads [{zeros}{cy}, {cx}] (mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) "
             f": ({any_op}) -> ({any_op}, {any_op})")
        emit(f"    %pcr{k}_{i}, %pcl{k}_{i} = transform.structured.tile_using_for %pct{k}_{i} tile_sizes "
             f"[{zeros}1, 0] : ({any_op}) -> ({any_op}, {any_op})")
        emit(f"    transform.structured.vectorize %pcr{k}_{i} : {any_op}")
        if rows // cy > 1:
            emit(f"    transform.loop.unroll %pcl{k}_{i} {{factor = {rows // cy}}} : {any_op}")



def applies(g: Group) -> bool:
    """The group is a matmul with nothing fused but the fill of its output (what `emit` stages) and elementwise
    consumers of its result (its epilogue)."""
    if g.chain or len(g.producers) != 1:
        return False
    out = g.root.operands[len(g.root.operands) - 1]
    return isinstance(out, ir.OpResult) and out.owner.operation == g.producers[0]


def _zero(t: ir.Type) -> str:
    return f"0.0 : {t}" if isinstance(t, (ir.F16Type, ir.F32Type, ir.BF16Type, ir.F64Type)) else f"0 : {t}"


def emit(emit, g: Group, s: Strategy, nfused: int) -> None:
    """The thread-level part of a promoted matmul group: `%wt{k}` is the group's tiled op (the matmul, or the last
    op of its epilogue) in its workgroup, `%wp{k}_j` the ops fused into it there (epilogue ops, the matmul, its
    fill). The epilogue runs after the K loop, each thread over its own register tile of the output."""
    any_op = "!transform.any_op"
    k = g.index
    nc = len(g.consumers)
    matmul, fill = (f"%wp{k}_{nc}", f"%wp{k}_{nc + 1}") if nc else (f"%wt{k}", f"%wp{k}_1")
    nloops = len(s.root_k_tile)
    red = nloops - 1
    lead = nloops - 3  # a batch matmul's batch loop: one index per workgroup
    tm_, tn_ = s.tile[lead], s.tile[lead + 1]
    ty, tx = s.threads[lead], s.threads[lead + 1]
    kt = s.promote_k
    threads = ty * tx
    # The fill: each thread zeroes its own tile.
    par_threads = ", ".join(str(t) for t in s.threads[:red])
    emit(f"    %pf{k}, %pff{k} = transform.structured.tile_using_forall {fill} num_threads [{par_threads}] "
         f"(mapping = [#gpu.thread<y>, #gpu.thread<x>]) : ({any_op}) -> ({any_op}, {any_op})")
    ksz = ", ".join(str(kt) if i == red else "0" for i in range(nloops))
    emit(f"    %pk{k}, %pkl{k} = transform.structured.tile_using_for {matmul} tile_sizes [{ksz}] "
         f": ({any_op}) -> ({any_op}, {any_op})")
    emit(f'    transform.annotate %pkl{k} "{PROMOTED_K}" : {any_op}')
    # Operand tiles become workgroup buffers filled by linalg.copy (the pad adds nothing: the tiles divide).
    zeros = ", ".join(_zero(ir.ShapedType(v.type).element_type) for v in g.root.operands)
    leads = tuple(ir.ShapedType(v.type).rank - 2 for v in g.root.operands[:2])
    emit_operand_copies(emit, k, zeros, ((tm_, kt), (kt, tn_)), lambda r, c: _copy_threads(r, c, threads), lead,
                        leads)
    # The matmul over one K step, per thread: its register tile, K by 4, rows unrolled (as in _threads).
    emit(f"    %tt{k}, %tf{k} = transform.structured.tile_using_forall %pp{k} num_threads [{par_threads}, 0] "
         f"(mapping = [#gpu.thread<y>, #gpu.thread<x>]) : ({any_op}) -> ({any_op}, {any_op})")
    kts = ", ".join(str(t) for t in s.root_k_tile)
    emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for %tt{k} tile_sizes [{kts}] "
         f": ({any_op}) -> ({any_op}, {any_op})")
    row_dim, rows = s.root_row_unroll
    body = f"%kt{k}"
    if rows > 1:
        rts = ", ".join("1" if i == row_dim else "0" for i in range(nloops))
        emit(f"    %rt{k}, %rl{k} = transform.structured.tile_using_for %kt{k} tile_sizes [{rts}] "
             f": ({any_op}) -> ({any_op}, {any_op})")
        emit(f"    transform.loop.unroll %rl{k} {{factor = {rows}}} : {any_op}")
        emit(f'    %ku{k} = transform.structured.match ops{{["linalg.generic"]}} in %kl{k} : ({any_op}) -> {any_op}')
        body = f"%ku{k}"
    emit(f"    transform.apply_patterns to %tf{k} {{ transform.apply_patterns.canonicalization }} : {any_op}")
    emit(f"    transform.structured.vectorize {body} : {any_op}")
    register_accumulators(emit, f"%tf{k}", f"%kl{k}")
    if nc:
        _epilogue(emit, g, s, par_threads)


def _epilogue(emit, g: Group, s: Strategy, par_threads: str) -> None:
    """The epilogue ops over the output tile, each thread its own register tile (the threads as the matmul's, so
    each reads the outputs it wrote), a row at a time (register_tiles.epilogue_rows)."""
    any_op = "!transform.any_op"
    k = g.index
    emit(f"    %pet{k}, %pef{k} = transform.structured.tile_using_forall %wt{k} num_threads [{par_threads}] "
         f"(mapping = [#gpu.thread<y>, #gpu.thread<x>]) : ({any_op}) -> ({any_op}, {any_op})")
    cont = f"%pef{k}"
    for j in range(1, len(g.consumers)):
        emit(f"    %pep{k}_{j}, %pec{k}_{j} = transform.structured.fuse_into_containing_op %wp{k}_{j} into {cont} "
             f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
        cont = f"%pec{k}_{j}"
    epilogue_rows(emit, g, s, cont, f"%pet{k}")


# ---- after outlining ----------------------------------------------------------------------------------------
def hoist_accumulators(module: ir.Module) -> None:
    """Run after outlining, on each PROMOTED_K loop: output-tile reads at loop-invariant positions whose only
    other use of the memref in the loop is the matching write at the end become loop-carried values (read before,
    written after the loop); the loop's barriers are marked as ordering workgroup memory only; the staging is
    software-pipelined (_prefetch)."""
    for loop in pop_marked(module.operation, "scf.for", PROMOTED_K):
        loop = carry_in_registers(loop, across_barriers=True)
        for inner in find_ops(loop, ("scf.for",)):
            if inner != loop:
                _mark_unroll(inner)
        # Its barriers publish and retire the workgroup tiles; the output tile is each thread's own.
        for op in find_ops(loop, ("gpu.barrier",)):
            op.attributes["address_spaces"] = ir.Attribute.parse("[#gpu.address_space<workgroup>]")
        prefetch(loop)


def _mark_unroll(loop: ir.Operation) -> None:
    """The math over one K step (K step / 4 iterations of 4-wide reads): unrolled, its workgroup-memory reads
    can be issued ahead of the FMAs that wait on them. NVIDIA's Vulkan compiler left it a loop: matmul 4096 f32
    4.30 -> 3.96 ms with it unrolled (H200 timestamps, benchmarks/results/h200/gpu_time)."""
    lb, ub, step = (constant_int(v) for v in list(loop.operands)[:3])
    if None not in (lb, ub, step) and step > 0 and 1 < (ub - lb) // step <= 32:
        loop.attributes[UNROLL] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), (ub - lb) // step)


def unroll_script(module: ir.Module) -> str:
    """A transform script unrolling every UNROLL-marked loop by its trip count (one match per count)."""
    counts = sorted({ir.IntegerAttr(op.attributes[UNROLL]).value
                     for op in find_ops(module.operation, ("scf.for",)) if UNROLL in op.attributes})
    any_op = "!transform.any_op"
    lines = ["module attributes {transform.with_named_sequence} {",
             f"  transform.named_sequence @__transform_main(%root: {any_op} {{transform.readonly}}) {{"]
    for n in counts:
        lines.append(f'    %u{n} = transform.structured.match ops{{["scf.for"]}} attributes {{{UNROLL} = {n} : i64}} '
                     f"in %root : ({any_op}) -> {any_op}")
        lines.append(f"    transform.loop.unroll %u{n} {{factor = {n}}} : {any_op}")
    lines += ["    transform.yield", "  }", "}"]
    return "\n".join(lines)


def index_slice(op: ir.Operation, body_ops: list) -> list:
    """The ops of `body_ops` that `op` depends on (index arithmetic), in body order."""
    need = []
    work = list(op.operands)
    while work:
        v = work.pop()
        owner = v.owner
        if isinstance(owner, ir.Block):
            continue
        if any(owner == o for o in body_ops) and not any(owner == o for o in need):
            need.append(owner)
            work.extend(owner.operands)
    return [o for o in body_ops if any(o == n for n in need)]


def clone_with(ops: list, iv: ir.Value, new_iv: ir.Value, before: ir.Operation) -> list:
    """Clone `ops` (a dependency-ordered chain ending in a read) before `before`, reading `new_iv` for `iv`;
    returns the clones."""
    clones = []
    for o in ops:
        c = o.clone(ip=ir.InsertionPoint(before)).operation
        c.replace_uses_of_with(iv, new_iv)
        for src, dst in zip(ops, clones):
            for a, b in zip(src.results, dst.results):
                c.replace_uses_of_with(a, b)
        clones.append(c)
    return clones


def with_iter_args(loop: ir.Operation, extra: list[ir.Value]):
    """(new scf.for, its yield): `loop`'s copy, built before it, carrying `extra` after its own iter_args, with
    the body moved in and the old block arguments replaced; the yield yields the old values (callers add theirs)."""
    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    n_acc = len(loop.results)
    with ir.InsertionPoint(loop), loop.location:
        new = scf.ForOp(loop.operands[0], loop.operands[1], loop.operands[2],
                        list(loop.operands[3:3 + n_acc]) + list(extra))
    for old, arg in zip(body.arguments, new.body.arguments):
        old.replace_all_uses_with(arg)
    with ir.InsertionPoint(new.body), loop.location:
        new_yield = scf.YieldOp(list(ops[-1].operands))
    for o in ops[:-1]:
        o.move_before(new_yield.operation)
    return new, new_yield


def replace_with_rebuilt(loop: ir.Operation, new: ir.Operation, new_yield, extra: list[ir.Value]) -> None:
    """Finish a with_iter_args rebuild: its yield also yields `extra`, and `new` replaces `loop`."""
    with ir.InsertionPoint(new_yield.operation), loop.location:
        scf.YieldOp(list(new_yield.operation.operands) + list(extra))
    new_yield.operation.erase()
    for old, res in zip(loop.results, new.results):
        old.replace_all_uses_with(res)
    loop.erase()


def prefetch(loop: ir.Operation) -> None:
    """Software-pipeline the staging: the global reads of step i+1 are issued right after step i's tiles are in
    workgroup memory (their latency overlaps step i's math), carried in registers, and written at the top of
    the next step. The barrier between the A and the B copy goes (nothing reads either tile before the last)."""
    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    iv = body.arguments[0]

    def is_workgroup(v):
        return memory_space(v) == "workgroup"

    reads = [o for o in ops if o.name in ("vector.transfer_read", "memref.load") and not is_workgroup(o.operands[0])
             and defined_outside(o.operands[0], loop)]
    stores = []
    for r in reads:
        users = [u.owner.operation for u in r.results[0].uses]
        if len(users) != 1 or users[0].name not in ("vector.transfer_write", "memref.store") or \
                not is_workgroup(users[0].operands[1]) \
                or not any(users[0] == o for o in ops):
            return
        stores.append(users[0])
    barriers = [i for i, o in enumerate(ops) if o.name == "gpu.barrier"]
    last_store = max(i for i, o in enumerate(ops) if any(o == st for st in stores)) if stores else -1
    after = [i for i in barriers if i > last_store]
    if not reads or not after:
        return
    sync = ops[after[0]]  # the barrier that publishes the tiles
    # Barriers among the copies only order copies against each other: drop them.
    for i in barriers:
        if i < after[0]:
            ops[i].erase()
    ops = [o.operation for o in body.operations]
    lb, ub, step = loop.operands[0], loop.operands[1], loop.operands[2]
    n_acc = len(loop.results)
    first = []
    for r in reads:
        first.append(clone_with(index_slice(r, ops) + [r], iv, lb, loop)[-1].results[0])
    new, new_yield = with_iter_args(loop, first)
    nbody = new.body
    niv = nbody.arguments[0]
    # Step i+1's reads, after the barrier: the last step re-reads its own tile (never past the end).
    body_now = [o.operation for o in nbody.operations]
    anchor = body_now[[i for i, o in enumerate(body_now) if o == sync][0] + 1]
    with ir.InsertionPoint(anchor), loop.location:
        nxt = arith.AddIOp(niv, step).result
        last = arith.SubIOp(ub, step).result
        nxt = arith.MinSIOp(nxt, last).result
    next_vals = []
    for r in reads:
        next_vals.append(clone_with(index_slice(r, body_now) + [r], niv, nxt, anchor)[-1].results[0])
    for i, (r, st) in enumerate(zip(reads, stores)):
        st.replace_uses_of_with(r.results[0], nbody.arguments[1 + n_acc + i])
    for r in reads:
        r.erase()
    replace_with_rebuilt(loop, new, new_yield, next_vals)


__all__ = ["applies", "emit", "hoist_accumulators", "PROMOTED_K"]
