"""Row chains whose rows the device cannot hold (compiler/row_chains.recompute): those rows are computed again
where they are read, still one kernel; and rows a CPU driver's loop limit would cut short are not chained."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_row_fusion import BUILD, _options, _run, _softmax

import portable
from portable.compiler.pipeline import compile_module


def _row_arrays(exe, cols: int) -> int:
    """How many arrays of a whole row (`cols` values) the OpenCL kernels keep (private or __local)."""
    return sum(len(re.findall(rf"\w+ \w+\[{cols}\]", k.opencl)) for k in exe.kernels)


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_rows_too_long_are_recomputed(device, tmp_path, family):
    """Rows whose buffers pass the profile's budget are computed again inside each op that reads them, from the
    chain's inputs, earliest first and only as many as it takes (row_chains.recompute): still one kernel,
    where each row the chain no longer holds used to become kernels of its own and global intermediates."""
    g, shapes = BUILD[family](5, 4097)
    rows = 2 if family == "softmax" else 1  # softmax: the scaled input and the exponentials; layernorm: x - mean
    fused = _run(g, shapes, device, tmp_path, row_fusion_private_bytes=1 << 20, reduction_threads=0)
    one = _run(g, shapes, device, tmp_path, row_fusion_private_bytes=4097 * 4 + 64, reduction_threads=0)
    none = _run(g, shapes, device, tmp_path, row_fusion_private_bytes=4096, reduction_threads=0)
    off = _run(g, shapes, device, tmp_path, row_fusion_private_bytes=0, reduction_threads=0)
    assert [len(e.kernels) for e in (fused, one, none)] == [1, 1, 1]
    assert len(off.kernels) >= 3
    if fused.kernels[0].opencl is not None:
        assert [_row_arrays(e, 4097) for e in (fused, one, none)] == [rows, 1, 0]


@pytest.mark.parametrize("cols", [21845, 65537, 100000, 300000])
def test_long_rows_within_the_loop_limit(device, cols):
    """lavapipe ends an invocation after 65535 loop iterations over all its loops: a row chain whose thread would
    walk its row that often (one pass per op, 4 columns a step where 4 divides the row) is not formed, and these
    softmaxes came back wrong without an error (3 x 21845 steps; a [sum, divide] chain over 300000 columns)."""
    g, shapes = _softmax(2, cols)
    x = np.random.default_rng(9).standard_normal(shapes[0]).astype(np.float32)
    out, = portable.run(g, x, device=device)
    ref, = g.reference(x)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-10)


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
@pytest.mark.parametrize("budget,rows", [(8192, 0), (4097 * 4 + 2048, 1)], ids=["none-kept", "one-kept"])
def test_workgroup_rows_past_memory_are_recomputed(device, tmp_path, family, budget, rows):
    """Rows past the workgroup-memory budget are computed again where they are read: one kernel, a workgroup per
    row, holding only the rows that fit (softmax's exponentials fit beside the partials; its scaled input is
    computed again in the max and the exponentials)."""
    g, shapes = BUILD[family](3, 4097)
    exe = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=budget)
    assert [k.workgroup_size for k in exe.kernels] == [(64, 1, 1)]
    if exe.kernels[0].opencl is not None:
        assert _row_arrays(exe, 4097) == rows


# Softmax of a masked input: the mask reads the position (linalg.index), the bias is one row for all rows.
_MASKED = """
func.func @main(%x: tensor<4x4097xf32>, %b: tensor<4097xf32>) -> tensor<4x4097xf32> {
  %e0 = tensor.empty() : tensor<4x4097xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                                        affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x4097xf32>, tensor<4097xf32>) outs(%e0 : tensor<4x4097xf32>) {
  ^bb0(%xv: f32, %bv: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c1000 = arith.constant 1000 : index
    %c2000 = arith.constant 2000 : index
    %lim0 = arith.muli %i, %c1000 : index
    %lim = arith.addi %lim0, %c2000 : index
    %keep = arith.cmpi ule, %j, %lim : index
    %s = arith.addf %xv, %bv : f32
    %c20 = arith.constant 20.0 : f32
    %low = arith.subf %s, %c20 : f32
    %v = arith.select %keep, %s, %low : f32
    linalg.yield %v : f32
  } -> tensor<4x4097xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]} ins(%y : tensor<4x4097xf32>)
      outs(%m0 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                         affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%y, %m : tensor<4x4097xf32>, tensor<4xf32>) outs(%e0 : tensor<4x4097xf32>) {
  ^bb0(%a: f32, %mv: f32, %o: f32):
    %d = arith.subf %a, %mv : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x4097xf32>
  %zero = arith.constant 0.0 : f32
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                         iterator_types = ["parallel", "reduction"]} ins(%ex : tensor<4x4097xf32>)
      outs(%s0 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>,
                                          affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %sum : tensor<4x4097xf32>, tensor<4xf32>) outs(%e0 : tensor<4x4097xf32>) {
  ^bb0(%a: f32, %sv: f32, %o: f32):
    %r = arith.divf %a, %sv : f32
    linalg.yield %r : f32
  } -> tensor<4x4097xf32>
  return %out : tensor<4x4097xf32>
}
"""


@pytest.mark.parametrize("overrides", [{"row_fusion_private_bytes": 4096, "reduction_threads": 0},
                                       {"row_fusion_shared_bytes": 8192, "reduction_threads": 64}],
                         ids=["private", "workgroup"])
def test_recomputed_rows_read_position_and_broadcast(device, tmp_path, overrides):
    """A masked softmax whose mask reads the loop position (linalg.index) and whose bias is one row broadcast over
    the rows: computed again inside the max, the exponentials and the division, each reads the position and the
    bias through its own loops."""
    live, opts = _options(device, **overrides)
    exe = compile_module(_MASKED, opts, (live.info.api,))
    assert len(exe.kernels) == 1
    rng = np.random.default_rng(5)
    x, b = rng.standard_normal((4, 4097)).astype(np.float32), rng.standard_normal(4097).astype(np.float32)
    keep = np.arange(4097)[None, :] <= np.arange(4)[:, None] * 1000 + 2000
    y = np.where(keep, x + b, x + b - 20).astype(np.float64)
    ref = np.exp(y - y.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    exe.save(tmp_path / "g.ptx")
    out, = portable.load(tmp_path / "g.ptx", device=device)(x, b)
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=1e-7)
