"""Rewrites of lowered kernels for Vulkan drivers that run a subgroup as the SIMD lanes of one CPU thread
(lavapipe), where every buffer access is a loop over the lanes; each is turned on by a key of the profile.

  gelu_as_sigmoid         0.5x(1 + tanh(u)) as x / (1 + exp(-2u)) (gelu_form.py)
  elementwise_rows_per_thread  2-d elementwise thread tiles unrolled into rows of 8 (row_vectors.py; on every
                          Vulkan device too where a grid past its workgroup count gave threads several rows)
  loop_vectorize          scalar loops along the innermost dim of their buffers run on vectors of this width
                          (compiler/lowering/loop_vectorize.py; lavapipe: vec4; the OpenCL C path takes the
                          same key, pipeline.py)
  recompute_private_rows  rows a loop of arithmetic writes to private memory are recomputed where read
                          (private_rows.py; before loop_vectorize, whose loops then read the inputs)
  subgroup_rows           a subgroup's rows one after the other, columns across its lanes, in registers
                          (subgroup_rows.py; the value is the subgroup size, subgroup_row_columns the longest row)
  subgroup_shared_reads   reads alike in every lane of a subgroup are split across it and shuffled
                          (subgroup_reads.py; the value is the subgroup size)
  wide_buffers            buffers accessed 128 (256) bits at a time are arrays of vector<2xi64> (<4xi64>)
                          (wide_buffers.py; with texel_reads only buffers the kernel never writes)
Last, 8-element vectors are split into vec4 halves (split_vectors.py: the strategy's elementwise tiles of 8 and
subgroup_rows' rows), whichever keys are on.
"""

from __future__ import annotations

from collections.abc import Callable

from ...ir.mlir import ir, passmanager
from ...profiles import Options
from .gelu_form import gelu_as_sigmoid
from .private_rows import recompute_private_rows
from .row_vectors import unroll_rows
from .split_vectors import split_wide_vectors
from .subgroup_reads import share_subgroup_reads
from .subgroup_rows import split_rows
from .wide_buffers import widen_buffers

# 2-d register tiles are accessed row by row (as the SPIR-V lowering does first anyway).
_UNROLL = "builtin.module(gpu.module(convert-vector-to-scf{full-unroll=true target-rank=1},canonicalize))"


def has_2d_arith(root: ir.Operation) -> bool:
    """Whether an arith or math op of `root` computes on (or from) a vector of two or more dimensions."""
    def on_2d(op: ir.Operation) -> bool:
        if not len(op.results) or op.name.split(".")[0] not in ("arith", "math"):
            return False
        types = [v.type for v in op.results] + [v.type for v in op.operands]
        return any(isinstance(t, ir.VectorType) and ir.VectorType(t).rank >= 2 for t in types)

    found = []

    def visit(op):
        if on_2d(op):
            found.append(op)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    root.walk(visit)
    return bool(found)


def rewrite(module: ir.Module, o: Options, vectorize_loops: Callable[[ir.Operation, int], bool]) -> bool:
    """The rewrites `o` asks for on `module` (one gpu.module, the Vulkan target's own copy), in place; whether
    any changed it. `vectorize_loops`: the compiler's loop vectorizer (compiler/lowering/loop_vectorize.py, which
    the OpenCL C path takes too), passed in so that codegen imports no compiler internals."""
    def gpu_module() -> ir.Operation:
        return next(op for op in module.body.operations if op.operation.name == "gpu.module").operation

    lanes = o.subgroup_shared_reads or 0
    on = (o.wide_buffers, o.loop_vectorize, o.gelu_as_sigmoid, o.recompute_private_rows, o.subgroup_rows)
    # 2-d elementwise tiles come from elementwise_rows_per_thread, and on any device from grids past its workgroup
    # count (strategy.choose gives each thread several rows): SPIR-V has no arithmetic on 2-d vectors.
    rows = (o.elementwise_rows_per_thread or 1) > 1 or has_2d_arith(gpu_module())
    if not (lanes or rows or any(on)):
        return False
    changed = False
    if rows:
        changed |= unroll_rows(gpu_module())
    if o.gelu_as_sigmoid:
        changed |= gelu_as_sigmoid(gpu_module())
    if o.recompute_private_rows:
        changed |= recompute_private_rows(gpu_module())
    if (o.loop_vectorize or 0) > 1:
        changed |= vectorize_loops(gpu_module(), o.loop_vectorize)
    if o.subgroup_rows:
        changed |= split_rows(module, gpu_module, o.subgroup_rows,
                              1024 if o.subgroup_row_columns is None else o.subgroup_row_columns)
    if lanes:
        changed |= share_subgroup_reads(gpu_module(), lanes)
    caps = o.spirv_caps or ()
    if o.wide_buffers and "Int64" in caps:  # the wide elements are 64-bit integers
        passmanager.PassManager.parse(_UNROLL).run(module.operation)
        narrow = tuple(t for t, cap in (("f16", "Float16"), ("i16", "Int16")) if cap in caps)
        changed |= widen_buffers(gpu_module(), stores=not o.texel_reads, narrow=narrow)
    # Elementwise tiles of 8 and subgroup_rows' rows leave 8-element vectors, wider than SPIR-V's vec4.
    changed |= split_wide_vectors(gpu_module())
    return changed
