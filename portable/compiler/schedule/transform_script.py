"""Writes the transform-dialect script that tiles, fuses, bufferizes and maps every dispatch group to the GPU."""

from __future__ import annotations

from dataclasses import dataclass

from ...ir.linalg_info import classify
from ...ir.mlir import gpu, ir
from ...ir.util import pop_marked
from ..dispatch.groups import Group
from ..strategy.strategy import Strategy
from . import block_grid, coop_matrix, coop_staging, grid_stride, promotion, serial_rows, subgroup_reduce
from .register_tiles import epilogue_rows, register_accumulators, row_pieces

# Marks the serial column loops of row-chain steps (_row_chain_workgroup): in each iteration a thread reads and
# writes only its own columns and partials, so the barrier that thread mapping puts at the end of the body is
# needed once, after the loop (hoist_step_barriers).
CYCLIC = "portable.cyclic_step"


# Separate rounds: some of these sets undo each other's forms and never reach a fixed point together.
VECTOR_ROUNDS = (("vector.cast_away_vector_leading_one_dim", "canonicalization"),
                 ('vector.lower_contraction lowering_strategy = "outerproduct"', "vector.lower_outerproduct",
                  "canonicalization"),
                 ("vector.transfer_permutation_patterns", "vector.lower_broadcast", "canonicalization"),
                 ("vector.cast_away_vector_leading_one_dim", "vector.drop_unit_dims_with_shape_cast",
                  "canonicalization"))


def _mapping(kind: str, n: int, linear: bool = False) -> str:
    """GPU mapping attributes for an n-dimensional forall, innermost loop on x (`linear`: on a linearized grid)."""
    if n <= 3 and not linear:
        names = ["z", "y", "x"][3 - n:]
    else:
        names = [f"linear_dim_{n - 1 - i}" for i in range(n)]
    return ", ".join(f"#gpu.{kind}<{a}>" for a in names)


def _split_at_growth(group_lines: list[str]) -> tuple[list[str], list[str]]:
    """A group's script as (its tiling and fusion, the rest: unrolling, vectorization, patterns), the second part run
    after every group's first. Upstream's fuse_into_containing_op prints its ops into a diagnostic whether or not it
    fails, which numbers and verifies the whole module, so each fusion costs time in the size of the module: fusing
    every group before any is unrolled keeps that size small (ResNet-50: quadratic in the number of groups). The
    parts only touch their own group's ops, so the kernels do not change."""
    cut = 0
    for i, line in enumerate(group_lines):
        if "fuse_into_containing_op" in line or " in %root " in line:
            cut = i + 1
    return group_lines[:cut], group_lines[cut:]


def _block_grid(ranges, s: Strategy) -> list[int] | None:
    """[x, y, z] workgroups of a linearized grid where the tiles do not fit one loop per grid dimension. A
    grid-stride or serial-rows strategy already loops over the tiles past its grid: its loop keeps one dimension."""
    if s.grid_stride or s.serial_rows > 1:
        return None
    return block_grid.linear_grid(block_grid.tile_counts(ranges, s.tile))


@dataclass(frozen=True)
class Script:
    """A transform script and, per line (1-based, as a diagnostic's location gives it), the index of the group that
    line schedules (None: shared by every group)."""

    text: str
    owners: tuple[int | None, ...]
    post: int = 0  # index of the first line after the groups' own (bufferization, vector forms, GPU mapping)

    def owner(self, line: int) -> int | None:
        return self.owners[line - 1] if 1 <= line <= len(self.owners) else None

    def _part(self, lines: list[str]) -> str:
        return "\n".join(lines + ["    transform.yield", "  }", "}"])

    @property
    def groups_text(self) -> str:
        """The groups' tiling, fusion and vectorization alone (each on its own ops, wherever they are)."""
        lines = self.text.split("\n")
        return self._part(lines[:self.post])

    @property
    def post_text(self) -> str:
        """The rest, on the whole module; blank lines keep every line where `owners` has it."""
        lines = self.text.split("\n")
        return "\n".join(lines[:2] + [""] * (self.post - 2) + lines[self.post:])


