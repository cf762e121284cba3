"""Matmuls with few outputs split along K into partial sums (compiler/graph/split_k.py), on every device."""

import numpy as np
import pytest
from conftest import compile_and_load, matmul_mlir

import portable


@pytest.mark.parametrize("m,k,n", [(1, 1024, 256), (3, 512, 64), (1, 96, 8)])
def test_gemv_split_along_k_with_residual(device, tmp_path, m, k, n):
    """x @ w + r: partial sums per K slice (one kernel), their sum with the residual (another); K = 96 splits
    into 8 slices of 12 rows (a short K: 8 rows at least, up to 32 slices)."""
    g = portable.Graph("gemv")
    x, w, r = g.input((m, k)), g.input((k, n)), g.input((m, n))
    g.output(g.add(g.matmul(x, w), r))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    assert len(exe.dispatches) == 2  # partial sums, then their reduction with the epilogue fused
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n))]
    np.testing.assert_allclose(loaded(*xs)[0], xs[0] @ xs[1] + xs[2], rtol=1e-4, atol=1e-4)


def test_gemv_f16_weights_accumulate_in_f32(device, tmp_path):
    """f16 operands, f32 accumulation and result (MLIR text: the Graph's matmul keeps its operand type)."""
    text = matmul_mlir(1, 512, 128, "f16", "f32")
    exe, loaded = compile_and_load(text, device, tmp_path, fill_threads=4096)
    assert len(exe.dispatches) == 2
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((1, 512)).astype(np.float16), rng.standard_normal((512, 128)).astype(np.float16)
    ref = x.astype(np.float32) @ w.astype(np.float32)
    np.testing.assert_allclose(loaded(x, w)[0], ref, rtol=1e-3, atol=1e-3)


def test_matmul_with_few_outputs_split_along_k(device, tmp_path):
    """24 x 20 outputs at a 2x2 thread tile are 120 threads: K = 512 splits into 16 slices of 32 rows (1920
    threads; slices of 16 would be too short), and the relu epilogue runs on the slices' sum."""
    g = portable.Graph("mm")
    a, b = g.input((24, 512)), g.input((512, 20))
    g.output(g.relu(g.matmul(a, b)))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096, thread_tile=[2, 2])
    assert len(exe.dispatches) == 2
    assert 16 * 24 * 20 * 4 in {exe.slots[s].nbytes for s in exe.dispatches[0].slots}  # the partial sums
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((24, 512)).astype(np.float32), rng.standard_normal((512, 20)).astype(np.float32)
    np.testing.assert_allclose(loaded(x, w)[0], np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)


def test_batch1_conv_split_along_k_keeps_bias_relu_and_residual(device, tmp_path):
    """A late CNN layer at batch 1 (NCHW, 3x3 over 32 channels of 5x5): im2col, partial sums, and their sum
    with bias, residual and relu fused."""
    g = portable.Graph("conv")
    x, w, bias, res = g.input((1, 32, 5, 5)), g.input((16, 32, 3, 3)), g.input((16,)), g.input((1, 16, 5, 5))
    g.output(g.relu(g.add(g.conv2d(x, w, bias, padding=1, layout="NCHW"), res)))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096, thread_tile=[2, 2])
    (tmp_path / "plain").mkdir()
    plain, _ = compile_and_load(g.to_mlir(), device, tmp_path / "plain", fill_threads=0, thread_tile=[2, 2])
    assert len(exe.dispatches) == len(plain.dispatches) + 1
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 32, 5, 5), (16, 32, 3, 3), (16,), (1, 16, 5, 5))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


