"""Kernels within a driver's loop-iteration limit (codegen_spirv/loop_limit.py): lavapipe stops an invocation after
65535 loop iterations over all its loops, so a reduction one thread walks past that came back as a partial sum."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.errors import CompileError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper


def _reduce_sum(shape, axes):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inputs, inits = ["x"], []
    if axes is not None:
        inits = [helper.make_tensor("axes", TensorProto.INT64, [len(axes)], list(axes))]
        inputs.append("axes")
    node = helper.make_node("ReduceSum", inputs, ["y"], keepdims=0)
    graph = helper.make_graph([node], "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


# Every element of the input (one thread of one workgroup), an outer axis longer than the limit (a thread per
# column walking 70000 rows), and a middle one.
CASES = [((3, 65535), None), ((70000, 3), (0,)), ((3, 70000, 2), (1,))]


@pytest.mark.parametrize(("shape", "axes"), CASES, ids=["all-3x65535", "axis0-70000x3", "axis1-3x70000x2"])
def test_long_reductions_are_whole(device, shape, axes):
    """Small integers: every partial sum is exact in float32, so the result equals numpy's to the bit; a sum cut
    off after 65535 iterations is short by a row's worth."""
    x = np.random.default_rng(0).integers(0, 4, size=shape).astype(np.float32)
    out, = portable.run(_reduce_sum(shape, axes), x, device=device)
    np.testing.assert_array_equal(out, x.sum(axis=None if axes is None else tuple(axes)))


KERNEL = """
gpu.module @m {{
  gpu.func @k(%out: memref<1xf32>, %in: memref<{n}xf32>) kernel attributes {{known_block_size = array<i32: 4, 1, 1>,
      known_grid_size = array<i32: 1, 1, 1>}} {{
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %rows = arith.constant {rows} : index
    %cols = arith.constant {cols} : index
    %z = arith.constant 0.0 : f32
    %t = gpu.thread_id x
    %left = arith.subi %c1, %t : index
    %one = arith.maxsi %left, %c0 : index
    %s = scf.for %i = %c0 to %rows step %c1 iter_args(%a = %z) -> (f32) {{
      %r = scf.for %j = %c0 to %cols step %c1 iter_args(%b = %a) -> (f32) {{
        %q = scf.for %u = %c0 to %one step %c1 iter_args(%e = %b) -> (f32) {{
          %k = arith.muli %i, %cols : index
          %l = arith.addi %k, %j : index
          %v = memref.load %in[%l] : memref<{n}xf32>
          %w = arith.addf %v, %e : f32
          scf.yield %w : f32
        }}
        scf.yield %q : f32
      }}
      scf.yield %r : f32
    }}
    memref.store %s, %out[%c0] : memref<1xf32>
    gpu.return
  }}
}}
"""


def _kernel(rows, cols):
    from portable.ir.mlir import ir

    ctx = ir.Context()
    ctx.__enter__()
    module = ir.Module.parse("module attributes {gpu.container_module} {" +
                             KERNEL.format(rows=rows, cols=cols, n=rows * cols) + "}")
    gm = module.body.operations[0].operation
    return ctx, module, gm, gm.regions[0].blocks[0].operations[0].operation


def test_loops_unrolled_within_the_limit():
    """3 x 65535 iterations (and a loop that runs at most once per thread, which becomes an if) come within
    65535 by unrolling, and the kernel still verifies."""
    from portable.codegen_spirv.loop_limit import limit_loop_iterations, loop_iterations

    ctx, module, gm, func = _kernel(3, 65535)
    try:
        assert loop_iterations(func) == 3 + 2 * 3 * 65535
        assert limit_loop_iterations(gm, 65535, "lavapipe") >= 1
        assert "scf.if" in str(func)
        assert loop_iterations(func) <= 65535
        module.operation.verify()
        assert limit_loop_iterations(gm, 0) == 0  # no limit: nothing to do
    finally:
        ctx.__exit__(None, None, None)


def test_kernel_past_the_limit_is_refused():
    """Past what unrolling by MAX_UNROLL reaches: a CompileError naming the kernel and the limit, not a kernel
    that returns a partial result."""
    from portable.codegen_spirv.loop_limit import MAX_UNROLL, limit_loop_iterations

    ctx, _module, gm, _func = _kernel(1, 65535 * MAX_UNROLL * 2)
    try:
        with pytest.raises(CompileError, match=r"kernel k runs \d+ loop iterations .* stops an invocation after 65535"):
            limit_loop_iterations(gm, 65535, "lavapipe")
    finally:
        ctx.__exit__(None, None, None)
