"""Matmuls on cooperative matrices (VK_KHR_cooperative_matrix), where the device profile lists the shape.

The strategy is upstream MLIR end to end: the workgroup tile is split among subgroups (`#gpu.warp` mapping),
each subgroup's tile is cut into 16x16 fragments (loops fully unrolled) over a K loop of 16, each fragment a
`vector.contract` whose f16 operands keep their type (`fold_arith_extension`), the accumulators hoisted into
the loop's iter_args, and after outlining `convert-vector-to-gpu` turns the contracts into `gpu.subgroup_mma_*`
ops, which `convert-gpu-to-spirv` lowers to `OpCooperativeMatrix*KHR`. The kernel is laid over subgroups of 32
(Kernel.subgroup_size): a device whose default is another width (RDNA3 runs wave64) takes it where its profile or
its live limits allow 32-lane subgroups, and the pipeline requires 32 (runtime_vk/pipelines.py, through
VK_EXT_subgroup_size_control). OpenCL C has no such types: where the
device's OpenCL C takes inline PTX (profile `opencl_asm`), codegen_opencl spells the same ops as `wmma`
(codegen_opencl/matrix.py); elsewhere, and for a graph compiled for both targets, the register-blocked FMA
strategy stays. Where the profile sets `coop_stage_k`, the operand tiles go through workgroup memory first
(coop_staging.py).

An elementwise epilogue (bias, activation, residual: dispatch.py's in-place consumers) is fused: the group's tiled
op is then its last epilogue op, with the matmul and its fill fused into the workgroup tile. The subgroups store
their fragments to the output buffer (the epilogue updates it in place: no temporary), a barrier (with
storage-buffer semantics: barriers.py sees the global writes before it), then the epilogue runs over the
workgroup tile on its threads (`emit_epilogue`), each a row and 4 columns at a time, consecutive threads on
consecutive column vectors (coalesced), reading the fragments other subgroups stored. An epilogue that first
rounds the f32 product to f16 (an f16 model's MatMul or Gemm) writes an output of its own: the fragments are
rounded and stored to it (coop_narrow.py).

Shape limits (else the FMA strategy is used): a plain (m,k)x(k,n) matmul with f16 inputs and an f32 or f16
result, m and n multiples of the workgroup tile (`tiles`: the profile's, or its small ones where those leave the
device idle or do not divide), k a multiple of 16; an epilogue of one (m, n) elementwise op whose other inputs are
read along the output's loops in order (a residual, a row or column broadcast), with no fill of its own.
"""

from __future__ import annotations

from ...ir.linalg_info import classify, dims_in_order, indexing_maps, is_identity, iterator_types, num_inputs
from ...ir.mlir import ir
from ...profiles import Options
from ..dispatch.groups import narrows

ANY = "!transform.any_op"
MMA = 16  # the M = N = K of the one shape used: every listed device has 16x16x16 for f16
SUBGROUP = 32
# Defaults (a profile may set coop_workgroup_tile / coop_subgroup_tile): 2 x 2 subgroups of 32 x 32 outputs,
# i.e. 2 x 2 fragments per subgroup, so every A and B fragment loaded feeds two multiplies.
WG_TILE = (64, 64)
SG_TILE = (32, 32)
EPILOGUE_VEC = 4  # columns per piece of a fused epilogue: the widest vector SPIR-V has without Vector16
EPILOGUE = "portable.coop_epilogue"  # marks the thread forall of a fused epilogue (transform_script.build)


def tiles(o: Options, shape: tuple[int, int] | None = None) -> tuple[tuple[int, int], tuple[int, int]]:
    """(workgroup tile, subgroup tile) in outputs (m, n) for this profile and, given, a matmul of `shape` (m, n):
    the profile's tiles, or its `coop_small_tiles` (workgroup m, n, subgroup m, n) where those divide the shape and
    the large ones do not, or give fewer workgroups than `coop_small_tiles_below` (a 1024^2 product is 64
    workgroups of 128x128: half of an H200's SMs idle)."""
    big = _checked(o.coop_workgroup_tile or WG_TILE, o.coop_subgroup_tile or SG_TILE)
    small = o.coop_small_tiles
    if shape is None or not small:
        return big
    m, n = shape
    (wm, wn), _ = big
    if m % wm == 0 and n % wn == 0 and \
            (m // wm) * (n // wn) >= (o.coop_small_tiles_below or 0):
        return big
    alt = _checked(small[:2], small[2:])
    return alt if m % alt[0][0] == 0 and n % alt[0][1] == 0 else big


def _checked(wg_tile, sg_tile) -> tuple[tuple[int, int], tuple[int, int]]:
    wg = tuple(int(x) for x in wg_tile)
    sg = tuple(int(x) for x in sg_tile)
    if len(wg) != 2 or len(sg) != 2 or any(w % s or s % MMA for w, s in zip(wg, sg)):
        raise ValueError(f"cooperative-matrix tiles {wg} / {sg}: the subgroup tile must divide the workgroup "
                         f"tile and be a multiple of {MMA}")
    return wg, sg  # type: ignore[return-value]


_MAPS = ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)")


