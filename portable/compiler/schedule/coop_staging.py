"""Cooperative-matrix matmul with the workgroup's A and B K-tiles staged in workgroup memory (profile key
`coop_stage_k`).

The plain cooperative-matrix kernel (coop_matrix.py) has every subgroup load its fragments straight from global
memory: each A fragment is fetched by every subgroup of the workgroup's row, each B fragment by every one of its
column. Here a workgroup walks K in steps of `coop_stage_k`: all its threads copy the A [WM, KT] and B [KT, WN]
tiles into workgroup memory (16-byte accesses, coalesced; rows padded by 16 bytes against bank conflicts), a
barrier, then each subgroup loads its fragments from workgroup memory, a barrier. The global reads of step i+1
are issued before step i's multiplies (carried in registers); `coop_stage_buffers` = 2 keeps two copies of the
tiles instead (one barrier per step). H200, matmul 4096 f16 on the device clock: 1.28 ms unstaged, 0.44 ms with
steps of 64 (benchmarks/results/h200/coop_staged; there neither the prefetch nor the second copy moved it).

Upstream pieces, as promotion.py does for the FMA matmul: tile_using_for (the workgroup K loop), pad with nofold +
bufferize_to_allocation (the workgroup buffers and their linalg.copy), tile_using_forall with linear thread mapping
(the copies), warp mapping (the subgroup tiles), map_nested_forall_to_threads with sync_after_distribute (the
barriers). After outlining (`after_outline`): the accumulators become loop-carried values starting from the fill's
zeros, the buffers are allocated once with padded rows. On the Vulkan kernel's own copy (`wide_copies`): the
operand buffers and tiles retyped to 16-byte elements, then the prefetch or the double buffering.
"""

from __future__ import annotations

from ...errors import CompileError
from ...ir.mlir import arith, gpu, ir, memref, passmanager
from ...ir.util import all_in_bounds, as_operation, constant_int, find_ops, grouped_memref, memory_space, multiple_of
from ...profiles import Options
from ..lowering.loop_registers import carry_in_registers, defined_outside
from . import coop_matrix, promotion
from .promotion import clone_with, index_slice

STAGED_K = "portable.coop_staged_k"  # marks the workgroup K loop of a staged cooperative-matrix matmul
VEC = 8  # f16 elements per 16-byte copy
# Workgroup memory assumed where the profile's options do not say: 48 KiB, what NVIDIA (the one profile with
# coop_stage_k) gives a workgroup without opting in to more.
SHARED_BYTES = 49152
ANY = "!transform.any_op"


