"""The compile pipeline as named stages, each dumpable with PORTABLE_DUMP=dir.

  input -> preprocess -> dispatch -> tile-and-map -> outline -> lower-kernels -> plan + codegen (SPIR-V, OpenCL C)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .. import cache, config
from ..errors import CompileError, PortableError, UnsupportedOp
from ..executable import Executable, Kernel
from ..ir.mlir import ir, passmanager
from ..ir.patterns import apply_patterns
from . import (
    arg_reductions,
    barriers,
    constant_init,
    conv_gemm,
    coop_matrix,
    coop_narrow,
    coop_staging,
    dispatch,
    grid_stride,
    lane_kernels,
    locations,
    loop_registers,
    loop_vectorize,
    named_ops,
    narrow_i64,
    nontemporal,
    plan,
    promotion,
    reduction_inputs,
    rewrites,
    row_columns,
    row_registers,
    serial_rows,
    split,
    split_k,
    split_rows,
    strategy,
    subgroup_reduce,
    transform_script,
    unfuse,
    widen_f16,
    windows,
)
from .linalg_info import OpKind, classify
from .row_vectors import row_tiles_ok
from .split_vectors import plain_elementwise
from .tensor_slices import insert_slices_to_generics

# Counts real compilations (not cache hits): tests use it to prove a warm start does no MLIR work.
COMPILE_COUNT = 0

FRONTEND_PATHS = "portable.onnx_paths"  # module attribute set by frontend/onnx_decompose.py

PREPROCESS = "builtin.module(func.func(linalg-generalize-named-ops),linalg-fuse-elementwise-ops,canonicalize,cse)"
OUTLINE = ("builtin.module(func.func(convert-linalg-to-loops),canonicalize,cse,gpu-launch-sink-index-computations,"
           "gpu-kernel-outlining)")
LOWER_KERNELS = ("builtin.module(gpu.module(fold-memref-alias-ops,expand-strided-metadata,lower-affine),"
                 "canonicalize,cse)")


class Dumper:
    """Writes numbered stage files under PORTABLE_DUMP/<graph hash>/ when dumping is on."""

    def __init__(self, graph_hash: str):
        root = config.dump_dir()
        self.dir = root / graph_hash[:16] if root else None
        self.n = 0
        if self.dir:
            self.dir.mkdir(parents=True, exist_ok=True)

    def __call__(self, stage: str, text: object, suffix: str = ".mlir") -> Path | None:
        """`text`: a string, or a module printed only when dumping is on (printing costs as much as the weights)."""
        if not self.dir:
            return None
        self.n += 1
        p = self.dir / f"{self.n:02d}-{stage}{suffix}"
        p.write_text(text if isinstance(text, str) else str(text))
        return p

    def failure(self, stage: str, text: object) -> str | None:
        p = self(f"FAILED-{stage}", text)
        return str(p) if p else None


def _run(module: ir.Module, pipeline: str, stage: str, dump: Dumper) -> None:
    try:
        passmanager.PassManager.parse(pipeline).run(module.operation)
    except ir.MLIRError as e:
        path = dump.failure(stage, module)
        raise CompileError(f"stage '{stage}' failed{locations.of_error(e)}: {e}", stage=stage, dump_path=path) from e
    dump(stage, module)


def _form_and_map(module: ir.Module, profile: dict, targets: tuple[str, ...], dump: Dumper, plain: bool):
    """Dispatch formation, a strategy per group, and the transform script that tiles, bufferizes and maps
    them: (groups, splits, strategies). `plain`: no row chains, no vector registers (the fallback)."""
    if plain:
        profile = dict(profile, row_fusion_private_bytes=0, row_fusion_shared_bytes=0)
    groups = dispatch.form_groups(public_func(module), profile,
                                  narrowing=lambda g: coop_matrix.eligible(g, profile, targets))
    # A kernel that would bind more than the device allows runs in chunks of one of its parallel loops.
    groups, splits = split.split_groups(public_func(module), groups, int(profile.get("max_bind_bytes") or 0),
                                        int(profile.get("bind_offset_alignment") or split.DEFAULT_OFFSET_ALIGNMENT))
    strategies = []
    for g in groups:
        t = classify(g.target)
        if coop_matrix.eligible(g, profile, targets):
            wg, sg = coop_matrix.group_tiles(g, profile)
            # The fallback (plain) keeps fragments loaded from global memory: fewer transforms to fail.
            staged = not plain and coop_staging.applies(g)
            kt, nbuf = coop_staging.stage_k(profile, classify(g.root).ranges[2], (wg, sg)) if staged else (0, 1)
            strategies.append(strategy.Strategy((*wg, 0), (0, 0, 0), coop=sg, promote_k=kt, coop_buffers=nbuf))
            continue
        kind = OpKind(g.kind.kind, t.ranges, t.iterators, t.gathers)
        gp = profile
        if int(profile.get("elementwise_per_thread", 1)) > 4 and profile.get("wide_buffers") and \
                not plain_elementwise([g.target] + g.fused()):
            gp = dict(profile, elementwise_per_thread=4)  # tiles of 8 only where split_vectors.py can halve them
        if "opencl" in targets and int(profile.get("matmul_k_tile", 0)) > 16:
            gp = dict(gp, matmul_k_tile=16)  # a K step's A row is one vector: OpenCL C has up to 16 lanes
        if int(profile.get("elementwise_rows_per_thread", 1)) > 1 and \
                ("opencl" in targets or not row_tiles_ok([g.target] + g.fused())):
            gp = dict(gp, elementwise_rows_per_thread=1)  # 2-d tiles unrolled for SPIR-V only (row_vectors.py)
        s = strategy.choose(kind, gp, g.kind)
        if s.promote_k and not promotion.applies(g):  # operands computed in the kernel: not staged
            s = strategy.choose(kind, dict(gp, matmul_promote_tile=None, matmul_promote_tiles=[]), g.kind)
        if s.vectorize and kind.kind == "elementwise" and "vulkan" in targets and _rows_per_thread(s) > 1 and \
                not row_tiles_ok([g.target] + g.fused()):
            # A grid past the device's workgroup count gives threads several rows (strategy.choose): SPIR-V holds
            # those 2-d tiles only where row_vectors.py unrolls them.
            s = dataclasses.replace(s, vectorize=False)
        if plain:
            s = dataclasses.replace(s, vectorize=False, root_k_tile=(), root_row_unroll=(0, 1),
                                    root_col_split=(0, 0, 1), promote_k=0)
        strategies.append(s)
    dump("dispatch", module)
    _tile_and_map(module, transform_script.build(groups, strategies, [classify(g.target).ranges for g in groups]),
                  dump)
    return groups, splits, strategies


def _rows_per_thread(s: strategy.Strategy) -> int:
    """Product of a thread's tile over every loop but the innermost."""
    n = 1
    for t, th in zip(s.tile[:-1], s.threads[:-1]):
        n *= t // th if th else max(t, 1)
    return n


