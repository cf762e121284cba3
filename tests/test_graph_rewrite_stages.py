"""Graph-rewrite stages of compiler/pipeline.py on model-shaped modules: a projection into attention heads
(collapse-loops), attention scores read in the projections' layout (contraction-layout), and a factor read by index
inside a reduction (unfuse-producers, unfuse-reductions). The stage runs alone on the module the stages before it
left (stage_runner.at_stage), and the IR it leaves is checked; the gathered factor also runs on each device."""

from __future__ import annotations

import math

import pytest
from stage_runner import at_stage, batch_matmul, options_for

from portable.compiler import pipeline
from portable.compiler.pipeline import stage
from portable.ir.mlir import ir
from portable.ir.util import find_ops


@pytest.fixture(autouse=True)
def _context():
    with ir.Context(), ir.Location.unknown():
        yield


HEADS_PROJECTION = """
func.func @main(%x: tensor<2x16x32xf32>, %w: tensor<32x4x8xf32>) -> tensor<2x16x4x8xf32> {
  %z = arith.constant 0.0 : f32
  %b = arith.constant dense<0.25> : tensor<4x8xf32>
  %e = tensor.empty() : tensor<2x16x4x8xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x16x4x8xf32>) -> tensor<2x16x4x8xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(b, s, h, d, k) -> (b, s, k)>,
                                        affine_map<(b, s, h, d, k) -> (k, h, d)>,
                                        affine_map<(b, s, h, d, k) -> (b, s, h, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%x, %w : tensor<2x16x32xf32>, tensor<32x4x8xf32>) outs(%f : tensor<2x16x4x8xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %p = arith.mulf %a, %c : f32
      %s = arith.addf %o, %p : f32
      linalg.yield %s : f32
  } -> tensor<2x16x4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(b, s, h, d) -> (b, s, h, d)>, affine_map<(b, s, h, d) -> (h, d)>,
                                        affine_map<(b, s, h, d) -> (b, s, h, d)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%m, %b : tensor<2x16x4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<2x16x4x8xf32>) {
    ^bb0(%a: f32, %c: f32, %o: f32):
      %s = arith.addf %a, %c : f32
      linalg.yield %s : f32
  } -> tensor<2x16x4x8xf32>
  return %r : tensor<2x16x4x8xf32>
}
"""


def test_collapse_loops_gives_a_projection_into_heads_its_matmul_back():
    """graph/collapse_dims.py: the (b, s, h, d, k) matmul that folded reshapes leave becomes (b*s, h*d, k) over
    collapse_shape views, its fill collapsed with it and its constant-bias epilogue collapsed alike (so it reads the
    matmul's result itself and fuses into its kernel); a batched 1x1 convolution (no two loops joinable) is left
    alone."""
    from portable.ir.linalg_info import classify, iterator_types

    _, c, changed = at_stage(HEADS_PROJECTION, "collapse-loops", options_for("nvidia"))
    assert changed
    generics = find_ops(c.module.operation, ("linalg.generic",))
    matmuls = [g for g in generics if classify(g).kind == "matmul"]
    assert [classify(m).ranges for m in matmuls] == [(32, 32, 32)]
    assert all(len(iterator_types(g)) == 2 for g in generics if g not in matmuls)
    assert any(v.owner == matmuls[0] for g in generics for v in g.operands if isinstance(v, ir.OpResult))
    _, c, changed = at_stage(batch_matmul(weight_first=True), "collapse-loops", options_for("nvidia"))
    assert changed is False


ATTENTION_SCORES = """
func.func @main(%q: tensor<2x32x2x16xf32>, %k: tensor<2x32x2x16xf32>) -> tensor<2x2x32x32xf32> {
  %z = arith.constant 0.0 : f32
  %c = arith.constant 0.5 : f32
  %e = tensor.empty() : tensor<2x2x32x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x2x32x32xf32>) -> tensor<2x2x32x32xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(b, h, i, j, d) -> (b, i, h, d)>,
                                        affine_map<(b, h, i, j, d) -> (b, j, h, d)>,
                                        affine_map<(b, h, i, j, d) -> (b, h, i, j)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>) outs(%f : tensor<2x2x32x32xf32>) {
    ^bb0(%a: f32, %b: f32, %o: f32):
      %x = arith.mulf %a, %c : f32
      %y = arith.mulf %b, %c : f32
      %p = arith.mulf %x, %y : f32
      %r = arith.addf %o, %p : f32
      linalg.yield %r : f32
  } -> tensor<2x2x32x32xf32>
  return %s : tensor<2x2x32x32xf32>
}
"""