def copy_threads(rows: int, cols: int, threads: int) -> tuple[int, int]:
    """(threads on rows, threads on columns) copying a [rows, cols] f16 tile 8 elements (16 bytes) per access."""
    cx = min(cols // VEC, threads)
    cy = min(rows, threads // cx)
    return cy, cx


def applies(g) -> bool:
    """The group (dispatch.Group, cooperative-matrix eligible) fuses its fill and nothing else but its epilogue:
    the form `emit` writes."""
    return len(g.producers) == 1


def stage_k(o: Options, k: int, tiles: tuple[tuple[int, int], tuple[int, int]]) -> tuple[int, int]:
    """(K step, workgroup buffers per operand) of the staged form for this profile and a matmul of depth k; a K
    step of 0 = not staged (no `coop_stage_k`, k not a multiple of it, or the padded tiles do not fit the
    workgroup memory) with these (workgroup, subgroup) `tiles`. `coop_stage_buffers` = 2 double-buffers the tiles
    where both copies fit."""
    kt = o.coop_stage_k or 0
    if not kt or kt % coop_matrix.MMA or k % kt:
        return 0, 1
    (wm, wn), (sm, sn) = tiles
    threads = (wm // sm) * (wn // sn) * coop_matrix.SUBGROUP
    for rows, cols in ((wm, kt), (kt, wn)):
        cy, cx = copy_threads(rows, cols, threads)
        if cols % VEC or rows % cy:
            return 0, 1
    staged = 2 * (wm * (kt + PAD) + kt * (wn + PAD))  # f16 bytes of both padded tiles
    limit = SHARED_BYTES if o.shared_memory_bytes is None else o.shared_memory_bytes
    for nbuf in (o.coop_stage_buffers or 1, 1):
        if nbuf in (1, 2) and nbuf * staged <= limit:
            return kt, nbuf
    return 0, 1


def emit(emit, k: int, nconsumers: int, nfused: int, wg_tile: tuple[int, int], sg_tile: tuple[int, int], kt: int,
         buffers: int = 1, acc: str = "f32") -> None:
    """Transform lines after the workgroup tiling of group k (handles as coop_matrix.handles says: the matmul and
    its one fill): the fill per subgroup fragment, the K loop of steps kt with the operand tiles in workgroup
    memory, the subgroup tiles of one step in 16x16 fragments. `acc`: the output's element type."""
    matmul, fills = coop_matrix.handles(k, nconsumers, nfused)
    if len(fills) != 1:
        raise CompileError("the staged cooperative-matrix form takes a matmul whose one fused producer is its fill "
                           f"(this group fuses {len(fills)})", stage="tile-and-map")
    sm, sn = sg_tile
    wm, wn = wg_tile
    threads = (wm // sm) * (wn // sn) * coop_matrix.SUBGROUP
    warps = "(mapping = [#gpu.warp<y>, #gpu.warp<x>])"
    # The zero fill, fragment by fragment per subgroup: after outlining each fragment's first read is this write.
    emit(f"    %zt{k}, %zf{k} = transform.structured.tile_using_forall {fills[0]} tile_sizes [{sm}, {sn}] {warps} "
         f": ({ANY}) -> ({ANY}, {ANY})")
    coop_matrix.fragments(emit, f"%zt{k}", f"z{k}", (sm, sn), f"[{coop_matrix.MMA}, {coop_matrix.MMA}]")
    emit(f'    %zv{k} = transform.structured.match ops{{["linalg.fill", "linalg.generic"]}} in %zf{k} '
         f": ({ANY}) -> {ANY}")
    emit(f"    transform.structured.vectorize %zv{k} : {ANY}")
    # The workgroup K loop; the operand tiles of a step become workgroup buffers filled by linalg.copy.
    emit(f"    %pk{k}, %pkl{k} = transform.structured.tile_using_for {matmul} tile_sizes [0, 0, {kt}] "
         f": ({ANY}) -> ({ANY}, {ANY})")
    emit(f"    %nb{k} = transform.param.constant {buffers} : i64 -> !transform.param<i64>")
    emit(f'    transform.annotate %pkl{k} "{STAGED_K}" = %nb{k} : {ANY}, !transform.param<i64>')
    # Thread t copies rows t // cx + j * cy (j < rows / cy), 8 halves each: a row's 16-byte pieces go to
    # neighbouring threads.
    promotion.emit_operand_copies(emit, k, f"0.0 : f16, 0.0 : f16, 0.0 : {acc}", ((wm, kt), (kt, wn)),
                                  lambda r, c: copy_threads(r, c, threads))
    # One K step of the subgroup tiles, as in the unstaged form, on the padded (workgroup-memory) operands.
    emit(f"    %st{k}, %sf{k} = transform.structured.tile_using_forall %pp{k} tile_sizes [{sm}, {sn}] {warps} "
         f": ({ANY}) -> ({ANY}, {ANY})")
    steps = kt // coop_matrix.MMA
    frag = f"[{coop_matrix.MMA}, {coop_matrix.MMA}, 0]"
    if steps > 1:
        emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for %st{k} tile_sizes [0, 0, {coop_matrix.MMA}] "
             f": ({ANY}) -> ({ANY}, {ANY})")
    coop_matrix.fragments(emit, f"%kt{k}" if steps > 1 else f"%st{k}", f"f{k}", (sm, sn), frag)
    emit(f'    %vo{k} = transform.structured.match ops{{["linalg.generic"]}} in %sf{k} : ({ANY}) -> {ANY}')
    emit(f"    transform.structured.vectorize %vo{k} : {ANY}")
    coop_matrix.contract_patterns(emit, f"%pkl{k}")
    if steps > 1:
        # Within the step the accumulators are the inner K loop's iter_args (read before it, written after);
        # then the loop goes: straight-line fragment loads of the whole step, for the driver to issue early.
        emit(f"    transform.apply_licm to %kl{k} : {ANY}")
        emit(f"    transform.loop.hoist_loop_invariant_subsets %kl{k} : {ANY}")
        emit(f"    transform.loop.unroll %kl{k} {{factor = {steps}}} : {ANY}")
    emit(f"    transform.apply_patterns to %zf{k} {{ transform.apply_patterns.canonicalization }} : {ANY}")


def after_outline(module: ir.Module) -> None:
    """Run after outlining: in each staged K loop the output fragments become loop-carried values starting from
    the fill's zeros (never read from or written to memory before the end), the workgroup buffers are allocated
    once, outside the loop, with padded rows."""
    if not find_ops(module.operation, ("scf.for",), lambda op: STAGED_K in op.attributes):
        return
    # Views folded into the accesses, so a fragment's reads and writes share one memref and index values.
    passmanager.PassManager.parse(FOLD).run(module.operation)
    for loop in find_ops(module.operation, ("scf.for",), lambda op: STAGED_K in op.attributes):
        buffers = loop.attributes[STAGED_K]
        del loop.attributes[STAGED_K]
        _hoist_allocs(loop)
        loop = carry_in_registers(loop, across_barriers=True)
        _start_from_fill(loop)
        _drop_leading_barriers(loop)
        _barrier_before_epilogue(loop)
        # For wide_copies, on the kernel's own copy (convert-vector-to-gpu rebuilds the loop: the kernel keeps it).
        fn = loop.parent
        while fn.name != "gpu.func":
            fn = fn.parent
        fn.attributes[STAGED_K] = buffers


FOLD = "builtin.module(gpu.module(fold-memref-alias-ops),canonicalize,cse)"
PAD = 8  # f16 elements added to every workgroup-buffer row: 16 bytes, so 8 rows of a fragment hit 8 bank groups


def _hoist_allocs(loop: ir.Operation) -> None:
    """The step's workgroup buffers are allocated before the loop (one allocation, reused every step), each
    row PAD elements longer than the tile's: a fragment's 16-byte row pieces then fall in distinct banks (rows
    of 64 or 256 bytes would put every second or every row on the same banks)."""
    for alloc in find_ops(loop, ("memref.alloc",)):
        t = ir.MemRefType(alloc.results[0].type)
        if memory_space(t) != "workgroup":
            continue
        if any(u.owner.name not in ("vector.transfer_read", "vector.transfer_write") for u in alloc.results[0].uses):
            raise CompileError("a staged cooperative-matrix tile is used by something other than a transfer",
                               stage="coop-staging")
        rows, cols = t.shape
        padded = ir.MemRefType.get([rows, cols + PAD], t.element_type, memory_space=t.memory_space)
        with ir.InsertionPoint(loop), loop.location:
            new = memref.AllocOp(padded, [], []).result
        alloc.results[0].replace_all_uses_with(new)
        alloc.erase()


def _start_from_fill(loop: ir.Operation) -> None:
    """An accumulator whose value before the loop is read back from where the fill wrote a constant starts from
    that constant; the fill's write goes (the loop's result is written there after the loop, and no other
    thread reads a subgroup's output fragment)."""
    ops = [o.operation for o in loop.block.operations]
    for init in list(loop.operands)[3:]:
        read = init.owner.operation if isinstance(init, ir.OpResult) else None
        if read is None or read.name != "vector.transfer_read" or read.block != loop.block:
            continue
        mem, idx = read.operands[0], _indices(read)
        fill = None
        for o in reversed(ops[:ops.index(read)]):
            if o.name == "vector.transfer_write" and o.operands[1] == mem and _same(_indices(o), idx):
                fill = o
                break
            if o.regions and _touches(o, mem):
                break
        const = fill.operands[0].owner.operation if fill is not None and \
            isinstance(fill.operands[0], ir.OpResult) else None
        if const is None or const.name != "arith.constant" or fill.operands[0].type != read.results[0].type or \
                str(fill.attributes["permutation_map"]) != str(read.attributes["permutation_map"]):
            continue
        read.results[0].replace_all_uses_with(fill.operands[0])
        read.erase()
        fill.erase()
        ops = [o.operation for o in loop.block.operations]


def _indices(op: ir.Operation) -> list[ir.Value]:
    """Index operands of a (maskless) vector transfer."""
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    start = 1 if op.name == "vector.transfer_read" else 2
    return list(op.operands)[start:start + seg[start]]


def _same(a: list[ir.Value], b: list[ir.Value]) -> bool:
    return len(a) == len(b) and all(x == y for x, y in zip(a, b))


def _touches(op: ir.Operation, mem: ir.Value) -> bool:
    """Whether `op` or an op nested in it takes `mem` as an operand."""
    found = []

    def visit(o):
        if any(v == mem for v in o.operands):
            found.append(o)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return bool(found)


def _barrier_before_epilogue(loop: ir.Operation) -> None:
    """The fragments, carried out of the loop, are stored right after it; a fused epilogue that follows
    (coop_matrix.emit_epilogue) reads what other subgroups stored: a barrier between them. (The barrier that
    thread mapping put after the subgroups' forall stays at the end of the loop's body, where the stores were;
    barriers.py keeps this one's storage-buffer semantics, since global writes precede it.)"""
    ops = [o.operation for o in loop.block.operations]
    rest = ops[ops.index(loop) + 1:]
    stores = 0
    while stores < len(rest) and rest[stores].name == "vector.transfer_write":
        stores += 1
    if stores and stores < len(rest) and rest[stores].name not in ("gpu.barrier", "gpu.return"):
        with ir.InsertionPoint(rest[stores]), loop.location:
            gpu.BarrierOp()


def _drop_leading_barriers(loop: ir.Operation) -> None:
    """The fill's barrier orders nothing once the fill is gone (no memory is touched before the loop)."""
    for o in [o.operation for o in loop.block.operations]:
        if o == loop:
            return
        if o.name == "gpu.barrier":
            o.erase()
        elif o.name in ("vector.transfer_write", "memref.store", "gpu.subgroup_mma_store_matrix"):
            return


# ---- on the Vulkan kernel's own copy (target_codegen.codegen) -----------------------------------------------
def wide_copies(module: ir.Module) -> bool:
    """A kernel's own copy (`module`: one gpu.module) whose staged K loops copy 16 bytes per access, in place: the
    f16 operand buffers and the workgroup tiles become arrays of vector<4xi32> (SPIR-V's logical addressing cannot
    load a vector from a half array: each 8-element transfer would be 8 loads and 8 stores), the fragment loads
    read the same bytes with strides in 16-byte units; then the next step's global reads are issued before this
    step's math (promotion._prefetch). Whether it had a staged loop (kernels without one are left alone)."""
    staged = find_ops(module.operation, ("gpu.func",), lambda op: STAGED_K in op.attributes)
    for fn in staged:
        buffers = ir.IntegerAttr(fn.attributes[STAGED_K]).value
        del fn.attributes[STAGED_K]
        # The staged loops: those whose body has barriers (the fragment loops inside have none).
        loops = [o.operation for o in fn.regions[0].blocks[0].operations if o.operation.name == "scf.for" and
                 any(b.operation.name == "gpu.barrier" for b in o.operation.regions[0].blocks[0].operations)]
        tiles = [a.results[0] for a in find_ops(fn, ("memref.alloc",)) if memory_space(a.results[0]) == "workgroup"]
        pairs = [_copy_pairs(t) for t in tiles]
        if not all(p is not None for p in pairs):
            continue  # the copies stay as they are (8 f16 accesses each): carried in registers they would
            # be vector<8xf16> values, which SPIR-V has no type for
        if any(_widened(ir.MemRefType(read.operands[0].type)) is None for p in pairs for read, _ in p):
            continue
        tiles = _widen(fn, tiles, pairs, buffers)
        for loop in loops:
            if buffers == 2 and len(loops) == 1:
                _double_buffer(loop, tiles)
            else:
                promotion.prefetch(loop)
    return bool(staged)


def _copy_pairs(tile: ir.Value) -> list | None:
    """[(global read, tile write)] of every 8-element copy into `tile`, when every access to the tile and to the
    buffers read can take 16-byte elements (8-element transfers and fragment loads at multiples of 8), else
    None."""
    pairs = []
    t = ir.MemRefType(tile.type)
    if t.rank != 2 or t.shape[1] % VEC or not isinstance(t.element_type, ir.F16Type):
        return None
    for use in tile.uses:
        o = as_operation(use.owner)
        if o.name == "gpu.subgroup_mma_load_matrix":
            if not multiple_of(list(o.operands)[-1], VEC):
                return None
        elif o.name == "vector.transfer_write" and use.operand_number == 1 and _eight(o, o.operands[0].type):
            src = o.operands[0].owner.operation if isinstance(o.operands[0], ir.OpResult) else None
            if src is None or src.name != "vector.transfer_read" or not _eight(src, src.results[0].type) or \
                    not isinstance(src.operands[0], ir.BlockArgument) or len(list(src.results[0].uses)) != 1:
                return None
            pairs.append((src, o))
        else:
            return None
    for src, _ in pairs:
        buf = src.operands[0]
        if any(as_operation(u.owner).name != "vector.transfer_read"
               for u in buf.uses) or ir.MemRefType(buf.type).shape[-1] % VEC:
            return None
    return pairs


def _eight(op: ir.Operation, vt: ir.Type) -> bool:
    """A transfer of 8 elements along the innermost dim, in bounds, unmasked, at a multiple of 8."""
    v = ir.VectorType(vt)
    if v.shape[-1] != VEC or any(d != 1 for d in v.shape[:-1]) or "permutation_map" not in op.attributes:
        return False
    seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
    amap = ir.AffineMapAttr(op.attributes["permutation_map"]).value
    minor = [str(e) for e in amap.results] == [f"d{amap.n_dims - v.rank + i}" for i in range(v.rank)]
    return minor and seg[-1] == 0 and all_in_bounds(op) and \
        multiple_of(_indices(op)[-1], VEC)


def _widened(t: ir.MemRefType) -> ir.MemRefType | None:
    """`t` as 16-byte elements (None: a view whose offset or strides are not whole 16-byte elements)."""
    return grouped_memref(t, VEC, ir.VectorType.get([4], ir.IntegerType.get_signless(32)))


def _widen(fn: ir.Operation, tiles: list[ir.Value], pairs: list[list], buffers: int) -> list[ir.Value]:
    """Retype as wide_copies says (`buffers` copies of each tile, stacked along the rows); the new tiles."""
    idx_t = ir.IndexType.get()
    bufs = []
    for tile_pairs in pairs:
        for read, _ in tile_pairs:
            if all(b != read.operands[0] for b in bufs):
                bufs.append(read.operands[0])
    for buf in bufs:
        buf.set_type(_widened(ir.MemRefType(buf.type)))
    entry = fn.regions[0].blocks[0]
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    inputs = [a.type for a in list(entry.arguments)[:len(ftype.inputs)]]
    fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, list(ftype.results)))

    def over8(op, i):
        with ir.InsertionPoint(op), op.location:
            return _divided(i, VEC, idx_t)

    out = []
    for tile, tile_pairs in zip(tiles, pairs):
        alloc = tile.owner.operation
        t = ir.MemRefType(tile.type)
        stacked = ir.MemRefType.get([buffers * t.shape[0], t.shape[1]], t.element_type, memory_space=t.memory_space)
        with ir.InsertionPoint(alloc), alloc.location:
            new = memref.AllocOp(_widened(stacked), [], []).result
        out.append(new)
        for read, write in tile_pairs:
            ri, wi = _indices(read), _indices(write)
            with ir.InsertionPoint(write), write.location:
                v = memref.LoadOp(read.operands[0], ri[:-1] + [over8(write, ri[-1])]).result
                memref.StoreOp(v, new, wi[:-1] + [over8(write, wi[-1])])
            write.erase()
            read.erase()
        for use in list(tile.uses):
            o = as_operation(use.owner)
            ops = list(o.operands)
            lead = ir.IntegerAttr(o.attributes["leadDimension"]).value
            with ir.InsertionPoint(o), o.location:
                ld = gpu.SubgroupMmaLoadMatrixOp(o.results[0].type, new, ops[1:-1] + [over8(o, ops[-1])],
                                                 lead // VEC)
            if "transpose" in o.attributes:
                ld.operation.attributes["transpose"] = o.attributes["transpose"]
            o.results[0].replace_all_uses_with(ld.result)
            o.erase()
        alloc.erase()
    return out


def _divided(v: ir.Value, n: int, idx_t: ir.Type) -> ir.Value:
    """v / n for an index v that multiple_of proved a multiple of n: sums and products divided term by term
    (a division of `x * 8 - y * 32` by 8 would be left to the driver otherwise), else a signed division (exact
    for a multiple, whatever its sign). Built at the current insertion point."""
    c = constant_int(v)
    if c is not None:
        return arith.ConstantOp(idx_t, c // n).result
    op = v.owner.operation if isinstance(v, ir.OpResult) else None
    if op is not None and op.name in ("arith.addi", "arith.subi"):
        a, b = (_divided(x, n, idx_t) for x in op.operands)
        return (arith.AddIOp if op.name == "arith.addi" else arith.SubIOp)(a, b).result
    if op is not None and op.name == "arith.muli":
        for x, y in (tuple(op.operands), tuple(op.operands)[::-1]):
            k = constant_int(y)
            if k is not None and k % n == 0:
                return arith.MulIOp(x, arith.ConstantOp(idx_t, k // n).result).result
    return arith.DivSIOp(v, arith.ConstantOp(idx_t, n).result).result


def _double_buffer(loop: ir.Operation, tiles: list[ir.Value]) -> None:
    """Software-pipeline the staged loop over two copies of each tile (stacked rows): step i multiplies from
    copy i % 2 while its threads store step i+1's operands (read from global memory during step i-1) into the
    other copy and issue the global reads of step i+2; one barrier per step (the one at its end) orders both
    the stores against the next step's fragment loads and this step's fragment loads against the stores of
    the next. A single copy needs a second barrier per step between the stores and the loads."""
    body = loop.regions[0].blocks[0]
    ops = [o.operation for o in body.operations]
    iv = body.arguments[0]
    lb, ub, step = list(loop.operands)[:3]
    n_acc = len(loop.results)
    reads = [o for o in ops if o.name == "memref.load" and not _is_workgroup(o.operands[0])
             and defined_outside(o.operands[0], loop)]
    stores = [next(iter(r.results[0].uses)).owner for r in reads]
    stores = [as_operation(st) for st in stores]
    barriers = [o for o in ops if o.name == "gpu.barrier"]
    if not reads or len(barriers) < 2 or any(st.name != "memref.store" for st in stores):
        promotion.prefetch(loop)
        return
    idx_t = ir.IndexType.get()
    # Prologue: step 0 into copy 0, a barrier, step 1's reads in flight.
    for st in stores:
        clone_with(index_slice(st, ops) + [st], iv, lb, loop)
    barriers[-1].clone(ip=ir.InsertionPoint(loop))
    with ir.InsertionPoint(loop), loop.location:
        first = arith.MinSIOp(arith.AddIOp(lb, step).result, arith.SubIOp(ub, step).result).result
    regs = [clone_with(index_slice(r, ops) + [r], iv, first, loop)[-1].results[0] for r in reads]
    new, new_yield = promotion.with_iter_args(loop, regs)
    nbody = new.body
    niv = nbody.arguments[0]
    for b in barriers[:-1]:
        b.erase()
    body_ops = [o.operation for o in nbody.operations]
    with ir.InsertionPoint(body_ops[0]), loop.location:
        two = arith.ConstantOp(idx_t, 2).result
        parity = arith.RemUIOp(arith.DivUIOp(arith.SubIOp(niv, lb).result, step).result, two).result
        off, other = [], []  # per tile: the row where this step's copy starts, and the other's
        for t in tiles:
            n = arith.ConstantOp(idx_t, ir.MemRefType(t.type).shape[0] // 2).result
            off.append(arith.MulIOp(parity, n).result)
            other.append(arith.SubIOp(n, off[-1]).result)

    def tile_of(v: ir.Value) -> int:
        return next(i for i, t in enumerate(tiles) if t == v)

    # Stores: the carried registers, into the other copy.
    for i, st in enumerate(stores):
        st.operands[0] = nbody.arguments[1 + n_acc + i]
        _shift_row(st, 2, other[tile_of(st.operands[1])])
    # Fragment loads: this step's copy.
    for o in body_ops:
        if o.name == "gpu.subgroup_mma_load_matrix":
            _shift_row(o, 1, off[tile_of(o.operands[0])])
    # Step i+2's reads, after the stores (the last steps re-read the last tile: never past the end).
    anchor = next(o for o in body_ops if o.name == "gpu.subgroup_mma_load_matrix")
    with ir.InsertionPoint(anchor), loop.location:
        two_steps = arith.AddIOp(niv, arith.AddIOp(step, step).result).result
        nxt = arith.MinSIOp(two_steps, arith.SubIOp(ub, step).result).result
    body_ops = [o.operation for o in nbody.operations]
    nxt_regs = [clone_with(index_slice(r, body_ops) + [r], niv, nxt, anchor)[-1].results[0] for r in reads]
    for r in reads:
        r.erase()
    promotion.replace_with_rebuilt(loop, new, new_yield, nxt_regs)


def _shift_row(op: ir.Operation, first_index: int, by: ir.Value) -> None:
    """Add `by` to the row (first) index of a memory op whose indices start at operand `first_index`."""
    with ir.InsertionPoint(op), op.location:
        op.operands[first_index] = arith.AddIOp(op.operands[first_index], by).result


def _is_workgroup(v: ir.Value) -> bool:
    return memory_space(v) == "workgroup"
