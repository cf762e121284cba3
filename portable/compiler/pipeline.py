"""The compile pipeline: `STAGES`, an ordered list of named stages, each a function that rewrites the module of one
`Compilation` in place (or, for the last two, reads it into a plan and kernels). PORTABLE_DUMP=dir writes the module
after every stage, named by it (PORTABLE_DUMP_STAGES=a,b: those stages only).

  parse -> named-ops -> signature -> preprocess -> ... graph rewrites ... -> dispatch -> tile-and-map -> outline
  -> ... kernel lowering ... -> plan -> codegen (SPIR-V words, OpenCL C: the only text)
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from .. import cache, config
from ..errors import CompileError, PortableError, UnsupportedOp
from ..executable import Executable
from ..ir import weights
from ..ir.mlir import ir
from ..ir.patterns import apply_patterns
from ..profiles import Options
from ..progress import Progress
from . import plan, target_codegen
from .compilation import Compilation, Dumper, public_func
from .graph import (
    arg_reductions,
    collapse_dims,
    contraction_layout,
    conv_gemm,
    epilogue_shapes,
    horizontal,
    named_ops,
    narrow_i64,
    reduction_inputs,
    reshape_refine,
    rewrites,
    softmax_rows,
    split_k,
    split_rows,
    stride_phases,
    unfuse,
    unit_broadcasts,
    widen_f16,
    windows,
)
from .graph.tensor_slices import insert_slices_to_generics
from .lowering import barriers, constant_init, kernel_dedup, loop_registers, row_columns, row_registers
from .schedule import (
    coop_matrix,
    coop_narrow,
    coop_staging,
    mapping,
    promotion,
    transform_script,
)
from .strategy import choice as strategy

# Counts real compilations (not cache hits): tests use it to prove a warm start does no MLIR work.
COMPILE_COUNT = 0

FRONTEND_PATHS = "portable.onnx_paths"  # module attribute set by frontend/onnx_decompose.py
INPUT_RANGES = "portable.input_ranges"  # module attribute set by frontend/onnx_decompose.py: values inputs may hold

PREPROCESS = "builtin.module(func.func(linalg-generalize-named-ops),linalg-fuse-elementwise-ops,canonicalize,cse)"
CLEAN = "builtin.module(canonicalize,cse)"
GENERALIZE = "builtin.module(func.func(linalg-generalize-named-ops),canonicalize,cse)"
OUTLINE = ("builtin.module(func.func(convert-linalg-to-loops),canonicalize,cse,gpu-launch-sink-index-computations,"
           "gpu-kernel-outlining)")
LOWER_KERNELS = ("builtin.module(gpu.module(fold-memref-alias-ops,expand-strided-metadata,lower-affine),"
                 "canonicalize,cse)")
LICM = "builtin.module(gpu.module(gpu.func(loop-invariant-code-motion)))"


@dataclass(frozen=True)
class Stage:
    """A named step: `run(c)` rewrites `c.module` in place and returns whether it changed it (None: it may have);
    the module is dumped under the stage's name after every run that may have changed it."""

    name: str
    run: Callable[[Compilation], bool | None]
    dumps_module: bool = True


def _passes_if(pipeline: str, rewrite: Callable[[Compilation], object]) -> Callable[[Compilation], bool]:
    """A stage: `rewrite`, then `pipeline` where it rewrote anything."""
    def run(c: Compilation) -> bool:
        if not rewrite(c):
            return False
        c.passes(pipeline)
        return True

    return run


def _stride_phases(c: Compilation) -> bool:
    """Where the profile takes channelwise convolutions as register tiles over their taps and asks for it
    (conv_stride_phases), strided ones become unit-stride ones over their input's phases (graph/stride_phases.py):
    a rewrite for that strategy alone, so it runs just before dispatch formation."""
    o = c.options
    return bool(o.conv_vector_taps and o.conv_stride_phases and o.vectorize) and \
        stride_phases.split_strided_windows(c.func) > 0


def _named_ops(c: Compilation) -> bool:
    _frontend_paths(c.module, c.dump)
    c.input_ranges = _input_ranges(c.module)
    return named_ops.decompose(c.module)  # softmax, pack, unpack: into ops PREPROCESS generalizes


def _signature(c: Compilation) -> bool:
    fn = c.func
    _check_signature(fn)
    _name_as_identifier(c.module, fn)
    return False


def _narrow_i64(c: Compilation) -> bool:
    if "vulkan" not in c.targets or "Int64" in (c.options.spirv_caps or ("Shader",)):
        return False
    c.narrowed = narrow_i64.demote_i64(c.func)  # no 64-bit integers on the device
    c.passes(CLEAN)
    return True


