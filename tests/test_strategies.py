"""Code-generation strategies that the CPU drivers' own profiles do not pick, forced on and run here, so every
strategy a GPU profile may choose is checked on the devices CI has."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.codegen_spirv import validate
from portable.compiler.pipeline import compile_module
from portable.devices import open_device


def _compile_and_load(g, device, tmp_path, **overrides):
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), **overrides)
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    if live.info.api == "vulkan":
        for k in exe.kernels:
            validate(k.spirv)
    path = tmp_path / "g.ptx"
    exe.save(path)
    return exe, portable.load(path, device=device)


@pytest.mark.parametrize("shape", [(33, 1000), (4, 129), (1, 4096)])
def test_workgroup_reduction(device, tmp_path, shape):
    g = portable.Graph()
    x = g.input(shape)
    g.output(g.softmax(x, axis=-1), g.mean(x, axis=1), g.max(x, axis=-1, keepdims=True), g.sum(x, axis=-1))
    exe, loaded = _compile_and_load(g, device, tmp_path, reduction_threads=64)
    assert any(k.workgroup_size == (64, 1, 1) for k in exe.kernels)
    xs = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    for out, ref in zip(loaded(xs), g.reference(xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tile", [(4, 4), (8, 1), (2, 2)])
def test_matmul_thread_tiles(device, tmp_path, tile):
    g = portable.Graph()
    a, b, bias = g.input((64, 48)), g.input((48, 128)), g.input((128,))
    g.output(g.relu(g.add(g.matmul(a, b), bias)))
    _, loaded = _compile_and_load(g, device, tmp_path, thread_tile=list(tile), workgroup_invocations=32)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((64, 48), (48, 128), (128,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [256, 96])
def test_gemv_columns_in_vec4_chunks(device, tmp_path, n):
    """One row: 16 columns per thread as four unrolled vec4 accumulators (root_col_unroll); 96 columns take the
    plain tiles."""
    g = portable.Graph()
    x, w, b = g.input((1, 96)), g.input((96, n)), g.input((n,))
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    exe, loaded = _compile_and_load(g, device, tmp_path, matmul_row_vector_cols=16, matmul_threads_x=8)
    if n == 256:
        assert exe.dispatches[0].grid == (2, 1, 1)  # 8 threads x 16 columns per workgroup
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 96), (96, n), (n,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


def test_split_k_gemv_with_epilogue(device, tmp_path):
    """A matrix-vector product has too few outputs for a GPU: its K loop is split over a workgroup."""
    g = portable.Graph()
    x, w, b = g.input((1, 1000)), g.input((1000, 300)), g.input((300,))
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    exe, loaded = _compile_and_load(g, device, tmp_path, reduction_threads=64)
    assert [k.workgroup_size for k in exe.kernels] == [(64, 1, 1)]
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 1000), (1000, 300), (300,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("im2col", [0, 64 << 20])
def test_conv_direct_and_im2col(device, tmp_path, im2col):
    """Both convolution paths: direct loops, and patches gathered into a matrix for the matmul path."""
    g = portable.Graph()
    x, w = g.input((2, 17, 15, 16)), g.input((3, 3, 16, 32))
    g.output(g.relu(g.conv2d(x, w, padding=(1, 1), stride=(2, 1))))
    _, loaded = _compile_and_load(g, device, tmp_path, im2col_max_bytes=im2col)
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((2, 17, 15, 16)).astype(np.float32), rng.standard_normal((3, 3, 16, 32)).astype(np.float32)]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


BCAST_BMM = """
#map = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map2 = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
module {
  func.func @bcast_bmm(%arg0: tensor<3x1x3x4xf32>, %arg1: tensor<1x2x4x2xf32>) -> tensor<3x2x3x2xf32> {
    %cst = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<3x2x3x4xf32>
    %c0 = tensor.collapse_shape %arg0 [[0, 1], [2], [3]] : tensor<3x1x3x4xf32> into tensor<3x3x4xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c0 : tensor<3x3x4xf32>) outs(%0 : tensor<3x2x3x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<3x2x3x4xf32>
    %2 = tensor.empty() : tensor<3x2x4x2xf32>
    %c1 = tensor.collapse_shape %arg1 [[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
    %3 = linalg.generic {indexing_maps = [#map2, #map1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%c1 : tensor<2x4x2xf32>) outs(%2 : tensor<3x2x4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<3x2x4x2xf32>
    %a = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<3x2x3x4xf32> into tensor<6x3x4xf32>
    %b = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<3x2x4x2xf32> into tensor<6x4x2xf32>
    %4 = tensor.empty() : tensor<6x3x2xf32>
    %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<6x3x2xf32>) -> tensor<6x3x2xf32>
    %6 = linalg.batch_matmul ins(%a, %b : tensor<6x3x4xf32>, tensor<6x4x2xf32>) outs(%5 : tensor<6x3x2xf32>) -> tensor<6x3x2xf32>
    %e = tensor.expand_shape %6 [[0, 1], [2], [3]] output_shape [3, 2, 3, 2] : tensor<6x3x2xf32> into tensor<3x2x3x2xf32>
    return %e : tensor<3x2x3x2xf32>
  }
}
"""


def test_strategy_the_transform_cannot_carry_out_falls_back(device):
    """ONNX test_matmul_bcast: the vector strategy for this batch matmul loses a fused fill while
    canonicalizing (tile-and-map fails); the compile falls back to scalar per-thread tiles and is right."""
    exe = portable.compile(BCAST_BMM, device=device)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 1, 3, 4), dtype=np.float32), rng.standard_normal((1, 2, 4, 2), dtype=np.float32)
    np.testing.assert_allclose(exe(a, b)[0], np.matmul(a, b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mkn,tile,k_step,thread_tile", [((64, 96, 128), (32, 64), 32, (8, 4)),
                                                          ((128, 64, 64), (64, 64), 16, (4, 4)),
                                                          ((32, 256, 64), (32, 32), 64, (8, 2))])
def test_matmul_promoted_to_workgroup_memory(device, tmp_path, mkn, tile, k_step, thread_tile):
    """Operand tiles staged through workgroup memory (compiler/promotion.py): K steps, copies spread over the
    threads, accumulators carried in registers across steps, next step's loads issued before this step's math."""
    m, k, n = mkn
    g = portable.Graph()
    g.output(g.matmul(g.input((m, k)), g.input((k, n))))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=list(thread_tile),
                                    matmul_promote_tile=list(tile), matmul_promote_k=k_step)
    # One thread per register tile of the workgroup tile: the promoted strategy was taken.
    assert exe.kernels[0].workgroup_size == (tile[1] // thread_tile[1], tile[0] // thread_tile[0], 1)
    assert exe.dispatches[0].grid == (n // tile[1], m // tile[0], 1)
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_promotion_needs_dividing_tiles(device, tmp_path):
    g = portable.Graph()
    g.output(g.matmul(g.input((48, 40)), g.input((40, 72))))  # 64x64 tiles do not divide: register-blocked form
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, matmul_promote_tile=[64, 64],
                                    matmul_promote_k=16)
    assert exe.kernels[0].workgroup_size != (16, 8, 1)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 72)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


def test_reductions_past_lavapipes_loop_limit(device):
    """lavapipe (Mesa 22.3) ends an invocation after 65535 loop iterations: a row sum of 70000 and a matmul with
    K = 70000 are split over a workgroup's threads there (max_loop_iterations), and right everywhere."""
    g = portable.Graph()
    x, a, b = g.input((2, 70000)), g.input((3, 70000)), g.input((70000, 5))
    g.output(g.sum(x, axis=-1), g.matmul(a, b))
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((2, 70000), (3, 70000), (70000, 5))]
    outs = portable.run(g, *xs, device=device)
    for out, ref in zip(outs, g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-3, atol=2e-2)
