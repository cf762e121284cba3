"""Code-generation strategies that the CPU drivers' own profiles do not pick, forced on and run here, so every
strategy a GPU profile may choose is checked on the devices CI has."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import compile_and_load as _compile_and_load
from conftest import depthwise_mlir

import portable
from portable import profiles
from portable.codegen_spirv import disassemble
from portable.compiler.pipeline import compile_module
from portable.devices import open_device


def _vector_accesses(src: str, kind: str, n: int) -> int:
    """How many n-lane global loads or stores the OpenCL C makes: vloadN / vstoreN, or through a vector pointer
    where the address is known to be aligned."""
    if kind == "load":
        return len(re.findall(rf"vload(?:_half)?{n}\(|\(__global const [a-z]+{n}\*\)", src))
    return len(re.findall(rf"vstore(?:_half)?{n}(?:_rte)?\(|\*\(__global [a-z]+{n}\*\)", src))


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


# A sum over the rows of x[k, n] into [n], loops (n, k): the reduced loop is innermost but x's rows lie apart
# (split_k's sum over slices has this form).
_STRIDED_SUM = """
#in = affine_map<(n, k) -> (k, n)>
#out = affine_map<(n, k) -> (n)>
func.func @main(%x: tensor<96x40xf32>) -> tensor<40xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<40xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<40xf32>) -> tensor<40xf32>
  %s = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<96x40xf32>) outs(%init : tensor<40xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<40xf32>
  return %s : tensor<40xf32>
}
"""


def test_short_reductions_share_fewer_threads(device, tmp_path):
    """A reduction shorter than two values per thread of `reduction_threads` still takes a workgroup per output
    where the row is contiguous (fewer threads, down to 32: tiles.row_threads); a sum across rows (strided)
    keeps a thread per output, whose neighbours read neighbouring addresses."""
    g = portable.Graph()
    x = g.input((5, 384))
    g.output(g.sum(x, axis=-1))
    exe, loaded = _compile_and_load(g, device, tmp_path, reduction_threads=256)
    assert (64, 1, 1) in [k.workgroup_size for k in exe.kernels]
    xs = np.random.default_rng(5).standard_normal((5, 384)).astype(np.float32)
    np.testing.assert_allclose(loaded(xs)[0], xs.sum(-1), rtol=1e-5, atol=1e-4)
    strided, loaded = _compile_and_load(_STRIDED_SUM, device, tmp_path, reduction_threads=64)
    assert (32, 1, 1) not in [k.workgroup_size for k in strided.kernels]
    xs = np.random.default_rng(6).standard_normal((96, 40)).astype(np.float32)
    np.testing.assert_allclose(loaded(xs)[0], xs.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("tile", [(4, 4), (8, 1), (2, 2)])
def test_matmul_thread_tiles(device, tmp_path, tile):
    g = portable.Graph()
    a, b, bias = g.input((64, 48)), g.input((48, 128)), g.input((128,))
    g.output(g.relu(g.add(g.matmul(a, b), bias)))
    _, loaded = _compile_and_load(g, device, tmp_path, thread_tile=list(tile), workgroup_invocations=32)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((64, 48), (48, 128), (128,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n,epilogue", [(64, 48, 128, True),   # tiles divide: 8x32 per thread, 2 float16
                                             (98, 36, 96, False),   # 98 rows: the dividing tiles, 7x32
                                             (56, 20, 48, True),    # 48 columns: 16 per thread, one float16
                                             (1, 64, 512, False),   # one row: a 1-D vector<32> tile
                                             (30, 10, 40, False)])  # no multiple of 16 divides 40: float4
def test_matmul_rows_wider_than_a_vector(device, tmp_path, m, k, n, epilogue):
    """OpenCL C profiles may hold a thread's matmul row in several float16 vectors (pocl.toml): each row and
    column block of the register tile unrolled, N-D vectors of rows past 16 lanes split into slots."""
    if not device.startswith("opencl"):
        pytest.skip("16-lane vectors are an OpenCL C strategy (SPIR-V has no Vector16 here)")
    g = portable.Graph()
    a, b, bias = g.input((m, k)), g.input((k, n)), g.input((n,))
    y = g.matmul(a, b)
    g.output(g.relu(g.add(y, bias)) if epilogue else y)
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=[8, 32], max_vector_width=16,
                                    matmul_promote_tile=None)
    if n % 16 == 0:
        assert "float16" in exe.kernels[-1].opencl
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (n,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,h,w,c,stride,relu", [(1, 16, 16, 32, 1, False), (2, 9, 13, 24, 1, True),
                                                 (1, 11, 10, 48, 2, True), (1, 7, 5, 3, 1, False)])
def test_depthwise_conv_register_taps(device, tmp_path, n, h, w, c, stride, relu):
    """Depthwise convolutions as register tiles over the window taps (conv_vector_taps, pocl.toml): channel
    rows of 32 (two float16) and 4 (24 channels); batch; a fused bias + ReLU epilogue. Stride 2, and odd channel
    counts (vectors would run along the width), keep the scalar loops."""
    if not device.startswith("opencl"):
        pytest.skip("register tiles of 2-D vectors are an OpenCL C strategy (SPIR-V has no 2-D vectors)")
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), vectorize=True, thread_tile=[8, 32],
                max_vector_width=16, conv_vector_taps=True, window_taps=0)  # not unrolled (windows.py): the taps
    exe = compile_module(depthwise_mlir(n, h, w, c, stride, relu), opts, (live.info.api,))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((n, h, w, c)).astype(np.float32)
    wt, b = rng.standard_normal((3, 3, c)).astype(np.float32), rng.standard_normal(c).astype(np.float32)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    oh, ow = (h - 1) // stride + 1, (w - 1) // stride + 1
    ref = sum(xp[:, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride] * wt[i, j]
              for i in range(3) for j in range(3))
    if relu:
        ref = np.maximum(ref + b, 0)
    # The taps strategy (unit strides): vector rows of channels, accumulated through the window loops.
    vector_reads = sum(_vector_accesses(exe.kernels[-1].opencl, "load", n) for n in (2, 4, 8, 16))
    assert bool(vector_reads) == (stride == 1 and c % 2 == 0)
    exe.save(tmp_path / "dw.ptx")
    out = portable.load(tmp_path / "dw.ptx", device=device)(x, wt, b)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,pads,dtype", [((1, 13, 9, 32), ((0, 0), (1, 2), (1, 1), (0, 0)), np.float32),
                                              ((2, 5, 6), ((1, 0), (0, 3), (0, 0)), np.float16),
                                              ((3, 7), ((0, 0), (2, 1)), np.float32),      # padded innermost: gather
                                              ((4, 6), ((1, 1), (0, 0)), np.int32)])       # not marked: scalar
def test_vectorized_pad(device, tmp_path, shape, pads, dtype):
    """Float pads as vector reads along the innermost loop (vectorize_gathers, pocl.toml): unpadded dims read
    unchecked, padded ones clamped and selected; a padded innermost dim becomes a vector.gather."""
    if not device.startswith("opencl"):
        pytest.skip("vectorize_gathers is an OpenCL profile key (its vector.gather lowering is OpenCL C)")
    g = portable.Graph()
    x = g.input(shape, dtype=np.dtype(dtype).name)
    g.output(g.pad(x, pads, value=1.5 if dtype != np.int32 else 3))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, vectorize_gathers=True,
                                    elementwise_per_thread=4)
    if dtype == np.float32 and pads[-1] == (0, 0):
        assert _vector_accesses(exe.kernels[0].opencl, "load", 4)
    xs = (np.random.default_rng(2).standard_normal(shape) * 4).astype(dtype)
    np.testing.assert_array_equal(loaded(xs)[0], g.reference(xs)[0])


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
def test_elementwise_sixteen_lanes(device, tmp_path, dtype):
    """elementwise_per_thread 16 with max_vector_width 16 (pocl.toml): 16-lane C vectors of each element type."""
    if not device.startswith("opencl"):
        pytest.skip("16-lane vectors are an OpenCL C strategy (SPIR-V has no Vector16 here)")
    g = portable.Graph()
    a, b = g.input((8, 256), dtype=dtype), g.input((8, 256), dtype=dtype)
    y = g.maximum(g.add(a, b), g.mul(a, b))
    g.output(g.tanh(y) if dtype.startswith("float") else g.cast(y, "float32"))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, elementwise_per_thread=16,
                                    max_vector_width=16)
    assert _vector_accesses(exe.kernels[0].opencl, "load", 16)
    rng = np.random.default_rng(12)
    xs = [(rng.standard_normal((8, 256)) * 5).astype(dtype) for _ in range(2)]
    tol = 2e-3 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(loaded(*xs)[0].astype(np.float32), g.reference(*xs)[0].astype(np.float32),
                               rtol=tol, atol=tol)


def test_min_workgroups_spreads_a_small_grid(device, tmp_path):
    """CPU drivers run a workgroup per core: a matrix-vector product's grid gets fewer threads per workgroup
    until it has min_workgroups of them."""
    g = portable.Graph()
    g.output(g.matmul(g.input((1, 96)), g.input((96, 512))))
    exe, loaded = _compile_and_load(g, device, tmp_path, min_workgroups=8, reduction_threads=0,
                                    matmul_short_rows_widen=False)
    grid = exe.dispatches[0].grid
    assert grid[0] * grid[1] * grid[2] >= 8
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((1, 96)).astype(np.float32), rng.standard_normal((96, 512)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("m,k,n", [(1, 200, 1024), (3, 40, 96), (2, 17, 50)])
def test_short_rows_widen_columns(device, tmp_path, m, k, n):
    """matmul_short_rows_widen (pocl.toml): fewer rows than the thread tile give the spare accumulators to
    columns (a matrix-vector product: 1x256 per thread, sixteen float16)."""
    if not device.startswith("opencl"):
        pytest.skip("16-lane vectors are an OpenCL C strategy (SPIR-V has no Vector16 here)")
    g = portable.Graph()
    g.output(g.matmul(g.input((m, k)), g.input((k, n))))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=[8, 32], max_vector_width=16,
                                    matmul_short_rows_widen=True, matmul_promote_tile=None)
    if m == 1:
        # The result only: the accumulators start at zero in registers (constant_init.forward_fills).
        assert _vector_accesses(exe.kernels[0].opencl, "store", 16) == 16
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)




@pytest.mark.parametrize("n", [256, 96])
def test_gemv_columns_in_vec4_chunks(device, tmp_path, n):
    """One row: 16 columns per thread as four unrolled vec4 accumulators (root_col_split); 96 columns take the
    plain tiles."""
    g = portable.Graph()
    x, w, b = g.input((1, 96)), g.input((96, n)), g.input((n,))
    g.output(g.relu(g.add(g.matmul(x, w), b)))
    # (a CPU OpenCL profile's min_workgroups would spread the grid, its max_vector_width take one float16)
    exe, loaded = _compile_and_load(g, device, tmp_path, matmul_row_vector_cols=16, matmul_threads_x=8,
                                    matmul_threads_x_slab_bytes=None, min_workgroups=0, max_vector_width=4)
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
    xs = [rng.standard_normal((2, 17, 15, 16)).astype(np.float32),
          rng.standard_normal((3, 3, 16, 32)).astype(np.float32)]
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
    %1 = linalg.generic {indexing_maps = [#map, #map1],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%c0 : tensor<3x3x4xf32>) outs(%0 : tensor<3x2x3x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<3x2x3x4xf32>
    %2 = tensor.empty() : tensor<3x2x4x2xf32>
    %c1 = tensor.collapse_shape %arg1 [[0, 1], [2], [3]] : tensor<1x2x4x2xf32> into tensor<2x4x2xf32>
    %3 = linalg.generic {indexing_maps = [#map2, #map1],
                         iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%c1 : tensor<2x4x2xf32>) outs(%2 : tensor<3x2x4x2xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<3x2x4x2xf32>
    %a = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<3x2x3x4xf32> into tensor<6x3x4xf32>
    %b = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<3x2x4x2xf32> into tensor<6x4x2xf32>
    %4 = tensor.empty() : tensor<6x3x2xf32>
    %5 = linalg.fill ins(%cst : f32) outs(%4 : tensor<6x3x2xf32>) -> tensor<6x3x2xf32>
    %6 = linalg.batch_matmul ins(%a, %b : tensor<6x3x4xf32>, tensor<6x4x2xf32>) outs(%5 : tensor<6x3x2xf32>)
        -> tensor<6x3x2xf32>
    %e = tensor.expand_shape %6 [[0, 1], [2], [3]] output_shape [3, 2, 3, 2]
        : tensor<6x3x2xf32> into tensor<3x2x3x2xf32>
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
    """Operand tiles staged through workgroup memory (compiler/schedule/promotion.py): K steps, copies spread over the
    threads, accumulators carried in registers across steps, next step's loads issued before this step's math."""
    m, k, n = mkn
    g = portable.Graph()
    g.output(g.matmul(g.input((m, k)), g.input((k, n))))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=list(thread_tile),
                                    matmul_promote_tile=list(tile), matmul_promote_k=k_step)
    # One thread per register tile of the workgroup tile: the promoted strategy was taken.
    assert exe.kernels[0].workgroup_size == (tile[1] // thread_tile[1], tile[0] // thread_tile[0], 1)
    assert exe.dispatches[0].grid == (n // tile[1], m // tile[0], 1)
    # The accumulators start at zero in registers: no fill of the output and barrier before the K loop, whose
    # two barriers (tiles written, tiles read) are all that remain (compiler/constant_init.forward_fills).
    kern = exe.kernels[0]
    assert (kern.opencl.count("barrier(") if kern.opencl else disassemble(kern.spirv).count("OpControlBarrier")) == 2
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bmkn", [(3, 64, 48, 96), (2, 32, 64, 32)])
def test_batch_matmul_promoted_to_workgroup_memory(device, tmp_path, bmkn):
    """A batch matmul stages its operand tiles the same way, one workgroup per batch index and tile (grid z)."""
    bsz, m, k, n = bmkn
    g = portable.Graph()
    g.output(g.matmul(g.input((bsz, m, k)), g.input((bsz, k, n))))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=[4, 4],
                                    matmul_promote_tile=[32, 32], matmul_promote_k=16)
    assert exe.kernels[0].workgroup_size == (8, 8, 1)
    assert exe.dispatches[0].grid == (n // 32, m // 32, bsz)
    kern = exe.kernels[0]
    assert (kern.opencl.count("barrier(") if kern.opencl else disassemble(kern.spirv).count("OpControlBarrier")) == 2
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((bsz, m, k)).astype(np.float32), rng.standard_normal((bsz, k, n)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("epilogue", ["bias_relu_residual", "bias_gelu", "scale_batch"])
def test_promoted_matmul_with_epilogue(device, tmp_path, epilogue):
    """A matmul's elementwise epilogue (bias, activation, residual; a batch matmul's scale) keeps the staged form:
    it runs after the K loop on each thread's own register tile, and takes the accumulators as they are (no fill
    of the output, no read back of it: each output vector is stored once)."""
    rng = np.random.default_rng(3)
    g = portable.Graph()
    if epilogue == "scale_batch":
        shapes = [(2, 64, 48), (2, 48, 96)]
        a, b = g.input(shapes[0]), g.input(shapes[1])
        g.output(g.mul(g.matmul(a, b), 0.125))
        rows, grid = 64 * 96 * 2 // 4, (96 // 32, 64 // 32, 2)
    else:
        shapes = [(64, 96), (96, 128), (128,), (64, 128)][:4 if epilogue == "bias_relu_residual" else 3]
        a, b, bias, *res = (g.input(s) for s in shapes)
        y = g.add(g.matmul(a, b), bias)
        g.output(g.add(g.relu(y), res[0]) if res else g.gelu(y))
        rows, grid = 64 * 128 // 4, (128 // 32, 64 // 32, 1)
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=[4, 4],
                                    matmul_promote_tile=[32, 32], matmul_promote_k=16)
    assert len(exe.kernels) == 1
    assert exe.kernels[0].workgroup_size == (8, 8, 1) and exe.dispatches[0].grid == grid
    kern = exe.kernels[0]
    if kern.opencl is not None:
        assert kern.opencl.count("barrier(") == 2
        out = re.search(r"__global float\* restrict (\w+)", kern.opencl).group(1)  # the one written
        stores = len(re.findall(rf"\*\(__global float4\*\)\({out} ", kern.opencl))
        assert stores * 8 * 8 * grid[0] * grid[1] * grid[2] == rows  # one 4-wide store per output vector
    else:
        assert disassemble(kern.spirv).count("OpControlBarrier") == 2
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


def test_register_blocked_epilogue_in_registers(device, tmp_path):
    """Without staging, a matmul's epilogue runs on the thread's register tile a row at a time, vectorized and
    unrolled, on the accumulators themselves: one loop (K) in the kernel, each output vector stored once."""
    g = portable.Graph()
    a, b, bias = g.input((64, 96)), g.input((96, 128)), g.input((128,))
    g.output(g.gelu(g.add(g.matmul(a, b), bias)))
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, thread_tile=[4, 4], matmul_promote_tile=None,
                                    matmul_promote_tiles=[])
    kern = exe.kernels[0]
    if kern.opencl is not None:
        assert kern.opencl.count("for (") == 1
    else:
        assert disassemble(kern.spirv).count("OpLoopMerge") == 1
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((64, 96), (96, 128), (128,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


def test_matmul_promotion_needs_dividing_tiles(device, tmp_path):
    g = portable.Graph()
    g.output(g.matmul(g.input((48, 40)), g.input((40, 72))))  # 64x64 tiles do not divide: register-blocked form
    exe, loaded = _compile_and_load(g, device, tmp_path, vectorize=True, matmul_promote_tile=[64, 64],
                                    matmul_promote_k=16)
    assert exe.kernels[0].workgroup_size != (16, 8, 1)
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((48, 40)).astype(np.float32), rng.standard_normal((40, 72)).astype(np.float32)
    np.testing.assert_allclose(loaded(a, b)[0], a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mnk,expected", [((4096, 4096, 4096), (128, 64, 8, 16)), ((1024, 1024, 1024), (64, 64, 8, 16)),
                                          ((96, 64, 64), None)])
def test_promoted_tile_candidates_keep_the_gpu_busy(mnk, expected):
    """The first candidate that divides the matmul and still gives matmul_promote_min_workgroups workgroups; a
    matmul the tiles do not divide is not promoted."""
    from portable.compiler.strategy.choice import choose
    from portable.ir.linalg_info import OpKind

    profile = {"vectorize": True, "matmul_promote_tiles": [[128, 64, 16, 4], [64, 64, 8, 4]],
               "matmul_promote_min_workgroups": 264, "matmul_promote_k": 32, "shared_memory_bytes": 49152}
    kind = OpKind("matmul", mnk, ("parallel", "parallel", "reduction"), contiguous_b=True)
    s = choose(kind, profile, kind)
    if expected is None:
        assert not s.promote_k
        return
    wm, wn, threads_m, threads_n = expected
    assert s.promote_k == 32 and s.tile[:2] == (wm, wn) and s.threads[:2] == (threads_m, threads_n)


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


def test_elementwise_dividing_tiles(device, tmp_path):
    """elementwise_dividing_tiles (pocl.toml): a transpose-back with a bias and ReLU over 64 x 12544 (a transposed
    stem's epilogue), whose power-of-two tiles of 1024 do not divide 12544, takes 56 threads of 16 lanes: one
    vector store per thread and no loops; without the key, scalar loops."""
    if not device.startswith("opencl"):
        pytest.skip("16-lane vectors are an OpenCL C strategy (SPIR-V has no Vector16 here)")
    g = portable.Graph()
    x, b = g.input((12544, 64)), g.input((64, 1))
    g.output(g.relu(g.add(g.transpose(x, (1, 0)), b)))
    keys = dict(vectorize=True, elementwise_per_thread=16, max_vector_width=16, workgroup_invocations=64)
    exe, loaded = _compile_and_load(g, device, tmp_path, elementwise_dividing_tiles=True, **keys)
    src = exe.kernels[0].opencl
    assert len(exe.kernels) == 1 and _vector_accesses(src, "store", 16) == 1 and "for (" not in src
    assert tuple(exe.kernels[0].workgroup_size)[0] * tuple(exe.dispatches[0].grid)[0] * 16 == 12544
    plain = compile_module(g.to_mlir(), dict(profiles.codegen_options(profiles.match(open_device(device).info),
                                                                      open_device(device).info),
                                             elementwise_dividing_tiles=False, **keys), ("opencl",))
    assert "for (" in plain.kernels[0].opencl
    rng = np.random.default_rng(14)
    xs, bs = rng.standard_normal((12544, 64)).astype(np.float32), rng.standard_normal((64, 1)).astype(np.float32)
    np.testing.assert_array_equal(loaded(xs, bs)[0], np.maximum(xs.T + bs, 0))


@pytest.mark.parametrize("k,n,slab,threads_x", [(147, 12544, 1 << 19, 14), (24, 12544, 1 << 19, 56),
                                                (147, 12544, 0, 14)])
def test_matmul_threads_x_where_b_columns_pass_the_slab(k, n, slab, threads_x):
    """matmul_threads_x_slab_bytes (pocl.toml): a stem's (64, 147) x (147, 12544) walks 147 x 2048 floats of B per
    workgroup (1.2 MB): at most 16 threads along its columns (14, dividing 12544 / 32), the rest along its rows;
    K = 24 walks 196 KB and keeps 56; without the key matmul_threads_x applies to every matmul."""
    from portable.compiler.strategy.choice import choose
    from portable.ir.linalg_info import OpKind

    opts = dict(profiles.codegen_options(profiles.all_profiles()["pocl"]), matmul_threads_x=16,
                matmul_threads_x_slab_bytes=slab or None, thread_tile=(8, 32))
    kind = OpKind("matmul", (64, n, k), ("parallel", "parallel", "reduction"), contiguous_b=True)
    s = choose(kind, opts, kind)
    assert s.root_k_tile and s.threads[1] == threads_x and s.threads[0] == 64 // threads_x


@pytest.mark.parametrize("shape,per", [((1, 96, 112, 112), 8), ((1, 32, 14, 14), 2), ((1, 8, 7, 7), None)])
def test_elementwise_tiles_that_divide(shape, per):
    """lavapipe's elementwise tiles (8 a thread, 128 threads) where powers of two do not divide the rows (an NCHW
    image of 112 or 14 columns): the widest vector that divides, threads that divide the rest, vectorized; rows of
    7 no vector divides: not vectorized."""
    from portable.compiler.strategy.choice import choose
    from portable.ir.linalg_info import OpKind

    lavapipe = profiles.codegen_options(profiles.all_profiles()["lavapipe"])
    kind = OpKind("elementwise", shape, ("parallel",) * 4)
    s = choose(kind, lavapipe, kind)
    assert s.vectorize == (per is not None), s
    if per:
        assert all(r % t == 0 for r, t in zip(shape, s.tile) if t), s
        assert s.tile[-1] // s.threads[-1] == per, s


def test_elementwise_tiles_that_divide_run(device, tmp_path):
    """A squeeze-and-excitation scale over a 1x24x28x28 image (rows of 28) on the device, same answer as numpy."""
    g = portable.Graph()
    x, s = g.input((1, 24, 28, 28)), g.input((1, 24, 1, 1))
    g.output(g.mul(x, g.sigmoid(s)))
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(shape).astype(np.float32) for shape in ((1, 24, 28, 28), (1, 24, 1, 1))]
    _, loaded = _compile_and_load(g.to_mlir(), device, tmp_path)
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-5, atol=1e-5)