def _widen_f16(c: Compilation) -> bool:
    if "vulkan" not in c.targets or "StorageBuffer16BitAccess" in (c.options.spirv_caps or ("Shader",)):
        return False
    widened = widen_f16.promote_f16(c.func)  # no 16-bit loads or stores on the device
    if widened is None:
        return False
    c.widened = widened
    c.passes(CLEAN)
    return True


def _insert_slices(c: Compilation) -> None:
    # Before convolutions become matmuls: an insert into zeros becomes a pad, which folds into im2col.
    insert_slices_to_generics(c.func)


def _conv_gemm(c: Compilation) -> bool:
    if not c.options.im2col_max_bytes:
        return False
    conv_gemm.convs_to_matmul(c.func, c.options.im2col_max_bytes, c.options.conv_pixel_multiple or 0,
                              c.options.conv_k_multiple or 0, bool(c.options.conv_winograd),
                              bool(c.options.matmul_row_vector_cols), bool(c.options.conv_batch_rows))
    return True


def _rewrites(c: Compilation) -> None:
    o = c.options
    rewrites.apply(c.func, vector_gathers=bool(o.vectorize_gathers), recompute=bool(o.reduction_threads))
    arg_reductions.arg_reductions(c.func, split=bool(o.reduction_threads))
    c.passes(GENERALIZE)


def _coop_staging(c: Compilation) -> bool:
    if not any(s.coop and s.promote_k for s in c.strategies):
        return False
    coop_staging.after_outline(c.module)
    return True


def _vector_to_mma(c: Compilation) -> bool:
    if not any(s.coop for s in c.strategies):
        return False
    c.passes(coop_matrix.CONVERT)
    return True


def _coop_narrow(c: Compilation) -> bool:
    if not (any(s.coop for s in c.strategies) and coop_narrow.narrow_fragments(c.module)):
        return False
    c.passes(CLEAN)  # (on views folded away)
    return True


def _row_registers(c: Compilation) -> bool:
    if not c.options.row_registers:
        return False
    row_registers.keep_rows_in_registers(c.module, c.options.row_registers)
    return True


def _unroll_steps(c: Compilation) -> bool:
    if not any(s.promote_k and not s.coop for s in c.strategies):
        return False
    promotion.hoist_accumulators(c.module)
    mapping.run_script(c, promotion.unroll_script(c.module))
    return True


def _loop_registers(c: Compilation) -> None:
    loop_registers.carry_all(c.module)
    constant_init.forward_fills(c.module)
    barriers.relax_barriers(c.module)
    c.passes(CLEAN)


def _forward_own_writes(c: Compilation) -> None:
    constant_init.forward_own_writes(c.module)  # matmul epilogues' reads of the outputs just written


def _row_columns(c: Compilation) -> bool:
    if (c.options.row_vector_columns or 0) <= 1:
        return False
    row_columns.regroup_columns(c.module, c.options.row_vector_columns)  # on the row kernels' final, folded indices
    c.passes(CLEAN)
    return True


def _plan(c: Compilation) -> bool:
    c.builder = plan.PlanBuilder(c.module, c.func, weights.by_digest(c.weights))
    c.builder.build()
    if c.splits and len(c.builder.launches) != len(c.groups):
        raise CompileError(f"{len(c.groups)} dispatch groups became {len(c.builder.launches)} kernel launches; "
                           f"the plan of kernels run in chunks needs one launch per group", stage="plan")
    return False


def _vector_rounds(c: Compilation) -> bool:
    """Vector forms every target lowers (transform_script.VECTOR_ROUNDS) where no group took cooperative
    matrices (those run them in the script, on the other groups' loops only)."""
    if any(s.coop for s in c.strategies) or not any(s.vectorize for s in c.strategies):
        return False
    for patterns in transform_script.VECTOR_ROUNDS:
        apply_patterns(c.module, list(patterns))
    return True


def _codegen(c: Compilation) -> bool:
    c.kernels, c.index = target_codegen.codegen(c.module, c.options, c.targets, c.dump, c.progress)
    return False


def _preprocess(c: Compilation) -> None:
    """Generic ops, their broadcasts of size-1 dims as lower-rank operands (unit_broadcasts.py: so reshapes fuse by
    expansion), then upstream's elementwise fusion; again where reshapes that split a dim two ways were taken
    through the shape both refine (reshape_refine.py)."""
    c.passes("builtin.module(func.func(linalg-generalize-named-ops))")
    unit_broadcasts.drop_unit_broadcasts(c.func)
    c.passes(PREPROCESS)  # its generalization finds nothing left
    if reshape_refine.refine_reshapes(c.func):
        c.passes(PREPROCESS)


