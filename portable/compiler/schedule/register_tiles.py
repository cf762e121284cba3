"""Transform-script pieces for a thread's register tile, shared by the plain and the staged (promotion.py) matmul
schedules: the tile cut into rows and column vectors, the fused epilogue a row at a time, the accumulators
kept in registers across the K loop."""

from __future__ import annotations

from ...ir.linalg_info import classify
from ..dispatch.groups import Group
from ..strategy.strategy import Strategy


def row_pieces(emit, s: Strategy, n: int, op: str, handle: str, result: str, loop: str) -> None:
    """`op` (tile_using_for, or fuse to take the producers along) on `handle`, an op over `n` loops laid out as the
    thread's register tile: one row (root_row_unroll) and one vector of columns (root_col_split) per piece, the
    loops unrolled (inner loop first: unrolling the outer one first would leave the handle on one copy of the
    inner loop)."""
    any_op = "!transform.any_op"
    row_dim, rows = s.root_row_unroll
    col_dim, width, cols = s.root_col_split
    sizes = ["0"] * n
    loops = []
    if rows > 1:
        sizes[row_dim] = "1"
        loops.append((row_dim, rows))
    if cols > 1:
        sizes[col_dim] = str(width)
        loops.append((col_dim, cols))
    if not loops:
        return
    loops.sort()
    names = [f"{loop}_{i}" for i in range(len(loops))]
    emit(f"    {result}, {', '.join(names)} = {op} {handle} tile_sizes [{', '.join(sizes)}] "
         f": ({any_op}) -> ({', '.join([any_op] * (len(loops) + 1))})")
    for name, (_, factor) in reversed(list(zip(names, loops))):
        emit(f"    transform.loop.unroll {name} {{factor = {factor}}} : {any_op}")

def epilogue_rows(emit, g: Group, s: Strategy, container: str, tiled: str) -> None:
    """A matmul's elementwise epilogue over the thread's register tile (`tiled`: its last op tiled to the thread,
    the others fused into `container`), one row and one vector of columns at a time, unrolled, each piece
    vectorized as 1-d: it reads the accumulators back where the matmul stored them (constant_init's
    forward_own_writes then takes them from registers). It had been scalar loops: lavapipe's gelu(x @ W + b) at
    512 took 9.85 ms against the matmul's 8.2 (8.38 with this)."""
    any_op = "!transform.any_op"
    k = g.index
    n = len(classify(g.target).ranges)
    if n != len(s.root_k_tile) - 1:
        return  # the epilogue's loops are not the matmul's parallel ones
    threads = s.threads[n - 1]
    if s.root_col_split[2] == 1 and (not threads or s.tile[n - 1] // threads < 2):
        return  # a column per thread: vector<1> has no SPIR-V form; the scalar loop stays
    row_pieces(emit, s, n, "transform.structured.fuse", tiled, f"%et{k}", f"%el{k}")
    for j in range(len(g.consumers)):  # tags: the last consumer 0, the others 1 .. (build)
        emit(f'    %ev{k}_{j} = transform.structured.match attributes{{portable.op = "g{k}_{j}"}} in {container} '
             f": ({any_op}) -> {any_op}")
        emit(f"    transform.structured.vectorize %ev{k}_{j} : {any_op}")

def register_accumulators(emit, container: str, k_loop: str, fold_extensions: bool = True) -> None:
    """After vectorizing a thread's matmul tile: broadcasting reads of the generic's vectorization fold into a plain
    (m,k)x(k,n) contract (with `fold_extensions`, of the narrow operands themselves); loop-invariant code (the
    padding value) leaves the K loop, so the output tile's read/write pair is invariant and becomes a register
    iter_arg."""
    any_op = "!transform.any_op"
    emit(f"    transform.apply_patterns to {container} {{")
    emit("      transform.apply_patterns.vector.transfer_permutation_patterns")
    emit("      transform.apply_patterns.vector.reduction_to_contract")
    if fold_extensions:
        emit("      transform.apply_patterns.vector.fold_arith_extension")
    emit("      transform.apply_patterns.canonicalization")
    emit(f"    }} : {any_op}")
    emit(f"    transform.apply_licm to {k_loop} : {any_op}")
    emit(f"    transform.loop.hoist_loop_invariant_subsets {k_loop} : {any_op}")