def test_pooled_classifier_head_split_along_k(device, tmp_path):
    """Global average pool, flatten, matmul + bias (a CNN's head): the reshape and the mean's division fuse into
    the matrix-vector product, leaving unit loops in it; it still splits."""
    g = portable.Graph("head")
    x, w, b = g.input((1, 64, 3, 3)), g.input((64, 40)), g.input((40,))
    g.output(g.add(g.matmul(g.reshape(g.mean(x, axis=(2, 3), keepdims=True), (1, 64)), w), b))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    assert 8 * 40 * 4 in {exe.slots[s].nbytes for d in exe.dispatches for s in d.slots}  # 8 slices of 8 rows
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 64, 3, 3), (64, 40), (40,))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fill", [0, 4096])
def test_decode_head_with_fused_norm_split_along_k(device, tmp_path, fill):
    """RMSNorm then the vocabulary projection (a decoder's last step): the norm's row scale and weight fuse into
    the matrix-vector product as two more inputs. Split, the norm becomes a kernel of its own over the row and
    the product a plain one over it; same logits either way."""
    g = portable.Graph("head")
    x, gamma, w = g.input((1, 96)), g.input((96,)), g.input((96, 64))
    scale = g.rsqrt(g.add(g.mean(g.mul(x, x), axis=-1, keepdims=True), 1e-5))
    g.output(g.matmul(g.mul(g.mul(x, scale), gamma), w))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=fill)
    partials = 8 * 64 * 4  # 8 slices of 12 rows
    assert (partials in {exe.slots[s].nbytes for d in exe.dispatches for s in d.slots}) == bool(fill)
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 96), (96,), (96, 64))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fill", [0, 4096])
def test_attention_values_product_split_along_k(device, tmp_path, fill):
    """A decode step's softmax(scores) @ V over the cache, per head ([6, 1, 256] x [6, 256, 64]): 384 outputs over
    K = 256. The softmax's division, fused into the product, becomes a kernel of its own (with the rest of the
    softmax where the profile makes row chains) and the batched product splits into 32 slices of 8 rows."""
    g = portable.Graph("attention")
    scores, v = g.input((6, 1, 256)), g.input((6, 256, 64))
    g.output(g.matmul(g.softmax(scores, axis=-1), v))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=fill)
    partials = 32 * 6 * 64 * 4
    assert (partials in {exe.slots[s].nbytes for d in exe.dispatches for s in d.slots}) == bool(fill)
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((6, 1, 256), (6, 256, 64))]
    np.testing.assert_allclose(loaded(*xs)[0], g.reference(*xs)[0], rtol=1e-4, atol=1e-5)


def test_attention_values_product_nvidia_kernels():
    """The nvidia profile: the whole softmax as one row chain (its division read back from the product), the
    partial sums, their sum: three kernels, for both targets."""
    from portable import profiles
    from portable.compiler.pipeline import compile_module

    g = portable.Graph("attention")
    g.output(g.matmul(g.softmax(g.input((6, 1, 256)), axis=-1), g.input((6, 256, 64))))
    exe = compile_module(g.to_mlir(), profiles.codegen_options(profiles.all_profiles()["nvidia"]), ("vulkan", "opencl"))
    assert len(exe.dispatches) == 3
    assert exe.kernels[exe.dispatches[0].kernel].workgroup_size == (64, 1, 1)  # a row of 256 per 64 threads


@pytest.mark.parametrize("fill", [0, 4096])
def test_short_k_matmul_takes_smaller_register_tiles_instead(device, tmp_path, fill):
    """Too few outputs but K too short to split (tiles.fill_device): one kernel either way, whose 8x4
    tiles halve under `fill_threads` down to one output per thread for these 16 x 16."""
    from conftest import open_device

    from portable import profiles

    info = open_device(device).info
    if "matmul_thread_tile" in profiles.codegen_options(profiles.match(info), info):
        pytest.skip("this profile's matmuls take its own vector tiles (matmul_thread_tile), which fill_threads "
                    "leaves alone")
    g = portable.Graph("mm")
    g.output(g.matmul(g.input((16, 64)), g.input((64, 16))))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=fill, thread_tile=[8, 4])
    (d,) = exe.dispatches
    threads = int(np.prod(d.grid)) * int(np.prod(exe.kernels[d.kernel].workgroup_size))
    assert threads >= 256 if fill else threads <= 256 // 8
    rng = np.random.default_rng(10)
    x, w = rng.standard_normal((16, 64)).astype(np.float32), rng.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(loaded(x, w)[0], x @ w, rtol=1e-4, atol=1e-4)


def test_no_split_without_the_profile_key_or_with_outputs_enough(device, tmp_path):
    g = portable.Graph("mm")
    g.output(g.matmul(g.input((64, 256)), g.input((256, 64))))  # 64 x 64 outputs at 1 per thread: enough
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096, thread_tile=[1, 1])
    assert len(exe.dispatches) == 1
    g = portable.Graph("mm")
    g.output(g.matmul(g.input((16, 64)), g.input((64, 16))))  # too few outputs, but K too short to pay
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    assert len(exe.dispatches) == 1
    g = portable.Graph("gemv")
    g.output(g.matmul(g.input((1, 256)), g.input((256, 64))))
    exe, _ = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=0)
    assert len(exe.dispatches) == 1


