"""NCHW (ONNX) convolutions as implicit GEMM (compiler/graph/conv_gemm.py): im2col gather + matmul, 1x1 stride-1
convolutions as a plain matmul over the input, grouped ones as batched matmuls, depthwise ones direct; their
epilogues (bias, ReLU, residual add) fused into the matmul's kernel. Checked on every device against a numpy
reference, with the kernel counts that show the fusion, plus the direct fallback."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.compiler.pipeline import compile_module
from portable.devices import open_device

onnx = pytest.importorskip("onnx", reason="the models here are built with 'onnx' (pip install 'portable[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from portable.frontend.onnx_import import onnx_to_mlir  # noqa: E402


def conv_ref(x, w, b, stride, pad, dil, group):
    """Grouped 2-D cross-correlation, NCHW x FCHW, in float64."""
    n, c, h, wd = x.shape
    f, cg, kh, kw = w.shape
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, f, oh, ow))
    fg = f // group
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dil, i * dil + stride * (oh - 1) + 1, stride)
                cols = slice(j * dil, j * dil + stride * (ow - 1) + 1, stride)
                patch = xs[:, :, rows, cols]
                out[:, g * fg:(g + 1) * fg] += np.einsum("nchw,fc->nfhw", patch, w[g * fg:(g + 1) * fg, :, i, j])
    if b is not None:
        out += b[None, :, None, None]
    return out


def conv_model(n, c, h, w, f, k, stride=1, pad=0, dil=1, group=1, bias=True, relu=True, residual=False, seed=0):
    """(model, feeds, reference): Conv [+ Relu] [+ Add of a second input]."""
    rng = np.random.default_rng(seed)
    wt = rng.standard_normal((f, c // group, k, k)).astype(np.float32)
    b = rng.standard_normal(f).astype(np.float32) if bias else None
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    ref = conv_ref(x, wt, b, stride, pad, dil, group)
    inits = [numpy_helper.from_array(wt, "w")] + ([numpy_helper.from_array(b, "b")] if bias else [])
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y0"], pads=[pad] * 4,
                              strides=[stride] * 2, dilations=[dil] * 2, group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)]
    feeds = [x]
    last = "y0"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["y1"]))
        last, ref = "y1", np.maximum(ref, 0)
    if residual:
        s = rng.standard_normal(ref.shape).astype(np.float32)
        inputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, s.shape))
        nodes.append(helper.make_node("Add", [last, "s"], ["y2"]))
        last, ref = "y2", ref + s
        feeds.append(s)
    outputs = [helper.make_tensor_value_info(last, TensorProto.FLOAT, ref.shape)]
    graph = helper.make_graph(nodes, "conv", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), feeds, ref


def _kernels(exe) -> int:
    """Kernels, a matmul whose rows were peeled (its remainder a kernel of its own, compiler/dispatch/split.py)
    counted once."""
    return len({d.kernel for d in exe.dispatches if not any(d.offsets)})


def _run(model, feeds, device, **overrides):
    """(outputs, kernel count: _kernels) compiled with the device's profile, optionally overridden; Winograd off
    unless asked for (tests/test_winograd.py), so that the forms here are the ones tested."""
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), **{"conv_winograd": False,
                                                                                 **overrides})
    exe = compile_module(onnx_to_mlir(model), opts, (live.info.api,))
    from portable.api import CompiledGraph

    cg = CompiledGraph(exe, live, 1)
    try:
        return cg(*feeds), _kernels(exe)
    finally:
        cg.close()


def _check(out, ref, tol=1e-4):
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


# (n, c, h, w, f, k, stride, pad, dil, group, bias): kernels with the implicit GEMM (gather + matmul, or the
# matmul alone for 1x1 stride 1).
CASES = {
    "3x3_pad1": ((1, 8, 10, 10, 16, 3, 1, 1, 1, 1, True), 2),
    "3x3_stride2_odd": ((1, 5, 13, 11, 7, 3, 2, 1, 1, 1, True), 2),
    "3x3_dilated_batch2": ((2, 6, 12, 12, 10, 3, 1, 2, 2, 1, True), 2),
    "5x5_valid_nobias": ((1, 3, 9, 9, 4, 5, 1, 0, 1, 1, False), 2),
    "7x7_stride2_stem": ((1, 3, 32, 32, 8, 7, 2, 3, 1, 1, True), 2),
    "1x1": ((1, 16, 7, 7, 24, 1, 1, 0, 1, 1, True), 1),
    "1x1_batch2": ((2, 16, 5, 9, 8, 1, 1, 0, 1, 1, False), 1),
    "1x1_stride2": ((1, 8, 9, 9, 16, 1, 2, 0, 1, 1, True), 2),
    "grouped": ((1, 8, 10, 10, 16, 3, 1, 1, 1, 2, True), 2),
    "grouped_batch2": ((2, 12, 7, 7, 6, 3, 1, 1, 1, 3, True), 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_nchw_conv_implicit_gemm(device, case):
    (n, c, h, w, f, k, s, p, d, g, b), kernels = CASES[case]
    model, feeds, ref = conv_model(n, c, h, w, f, k, s, p, d, g, b, relu=True)
    (out,), count = _run(model, feeds, device, conv_pixel_multiple=0)  # the plain form (transposed: below)
    _check(out, ref)
    assert count == kernels, f"{case}: {count} kernels, want {kernels} (the bias and ReLU fused into the matmul)"


def _conv_matmuls(model, pixel_multiple: int, k_multiple: int = 0,
                  batch_rows: bool = False) -> list[tuple[list[int], list[int]]]:
    """The (A shape, B shape) of each matmul that convs_to_matmul makes of `model`'s convolutions."""
    from portable.compiler.graph import conv_gemm
    from portable.compiler.pipeline import PREPROCESS, public_func
    from portable.ir import weights
    from portable.ir.mlir import ir, passmanager

    with ir.Context(), ir.Location.unknown():
        module = weights.parse(onnx_to_mlir(model))
        passmanager.PassManager.parse(PREPROCESS).run(module.operation)
        fn = public_func(module)
        conv_gemm.convs_to_matmul(fn, 1 << 30, pixel_multiple, k_multiple, batch_rows=batch_rows)
        return [(list(ir.RankedTensorType(op.operands[0].type).shape),
                 list(ir.RankedTensorType(op.operands[1].type).shape))
                for op in fn.regions[0].blocks[0].operations if op.name == "linalg.matmul"]


