"""Rewrites of lowered kernels for Vulkan drivers that run a subgroup as the SIMD lanes of one CPU thread
(lavapipe), where every buffer access is a loop over the lanes; each is turned on by a key of the profile.

  gelu_as_sigmoid         0.5x(1 + tanh(u)) as x / (1 + exp(-2u)) (gelu_form.py)
  elementwise_rows_per_thread  2-d elementwise thread tiles unrolled into rows of 8 (row_vectors.py; on every
                          Vulkan device too where a grid past its workgroup count gave threads several rows)
  loop_vectorize          scalar loops along the innermost dim of their buffers run on vectors of this width
                          (loop_vectorize.py; lavapipe: vec4; the OpenCL C path takes the same key, pipeline.py)
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

import re

from ..ir.mlir import ir, passmanager
from .gelu_form import gelu_as_sigmoid
from .loop_vectorize import vectorize_loops
from .private_rows import recompute_private_rows
from .row_vectors import unroll_rows
from .split_vectors import split_wide_vectors
from .subgroup_reads import share_subgroup_reads
from .subgroup_rows import split_rows
from .wide_buffers import widen_buffers

_ARITH_2D = re.compile(r"= (?:arith|math)\.\w+ [^\n]*: vector<\d+x\d+x")
# 2-d register tiles are accessed row by row (as the SPIR-V lowering does first anyway).
_UNROLL = "builtin.module(gpu.module(convert-vector-to-scf{full-unroll=true target-rank=1},canonicalize))"


def rewrite(text: str, profile: dict) -> str:
    """`text` (one gpu.module) with the rewrites `profile` asks for; unchanged text when none applies."""
    lanes = int(profile.get("subgroup_shared_reads", 0))
    keys = ("wide_buffers", "loop_vectorize", "gelu_as_sigmoid", "recompute_private_rows",
            "subgroup_rows")
    # 2-d elementwise tiles come from elementwise_rows_per_thread, and on any device from grids past its workgroup
    # count (strategy.choose gives each thread several rows): SPIR-V has no arithmetic on 2-d vectors.
    rows = int(profile.get("elementwise_rows_per_thread", 1)) > 1 or _ARITH_2D.search(text) is not None
    if not (lanes or rows or any(profile.get(k) for k in keys)):
        return text
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse("module attributes {gpu.container_module} {\n" + text + "\n}")

        def gpu_module() -> ir.Operation:
            return next(op for op in module.body.operations if op.operation.name == "gpu.module").operation

        changed = False
        if rows:
            changed |= unroll_rows(gpu_module())
        if profile.get("gelu_as_sigmoid"):
            changed |= gelu_as_sigmoid(gpu_module())
        if profile.get("recompute_private_rows"):
            changed |= recompute_private_rows(gpu_module())
        if int(profile.get("loop_vectorize", 0)) > 1:
            changed |= vectorize_loops(gpu_module(), int(profile["loop_vectorize"]))
        if profile.get("subgroup_rows"):
            changed |= split_rows(module, gpu_module, int(profile["subgroup_rows"]),
                                  int(profile.get("subgroup_row_columns", 1024)))
        if lanes:
            changed |= share_subgroup_reads(gpu_module(), lanes)
        caps = profile.get("spirv_caps", ())
        if profile.get("wide_buffers") and "Int64" in caps:  # the wide elements are 64-bit integers
            passmanager.PassManager.parse(_UNROLL).run(module.operation)
            narrow = tuple(t for t, cap in (("f16", "Float16"), ("i16", "Int16")) if cap in caps)
            changed |= widen_buffers(gpu_module(), stores=not profile.get("texel_reads"), narrow=narrow)
        # Elementwise tiles of 8 and subgroup_rows' rows leave 8-element vectors, wider than SPIR-V's vec4.
        changed |= split_wide_vectors(gpu_module())
        return str(gpu_module()) if changed else text
