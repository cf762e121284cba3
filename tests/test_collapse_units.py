"""collapse_dims.py at decode: an attention output (b, h, s, e) with a single token (s = 1) read by the output
projection through two reduction loops (h, e) has the token's size-1 dim left out of that input, so (h, e) join
into one K and the projection is a plain matrix-vector product (split_k's), not a two-loop reduction."""

from __future__ import annotations

import numpy as np

import portable
from portable.compiler.graph.collapse_dims import collapse_matmul_loops
from portable.compiler.pipeline import public_func
from portable.ir.linalg_info import iterator_types
from portable.ir.mlir import ir
from portable.ir.util import find_ops

OPROJ = """
#x = affine_map<(d0, d1, d2, d3, d4) -> (d0, d3, d1, d4)>
#w = affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>
#o = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>
func.func @oproj(%x: tensor<1x4x1x64xf32>, %w: tensor<4x64x256xf32>) -> tensor<1x1x256xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x1x256xf32>) -> tensor<1x1x256xf32>
  %r = linalg.generic {indexing_maps = [#x, #w, #o],
                       iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
      ins(%x, %w : tensor<1x4x1x64xf32>, tensor<4x64x256xf32>) outs(%init : tensor<1x1x256xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x1x256xf32>
  return %r : tensor<1x1x256xf32>
}
"""


def test_heads_join_into_one_k_past_the_single_token():
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(OPROJ)
        fn = public_func(module)
        assert collapse_matmul_loops(fn) == 1
        module.operation.verify()
        (product,) = [op for op in find_ops(fn, ("linalg.generic",)) if "reduction" in iterator_types(op)]
        assert iterator_types(product).count("reduction") == 1


def test_values(device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 1, 64)).astype(np.float32)
    w = rng.standard_normal((4, 64, 256)).astype(np.float32)
    ref = np.einsum("bhse,hen->bsn", x, w)
    np.testing.assert_allclose(portable.run(OPROJ, x, w, device=device)[0], ref, rtol=1e-4, atol=1e-4)
