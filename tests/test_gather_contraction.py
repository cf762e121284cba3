"""A gather by index inside a contraction (Funnel's relative-position attention: a table row picked by an index
input, at the contraction's own K index, times the values), with the bounds assert torch-mlir puts beside the
gather: the gather leaves the reduction as its own side (its loop index renumbered), and the numbers match."""

from __future__ import annotations

import numpy as np

import portable

TEXT = """
#x = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4)>
#w = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4, d2, d3)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
func.func @main(%idx: tensor<1x64x32xi64>, %w: tensor<1x32x4x16xf32>, %t: tensor<96x32xf32>) -> tensor<1x64x4x16xf32> {
  %z = arith.constant 0.0 : f32
  %c96 = arith.constant 96 : index
  %e = tensor.empty() : tensor<1x64x4x16xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x64x4x16xf32>) -> tensor<1x64x4x16xf32>
  %r = linalg.generic {indexing_maps = [#x, #w, #o],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%idx, %w : tensor<1x64x32xi64>, tensor<1x32x4x16xf32>) outs(%f : tensor<1x64x4x16xf32>) {
    ^bb0(%in: i64, %wv: f32, %out: f32):
      %k = linalg.index 4 : index
      %row = arith.index_cast %in : i64 to index
      %ok = arith.cmpi slt, %row, %c96 : index
      cf.assert %ok, "index must be smaller than dim size"
      %g = tensor.extract %t[%row, %k] : tensor<96x32xf32>
      %p = arith.mulf %g, %wv : f32
      %s = arith.addf %out, %p : f32
      linalg.yield %s : f32
  } -> tensor<1x64x4x16xf32>
  return %r : tensor<1x64x4x16xf32>
}
"""


def test_gather_at_the_contractions_own_index(device):
    rng = np.random.default_rng(0)
    idx = rng.integers(0, 96, (1, 64, 32)).astype(np.int64)
    w = rng.standard_normal((1, 32, 4, 16)).astype(np.float32)
    t = rng.standard_normal((96, 32)).astype(np.float32)
    (got,) = portable.run(TEXT, idx, w, t, device=device)
    gathered = t[idx, np.arange(32)[None, None, :]]  # [1, 64, 32]: t[idx[b, i, k], k]
    want = np.einsum("bik,bkhd->bihd", gathered, w)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