def build(groups: list[Group], strategies: list[Strategy], ranges: list[tuple[int, ...]]) -> Script:
    """`ranges[i]`: loop trip counts of group i's tiled op (for grid sizes)."""
    g_ranges = {g.index: r for g, r in zip(groups, ranges)}
    any_op = "!transform.any_op"
    lines = [
        "module attributes {transform.with_named_sequence} {",
        f"  transform.named_sequence @__transform_main(%root: {any_op} {{transform.consumed}}) {{",
    ]
    owners: list[int | None] = [None, None]
    deferred: list[str] = []
    deferred_owners: list[int] = []
    for g, s in zip(groups, strategies):
        k = g.index
        group_lines: list[str] = []
        emit = group_lines.append
        tiled = [t for t in s.tile if t]
        emit(f'    %t{k} = transform.structured.match attributes{{portable.op = "g{k}_0"}} in %root '
             f': ({any_op}) -> {any_op}')
        fused = g.fused()
        for j in range(1, len(fused) + 1):
            emit(f'    %p{k}_{j} = transform.structured.match attributes{{portable.op = "g{k}_{j}"}} in %root '
                 f': ({any_op}) -> {any_op}')
        # A cooperative-matrix strategy gives the matmul's tile (m, n, 0); with an epilogue the tiled op is its
        # last op, over (m, n).
        sizes = ", ".join(str(t) for t in (s.tile[:len(g_ranges[k])] if s.coop else s.tile))
        emit(f"    %wt{k}, %wf{k} = transform.structured.tile_using_forall %t{k} tile_sizes [{sizes}] "
             f"(mapping = [{_mapping('block', len(tiled), _block_grid(g_ranges[k], s) is not None)}]) "
             f": ({any_op}) -> ({any_op}, {any_op})")
        emit(f'    transform.annotate %wf{k} "portable.wg{k}" : {any_op}')
        cont = f"%wf{k}"
        for j in range(1, len(fused) + 1):
            emit(f"    %wp{k}_{j}, %wc{k}_{j} = transform.structured.fuse_into_containing_op %p{k}_{j} into {cont} "
                 f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
            cont = f"%wc{k}_{j}"
        if s.coop:
            nc = len(g.consumers)
            if s.promote_k:
                acc = str(ir.ShapedType(g.root.operands[2].type).element_type)
                coop_staging.emit(emit, k, nc, len(fused), (s.tile[0], s.tile[1]), s.coop, s.promote_k,
                                  s.coop_buffers, acc)
            else:
                coop_matrix.emit_subgroup_tiles(emit, k, nc, len(fused), s.coop)
            if nc:
                wg = (s.tile[0], s.tile[1])
                coop_matrix.emit_epilogue(emit, k, nc, wg, coop_matrix.epilogue_threads(wg, s.coop))
        elif s.promote_k:
            promotion.emit(emit, g, s, len(fused))
        elif g.chain and s.reduce_threads:
            _row_chain_workgroup(emit, g, s, len(fused))
        elif s.reduce_threads:
            _workgroup_reduction(emit, g, s, len(fused))
        else:
            _threads(emit, g, s, len(fused))
        head, tail = _split_at_growth(group_lines)
        lines.extend(head)
        owners.extend([k] * len(head))
        deferred.extend(tail)
        deferred_owners.extend([k] * len(tail))
    lines.extend(deferred)
    owners.extend(deferred_owners)
    post = len(lines)
    emit = lines.append
    emit(f'    %funcs = transform.structured.match ops{{["func.func"]}} in %root : ({any_op}) -> {any_op}')
    # Writes of register tiles into slices fold into writes at offsets of the whole tile, so bufferization
    # updates the output in place instead of copying through temporaries.
    emit(f"    transform.apply_patterns to %funcs {{ transform.apply_patterns.tensor.fold_tensor_subset_ops "
         f"transform.apply_patterns.canonicalization }} : {any_op}")
    emit(f"    transform.apply_cse to %funcs : {any_op}")
    emit(f"    %b = transform.bufferization.one_shot_bufferize %root {{bufferize_function_boundaries = true, "
         f"function_boundary_type_conversion = 1 : i32}} : ({any_op}) -> {any_op}")
    if any(s.vectorize or (s.coop and g.consumers) for g, s in zip(groups, strategies)):
        # Canonical 1-d vector transfers; each target lowers them its own way (codegen_spirv unrolls them to
        # scalar accesses: pointer bitcasts to vectors are invalid in Vulkan's logical addressing).
        # Cooperative-matrix groups keep their contracts for convert-vector-to-gpu: then only the other
        # groups' workgroup loops get these patterns.
        if any(s.coop for s in strategies):
            targets = []
            for g, s in zip(groups, strategies):
                if s.vectorize and not s.coop:
                    emit(f"    %bv{g.index} = transform.structured.match attributes{{portable.wg{g.index}}} in %b "
                         f": ({any_op}) -> {any_op}")
                    targets.append(f"%bv{g.index}")
            if any(s.coop and g.consumers for g, s in zip(groups, strategies)):
                # Epilogues' thread foralls (coop_matrix.emit_epilogue): their pieces' 1x4 vectors become 1-d.
                emit(f"    %bepi = transform.structured.match attributes{{{coop_matrix.EPILOGUE}}} in %b "
                     f": ({any_op}) -> {any_op}")
                targets.append("%bepi")
        else:
            # Every group's: done on the outlined kernels instead (VECTOR_ROUNDS, after repeats are dropped).
            targets = []
        for stage in VECTOR_ROUNDS:
            for t in targets:
                emit(f"    transform.apply_patterns to {t} {{")
                for p in stage:
                    emit(f"      transform.apply_patterns.{p}")
                emit(f"    }} : {any_op}")
    for g, s in zip(groups, strategies):
        k = g.index
        owners.extend([None] * (len(lines) - len(owners)))
        wx, wy, wz = s.workgroup_size
        emit(f"    %f{k} = transform.structured.match attributes{{portable.wg{k}}} in %b : ({any_op}) -> {any_op}")
        dims = _block_grid(g_ranges[k], s)  # a linearized grid's size must be given
        grid = f" grid_dims = [{', '.join(map(str, dims))}]" if dims else ""
        emit(f"    %l{k} = transform.gpu.map_forall_to_blocks %f{k} generate_gpu_launch{grid} : ({any_op}) -> {any_op}")
        # Promoted: a barrier after each step; a cooperative-matrix epilogue: after the subgroups' stores.
        sync = "true" if s.reduce_threads or s.promote_k or (s.coop and g.consumers) else "false"
        warp = f" warp_size = {coop_matrix.SUBGROUP}" if s.coop else ""
        emit(f"    %m{k} = transform.gpu.map_nested_forall_to_threads %l{k} block_dims = [{wx}, {wy}, {wz}] "
             f"sync_after_distribute = {sync}{warp} : ({any_op}) -> {any_op}")
        if s.grid_stride:
            emit(f"    %gs{k} = transform.param.constant {s.grid_stride} : i64 -> !transform.param<i64>")
            emit(f'    transform.annotate %m{k} "{grid_stride.ATTR}" = %gs{k} : {any_op}, !transform.param<i64>')
        if s.serial_rows > 1:
            emit(f"    %sr{k} = transform.param.constant {s.serial_rows} : i64 -> !transform.param<i64>")
            emit(f'    transform.annotate %m{k} "{serial_rows.ATTR}" = %sr{k} : {any_op}, !transform.param<i64>')
        owners.extend([k] * (len(lines) - len(owners)))
    emit("    transform.yield")
    emit("  }")
    emit("}")
    owners.extend([None] * (len(lines) - len(owners)))
    return Script("\n".join(lines), tuple(owners), post)


def _threads(emit, g: Group, s: Strategy, nfused: int) -> None:
    """Thread-level tiling of the workgroup tile; vectorization and the matmul K loop where chosen."""
    any_op = "!transform.any_op"
    k = g.index
    distributed = [t for t in s.threads if t]
    nts = ", ".join(str(t) for t in s.threads)
    emit(f"    %tt{k}, %tf{k} = transform.structured.tile_using_forall %wt{k} num_threads [{nts}] "
         f"(mapping = [{_mapping('thread', len(distributed))}]) : ({any_op}) -> ({any_op}, {any_op})")
    cont = f"%tf{k}"
    for j in range(1, nfused + 1):
        emit(f"    %tp{k}_{j}, %tc{k}_{j} = transform.structured.fuse_into_containing_op %wp{k}_{j} into {cont} "
             f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
        cont = f"%tc{k}_{j}"
    if s.vectorize and s.root_taps:
        _conv_taps(emit, g, s, cont, [f"%tt{k}"] + [f"%tp{k}_{j}" for j in range(1, nfused + 1)])
    elif s.vectorize:
        handles = [f"%tt{k}"] + [f"%tp{k}_{j}" for j in range(1, nfused + 1)]
        if s.root_k_tile:
            # The root (matmul) gets a K loop of static steps; its accumulator is then hoisted into
            # registers (loop-invariant read/write of the output tile become iter_args).
            root = handles[len(g.consumers)] if g.consumers else handles[0]
            kts = ", ".join(str(t) for t in s.root_k_tile)
            emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for {root} tile_sizes [{kts}] "
                 f": ({any_op}) -> ({any_op}, {any_op})")
            # The matmul and its fill; the epilogue is vectorized a row (and a vector of columns) at a time
            # (epilogue_rows): on the 2-d register tile it would be n-d vector math, which SPIR-V cannot
            # express (no vector unrolling pass upstream).
            handles = [f"%kt{k}"] + [h for h in handles[handles.index(root) + 1:]]
            if s.root_row_unroll[1] > 1 or s.root_col_split[2] > 1:
                _unroll_register_tile(emit, k, s)
                handles[0] = f"%ku{k}"
            if g.consumers and not g.kind.gathers:
                epilogue_rows(emit, g, s, cont, f"%tt{k}")
        elif s.root_row_unroll[1] > 1:
            # One row of the thread tile per copy, its producers fused in: each copy vectorizes as 1-d, and the
            # copies' reads of one input element become one (CSE).
            dim, rows = s.root_row_unroll
            sizes = ", ".join("1" if i == dim else "0" for i in range(len(s.tile)))
            emit(f"    %ut{k}, %ul{k} = transform.structured.fuse {handles[0]} tile_sizes [{sizes}] "
                 f": ({any_op}) -> ({any_op}, {any_op})")
            emit(f"    transform.loop.unroll %ul{k} {{factor = {rows}}} : {any_op}")
            emit(f"    transform.apply_patterns to {cont} {{ transform.apply_patterns.canonicalization }} : {any_op}")
            emit(f'    %ug{k} = transform.structured.match ops{{["linalg.generic"]}} in {cont} '
                 f': ({any_op}) -> {any_op}')
            handles = [f"%ug{k}"]
        emit(f"    transform.apply_patterns to {cont} {{ transform.apply_patterns.canonicalization }} : {any_op}")
        # Reads by index (gathers): a contiguous read along the vector becomes a vector load.
        extract = " {vectorize_nd_extract}" if g.kind.gathers else ""
        for h in handles:
            emit(f"    transform.structured.vectorize {h}{extract} : {any_op}")
        if s.root_k_tile:
            # A thread with one output (a small matmul whose tiles shrank to fill the GPU) is a dot product:
            # its contract keeps the widened f32 operands, since upstream's lowering of a dot product takes no
            # mixed precision (an f16 33x100x70 matmul failed to compile for nvidia on both APIs).
            # (A tile of 0 is the whole loop in each thread: left as before, folded.)
            one = all((t // n if n else t) == 1 for t, n, it in zip(s.tile, s.threads, g.kind.iterators)
                      if it == "parallel")
            register_accumulators(emit, cont, f"%kl{k}", fold_extensions=not one)


def _conv_taps(emit, g: Group, s: Strategy, container: str, handles: list[str]) -> None:
    """A direct convolution's thread tile: its window loops stepped one tap at a time; with those unit loops
    folded away each step is an elementwise multiply-add of an input tile by a filter row (broadcast), which
    vectorizes; the output tile's read/write, invariant across the taps, then becomes a register accumulator
    (hoisted from the innermost tap loop outwards)."""
    any_op = "!transform.any_op"
    k = g.index
    ri = handles.index(f"%tp{k}_{len(g.consumers)}") if g.consumers else 0
    window = [i for i, it in enumerate(g.kind.iterators) if it == "reduction"]
    sizes = ", ".join("1" if i in window else "0" for i in range(len(g.kind.iterators)))
    loops = [f"%cl{k}_{i}" for i in range(len(window))]
    emit(f"    %ct{k}, {', '.join(loops)} = transform.structured.tile_using_for {handles[ri]} tile_sizes [{sizes}] "
         f": ({any_op}) -> ({', '.join([any_op] * (len(loops) + 1))})")
    handles[ri] = f"%ct{k}"
    emit(f"    transform.apply_patterns to {container} {{")
    emit("      transform.apply_patterns.linalg.fold_unit_extent_dims_via_slices")
    emit("      transform.apply_patterns.canonicalization")
    emit(f"    }} : {any_op}")
    for h in handles:
        emit(f"    transform.structured.vectorize {h} : {any_op}")
    emit(f"    transform.apply_patterns to {container} {{")
    emit("      transform.apply_patterns.vector.transfer_permutation_patterns")
    emit("      transform.apply_patterns.canonicalization")
    emit(f"    }} : {any_op}")
    for loop in reversed(loops):
        emit(f"    transform.apply_licm to {loop} : {any_op}")
        emit(f"    transform.loop.hoist_loop_invariant_subsets {loop} : {any_op}")
    if s.unroll_taps:
        for loop, d in reversed(list(zip(loops, window))):
            emit(f"    transform.loop.unroll {loop} {{factor = {g.kind.ranges[d]}}} : {any_op}")
        emit(f"    transform.apply_patterns to {container} {{ transform.apply_patterns.canonicalization }} : {any_op}")
        emit(f"    transform.apply_cse to {container} : {any_op}")


def _unroll_register_tile(emit, k: int, s: Strategy) -> None:
    """One row of the thread tile per copy, unrolled: each row's accumulator is then hoisted on its own as a
    1-d vector (SPIR-V has no 2-d vectors, and no upstream pass splits them). Rows wider than a vector are
    split into column blocks of one vector each, unrolled the same way."""
    any_op = "!transform.any_op"
    row_pieces(emit, s, len(s.root_k_tile), "transform.structured.tile_using_for", f"%kt{k}", f"%rt{k}", f"%rl{k}")
    emit(f'    %ku{k} = transform.structured.match ops{{["linalg.generic"]}} in %kl{k} : ({any_op}) -> {any_op}')


def _workgroup_reduction(emit, g: Group, s: Strategy, nfused: int) -> None:
    """One workgroup per output element: each thread reduces a slice into workgroup memory, then one thread
    combines the partials and runs the group's elementwise consumers (so nothing is written twice)."""
    any_op = "!transform.any_op"
    k = g.index
    t = s.reduce_threads
    nloops = len(g.kind.ranges)
    red = g.kind.iterators.index("reduction")
    root = f"%wp{k}_{len(g.consumers)}" if g.consumers else f"%wt{k}"
    nts = ", ".join(str(t) if i == red else "0" for i in range(nloops))
    one = ", ".join("1" if i == red else "0" for i in range(nloops))
    emit(f"    %rfill{k}, %rpart{k}, %rcomb{k}, %rfor{k} = transform.structured.tile_reduction_using_forall {root} "
         f"by num_threads = [{nts}] tile_sizes = [{one}] mapping = [#gpu.thread<x>] "
         f": ({any_op}) -> ({any_op}, {any_op}, {any_op}, {any_op})")
    # Each thread initializes its own partial (a fill by every thread would race with the partial reductions).
    threads = ", ".join(["1"] * (nloops - 1) + [str(t)])
    emit(f"    %rft{k}, %rff{k} = transform.structured.tile_using_forall %rfill{k} num_threads [{threads}] "
         f"(mapping = [{_mapping('thread', nloops)}]) : ({any_op}) -> ({any_op}, {any_op})")
    emit(f"    %rbuf{k}, %rnew{k} = transform.structured.bufferize_to_allocation %rff{k} "
         f"{{memory_space = #gpu.address_space<workgroup>, bufferize_destination_only}} : {any_op}")
    # The combine and the consumers run on one thread.
    last = f"%wt{k}" if g.consumers else f"%rcomb{k}"
    npar = len(s.tile) if g.consumers else nloops - 1
    ones = ", ".join(["1"] * npar)
    emit(f"    %ct{k}, %cf{k} = transform.structured.tile_using_forall {last} num_threads [{ones}] "
         f"(mapping = [{_mapping('thread', npar)}]) : ({any_op}) -> ({any_op}, {any_op})")
    cont = f"%cf{k}"
    inner = [f"%wp{k}_{j}" for j in range(1, len(g.consumers))] + ([f"%rcomb{k}"] if g.consumers else [])
    for j, h in enumerate(inner):
        emit(f"    %cp{k}_{j}, %cc{k}_{j} = transform.structured.fuse_into_containing_op {h} into {cont} "
             f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
        cont = f"%cc{k}_{j}"


def _row_chain_workgroup(emit, g: Group, s: Strategy, nfused: int) -> None:
    """A row chain on one workgroup per row, op by op in order: elementwise ops split the row over the threads
    into a workgroup-memory row; reductions reduce per-thread partials in workgroup memory, combined on one
    thread into a workgroup-memory result that every thread then reads (a barrier follows each step).

    Columns go to threads cyclically (thread t takes columns t, t+T, t+2T, ...), so at each step the threads
    of a subgroup read consecutive addresses (coalesced global reads, conflict-free workgroup-memory banks):
    each step is first tiled by T columns with a serial loop (`tile_using_for`; reductions
    `tile_reduction_using_for`, which keeps a T-wide partial across the loop), then the T columns of a tile are
    mapped one per thread."""
    any_op = "!transform.any_op"
    k = g.index
    t = s.reduce_threads
    block = f"%wc{k}_{nfused}" if nfused else f"%wf{k}"
    # Producers fused for several users are identical clones: one of each remains.
    emit(f"    transform.apply_cse to {block} : {any_op}")
    emit(f"    transform.apply_patterns to {block} {{ transform.apply_patterns.canonicalization }} : {any_op}")
    n = len(g.chain)
    for i, op in enumerate(g.chain):
        tag = 0 if i == n - 1 else n - 1 - i
        h = f"%rc{k}_{i}"
        emit(f'    {h} = transform.structured.match attributes{{portable.op = "g{k}_{tag}"}} in {block} '
             f": ({any_op}) -> {any_op}")
        info = classify(op)
        nloops = len(info.ranges)
        last = i == n - 1

        def cols(v: int, nloops: int = nloops) -> str:
            return ", ".join(str(v) if d == nloops - 1 else "0" for d in range(nloops))

        if info.kind == "elementwise":
            if not last:
                # The whole row lives in workgroup memory (its later readers take other columns than this
                # thread wrote).
                emit(f"    %rb{k}_{i}, %rn{k}_{i} = transform.structured.bufferize_to_allocation {h} "
                     f"{{memory_space = #gpu.address_space<workgroup>, bufferize_destination_only}} : {any_op}")
            emit(f"    %rs{k}_{i}, %rsl{k}_{i} = transform.structured.tile_using_for {h} tile_sizes [{cols(t)}] "
                 f": ({any_op}) -> ({any_op}, {any_op})")
            emit(f"    %re{k}_{i}, %ref{k}_{i} = transform.structured.tile_using_forall %rs{k}_{i} "
                 f"num_threads [{cols(t)}] (mapping = [#gpu.thread<x>]) : ({any_op}) -> ({any_op}, {any_op})")
            emit(f'    transform.annotate %rsl{k}_{i} "{CYCLIC}" : {any_op}')
            continue
        # Per-thread partials in workgroup memory; past a subgroup's worth, the partials are reduced the same way
        # once more (a two-level tree), so the serial combine is short. With subgroup reductions, one level: the
        # combine becomes shuffles within each subgroup and a read of the subgroups' results (subgroup_reduce.py).
        src = h
        tree = [t] if s.subgroup_reduce else [t] + ([32] if t > 32 else [])
        for lvl, nt in enumerate(tree):
            emit(f"    %rf{k}_{i}_{lvl}, %rp{k}_{i}_{lvl}, %rcb{k}_{i}_{lvl}, %rl{k}_{i}_{lvl} = "
                 f"transform.structured.tile_reduction_using_for {src} by tile_sizes = [{cols(nt)}] "
                 f": ({any_op}) -> ({any_op}, {any_op}, {any_op}, {any_op})")
            # Each thread initializes its own partial.
            ones = ", ".join(["1"] * (nloops - 1) + [str(nt)])
            emit(f"    %rft{k}_{i}_{lvl}, %rff{k}_{i}_{lvl} = transform.structured.tile_using_forall %rf{k}_{i}_{lvl} "
                 f"num_threads [{ones}] (mapping = [{_mapping('thread', nloops)}]) "
                 f": ({any_op}) -> ({any_op}, {any_op})")
            emit(f"    %rpb{k}_{i}_{lvl}, %rpn{k}_{i}_{lvl} = transform.structured.bufferize_to_allocation "
                 f"%rff{k}_{i}_{lvl} {{memory_space = #gpu.address_space<workgroup>, bufferize_destination_only}} "
                 f": {any_op}")
            # Within a tile of nt columns, column j goes to thread j.
            emit(f"    %rpt{k}_{i}_{lvl}, %rpf{k}_{i}_{lvl} = transform.structured.tile_using_forall %rp{k}_{i}_{lvl} "
                 f"num_threads [{cols(nt)}] (mapping = [#gpu.thread<x>]) : ({any_op}) -> ({any_op}, {any_op})")
            emit(f'    transform.annotate %rl{k}_{i}_{lvl} "{CYCLIC}" : {any_op}')
            src = f"%rcb{k}_{i}_{lvl}"
        emit(f"    %rcb{k}_{i} = transform.merge_handles {src} : {any_op}")
        emit(f"    %rcp{k}_{i} = transform.get_producer_of_operand %rcb{k}_{i}[1] : ({any_op}) -> {any_op}")
        if s.subgroup_reduce:
            # Every thread combines (so each has the result); its init and result in its private memory.
            emit(f"    %rsg{k}_{i} = transform.param.constant {s.subgroup_reduce} : i64 -> !transform.param<i64>")
            emit(f'    transform.annotate %rcb{k}_{i} "{subgroup_reduce.COMBINE}" = %rsg{k}_{i} '
                 f": {any_op}, !transform.param<i64>")
            if not last:
                emit(f"    %rcr{k}_{i}, %rcn{k}_{i} = transform.structured.bufferize_to_allocation %rcp{k}_{i} "
                     f"{{bufferize_destination_only}} : {any_op}")
            continue
        # The combine, and the init it starts from, on one thread.
        single = ", ".join(["1"] * (nloops - 1))
        emit(f"    %rct{k}_{i}, %rcf{k}_{i} = transform.structured.tile_using_forall %rcb{k}_{i} "
             f"num_threads [{single}] "
             f"(mapping = [{_mapping('thread', nloops - 1)}]) : ({any_op}) -> ({any_op}, {any_op})")
        emit(f"    %rci{k}_{i}, %rcc{k}_{i} = transform.structured.fuse_into_containing_op %rcp{k}_{i} "
             f"into %rcf{k}_{i} "
             f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
        if not last:
            emit(f"    %rcr{k}_{i}, %rcn{k}_{i} = transform.structured.bufferize_to_allocation %rcc{k}_{i} "
                 f"{{memory_space = #gpu.address_space<workgroup>, bufferize_destination_only}} : {any_op}")


def hoist_step_barriers(module: ir.Module) -> None:
    """Run after thread mapping: the serial column loops of row-chain steps (marked CYCLIC) end their body
    with the barrier of the thread-mapped step inside; no thread reads another's columns within the loop, so
    one barrier after the loop suffices (a barrier per iteration would also keep each thread to one
    outstanding global load)."""
    for loop in pop_marked(module.operation, "scf.for", CYCLIC):
        body = list(loop.regions[0].blocks[0].operations)
        # Copies of a tile onto itself (left by bufferization of the step's in-place writes) do nothing.
        for op in body:
            if op.operation.name == "memref.copy" and op.operation.operands[0] == op.operation.operands[1]:
                op.operation.erase()
        body = list(loop.regions[0].blocks[0].operations)
        barriers = [op for op in body if op.operation.name == "gpu.barrier"]
        # Only the trailing barrier, and only where the body has no other (then it is not a plain step).
        if len(body) < 2 or len(barriers) != 1 or body[-2].operation != barriers[0].operation:
            continue
        barriers[0].operation.erase()
        with ir.InsertionPoint.after(loop), loop.location:
            gpu.BarrierOp()
