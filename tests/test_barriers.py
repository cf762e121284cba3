"""Barrier fences (compiler/barriers.py): a barrier orders global memory only where a write to it before the
barrier may be read or written by another thread after it."""

from __future__ import annotations

import portable
from portable import profiles
from portable.compiler.pipeline import compile_module


def _reduction():
    g = portable.Graph()
    g.output(g.relu(g.sum(g.input((8, 65536), "float32"), axis=-1)))
    return g


def test_reduction_into_global_output_keeps_global_fences():
    """A workgroup reduction zeroes its output in global memory, then one thread accumulates into it: both
    barriers fence global memory."""
    exe = compile_module(_reduction().to_mlir(), profiles.codegen_options(profiles.all_profiles()["nvidia"]),
                         ("opencl",))
    src = exe.kernels[0].opencl
    assert src.count("barrier(") == 2 and src.count("CLK_GLOBAL_MEM_FENCE") == 2, src