@pytest.mark.parametrize("reduction_threads", [0, 64], ids=["cpu-profile", "gpu-profile"])
def test_swiglu_before_a_matrix_vector_product(device, tmp_path, reduction_threads):
    """(silu(gate) * up) @ w: with a reduction per thread (CPU drivers' profiles) SwiGLU runs once in a kernel of
    its own, not once per output column inside the product (split_k.unfuse_producers); a GPU profile without
    split-K keeps it fused (a workgroup per output shares it). The same values either way."""
    g = portable.Graph("swiglu")
    gate, up, w = g.input((1, 512)), g.input((1, 512)), g.input((512, 96))
    g.output(g.matmul(g.mul(g.mul(gate, g.sigmoid(gate)), up), w))
    exe, loaded = compile_and_load(g, device, tmp_path, reduction_threads=reduction_threads, fill_threads=0)
    assert len(exe.dispatches) == (2 if not reduction_threads else 1)
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 512), (1, 512), (512, 96))]
    a = xs[0] / (1 + np.exp(-xs[0])) * xs[1]
    np.testing.assert_allclose(loaded(*xs)[0], a @ xs[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,n,kernels", [(512, 96, 1), (1024, 1024, 3)], ids=["small-weight", "4MiB-weight"])
def test_swiglu_matrix_vector_product_splits_past_a_weight_size(device, tmp_path, k, n, kernels):
    """On a GPU profile a matrix-vector product with SwiGLU fused and a K long enough for a workgroup per output
    keeps that form while its weight is small; from FUSED_SPLIT_BYTES on (a column-wise read of the weight wastes
    most of each memory sector) SwiGLU gets a kernel of its own and the product splits along K (then the sum of
    the partials)."""
    from portable.compiler.graph.split_k import FUSED_SPLIT_BYTES

    assert (k * n * 4 >= FUSED_SPLIT_BYTES) == (kernels == 3)
    g = portable.Graph("swiglu")
    gate, up, w = g.input((1, k)), g.input((1, k)), g.input((k, n))
    g.output(g.matmul(g.mul(g.mul(gate, g.sigmoid(gate)), up), w))
    exe, loaded = compile_and_load(g, device, tmp_path, reduction_threads=64, fill_threads=4096)
    assert len(exe.dispatches) == kernels
    rng = np.random.default_rng(12)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, k), (1, k), (k, n))]
    a = xs[0] / (1 + np.exp(-xs[0])) * xs[1]
    np.testing.assert_allclose(loaded(*xs)[0], a @ xs[2], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("launch_ops", [None, 200_000_000], ids=["unfused", "fused"])
def test_swiglu_down_projection_keeps_its_producer(device, tmp_path, launch_ops):
    """A decode step's MLP as exported: gate and up projections (one product over joined weights after horizontal
    fusion, read as two column ranges), silu(gate) * up, the down projection and the residual. Split along K, the
    down projection computes silu(gate) * up in its partial sums where the profile's launch_ops says a kernel
    costs more than computing it once per 4-wide column (GPUs): four kernels, five with it a kernel of its own."""
    onnx = pytest.importorskip("onnx", reason="the MLP is built with 'onnx'")
    from onnx import TensorProto, helper

    from portable.frontend.onnx_import import onnx_to_mlir

    h, f, n = 64, 96, 64
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"]), helper.make_node("MatMul", ["x", "wu"], ["u"]),
             helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["a"]), helper.make_node("MatMul", ["a", "wd"], ["d"]),
             helper.make_node("Add", ["d", "r"], ["y"])]
    rng = np.random.default_rng(21)
    wg, wu, wd = (rng.standard_normal(s).astype(np.float32) for s in ((h, f), (h, f), (f, n)))
    f32 = TensorProto.FLOAT
    ins = [helper.make_tensor_value_info(name, f32, shape) for name, shape in (("x", [1, h]), ("r", [1, n]))]
    inits = [onnx.numpy_helper.from_array(w, name) for w, name in ((wg, "wg"), (wu, "wu"), (wd, "wd"))]
    model = helper.make_model(
        helper.make_graph(nodes, "mlp", ins, [helper.make_tensor_value_info("y", f32, [1, n])], initializer=inits),
        opset_imports=[helper.make_opsetid("", 17)])
    exe, loaded = compile_and_load(onnx_to_mlir(model), device, tmp_path, reduction_threads=64, fill_threads=4096,
                                   launch_ops=launch_ops)
    assert len(exe.dispatches) == (4 if launch_ops else 5)
    x, r = rng.standard_normal((1, h)).astype(np.float32), rng.standard_normal((1, n)).astype(np.float32)
    g, u = x @ wg, x @ wu
    np.testing.assert_allclose(loaded(x, r)[0], (g / (1 + np.exp(-g)) * u) @ wd + r, rtol=1e-4, atol=1e-4)