SHARED_BIAS_SCORES = ATTENTION_SCORES.replace(
    "%k: tensor<2x32x2x16xf32>)", "%k: tensor<2x32x2x16xf32>, %bias: tensor<2x16xf32>)").replace(
    "affine_map<(b, h, i, j, d) -> (b, i, h, d)>,", "affine_map<(b, h, i, j, d) -> (h, d)>, "
    "affine_map<(b, h, i, j, d) -> (b, i, h, d)>,").replace(
    "ins(%q, %k : tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>)",
    "ins(%bias, %q, %k : tensor<2x16xf32>, tensor<2x32x2x16xf32>, tensor<2x32x2x16xf32>)").replace(
    "^bb0(%a: f32, %b: f32, %o: f32):\n      %x = arith.mulf %a, %c : f32\n      %y = arith.mulf %b, %c : f32",
    "^bb0(%t: f32, %a: f32, %b: f32, %o: f32):\n      %a1 = arith.addf %a, %t : f32\n"
    "      %b1 = arith.addf %b, %t : f32\n      %x = arith.mulf %a1, %c : f32\n      %y = arith.mulf %b1, %c : f32")


def test_contraction_layout_gives_attention_scores_batch_matmul_operands():
    """graph/contraction_layout.py: Q.K^T read in the projections' (b, s, h, d) layout, with each side's scale in the
    body, becomes a pure product over operands copied once (the scale applied there) in (b, h, i, d) and (b, h, d, j)
    order; collapse_dims.py then makes it a batch matmul over b*h."""
    from portable.ir.linalg_info import classify, iterator_types

    for text in (ATTENTION_SCORES, SHARED_BIAS_SCORES):  # a bias both sides add goes into both copies
        _, c, changed = at_stage(text, "contraction-layout", options_for("nvidia"))
        assert changed
        generics = find_ops(c.module.operation, ("linalg.generic",))
        copies = [g for g in generics if "reduction" not in iterator_types(g) and classify(g).kind != "fill"]
        assert sorted(tuple(g.results[0].type.shape) for g in copies) == [(2, 2, 16, 32), (2, 2, 32, 16)]
        assert all(any(o.name == "arith.mulf" for o in g.regions[0].blocks[0].operations) for g in copies)
        c.stage = "collapse-loops"
        stage("collapse-loops").run(c)
        c.passes(pipeline.CLEAN)
        matmuls = [g for g in find_ops(c.module.operation, ("linalg.generic",)) if classify(g).kind == "matmul"]
        assert [classify(m).ranges for m in matmuls] == [(4, 32, 32, 16)]


def test_contraction_layout_ragged_scores_on_cpu_drivers():
    """Scores over 31 tokens: in (batch, k, n) order the vector dimension would be the 31 keys, so on the CPU drivers
    the keys' side is copied as (batch, n, k), both sides read along d; a GPU profile stages (batch, k, n)."""
    from portable.ir.linalg_info import classify, iterator_types

    def copies(name):
        _, c, changed = at_stage(text, "contraction-layout", options_for(name))
        assert changed
        generics = find_ops(c.module.operation, ("linalg.generic",))
        return sorted(tuple(g.results[0].type.shape) for g in generics
                      if "reduction" not in iterator_types(g) and classify(g).kind != "fill")

    text = ATTENTION_SCORES.replace("2x32x2x16", "2x31x2x16").replace("2x2x32x32", "2x2x31x31")
    for name in ("pocl", "lavapipe"):
        assert copies(name) == [(2, 2, 31, 16), (2, 2, 31, 16)]
    assert copies("nvidia") == [(2, 2, 16, 31), (2, 2, 31, 16)]
    text = ATTENTION_SCORES  # 32 keys: (batch, k, n) everywhere
    assert copies("pocl") == [(2, 2, 16, 32), (2, 2, 32, 16)]


