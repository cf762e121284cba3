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

Shape limits (else the FMA strategy is used): a plain (m,k)x(k,n) matmul with f16 inputs and an f32 or f16
result, no fused epilogue, m and n multiples of the workgroup tile, k a multiple of 16.
"""

from __future__ import annotations

from .linalg_info import iterator_types, num_inputs
from .mlir import ir

MMA = 16  # the M = N = K of the one shape used: every listed device has 16x16x16 for f16
SUBGROUP = 32
# Defaults (a profile may set coop_workgroup_tile / coop_subgroup_tile): 2 x 2 subgroups of 32 x 32 outputs,
# i.e. 2 x 2 fragments per subgroup, so every A and B fragment loaded feeds two multiplies.
WG_TILE = (64, 64)
SG_TILE = (32, 32)


def tiles(profile: dict) -> tuple[tuple[int, int], tuple[int, int]]:
    """(workgroup tile, subgroup tile) in outputs (m, n) for this profile."""
    wg = tuple(int(x) for x in profile.get("coop_workgroup_tile", WG_TILE))
    sg = tuple(int(x) for x in profile.get("coop_subgroup_tile", SG_TILE))
    if any(w % s or s % MMA for w, s in zip(wg, sg)):
        raise ValueError(f"cooperative-matrix tiles {wg} / {sg}: the subgroup tile must divide the workgroup "
                         f"tile and be a multiple of {MMA}")
    return wg, sg  # type: ignore[return-value]


_MAPS = ("(d0, d1, d2) -> (d0, d2)", "(d0, d1, d2) -> (d2, d1)", "(d0, d1, d2) -> (d0, d1)")


def shape_name(acc: str) -> str:
    """The profile's spelling of the shape a matmul with this accumulator type needs."""
    return f"{MMA}x{MMA}x{MMA} f16*f16+{acc}->{acc}"


def eligible(group, profile: dict, targets: tuple[str, ...]) -> bool:
    """Whether `group` (dispatch.Group) runs on cooperative matrices for this profile and these targets."""
    if group.consumers or getattr(group, "chain", None) or not _target_has_matrices(profile, targets):
        return False
    if int(profile.get("subgroup_size", 0) or 0) not in (0, SUBGROUP) and SUBGROUP not in profile.get("subgroup_sizes",
                                                                                                      ()):
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
    if shape_name(str(c.element_type)) not in profile.get("cooperative_matrix_shapes", ()):
        return False
    body = [o.name for o in op.regions[0].blocks[0].operations]
    if [n for n in body if n != "arith.extf"] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return False
    if any(p.name != "linalg.fill" and not _is_fill(p) for p in group.producers):
        return False
    m, k = a.shape
    n = b.shape[1]
    (wm, wn), _ = tiles(profile)
    return m % wm == 0 and n % wn == 0 and k % MMA == 0


def _target_has_matrices(profile: dict, targets: tuple[str, ...]) -> bool:
    """One target per executable (the other keeps FMA): SPIR-V's cooperative matrices on Vulkan; on OpenCL,
    the same fragments spelled as inline PTX `wmma` where the device's OpenCL C takes it (profile opencl_asm)."""
    return tuple(targets) == ("vulkan",) or (tuple(targets) == ("opencl",) and profile.get("opencl_asm") == "ptx")


def _is_fill(op: ir.Operation) -> bool:
    return op.name == "linalg.generic" and num_inputs(op) == 0 and \
        [o.name for o in op.regions[0].blocks[0].operations] == ["linalg.yield"]


def emit_subgroup_tiles(emit, k: int, nfused: int, subgroup_tile: tuple[int, int]) -> None:
    """Transform lines after the workgroup tiling of group k (handles %wt{k}, %wf{k}, %wp{k}_j): a tile of
    16x16 fragments per subgroup, a K loop of 16, one vector contract per fragment with its accumulator in the
    loop's iter_args, the fill forwarded into the accumulators' initial value."""
    any_op = "!transform.any_op"
    sm, sn = subgroup_tile
    emit(f"    %st{k}, %sf{k} = transform.structured.tile_using_forall %wt{k} tile_sizes [{sm}, {sn}] "
         f"(mapping = [#gpu.warp<y>, #gpu.warp<x>]) : ({any_op}) -> ({any_op}, {any_op})")
    cont = f"%sf{k}"
    fills = []
    for j in range(1, nfused + 1):
        emit(f"    %sp{k}_{j}, %sc{k}_{j} = transform.structured.fuse_into_containing_op %wp{k}_{j} into {cont} "
             f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
        cont = f"%sc{k}_{j}"
        fills.append(f"%sp{k}_{j}")
    emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for %st{k} tile_sizes [0, 0, {MMA}] "
         f": ({any_op}) -> ({any_op}, {any_op})")
    # Fragments of the subgroup tile: loops of 16 fully unrolled, so every fragment has static offsets.
    fragments(emit, f"%kt{k}", f"f{k}", (sm, sn), f"[{MMA}, {MMA}, 0]")
    for i, h in enumerate(fills):
        fragments(emit, h, f"z{k}_{i}", (sm, sn), f"[{MMA}, {MMA}]")
    emit(f'    %vo{k} = transform.structured.match ops{{["linalg.generic", "linalg.fill"]}} in {cont} '
         f": ({any_op}) -> {any_op}")
    emit(f"    transform.structured.vectorize %vo{k} : {any_op}")
    contract_patterns(emit, cont)
    emit(f"    transform.apply_licm to %kl{k} : {any_op}")
    emit(f"    transform.loop.hoist_loop_invariant_subsets %kl{k} : {any_op}")
    # The zero fill forwards into the accumulators' initial values (mma constants after conversion).
    emit(f"    transform.apply_patterns to {cont} {{ transform.apply_patterns.canonicalization }} : {any_op}")


def contract_patterns(emit, cont: str) -> None:
    """Vectorized fragments to contracts convert-vector-to-gpu takes, in the ops under handle `cont`."""
    any_op = "!transform.any_op"
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
    emit(f"    }} : {any_op}")


def fragments(emit, handle: str, name: str, tile: tuple[int, int], sizes: str) -> None:
    any_op = "!transform.any_op"
    emit(f"    %{name}t, %{name}m, %{name}n = transform.structured.tile_using_for {handle} tile_sizes {sizes} "
         f": ({any_op}) -> ({any_op}, {any_op}, {any_op})")
    for loop, extent in ((f"%{name}n", tile[1]), (f"%{name}m", tile[0])):
        if extent // MMA > 1:
            emit(f"    transform.loop.unroll {loop} {{factor = {extent // MMA}}} : {any_op}")


def uses_mma(gpu_module_text: str) -> bool:
    return "vector.contract" in gpu_module_text


CONVERT = "builtin.module(gpu.module(convert-vector-to-gpu),canonicalize,cse)"
