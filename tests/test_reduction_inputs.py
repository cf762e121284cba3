"""Elementwise kernels computed again inside the small reductions that read them (compiler/graph/reduction_inputs.py):
attention's scores over a KV cache read the cache with this step's k written in (also an output) and a scaled q;
both are computed inside the scores kernel, which then depends on nothing computed in the step. Checked on every
device against numpy; the kernel count and dependency depth on GPU and CPU profiles."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import longest_chain

from portable import profiles
from portable.api import CompiledGraph
from portable.compiler.pipeline import compile_module
from portable.devices import open_device

H, T, D = 3, 40, 16

SCORES = f"""
#id3 = affine_map<(h, j, d) -> (h, j, d)>
#kmap = affine_map<(h, j, d) -> (h, 0, d)>
#pos = affine_map<(h, j, d) -> ()>
#q = affine_map<(h, j, d) -> (h, d)>
#qh = affine_map<(h, j) -> (h, j)>
#cache = affine_map<(h, m, j, d) -> (h, j, d)>
#qs = affine_map<(h, m, j, d) -> (h, m, d)>
#out = affine_map<(h, m, j, d) -> (h, m, j)>
func.func @main(%cache: tensor<{H}x{T}x{D}xf32>, %k: tensor<{H}x1x{D}xf32>, %q: tensor<{H}x{D}xf32>,
                %pos: tensor<i32>) -> (tensor<{H}x{T}x{D}xf32>, tensor<{H}x1x{T}xf32>) {{
  %e = tensor.empty() : tensor<{H}x{T}x{D}xf32>
  %new = linalg.generic {{indexing_maps = [#kmap, #id3, #pos, #id3],
                          iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%k, %cache, %pos : tensor<{H}x1x{D}xf32>, tensor<{H}x{T}x{D}xf32>, tensor<i32>)
      outs(%e : tensor<{H}x{T}x{D}xf32>) {{
  ^bb0(%kv: f32, %cv: f32, %p: i32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %here = arith.cmpi eq, %ji, %p : i32
    %v = arith.select %here, %kv, %cv : f32
    linalg.yield %v : f32
  }} -> tensor<{H}x{T}x{D}xf32>
  %eq = tensor.empty() : tensor<{H}x{D}xf32>
  %q2 = linalg.generic {{indexing_maps = [#qh, #qh], iterator_types = ["parallel", "parallel"]}}
      ins(%q : tensor<{H}x{D}xf32>) outs(%eq : tensor<{H}x{D}xf32>) {{
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  }} -> tensor<{H}x{D}xf32>
  %q3 = tensor.expand_shape %q2 [[0], [1, 2]] output_shape [{H}, 1, {D}]
      : tensor<{H}x{D}xf32> into tensor<{H}x1x{D}xf32>
  %zero = arith.constant 0.0 : f32
  %es = tensor.empty() : tensor<{H}x1x{T}xf32>
  %init = linalg.fill ins(%zero : f32) outs(%es : tensor<{H}x1x{T}xf32>) -> tensor<{H}x1x{T}xf32>
  %s = linalg.generic {{indexing_maps = [#qs, #cache, #out],
                        iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%q3, %new : tensor<{H}x1x{D}xf32>, tensor<{H}x{T}x{D}xf32>) outs(%init : tensor<{H}x1x{T}xf32>) {{
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }} -> tensor<{H}x1x{T}xf32>
  return %new, %s : tensor<{H}x{T}x{D}xf32>, tensor<{H}x1x{T}xf32>
}}
"""


@pytest.mark.parametrize("profile,depth", [("nvidia", 1), ("arm-mali-valhall", 1), ("lavapipe", 2), ("pocl", 2)])
def test_scores_do_not_wait_for_the_cache_write(profile, depth):
    """The cache write stays (it is an output) and the scores compute their own copy of it: the two kernels
    depend on nothing in the step, so they run side by side (without the rewrite, the scores wait for the write:
    depth 2, as on the CPU drivers' profiles, which keep the arithmetic once). The scaled q, read only by the
    scores, is fused into them upstream (linalg-fuse-elementwise-ops)."""
    api = "opencl" if profile == "pocl" else "vulkan"
    exe = compile_module(SCORES, profiles.codegen_options(profiles.all_profiles()[profile]), (api,))
    assert len(exe.dispatches) == 2
    assert longest_chain(exe) == depth


def test_scores_match_numpy(device):
    live = open_device(device)
    opts = profiles.codegen_options(profiles.match(live.info), live.info)
    exe = CompiledGraph(compile_module(SCORES, opts, (live.info.api,)), live)
    rng = np.random.default_rng(5)
    cache = rng.standard_normal((H, T, D)).astype(np.float32)
    k = rng.standard_normal((H, 1, D)).astype(np.float32)
    q = rng.standard_normal((H, D)).astype(np.float32)
    for pos in (0, 17, T - 1):
        new, s = exe(cache, k, q, np.array(pos, np.int32))
        want = cache.copy()
        want[:, pos, :] = k[:, 0, :]
        np.testing.assert_array_equal(new, want)
        ref = np.einsum("hd,hjd->hj", q * np.float32(0.25), want)[:, None, :]
        np.testing.assert_allclose(s, ref, rtol=1e-5, atol=1e-5)
    exe.close()


PRODUCT = """
#id = affine_map<(i, j) -> (i, j)>
#a = affine_map<(i, j, k) -> (i, k)>
#b = affine_map<(i, j, k) -> (k, j)>
#o = affine_map<(i, j, k) -> (i, j)>
func.func @main(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>) -> (tensor<8x32xf32>, tensor<8x16xf32>) {
  %e = tensor.empty() : tensor<8x32xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %c = arith.constant 2.0 : f32
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<8x32xf32>
  %zero = arith.constant 0.0 : f32
  %eo = tensor.empty() : tensor<8x16xf32>
  %init = linalg.fill ins(%zero : f32) outs(%eo : tensor<8x16xf32>) -> tensor<8x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #o], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%s, %w : tensor<8x32xf32>, tensor<32x16xf32>) outs(%init : tensor<8x16xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %m = arith.mulf %u, %v : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %s, %p : tensor<8x32xf32>, tensor<8x16xf32>
}
"""


def test_matmuls_keep_plain_operands():
    """A matmul whose B rows run along n keeps its register-blocked strategies: its scaled x (also an output)
    stays a kernel it reads, not a computation inside it; the scores' cache write does go inside them, and so does
    the scaled q, read through a reshape that only adds a unit dim."""
    from portable.compiler.graph.reduction_inputs import fuse_into_reductions
    from portable.ir.mlir import ir

    with ir.Context():
        for text, fused in ((PRODUCT, 0), (SCORES, 2)):
            module = ir.Module.parse(text)
            func = module.body.operations[0]
            assert fuse_into_reductions(func, profiles.Options(reduction_threads=64)) == fused
            assert module.operation.verify()


REVERSED_MAX = """
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @main(%x: tensor<4x6xf32>) -> tensor<4xf32> {
  %c5 = arith.constant 5 : index
  %e = tensor.empty() : tensor<4x6xf32>
  %r = linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<4x6xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %jr = arith.subi %c5, %j : index
    %v = tensor.extract %x[%i, %jr] : tensor<4x6xf32>
    linalg.yield %v : f32
  } -> tensor<4x6xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %eo = tensor.empty() : tensor<4xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%eo : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<4x6xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %y = arith.maximumf %a, %acc : f32
    linalg.yield %y : f32
  } -> tensor<4xf32>
  return %m : tensor<4xf32>
}
"""


def test_a_producer_read_by_extract_stays_when_it_would_leave_a_loop_unbound():
    """ArgMax with select_last_index reads its row reversed through tensor.extract (no operand). Computed inside
    the max, that row would leave the op no operand spanning the reduced loop, and MLIR crashed on the result
    (a segfault in canonicalize, found by the conformance run for the nvidia profile): it stays a kernel."""
    from portable.compiler.graph.reduction_inputs import fuse_into_reductions
    from portable.ir.mlir import ir

    with ir.Context():
        module = ir.Module.parse(REVERSED_MAX)
        assert fuse_into_reductions(module.body.operations[0], profiles.Options(reduction_threads=64)) == 0
        assert module.operation.verify()
    exe = compile_module(REVERSED_MAX, profiles.codegen_options(profiles.all_profiles()["nvidia"]), ("vulkan",))
    assert len(exe.dispatches) >= 1