@pytest.mark.parametrize("case", ["3x3_dilated_batch2", "1x1_batch2"])
def test_batch_as_rows_of_one_matmul(device, case):
    """conv_batch_rows: both images' pixels are the rows of one (N*OH*OW, C*KH*KW) x (C*KH*KW, F) matmul, not a
    batch of per-image products; the result is transposed back to NCHW (bias and ReLU after it)."""
    (n, c, h, w, f, k, s, p, d, g, b), _ = CASES[case]
    model, feeds, ref = conv_model(n, c, h, w, f, k, s, p, d, g, b, relu=True)
    oh, ow = (h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1
    assert _conv_matmuls(model, 0, batch_rows=True) == [([n * oh * ow, c * k * k], [c * k * k, f])]
    assert _conv_matmuls(model, 0) != [([n * oh * ow, c * k * k], [c * k * k, f])]
    (out,), _ = _run(model, feeds, device, conv_pixel_multiple=0, conv_batch_rows=True)
    _check(out, ref)


def test_batch_of_large_images_keeps_per_image_products():
    """24x24 = 576 output pixels per image (from conv_gemm.BATCH_ROWS_PIXELS on): transposing such outputs back to
    NCHW costs what one product over the batch saves, so each image keeps its own (F, C) x (C, 576) product."""
    model, _, _ = conv_model(2, 8, 24, 24, 16, 1, 1, 0, 1, 1, False)
    assert _conv_matmuls(model, 0, batch_rows=True) == []  # the batched generic: no linalg.matmul


@pytest.mark.parametrize("hw,k,transposed", [(7, 3, True), (7, 1, True), (14, 3, True), (14, 1, False), (8, 3, False),
                                             (4, 1, False), (1, 1, False), (3, 3, False)])
def test_ragged_pixels_multiply_transposed(hw, k, transposed):
    """conv_pixel_multiple 16: OH*OW = 49 or 196 (a ragged vector count) multiplies (OH*OW, K) x (K, F), the filter
    transposed at compile time; 64 and 16 pixels keep (F, K) x (K, OH*OW), and so does a 1x1 convolution over 196
    pixels (4-wide vectors fit; the transposed form would copy its input), and so do fewer pixels than the multiple
    (squeeze-and-excitation's one-pixel 1x1 convolutions); without the key, every shape does."""
    model, _, _ = conv_model(1, 8, hw, hw, 32, k, pad=k // 2)
    p, kk = hw * hw, 8 * k * k
    want = [([p, kk], [kk, 32])] if transposed else [([32, kk], [kk, p])]
    assert _conv_matmuls(model, 16) == want
    assert _conv_matmuls(model, 0) == [([32, kk], [kk, p])]


@pytest.mark.parametrize("c,k,stride,padded", [(3, 7, 2, 148), (3, 3, 2, 28), (4, 3, 1, 0), (3, 1, 2, 4)])
def test_reduction_padded_to_the_k_multiple(c, k, stride, padded):
    """conv_k_multiple 4: a stem's C*KH*KW (147, 27; a strided 1x1 over 3 channels: 3) becomes the next multiple of
    4 on both matmul operands; 36 stays; without the key nothing is padded."""
    model, _, _ = conv_model(1, c, 16, 16, 8, k, stride=stride, pad=k // 2)
    o = -(-16 // stride)
    kk = c * k * k
    assert _conv_matmuls(model, 0, 4) == [([8, padded or kk], [padded or kk, o * o])]
    assert _conv_matmuls(model, 0, 0) == [([8, kk], [kk, o * o])]


@pytest.mark.parametrize("c,k,stride", [(3, 7, 2), (3, 3, 1), (5, 3, 2)])
def test_padded_reduction_values(device, c, k, stride):
    """The padded form with bias and ReLU against the reference: zero patch rows past C*KH*KW, zero weights."""
    model, feeds, ref = conv_model(1, c, 17, 15, 8, k, stride=stride, pad=k // 2)
    (out,), count = _run(model, feeds, device, conv_k_multiple=4, conv_pixel_multiple=0)
    _check(out, ref)
    assert count == 2


@pytest.mark.parametrize("k,stride,residual", [(3, 1, True), (1, 1, False), (3, 2, False), (1, 2, True)])
def test_transposed_form_values(device, k, stride, residual):
    """The transposed form, with bias, ReLU and a residual add, against the reference: the patch gather, the matmul
    and the transpose back with the epilogue."""
    model, feeds, ref = conv_model(1, 16, 7 * stride, 7 * stride, 24, k, stride=stride, pad=k // 2, residual=residual)
    (out,), count = _run(model, feeds, device, conv_pixel_multiple=16)
    _check(out, ref)
    assert count == 3


@pytest.mark.parametrize("f,padded", [(250, 256), (1000, 1008), (24, 24), (40, 40)])
def test_transposed_filters_padded_to_the_multiple(f, padded):
    """conv_pixel_multiple 16: in the transposed form a filter count it does not divide is padded with zero filters
    where that adds at most 1/16 of the work (250 -> 256, SqueezeNet's 1000 -> 1008); 24 and 40 stay."""
    model, _, _ = conv_model(1, 8, 7, 7, f, 3, pad=1)
    assert _conv_matmuls(model, 16) == [([49, 72], [72, padded])]


def test_transposed_padded_filters_values(device):
    """The padded transposed form with bias, ReLU and a residual add: the padded columns are left out by a slice
    before the transpose back (one kernel more)."""
    model, feeds, ref = conv_model(1, 16, 7, 7, 250, 3, pad=1, residual=True)
    (out,), count = _run(model, feeds, device, conv_pixel_multiple=16)
    _check(out, ref)
    assert count == 4


def test_residual_epilogue_fused(device):
    """Conv + bias + ReLU + residual add: the gather and one matmul kernel with the whole epilogue."""
    model, feeds, ref = conv_model(1, 8, 9, 9, 8, 3, pad=1, residual=True)
    (out,), count = _run(model, feeds, device, conv_pixel_multiple=0)
    _check(out, ref)
    assert count == 2


def test_relu_between_convs_fuses_into_first(device):
    """Conv -> ReLU -> 1x1 Conv: elementwise fusion puts the ReLU into the second conv's body; it is split back
    out and becomes the first matmul's epilogue (a ReLU dropped here once gave wrong answers silently)."""
    rng = np.random.default_rng(3)
    w1, w2 = rng.standard_normal((8, 4, 3, 3)).astype(np.float32), rng.standard_normal((12, 8, 1, 1)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    x = rng.standard_normal((1, 4, 6, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1] * 4), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 12, 6, 6))],
                              [numpy_helper.from_array(v, k) for k, v in (("w1", w1), ("b1", b1), ("w2", w2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ref = conv_ref(np.maximum(conv_ref(x, w1, b1, 1, 1, 1, 1), 0), w2, None, 1, 0, 1, 1)
    (out,), count = _run(model, [x], device, conv_pixel_multiple=0)
    _check(out, ref)
    assert count == 3  # gather, matmul + bias + ReLU, 1x1 matmul


def test_depthwise_stays_direct(device):
    model, feeds, ref = conv_model(2, 8, 11, 11, 8, 3, stride=2, pad=1, group=8)
    (out,), count = _run(model, feeds, device)
    _check(out, ref)
    assert count == 2  # the pad and the direct convolution with its epilogue


@pytest.mark.parametrize("k,hw", [(5, 28), (3, 12), (3, 14), (5, 7)])
def test_nchw_depthwise_register_taps(device, k, hw):
    """An NCHW depthwise convolution at unit stride reads its input along the output's columns (shifted by the
    column tap): with the profile's conv_vector_taps its thread tiles are vectors of columns carried in registers
    across the taps (on Vulkan the taps unrolled, the 2-d tile held as rows), and the answer is the direct one.
    Rows that no vector of 4 or 2 divides (7) are taken whole on Vulkan (conv_row_columns): a vec4 and a vec3."""
    from portable.codegen_spirv import disassemble
    from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
    from portable.compiler.strategy.choice import for_targets
    from portable.ir import weights
    from portable.ir.mlir import ir

    model, feeds, ref = conv_model(1, 24, hw, hw, 24, k, pad=k // 2, group=24)
    live = open_device(device)
    api = live.info.api
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), conv_vector_taps=True, vectorize=True,
                conv_row_columns=8)
    with ir.Context(), ir.Location.unknown():
        c = Compilation(weights.parse(onnx_to_mlir(model)), for_targets(profiles.Options.of(opts), (api,)), (api,),
                        Dumper("0" * 16))
        run_stages(c, STAGES[:[st.name for st in STAGES].index("tile-and-map") + 1])
        taps = [st for st in c.strategies if st.root_taps and st.vectorize]
        if hw == 7 and api == "opencl":
            assert not taps, c.strategies  # no 7-wide OpenCL C vector: the scalar taps
        else:
            assert taps and all(st.unroll_taps == (api == "vulkan") for st in taps), c.strategies
    if api == "vulkan":
        exe = compile_module(onnx_to_mlir(model), opts, (api,))
        spirv = disassemble(exe.kernels[exe.dispatches[-1].kernel].spirv)
        assert "OpLoopMerge" not in spirv  # the taps unrolled: straight-line code
        assert ("%v3float" in spirv) == (hw == 7)
    (out,), _ = _run(model, feeds, device, conv_vector_taps=True, vectorize=True, conv_row_columns=8)
    _check(out, ref)


@pytest.mark.parametrize("fill", [0, 4096])
def test_depthwise_tiles_shrink_to_fill_the_device(device, fill):
    """A late depthwise layer at batch 1 (7x7, 32 channels): 8x4 outputs per thread leave 64 threads; under
    `fill_threads` each thread takes fewer (one each, 1568 outputs being under 4096), same answer."""
    model, feeds, ref = conv_model(1, 32, 7, 7, 32, 3, pad=1, group=32)
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), thread_tile=[8, 4], fill_threads=fill,
                conv_vector_taps=False)  # the scalar taps path, whose tiles this is about
    exe = compile_module(onnx_to_mlir(model), opts, (live.info.api,))
    conv = exe.dispatches[-1]
    threads = int(np.prod(conv.grid)) * int(np.prod(exe.kernels[conv.kernel].workgroup_size))
    assert threads >= 1568 if fill else threads < 1568 // 8
    (out,), _ = _run(model, feeds, device, thread_tile=[8, 4], fill_threads=fill, conv_vector_taps=False)
    _check(out, ref)


@pytest.mark.parametrize("k,hw,stride", [(3, 12, 2), (5, 15, 2), (3, 13, 3)])
def test_strided_depthwise_as_stride_phases(device, k, hw, stride):
    """A strided NCHW depthwise convolution, where the profile asks for it (conv_stride_phases, with
    conv_vector_taps), becomes a unit-stride one over its input's stride phases (graph/stride_phases.py), which the
    register taps strategy takes; the pad is read in place by the phase gather. Same answer as the direct one."""
    from portable.compiler.graph.stride_phases import ATTR
    from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
    from portable.compiler.strategy.choice import for_targets
    from portable.ir import weights
    from portable.ir.mlir import ir

    model, feeds, ref = conv_model(1, 16, hw, hw, 16, k, stride=stride, pad=k // 2, group=16)
    live = open_device(device)
    api = live.info.api
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), conv_vector_taps=True, vectorize=True,
                conv_stride_phases=True, conv_row_columns=8 if api == "vulkan" else 0)
    with ir.Context(), ir.Location.unknown():
        c = Compilation(weights.parse(onnx_to_mlir(model)), for_targets(profiles.Options.of(opts), (api,)), (api,),
                        Dumper("0" * 16))
        run_stages(c, STAGES[:[st.name for st in STAGES].index("dispatch") + 1])
        assert ATTR in str(c.module)
        assert any(st.root_taps and st.vectorize for st in c.strategies) or api == "opencl", c.strategies
    (out,), kernels = _run(model, feeds, device, **{k: v for k, v in opts.items() if k.startswith(("conv_", "vec"))})
    _check(out, ref)
    assert kernels == 2  # the phase gather (the pad inlined) and the convolution


@pytest.mark.parametrize("cols", [0, 16])
def test_one_pixel_conv_as_row_vector(device, cols):
    """A 1x1 convolution over one pixel (squeeze-and-excitation): where the profile's matrix-vector products take
    vector columns (matmul_row_vector_cols) it multiplies x (1, C) by the filters transposed at compile time, (C, F),
    with no copy; else (F, C) times (C, 1). Same answer either way."""
    from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
    from portable.ir import weights
    from portable.ir.mlir import ir

    model, feeds, ref = conv_model(1, 48, 1, 1, 24, 1)
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), matmul_row_vector_cols=cols)
    with ir.Context(), ir.Location.unknown():
        c = Compilation(weights.parse(onnx_to_mlir(model)), profiles.Options.of(opts), (live.info.api,),
                        Dumper("0" * 16))
        run_stages(c, STAGES[:[st.name for st in STAGES].index("conv-gemm") + 1])
        text = str(c.module)
    assert ("tensor<1x48xf32>, tensor<48x24xf32>" in text) == bool(cols), text
    (out,), kernels = _run(model, feeds, device, matmul_row_vector_cols=cols)
    _check(out, ref)
    assert kernels == 1


@pytest.mark.parametrize("limit", [0, 1024])
def test_direct_fallback(device, limit):
    """No im2col on the profile (0), or a patch matrix over its limit: the direct convolution, same answer; a
    1x1 stride-1 convolution needs no patch matrix and stays a matmul under any nonzero limit."""
    model, feeds, ref = conv_model(1, 8, 10, 10, 16, 3, pad=1)
    (out,), count = _run(model, feeds, device, im2col_max_bytes=limit, conv_pixel_multiple=0)
    _check(out, ref)
    assert count == 2  # pad + direct conv
    model, feeds, ref = conv_model(1, 16, 6, 6, 8, 1)
    (out,), count = _run(model, feeds, device, im2col_max_bytes=limit, conv_pixel_multiple=0)
    _check(out, ref)
    assert count == 1


def test_nchw_conv_f16(device):
    """f16 NCHW convolution (Graph builder) on the im2col path, f16 accumulation: tolerance grows with K."""
    g = portable.Graph()
    x, w, b = g.input((1, 8, 9, 9), "float16"), g.input((16, 8, 3, 3), "float16"), g.input((16,), "float16")
    g.output(g.relu(g.conv2d(x, w, b, stride=1, padding=1, layout="NCHW")))
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal(s).astype(np.float16) for s in ((1, 8, 9, 9), (16, 8, 3, 3), (16,))]
    (out,) = portable.run(g, *xs, device=device)
    ref = np.maximum(conv_ref(*[a.astype(np.float32) for a in xs], 1, 1, 1, 1), 0)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=0.02 * 72 ** 0.5)