def _tile_and_map(module: ir.Module, script: str, dump: Dumper) -> None:
    _transform(module, script, "tile-and-map", dump)
    transform_script.hoist_step_barriers(module)
    subgroup_reduce.lower_combines(module)
    serial_rows.run_rows_serially(module)
    grid_stride.run_grid_stride(module)


def _transform(module: ir.Module, script: str, stage: str, dump: Dumper) -> None:
    """Run a transform script on the module, then drop it."""
    dump(f"{stage}-script", script)
    body = module.body
    for op in ir.Module.parse(script).body.operations:
        body.append(op.operation.clone())
    module.operation.attributes["transform.with_named_sequence"] = ir.UnitAttr.get()
    _run(module, "builtin.module(transform-interpreter,canonicalize,cse)", stage, dump)
    for op in list(module.body.operations):
        if op.operation.name == "transform.named_sequence":
            op.operation.erase()
    del module.operation.attributes["transform.with_named_sequence"]


def public_func(module: ir.Module) -> ir.Operation:
    funcs = [op.operation for op in module.body.operations if op.operation.name == "func.func"]
    public = [f for f in funcs if "sym_visibility" not in f.attributes
              or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"]
    if len(public) != 1:
        raise UnsupportedOp(f"the module must have exactly one public func.func, it has {len(public)}")
    return public[0]


def compile_module(text: str, profile: dict, targets: tuple[str, ...] = ("vulkan", "opencl")) -> Executable:
    """Compile MLIR text (linalg on tensors) for a device profile into an Executable."""
    global COMPILE_COUNT
    COMPILE_COUNT += 1
    ghash = cache.key(text, profile, targets)
    profile = strategy.for_targets(profile, targets)
    dump = Dumper(ghash)
    try:
        text.encode()
    except UnicodeEncodeError as e:  # a lone surrogate (a str decoded with surrogateescape): MLIR takes UTF-8 only
        raise CompileError(f"the MLIR text holds {text[e.start:e.end]!r} at offset {e.start}, which is not Unicode "
                           f"text; read the file as UTF-8 (errors='strict') and fix it", stage="parse") from None
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as e:
            module = named_ops.parse(text, e)  # ops upstream renamed; else UnsupportedOp / CompileError
        dump("input", module)
        _frontend_paths(module, dump)
        if named_ops.decompose(module):  # softmax, pack, unpack: into ops PREPROCESS generalizes
            dump("named-ops", module)
        fn = public_func(module)
        _check_signature(fn)
        _name_as_identifier(module, fn)
        _run(module, PREPROCESS, "preprocess", dump)
        narrowed: tuple[list[int], list[int]] = ([], [])
        if "vulkan" in targets and "Int64" not in profile.get("spirv_caps", ["Shader"]):
            narrowed = narrow_i64.demote_i64(public_func(module))  # no 64-bit integers on the device
            _run(module, "builtin.module(canonicalize,cse)", "narrow-i64", dump)
        widened: tuple[list[int], list[int]] | None = None
        if "vulkan" in targets and "StorageBuffer16BitAccess" not in profile.get("spirv_caps", ["Shader"]):
            widened = widen_f16.promote_f16(public_func(module))  # no 16-bit loads or stores on the device
            if widened is not None:
                _run(module, "builtin.module(canonicalize,cse)", "widen-f16", dump)
        widened = widened or ([], [])
        # Before convolutions become matmuls: an insert into zeros becomes a pad, which folds into im2col.
        insert_slices_to_generics(public_func(module))
        # Producers fused into convolutions (squeeze-and-excitation's scale) leave them where recomputing costs
        # more (fusion_cost.py), before convolutions are matched as matmuls.
        if unfuse.unfuse_reductions(public_func(module)):
            _run(module, "builtin.module(canonicalize,cse)", "unfuse-reductions", dump)
        if profile.get("im2col_max_bytes", 0):
            conv_gemm.convs_to_matmul(public_func(module), int(profile["im2col_max_bytes"]),
                                      int(profile.get("conv_pixel_multiple") or 0))
        rewrites.apply(public_func(module), vector_gathers=bool(profile.get("vectorize_gathers")),
                       recompute=bool(profile.get("reduction_threads")))
        arg_reductions.arg_reductions(public_func(module), split=bool(profile.get("reduction_threads")))
        _run(module, "builtin.module(func.func(linalg-generalize-named-ops),canonicalize,cse)", "rewrites", dump)
        if windows.unroll_small_windows(public_func(module), int(profile.get("window_taps", 0))):
            _run(module, "builtin.module(canonicalize,cse)", "windows", dump)
        if split_k.split_matmuls(public_func(module), profile):  # its fills are named ops
            _run(module, "builtin.module(func.func(linalg-generalize-named-ops),canonicalize,cse)", "split-k", dump)
        # Producers fused into a matmul that recomputes them per output column leave it (fusion_cost.py).
        if split_k.unfuse_producers(public_func(module), profile):  # its fills are named ops
            _run(module, "builtin.module(func.func(linalg-generalize-named-ops),canonicalize,cse)",
                 "unfuse-producers", dump)
        if split_rows.split_rows(public_func(module), profile):  # its fills are named ops
            _run(module, "builtin.module(func.func(linalg-generalize-named-ops),canonicalize,cse)", "split-rows", dump)
        if reduction_inputs.fuse_into_reductions(public_func(module), profile):
            _run(module, "builtin.module(canonicalize,cse)", "reduction-inputs", dump)
        pristine = module.operation.clone()  # in memory: no printing and parsing of the weights
        # A strategy the transform dialect cannot carry out on this shape (e.g. a fused op folded away while a
        # handle still tracks it) falls back to plain ones: scalar per-thread tiles and no row chains, formed
        # again from the module as it was before dispatch formation (a failed run leaves it half rewritten).
        try:
            groups, splits, strategies = _form_and_map(module, profile, targets, dump, plain=False)
        except CompileError:
            module = pristine
            groups, splits, strategies = _form_and_map(module, profile, targets, dump, plain=True)
        _run(module, OUTLINE, "outline", dump)
        if any(s.coop and s.promote_k for s in strategies):
            coop_staging.after_outline(module)
        if any(s.coop for s in strategies):
            _run(module, coop_matrix.CONVERT, "vector-to-mma", dump)
        _run(module, LOWER_KERNELS, "lower-kernels", dump)
        if any(s.coop for s in strategies) and coop_narrow.narrow_fragments(module):
            _run(module, "builtin.module(canonicalize,cse)", "coop-narrow", dump)  # (on views folded away)
        # Index arithmetic out of loops first: what stays in a loop's memory then shows as invariant.
        _run(module, "builtin.module(gpu.module(gpu.func(loop-invariant-code-motion)))", "licm", dump)
        if int(profile.get("row_registers", 0)):
            row_registers.keep_rows_in_registers(module, int(profile["row_registers"]))
        if any(s.promote_k and not s.coop for s in strategies):
            promotion.hoist_accumulators(module)
            _transform(module, promotion.unroll_script(module), "unroll-steps", dump)
        loop_registers.carry_all(module)
        constant_init.forward_fills(module)
        barriers.relax_barriers(module)
        _run(module, "builtin.module(canonicalize,cse)", "loop-registers", dump)
        constant_init.forward_own_writes(module)  # matmul epilogues' reads of the outputs just written
        if int(profile.get("row_vector_columns", 0)) > 1:  # on the row kernels' final, folded indices
            row_columns.regroup_columns(module, int(profile["row_vector_columns"]))
            _run(module, "builtin.module(canonicalize,cse)", "row-columns", dump)
        builder = plan.PlanBuilder(module, public_func(module))
        builder.build()
        if splits and len(builder.launches) != len(groups):
            raise CompileError(f"{len(groups)} dispatch groups became {len(builder.launches)} kernel launches; "
                               f"the plan of kernels run in chunks needs one launch per group", stage="plan")
        kernels, index = _codegen(module, profile, targets, dump)
    inputs, outputs = list(builder.inputs), list(builder.outputs)
    for k in narrowed[0]:  # int64 on the host, int32 on the device: the runtime converts
        inputs[k] = dataclasses.replace(inputs[k], dtype="int64", device=inputs[k].dtype)
    for k in narrowed[1]:
        outputs[k] = (outputs[k][0], dataclasses.replace(outputs[k][1], dtype="int64", device=outputs[k][1].dtype))
    for k in widened[0]:  # float16 on the host, float32 on the device
        inputs[k] = dataclasses.replace(inputs[k], dtype="float16", device=inputs[k].dtype)
    for k in widened[1]:
        outputs[k] = (outputs[k][0], dataclasses.replace(outputs[k][1], dtype="float16", device=outputs[k][1].dtype))
    exe = Executable(
        kernels=kernels,
        slots=builder.slots,
        dispatches=plan.dispatches(builder, index, splits),
        inputs=inputs,
        input_slots=builder.input_slots,
        outputs=outputs,
        constants=builder.constants,
        target=",".join(targets),
        profile=profile.get("name", "generic"),
        source_hash=ghash,
    )
    return exe


def _name_as_identifier(module: ir.Module, fn: ir.Operation) -> None:
    """Rename the public function to a C identifier: kernels, OpenCL C functions, SPIR-V entry points and dump
    files are named after it, and a user's graph name ("Model from PaddlePaddle.", "encoder/layer::0") is none."""
    name = ir.StringAttr(fn.attributes["sym_name"]).value
    ident = re.sub(r"\W", "_", name, flags=re.ASCII).strip("_")[:48] or "graph"
    if ident[0].isdigit():
        ident = "g_" + ident
    taken = {ir.StringAttr(op.attributes["sym_name"]).value for op in module.body.operations
             if "sym_name" in op.attributes and op.operation != fn}
    base, n = ident, 0
    while ident in taken:
        n += 1
        ident = f"{base}_{n}"
    if ident != name:
        ir.SymbolTable.replace_all_symbol_uses(name, ident, module.operation)
        ir.SymbolTable.set_symbol_name(fn, ident)


def _frontend_paths(module: ir.Module, dump: Dumper) -> None:
    """The ONNX frontend's record of which path each rewritable op took (its own decomposition or torch-mlir's
    lowering): written to the dump as onnx-decompositions.txt and taken off the module."""
    attrs = module.operation.attributes
    if FRONTEND_PATHS not in attrs:
        return
    dump("onnx-decompositions", "\n".join(ir.StringAttr(a).value for a in ir.ArrayAttr(attrs[FRONTEND_PATHS])) + "\n",
         ".txt")
    del attrs[FRONTEND_PATHS]


def _check_signature(fn: ir.Operation) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    for t in list(ftype.inputs) + list(ftype.results):
        if not isinstance(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
            raise UnsupportedOp(f"function arguments and results must be statically shaped tensors, got {t}")


def _gpu_module(single: ir.Module) -> ir.Operation:
    return next(op for op in single.body.operations if op.operation.name == "gpu.module").operation


def _codegen(module: ir.Module, profile: dict, targets: tuple[str, ...], dump: Dumper):
    from ..codegen_spirv import disassemble, spirv_from_gpu_module

    kernels: list[Kernel] = []
    index: dict[str, int] = {}
    for gm in module.body.operations:
        if gm.operation.name != "gpu.module":
            continue
        gname = ir.StringAttr(gm.attributes["sym_name"]).value
        fn = next(op for op in gm.regions[0].blocks[0].operations if op.operation.name == "gpu.func")
        fname = ir.StringAttr(fn.attributes["sym_name"]).value
        wg = tuple(int(x) for x in ir.DenseI32ArrayAttr(fn.attributes["known_block_size"]))
        nargs = len(fn.regions[0].blocks[0].arguments)
        access = plan.kernel_access(fn.operation)
        spirv = opencl = None
        texels: tuple[int, ...] = ()
        # Local scope: printed without it, a nested op numbers the whole module first (every kernel, each time).
        asm = gm.operation.get_asm(use_local_scope=True)
        # Cooperative matrices are laid over 32 lanes, shuffles over the profile's subgroup: the Vulkan pipeline
        # requires that width (runtime_vk/pipelines.py), since a driver may pick another per pipeline.
        width = coop_matrix.SUBGROUP if "gpu.subgroup_mma" in asm else \
            int(profile.get("subgroup_size") or 0) if "gpu.shuffle" in asm else 0
        if "vulkan" in targets:
            # CPU drivers: fewer per-lane buffer accesses (profile keys; the text is unchanged for GPUs).
            vk_asm = coop_staging.wide_copies(lane_kernels.rewrite(asm, profile))
            if vk_asm != asm:
                dump(f"{gname}-lanes", vk_asm)
            spirv, texels = spirv_from_gpu_module(vk_asm, wg, profile, dump=lambda s, t: dump(f"{gname}-{s}", t),
                                                  access=access)
            dump(f"{gname}", disassemble(spirv), ".spvasm")
        if "opencl" in targets:
            from ..codegen_opencl import emit_opencl

            # OpenCL C has vloadN/vstoreN: in-bounds 1-d transfers become vector loads and stores. Staged
            # fragments (wmma through inline PTX) take the same 16-byte copies as on Vulkan.
            ocl_asm = coop_staging.wide_copies(asm)
            single = ir.Module.parse("module attributes {gpu.container_module} {\n" + ocl_asm + "\n}")
            if int(profile.get("loop_vectorize", 0)) > 1:  # CPU OpenCL (PoCL): row loops on float16
                loop_vectorize.vectorize_loops(_gpu_module(single), int(profile["loop_vectorize"]))
            apply_patterns(single, ["vector.lower_transfer max_transfer_rank = 1", "canonicalization"])
            rewrites.workgroup_allocs_to_attributions(single)
            gmod = _gpu_module(single)
            nontemporal.mark(gmod, int(profile.get("nontemporal_store_bytes", 0)))
            ocl = emit_opencl(gmod, fp16=bool(profile.get("fp16", False)), asm=profile.get("opencl_asm"))
            opencl = ocl.source
            dump(f"{gname}", opencl, ".cl")
        index[(gname, fname)] = len(kernels)
        kernels.append(Kernel(name=fname, workgroup_size=wg, num_buffers=nargs, spirv=spirv, opencl=opencl,
                              access=access, texel_buffers=texels, subgroup_size=width if spirv else 0))
    return kernels, index


__all__ = ["compile_module", "COMPILE_COUNT", "PortableError"]