def shape_name(acc: str) -> str:
    """The profile's spelling of the shape a matmul with this accumulator type needs."""
    return f"{MMA}x{MMA}x{MMA} f16*f16+{acc}->{acc}"


def eligible(group, o: Options, targets: tuple[str, ...]) -> bool:
    """Whether `group` (dispatch.Group) runs on cooperative matrices for this profile and these targets."""
    if getattr(group, "chain", None) or not _target_has_matrices(o, targets):
        return False
    if (o.subgroup_size or 0) not in (0, SUBGROUP) and SUBGROUP not in (o.subgroup_sizes or ()):
        return False
    op = group.root
    if op.name != "linalg.generic" or num_inputs(op) != 2 or len(op.results) != 1:
        return False
    if iterator_types(op) != ["parallel", "parallel", "reduction"]:
        return False
    maps = [str(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]
    if tuple(maps) != _MAPS:
        return False
    a, b, c = (ir.RankedTensorType(v.type) for v in op.operands)
    if str(a.element_type) != "f16" or str(b.element_type) != "f16" or str(c.element_type) not in ("f16", "f32"):
        return False
    if shape_name(str(c.element_type)) not in (o.cooperative_matrix_shapes or ()):
        return False
    body = [o.name for o in op.regions[0].blocks[0].operations]
    if [n for n in body if n != "arith.extf"] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    if any(p.name != "linalg.fill" and not _is_fill(p) for p in group.producers):
        return False
    m, k = a.shape
    n = b.shape[1]
    (wm, wn), sg = tiles(o, (m, n))
    if group.consumers and (not _epilogue_ok(group, (m, n)) or epilogue_threads((wm, wn), sg) is None):
        return False
    return m % wm == 0 and n % wn == 0 and k % MMA == 0


def group_tiles(group, o: Options) -> tuple[tuple[int, int], tuple[int, int]]:
    """`tiles` for the matmul an eligible group computes."""
    m, n, _ = classify(group.root).ranges
    return tiles(o, (m, n))


def _epilogue_ok(group, shape: tuple[int, int]) -> bool:
    """The consumer is one elementwise op updating the matmul's output in place (as dispatch.py makes it; or,
    rounding the product to f16 first, writing an output of its own: coop_narrow.py then stores f16 fragments; the
    preprocessing fuses an elementwise chain into one op, and a chain left of several is not tried here), the
    matmul's own fill the group's one producer (an epilogue's constant operand would be a second: its fill would
    need a place of its own in the kernel), and every other input is read along the output's loops in order (a
    1-d vector load per piece; a transposed read is left to FMA)."""
    out = group.root.operands[2]
    if len(group.consumers) != 1 or len(group.producers) != 1 or not isinstance(out, ir.OpResult) or \
            out.owner.operation != group.producers[0]:
        return False
    (op,) = group.consumers
    if op.name != "linalg.generic" or len(op.results) != 1 or iterator_types(op) != ["parallel", "parallel"] \
            or classify(op).gathers:
        return False
    nin = num_inputs(op)
    dest = op.operands[nin] if len(op.operands) == nin + 1 else None
    if dest is None or tuple(ir.RankedTensorType(dest.type).shape) != shape:
        return False
    in_place = isinstance(dest, ir.OpResult) and dest.owner.operation == group.root
    if not in_place and not any(v == group.root.results[0] and narrows(op, i)
                                for i, v in enumerate(list(op.operands)[:nin])):
        return False
    maps = indexing_maps(op)
    # (d0, d1), (d1), (d0) or (): each input follows the output's loops, broadcast or not.
    return is_identity(maps[nin]) and all(dims_in_order(m) is not None for m in maps[:nin])


def epilogue_threads(wg_tile: tuple[int, int], sg_tile: tuple[int, int]) -> tuple[int, int] | None:
    """(threads on rows, threads on columns) running an epilogue over the workgroup tile, 4 columns per thread
    and piece: a row of the tile on neighbouring threads (as many as it has 4-column vectors, at most all), the
    rest on rows; None where they do not divide the tile."""
    (wm, wn), (sm, sn) = wg_tile, sg_tile
    threads = (wm // sm) * (wn // sn) * SUBGROUP
    if wn % EPILOGUE_VEC:
        return None
    tx = min(wn // EPILOGUE_VEC, threads)
    ty = threads // tx
    if threads % tx or wn % (tx * EPILOGUE_VEC) or wm % ty:
        return None
    return ty, tx


def _target_has_matrices(o: Options, targets: tuple[str, ...]) -> bool:
    """One target per executable (the other keeps FMA): SPIR-V's cooperative matrices on Vulkan; on OpenCL,
    the same fragments spelled as inline PTX `wmma` where the device's OpenCL C takes it (profile opencl_asm)."""
    return tuple(targets) == ("vulkan",) or (tuple(targets) == ("opencl",) and o.opencl_asm == "ptx")


def _is_fill(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and num_inputs(op) == 0 and \
        [o.name for o in op.regions[0].blocks[0].operations] == ["linalg.yield"]


def handles(k: int, nconsumers: int, nfused: int) -> tuple[str, list[str]]:
    """Transform handles of group k's matmul and the fills fused with it after the workgroup tiling
    (transform_script.build): the tiled op itself and the fused ops, or with an epilogue of `nconsumers` ops, the
    fused ops after the consumers."""
    if nconsumers:
        return f"%wp{k}_{nconsumers}", [f"%wp{k}_{j}" for j in range(nconsumers + 1, nfused + 1)]
    return f"%wt{k}", [f"%wp{k}_{j}" for j in range(1, nfused + 1)]


def emit_subgroup_tiles(emit, k: int, nconsumers: int, nfused: int, subgroup_tile: tuple[int, int]) -> None:
    """Transform lines after the workgroup tiling of group k (handles as `handles` says): a tile of 16x16
    fragments per subgroup, a K loop of 16, one vector contract per fragment with its accumulator in the loop's
    iter_args, the fill forwarded into the accumulators' initial value."""
    matmul, fills = handles(k, nconsumers, nfused)
    sm, sn = subgroup_tile
    emit(f"    %st{k}, %sf{k} = transform.structured.tile_using_forall {matmul} tile_sizes [{sm}, {sn}] "
         f"(mapping = [#gpu.warp<y>, #gpu.warp<x>]) : ({ANY}) -> ({ANY}, {ANY})")
    cont = f"%sf{k}"
    for j, h in enumerate(fills, 1):
        emit(f"    %sp{k}_{j}, %sc{k}_{j} = transform.structured.fuse_into_containing_op {h} into {cont} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        cont = f"%sc{k}_{j}"
    emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for %st{k} tile_sizes [0, 0, {MMA}] "
         f": ({ANY}) -> ({ANY}, {ANY})")
    # Fragments of the subgroup tile: loops of 16 fully unrolled, so every fragment has static offsets.
    fragments(emit, f"%kt{k}", f"f{k}", (sm, sn), f"[{MMA}, {MMA}, 0]")
    for j in range(1, len(fills) + 1):
        fragments(emit, f"%sp{k}_{j}", f"z{k}_{j - 1}", (sm, sn), f"[{MMA}, {MMA}]")
    emit(f'    %vo{k} = transform.structured.match ops{{["linalg.generic", "linalg.fill"]}} in {cont} '
         f": ({ANY}) -> {ANY}")
    emit(f"    transform.structured.vectorize %vo{k} : {ANY}")
    contract_patterns(emit, cont)
    emit(f"    transform.apply_licm to %kl{k} : {ANY}")
    emit(f"    transform.loop.hoist_loop_invariant_subsets %kl{k} : {ANY}")
    # The zero fill forwards into the accumulators' initial values (mma constants after conversion).
    emit(f"    transform.apply_patterns to {cont} {{ transform.apply_patterns.canonicalization }} : {ANY}")


def emit_epilogue(emit, k: int, nconsumers: int, workgroup_tile: tuple[int, int], threads: tuple[int, int]) -> None:
    """Transform lines running group k's epilogue (handle %wt{k}, its last op; %wp{k}_j, j < nconsumers, the
    others) over the workgroup tile on the threads (`threads` = epilogue_threads), in a forall of its own after
    the subgroups' (map_nested_forall_to_threads puts a barrier between them: sync_after_distribute). A thread
    takes a [rows, 4 * cols] block, a row and 4 columns per piece, each piece vectorized as 1-d (SPIR-V has no
    2-d vectors); the pieces are unrolled by up to 8, whose loads can then be in flight together. The forall is
    marked (EPILOGUE) for the vector lowering after bufferization."""
    wm, wn = workgroup_tile
    ty, tx = threads
    rows, cols = wm // ty, wn // tx // EPILOGUE_VEC
    emit(f"    %et{k}, %ef{k} = transform.structured.tile_using_forall %wt{k} num_threads [{ty}, {tx}] "
         f"(mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]) : ({ANY}) -> ({ANY}, {ANY})")
    emit(f'    transform.annotate %ef{k} "{EPILOGUE}" : {ANY}')
    cont = f"%ef{k}"
    for j in range(1, nconsumers):
        emit(f"    %ep{k}_{j}, %ec{k}_{j} = transform.structured.fuse_into_containing_op %wp{k}_{j} into {cont} "
             f": ({ANY}, {ANY}) -> ({ANY}, {ANY})")
        cont = f"%ec{k}_{j}"
    loops = [(f"%erl{k}", rows)] + ([(f"%ecl{k}", cols)] if cols > 1 else [])
    sizes = f"[1, {EPILOGUE_VEC if cols > 1 else 0}]"
    emit(f"    %es{k}, {', '.join(n for n, _ in loops)} = transform.structured.fuse %et{k} tile_sizes {sizes} "
         f": ({ANY}) -> ({', '.join([ANY] * (len(loops) + 1))})")
    # Inner loop first (unrolling the outer one first would leave the handle on one copy of the inner loop).
    budget = 8
    for name, n in reversed(loops):
        factor = max(f for f in range(1, min(n, budget) + 1) if n % f == 0)
        if factor > 1:
            emit(f"    transform.loop.unroll {name} {{factor = {factor}}} : {ANY}")
        budget = max(1, budget // factor)
    for j in range(nconsumers):  # tags: the last consumer 0, the others 1 .. (transform_script.build)
        emit(f'    %ev{k}_{j} = transform.structured.match attributes{{portable.op = "g{k}_{j}"}} in {cont} '
             f": ({ANY}) -> {ANY}")
        emit(f"    transform.structured.vectorize %ev{k}_{j} : {ANY}")


def contract_patterns(emit, cont: str) -> None:
    """Vectorized fragments to contracts convert-vector-to-gpu takes, in the ops under handle `cont`."""
    emit(f"    transform.apply_patterns to {cont} {{")
    # Slices of slices become one slice and reads/writes of slices read/write the tile at an offset, so each
    # fragment's accumulator is a loop-invariant subset of the K loop's iter_arg (hoisted below); the
    # contracts keep their f16 operands (fold_arith_extension), which is what convert-vector-to-gpu matches.
    emit("      transform.apply_patterns.tensor.merge_consecutive_insert_extract_slice")
    emit("      transform.apply_patterns.tensor.fold_tensor_subset_ops")
    emit("      transform.apply_patterns.vector.transfer_permutation_patterns")
    emit("      transform.apply_patterns.vector.reduction_to_contract")
    emit("      transform.apply_patterns.vector.fold_arith_extension")
    emit("      transform.apply_patterns.canonicalization")
    emit(f"    }} : {ANY}")


def fragments(emit, handle: str, name: str, tile: tuple[int, int], sizes: str) -> None:
    emit(f"    %{name}t, %{name}m, %{name}n = transform.structured.tile_using_for {handle} tile_sizes {sizes} "
         f": ({ANY}) -> ({ANY}, {ANY}, {ANY})")
    for loop, extent in ((f"%{name}n", tile[1]), (f"%{name}m", tile[0])):
        if extent // MMA > 1:
            emit(f"    transform.loop.unroll {loop} {{factor = {extent // MMA}}} : {ANY}")


def uses_mma(gpu_module_text: str) -> bool:
    return "vector.contract" in gpu_module_text


CONVERT = "builtin.module(gpu.module(convert-vector-to-gpu),canonicalize,cse)"