@pytest.mark.parametrize("shape,k,stride,pad", [((1, 14, 14, 32), 1, 1, 0), ((2, 7, 5, 12), 1, 1, 0),
                                                ((1, 8, 8, 16), 1, 2, 0), ((1, 6, 6, 8), 1, 1, 1),
                                                ((1, 9, 9, 8), 3, 1, 1)])
def test_nhwc_1x1_as_view(device, shape, k, stride, pad):
    """NHWC (Graph) convolutions: a 1x1 stride-1 unpadded one multiplies its input viewed as (N*H*W, C), one
    kernel; strided, padded and 3x3 ones keep their gather kernel."""
    n, h, w, c = shape
    f = 24
    g = portable.Graph()
    g.output(g.conv2d(g.input(shape), g.input((k, k, c, f)), stride=stride, padding=pad, layout="NHWC"))
    rng = np.random.default_rng(4)
    x, wt = rng.standard_normal(shape).astype(np.float32), rng.standard_normal((k, k, c, f)).astype(np.float32)
    live = open_device(device)
    opts = profiles.codegen_options(profiles.match(live.info), live.info)
    exe = compile_module(g.to_mlir(), opts, (live.info.api,))
    out, = portable.api.CompiledGraph(exe, live)(x, wt)
    ref = conv_ref(x.transpose(0, 3, 1, 2), wt.transpose(3, 2, 0, 1), None, stride, pad, 1, 1).transpose(0, 2, 3, 1)
    _check(out, ref)
    plain = (k, stride, pad) == (1, 1, 0)
    if opts.get("im2col_max_bytes"):
        assert _kernels(exe) == (1 if plain else 2)


def test_conv3d_long_reduction(device):
    """A direct 3-d convolution whose reduction is long (256 channels x 3x3x3 taps): a thread's tile shrinks until
    its loops stay within the driver's per-invocation limit (lavapipe's 65535 iterations), same answer."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 256, 2, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((32, 256, 3, 3, 3)) / 40).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], kernel_shape=[3, 3, 3], pads=[1] * 6,
                                            strides=[2, 2, 2])], "conv3d",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 32, 1, 4, 4))],
                          [numpy_helper.from_array(w, "W")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    ref = np.zeros((1, 32, 1, 4, 4))
    for a in range(3):
        for b in range(3):
            for c in range(3):
                patch = xp[:, :, a:a + 1:2, b:b + 7:2, c:c + 7:2]
                ref += np.einsum("nctyx,fc->nftyx", patch, w[:, :, a, b, c])
    (out,), _ = _run(model, [x], device)
    _check(out, ref)