STAGES: list[Stage] = [
    # Graph level: linalg on tensors.
    Stage("named-ops", _named_ops),
    Stage("signature", _signature),
    Stage("preprocess", _preprocess),
    Stage("narrow-i64", _narrow_i64),
    Stage("widen-f16", _widen_f16),
    Stage("insert-slices", _insert_slices),
    # Producers fused into convolutions (squeeze-and-excitation's scale) leave them where recomputing costs more
    # (fusion_cost.py), before convolutions are matched as matmuls.
    Stage("unfuse-reductions", _passes_if(CLEAN, lambda c: unfuse.unfuse_reductions(c.func))),
    Stage("conv-gemm", _conv_gemm),
    Stage("rewrites", _rewrites),
    # Contractions read in another layout (attention) get batch-matmul operands; matmul loops that folded reshapes
    # split (a projection into heads) are joined again: plain matmuls.
    Stage("contraction-layout", _passes_if(CLEAN, lambda c: contraction_layout.canonical_contractions(
        c.func, keep_ragged=bool(c.options.loop_vectorize)))),
    Stage("collapse-loops", _passes_if(CLEAN, lambda c: collapse_dims.collapse_matmul_loops(c.func))),
    # Projections whose heads split their loops (Q/K/V of exported decoders) are plain one-row matmuls only now.
    Stage("horizontal", _passes_if(GENERALIZE, lambda c: horizontal.fuse_shared_lhs_matmuls(c.func))),
    Stage("windows", _passes_if(CLEAN, lambda c: windows.unroll_small_windows(c.func, c.options.window_taps or 0))),
    Stage("split-k", _passes_if(GENERALIZE, lambda c: split_k.split_matmuls(c.func, c.options))),  # fills: named ops
    # Producers fused into a matmul that recomputes them per output column leave it (fusion_cost.py).
    Stage("unfuse-producers", _passes_if(GENERALIZE, lambda c: split_k.unfuse_producers(c.func, c.options))),
    Stage("split-rows", _passes_if(GENERALIZE, lambda c: split_rows.split_rows(c.func, c.options))),
    Stage("epilogue-shapes", _passes_if(CLEAN, lambda c: epilogue_shapes.take_epilogues_into_result_shapes(c.func))),
    Stage("reduction-inputs", _passes_if(CLEAN, lambda c: reduction_inputs.fuse_into_reductions(c.func, c.options))),
    # A softmax's division leaves the product that reads it: the softmax is then one row chain (one kernel).
    Stage("softmax-rows", _passes_if(CLEAN, lambda c: softmax_rows.take_out_normalizations(c.func, c.options))),
    Stage("stride-phases", _stride_phases),
    # Dispatch formation, strategies, and the transform script that tiles, bufferizes and maps to the GPU.
    Stage("dispatch", mapping.dispatch_stage),
    Stage("tile-and-map", mapping.tile_and_map),
    # Kernels: outlined gpu.modules, lowered on memrefs.
    Stage("outline", lambda c: c.passes(OUTLINE)),
    Stage("dedup-kernels", lambda c: kernel_dedup.drop_repeats(c.module)),
    Stage("vector-rounds", _vector_rounds),
    Stage("coop-staging", _coop_staging),
    Stage("vector-to-mma", _vector_to_mma),
    Stage("lower-kernels", lambda c: c.passes(LOWER_KERNELS)),
    Stage("coop-narrow", _coop_narrow),
    # Index arithmetic out of loops first: what stays in a loop's memory then shows as invariant.
    Stage("licm", lambda c: c.passes(LICM)),
    Stage("row-registers", _row_registers),
    Stage("unroll-steps", _unroll_steps),
    Stage("loop-registers", _loop_registers),
    Stage("forward-own-writes", _forward_own_writes),
    Stage("row-columns", _row_columns),
    # The boundary: the host function read into a plan; each gpu.module into SPIR-V words and OpenCL C.
    Stage("plan", _plan, dumps_module=False),
    Stage("codegen", _codegen, dumps_module=False),
]


def run_stages(c: Compilation, stages: list[Stage] | None = None) -> Compilation:
    """Run `stages` (default: all of STAGES) in order on `c`, dumping the module after each that changed it."""
    for st in STAGES if stages is None else stages:
        c.stage = st.name
        c.progress.step(st.name)
        changed = st.run(c)
        if st.dumps_module and changed is not False and config.dump_stage(st.name):
            c.dump(st.name, c.module)
    return c


