"""Writes the transform-dialect script that tiles, fuses, bufferizes and maps every dispatch group to the GPU."""

from __future__ import annotations

from .dispatch import Group
from .strategy import Strategy


def _mapping(kind: str, n: int) -> str:
    """GPU mapping attributes for an n-dimensional forall, innermost loop on x."""
    if n <= 3:
        names = ["z", "y", "x"][3 - n:]
    else:
        names = [f"linear_dim_{n - 1 - i}" for i in range(n)]
    return ", ".join(f"#gpu.{kind}<{a}>" for a in names)


def build(groups: list[Group], strategies: list[Strategy]) -> str:
    any_op = "!transform.any_op"
    lines = [
        "module attributes {transform.with_named_sequence} {",
        f"  transform.named_sequence @__transform_main(%root: {any_op} {{transform.consumed}}) {{",
    ]
    emit = lines.append
    for g, s in zip(groups, strategies):
        k = g.index
        tiled = [t for t in s.tile if t]
        emit(f'    %t{k} = transform.structured.match attributes{{portable.op = "g{k}_0"}} in %root : ({any_op}) -> {any_op}')
        fused = g.fused()
        for j in range(1, len(fused) + 1):
            emit(f'    %p{k}_{j} = transform.structured.match attributes{{portable.op = "g{k}_{j}"}} in %root : ({any_op}) -> {any_op}')
        sizes = ", ".join(str(t) for t in s.tile)
        emit(f"    %wt{k}, %wf{k} = transform.structured.tile_using_forall %t{k} tile_sizes [{sizes}] "
             f"(mapping = [{_mapping('block', len(tiled))}]) : ({any_op}) -> ({any_op}, {any_op})")
        emit(f'    transform.annotate %wf{k} "portable.wg{k}" : {any_op}')
        cont = f"%wf{k}"
        for j in range(1, len(fused) + 1):
            emit(f"    %wp{k}_{j}, %wc{k}_{j} = transform.structured.fuse_into_containing_op %p{k}_{j} into {cont} "
                 f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
            cont = f"%wc{k}_{j}"
        nts = ", ".join(str(t) for t in s.threads)
        emit(f"    %tt{k}, %tf{k} = transform.structured.tile_using_forall %wt{k} num_threads [{nts}] "
             f"(mapping = [{_mapping('thread', len(tiled))}]) : ({any_op}) -> ({any_op}, {any_op})")
        cont = f"%tf{k}"
        for j in range(1, len(fused) + 1):
            emit(f"    %tp{k}_{j}, %tc{k}_{j} = transform.structured.fuse_into_containing_op %wp{k}_{j} into {cont} "
                 f": ({any_op}, {any_op}) -> ({any_op}, {any_op})")
            cont = f"%tc{k}_{j}"
        if s.vectorize:
            handles = [f"%tt{k}"] + [f"%tp{k}_{j}" for j in range(1, len(fused) + 1)]
            if s.root_k_tile:
                # The root (matmul) gets a K loop of static steps; its accumulator is then hoisted into
                # registers (loop-invariant read/write of the output tile become iter_args).
                root = handles[len(g.consumers)] if g.consumers else handles[0]
                kts = ", ".join(str(t) for t in s.root_k_tile)
                emit(f"    %kt{k}, %kl{k} = transform.structured.tile_using_for {root} tile_sizes [{kts}] "
                     f": ({any_op}) -> ({any_op}, {any_op})")
                handles = [f"%kt{k}" if h == root else h for h in handles]
            emit(f"    transform.apply_patterns to {cont} {{ transform.apply_patterns.canonicalization }} : {any_op}")
            for h in handles:
                emit(f"    transform.structured.vectorize {h} : {any_op}")
            if s.root_k_tile:
                emit(f"    transform.apply_patterns to {cont} {{")
                emit("      transform.apply_patterns.vector.reduction_to_contract")
                emit("      transform.apply_patterns.canonicalization")
                emit(f"    }} : {any_op}")
                emit(f"    transform.loop.hoist_loop_invariant_subsets %kl{k} : {any_op}")
    emit(f'    %funcs = transform.structured.match ops{{["func.func"]}} in %root : ({any_op}) -> {any_op}')
    emit(f"    transform.apply_patterns to %funcs {{ transform.apply_patterns.canonicalization }} : {any_op}")
    emit(f"    transform.apply_cse to %funcs : {any_op}")
    emit(f"    %b = transform.bufferization.one_shot_bufferize %root {{bufferize_function_boundaries = true, "
         f"function_boundary_type_conversion = 1 : i32}} : ({any_op}) -> {any_op}")
    if any(s.vectorize for s in strategies):
        # Canonical 1-d vector transfers; each target lowers them its own way (codegen_spirv unrolls them to
        # scalar accesses: pointer bitcasts to vectors are invalid in Vulkan's logical addressing).
        emit(f'    %bf = transform.structured.match ops{{["func.func"]}} in %b : ({any_op}) -> {any_op}')
        emit("    transform.apply_patterns to %bf {")
        for p in ('vector.lower_contraction lowering_strategy = "outerproduct"', "vector.lower_outerproduct",
                  "vector.transfer_permutation_patterns",
                  "vector.cast_away_vector_leading_one_dim", "vector.lower_broadcast", "canonicalization"):
            emit(f"      transform.apply_patterns.{p}")
        emit(f"    }} : {any_op}")
    for g, s in zip(groups, strategies):
        k = g.index
        wx, wy, wz = s.workgroup_size
        emit(f"    %f{k} = transform.structured.match attributes{{portable.wg{k}}} in %b : ({any_op}) -> {any_op}")
        emit(f"    %l{k} = transform.gpu.map_forall_to_blocks %f{k} generate_gpu_launch : ({any_op}) -> {any_op}")
        emit(f"    %m{k} = transform.gpu.map_nested_forall_to_threads %l{k} block_dims = [{wx}, {wy}, {wz}] "
             f"sync_after_distribute = false : ({any_op}) -> {any_op}")
    emit("    transform.yield")
    emit("  }")
    emit("}")
    return "\n".join(lines)