GATHERED_FACTOR = """
func.func @main(%t: tensor<4096x2xf32>, %d: tensor<4096xf32>, %w: tensor<4096x64xf32>) -> tensor<1x64xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<1x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x64xf32>) -> tensor<1x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k)>, affine_map<(m, n, k) -> (k, n)>,
                                        affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%d, %w : tensor<4096xf32>, tensor<4096x64xf32>) outs(%f : tensor<1x64xf32>) {
    ^bb0(%dv: f32, %wv: f32, %acc: f32):
      %k = linalg.index 2 : index
      %a = tensor.extract %t[%k, %c0] : tensor<4096x2xf32>
      %b = tensor.extract %t[%k, %c1] : tensor<4096x2xf32>
      %s = arith.addf %a, %b : f32
      %q = arith.divf %s, %dv : f32
      %p = arith.mulf %q, %wv : f32
      %o = arith.addf %acc, %p : f32
      linalg.yield %o : f32
  } -> tensor<1x64xf32>
  return %r : tensor<1x64xf32>
}
"""


GATHERED_FACTOR_2K = """
func.func @main(%t: tensor<64x64x2xf32>, %d: tensor<64x64xf32>, %w: tensor<64x64x64xf32>) -> tensor<1x64xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<1x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x64xf32>) -> tensor<1x64xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k, l) -> (k, l)>, affine_map<(m, n, k, l) -> (k, l, n)>,
                                        affine_map<(m, n, k, l) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%d, %w : tensor<64x64xf32>, tensor<64x64x64xf32>) outs(%f : tensor<1x64xf32>) {
    ^bb0(%dv: f32, %wv: f32, %acc: f32):
      %k = linalg.index 2 : index
      %l = linalg.index 3 : index
      %a = tensor.extract %t[%k, %l, %c0] : tensor<64x64x2xf32>
      %b = tensor.extract %t[%k, %l, %c1] : tensor<64x64x2xf32>
      %s = arith.addf %a, %b : f32
      %q = arith.divf %s, %dv : f32
      %p = arith.mulf %q, %wv : f32
      %o = arith.addf %acc, %p : f32
      linalg.yield %o : f32
  } -> tensor<1x64xf32>
  return %r : tensor<1x64xf32>
}
"""


@pytest.mark.parametrize("text,stage", [(GATHERED_FACTOR, "unfuse-producers"),
                                        (GATHERED_FACTOR_2K, "unfuse-reductions")])
def test_gathered_factor_leaves_the_reduction(text, stage):
    """A factor read by index (an upsampling pool's window sum before a classifier) is computed once per k, over
    the loops it reads, instead of once per (k, n): the product then reads it as a plain operand (a matmul form:
    unfuse-producers; a reduction over two loops, as a flattened pool's classifier: unfuse-reductions)."""
    _, c, changed = at_stage(text, stage, options_for("pocl"))
    assert changed
    generics = find_ops(c.module.operation, ("linalg.generic",))
    body = lambda g: [o.name for o in g.regions[0].blocks[0].operations]  # noqa: E731
    pre = [g for g in generics if "tensor.extract" in body(g)]
    red = [g for g in generics if "reduction" in str(g.attributes["iterator_types"])]
    assert len(pre) == 1 and len(red) == 1
    assert math.prod(ir.ShapedType(pre[0].results[0].type).shape) == 4096
    assert "linalg.index" not in body(red[0]) and "tensor.extract" not in body(red[0])


@pytest.mark.parametrize("text,kshape", [(GATHERED_FACTOR, (4096,)), (GATHERED_FACTOR_2K, (64, 64))])
def test_gathered_factor_numbers(device, text, kshape):
    import numpy as np

    import portable

    rng = np.random.default_rng(0)
    t = rng.standard_normal((*kshape, 2)).astype(np.float32)
    d = (1.0 + rng.random(kshape)).astype(np.float32)
    w = rng.standard_normal((*kshape, 64)).astype(np.float32)
    (out,) = portable.run(text, t, d, w, device=device)
    want = (((t[..., 0] + t[..., 1]) / d).reshape(1, -1) @ w.reshape(4096, 64))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