def stage(name: str) -> Stage:
    """The stage of STAGES called `name` (tests run one at a time on a small module)."""
    for st in STAGES:
        if st.name == name:
            return st
    raise KeyError(f"no stage {name!r}; stages: {', '.join(st.name for st in STAGES)}")


def compile_module(text: str, options: Options | dict, targets: tuple[str, ...] = ("vulkan", "opencl"),
                   progress: Progress | None = None) -> Executable:
    """Compile MLIR text (linalg on tensors) for a device's options into an Executable; `progress` (by default
    one of its own) reports each stage of a long compile."""
    global COMPILE_COUNT
    own = progress is None
    progress = Progress() if own else progress
    COMPILE_COUNT += 1
    ghash = cache.key(text, options, targets)
    o = strategy.for_targets(Options.of(options), targets)
    dump = Dumper(ghash)
    try:
        text.encode()
    except UnicodeEncodeError as e:  # a lone surrogate (a str decoded with surrogateescape): MLIR takes UTF-8 only
        raise CompileError(f"the MLIR text holds {text[e.start:e.end]!r} at offset {e.start}, which is not Unicode "
                           f"text; read the file as UTF-8 (errors='strict') and fix it", stage="parse") from None
    progress.step("parse")
    with ir.Context(), ir.Location.unknown():
        try:
            module = weights.parse(text)
        except ir.MLIRError as e:
            module = named_ops.parse(text, e)  # ops upstream renamed; else UnsupportedOp / CompileError
        dump("input", module)
        c = run_stages(Compilation(module, o, tuple(targets), dump, progress=progress,
                                   weights=getattr(text, "weights", {})))
    if own:
        progress.finish()
    builder, narrowed, widened = c.builder, c.narrowed, c.widened
    inputs, outputs = list(builder.inputs), list(builder.outputs)
    for k in narrowed[0]:  # int64 on the host, int32 on the device: the runtime converts
        inputs[k] = dataclasses.replace(inputs[k], dtype="int64", device=inputs[k].dtype)
    for k in narrowed[1]:
        outputs[k] = (outputs[k][0], dataclasses.replace(outputs[k][1], dtype="int64", device=outputs[k][1].dtype))
    for k in widened[0]:  # float16 on the host, float32 on the device
        inputs[k] = dataclasses.replace(inputs[k], dtype="float16", device=inputs[k].dtype)
    for k, valid in c.input_ranges.items():  # checked by the runtime before the values reach a kernel
        if 0 <= k < len(inputs):
            inputs[k] = dataclasses.replace(inputs[k], valid=valid)
    for k in widened[1]:
        outputs[k] = (outputs[k][0], dataclasses.replace(outputs[k][1], dtype="float16", device=outputs[k][1].dtype))
    return Executable(
        kernels=c.kernels,
        slots=builder.slots,
        dispatches=plan.dispatches(builder, c.index, c.splits),
        inputs=inputs,
        input_slots=builder.input_slots,
        outputs=outputs,
        constants=builder.constants,
        target=",".join(targets),
        profile=o.name or "generic",
        source_hash=ghash,
    )


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


def _input_ranges(module: ir.Module) -> dict[int, tuple[int, int, str]]:
    """The frontend's ranges of input values (INPUT_RANGES), taken off the module: input position -> (lo, hi,
    why), several constraints on one input intersected."""
    attrs = module.operation.attributes
    if INPUT_RANGES not in attrs:
        return {}
    out: dict[int, tuple[int, int, str]] = {}
    for a in ir.ArrayAttr(attrs[INPUT_RANGES]):
        try:
            pos, lo, hi, why = ir.StringAttr(a).value.split("\t", 3)
            k, lo, hi = int(pos), int(lo), int(hi)
        except ValueError:
            raise CompileError(f"module attribute {INPUT_RANGES}: {ir.StringAttr(a).value!r} is not "
                               f"'<input position>\\t<lo>\\t<hi>\\t<why>'", stage="named-ops") from None
        if k in out:  # the tighter bound's reason
            olo, ohi, owhy = out[k]
            lo, hi, why = max(lo, olo), min(hi, ohi), why if hi < ohi else owhy
        out[k] = (lo, hi, why)
    del attrs[INPUT_RANGES]
    return out


def _check_signature(fn: ir.Operation) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
    for t in list(ftype.inputs) + list(ftype.results):
        if not isinstance(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
            raise UnsupportedOp(f"function arguments and results must be statically shaped tensors, got {t}")


__all__ = ["compile_module", "COMPILE_COUNT", "PortableError", "STAGES", "Stage", "Compilation", "Dumper",
           "public_func", "run_stages"]
