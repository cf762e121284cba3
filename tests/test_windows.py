"""Small-window reductions unrolled into elementwise ops (compiler/graph/windows.py, profile `window_taps`): forced on
for every device here (the CPU profiles leave it off), against numpy and against the same graph compiled
without it; and the IR it makes."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import depthwise_mlir

from portable import profiles
from portable.api import CompiledGraph
from portable.compiler.graph import windows
from portable.compiler.pipeline import compile_module
from portable.devices import open_device
from portable.ir.linalg_info import iterator_types
from portable.ir.mlir import ir

RNG = np.random.default_rng(11)


def _compile(device: str, text: str, taps: int, **extra) -> CompiledGraph:
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), window_taps=taps, **extra)
    return CompiledGraph(compile_module(text, opts, (live.info.api,)), live)


def _depthwise_ref(x, w, stride):
    n, h, wd, c = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    oh, ow = (h - 1) // stride + 1, (wd - 1) // stride + 1
    return sum(xp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] * w[i, j] for i in range(3)
               for j in range(3))


def _depthwise_case(shape, stride, relu):
    """(MLIR, x, w, b, reference) of a padded 3x3 depthwise convolution, with a bias + ReLU epilogue if `relu`."""
    n, hw, c = shape
    text = depthwise_mlir(n, hw, hw, c, stride=stride, relu=relu)
    x = RNG.standard_normal((n, hw, hw, c)).astype(np.float32)
    w = RNG.standard_normal((3, 3, c)).astype(np.float32)
    b = RNG.standard_normal(c).astype(np.float32)
    ref = _depthwise_ref(x, w, stride)
    if relu:  # the bias argument is read by the epilogue only
        ref = np.maximum(ref + b, 0)
    return text, x, w, b, ref


@pytest.mark.parametrize("shape, stride, relu", [((1, 20, 32), 1, False), ((2, 9, 5), 2, True),
                                                 ((1, 7, 12), 1, True)])
def test_depthwise_conv_is_one_kernel_that_reads_the_input_in_place(device, shape, stride, relu):
    text, x, w, b, ref = _depthwise_case(shape, stride, relu)
    unrolled, taps = _compile(device, text, 27), _compile(device, text, 0)
    assert len(unrolled.executable.kernels) == 1 < len(taps.executable.kernels)  # the pad was a kernel of its own
    out = unrolled(x, w, b)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    # The taps are summed in the reduction's own order, from the fill's zero: the same float operations.
    np.testing.assert_array_equal(out, taps(x, w, b)[0])


MAX_POOL = """module {
  func.func @main(%x: tensor<2x11x11x6xf32>) -> tensor<2x6x6x6xf32> {
    %ninf = arith.constant 0xFF800000 : f32
    %xp = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %ninf : f32
    } : tensor<2x11x11x6xf32> to tensor<2x13x13x6xf32>
    %k = tensor.empty() : tensor<3x3xf32>
    %e = tensor.empty() : tensor<2x6x6x6xf32>
    %acc = linalg.fill ins(%ninf : f32) outs(%e : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
    %r = linalg.pooling_nhwc_max {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
      ins(%xp, %k : tensor<2x13x13x6xf32>, tensor<3x3xf32>) outs(%acc : tensor<2x6x6x6xf32>) -> tensor<2x6x6x6xf32>
    return %r : tensor<2x6x6x6xf32>
  }
}"""


@pytest.mark.parametrize("rows", [0, 3])
def test_max_pool_with_stride_two(device, rows):
    """rows: outputs along the width per thread, vectorized over channels (window_outputs_per_thread; 0: off)."""
    x = RNG.standard_normal((2, 11, 11, 6)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    ref = np.max([xp[:, i:i + 12:2, j:j + 12:2, :] for i in range(3) for j in range(3)], axis=0)
    extra = dict(vectorize=True, vectorize_gathers=True, window_outputs_per_thread=rows, elementwise_per_thread=2) \
        if rows else {}
    g = _compile(device, MAX_POOL, 27, **extra)
    assert len(g.executable.kernels) == 1
    np.testing.assert_array_equal(g(x)[0], ref)


def _generics(text: str, taps: int) -> list[list[str]]:
    """Iterator types of the top-level generics after the rewrite (on generalized linalg)."""
    from portable.ir.mlir import passmanager

    with ir.Context():
        module = ir.Module.parse(text)
        passmanager.PassManager.parse("builtin.module(func.func(linalg-generalize-named-ops))").run(module.operation)
        fn = module.body.operations[0]
        windows.unroll_small_windows(fn, taps)
        return [iterator_types(op.operation) for op in fn.regions[0].blocks[0].operations
                if op.operation.name == "linalg.generic"]


CONV_OVER_CHANNELS = """module {
  func.func @main(%x: tensor<1x10x10x8xf32>, %w: tensor<3x3x8x4xf32>, %o: tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32> {
    %r = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%x, %w : tensor<1x10x10x8xf32>, tensor<3x3x8x4xf32>) outs(%o : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
    return %r : tensor<1x8x8x4xf32>
  }
}"""


@pytest.mark.parametrize("why, text, taps, reductions_left", [
    ("9 taps unrolled", depthwise_mlir(1, 6, 6, 4, bias=False), 27, 0),
    ("the profile unrolls none", depthwise_mlir(1, 6, 6, 4, bias=False), 0, 1),
    ("fewer taps allowed than the window has", depthwise_mlir(1, 6, 6, 4, bias=False), 8, 1),
    ("3x3x8 = 72 taps: a reduction over channels stays", CONV_OVER_CHANNELS, 27, 1),
])
def test_which_reductions_are_unrolled(why, text, taps, reductions_left):
    its = _generics(text, taps)
    assert sum("reduction" in i for i in its) == reductions_left, why


@pytest.mark.parametrize("shape, stride, relu", [((2, 16, 8), 1, True), ((1, 12, 12), 1, False),
                                                 ((1, 9, 4), 2, True), ((1, 10, 6), 1, False)])
def test_depthwise_conv_with_window_rows_per_thread(device, shape, stride, relu):
    """`window_outputs_per_thread` (nvidia): a thread takes several outputs along the width, one vector of channels
    each, its producers fused in; widths that 4 does not divide take the largest divisor, channels that 4 does not
    divide stay scalar."""
    text, x, w, b, ref = _depthwise_case(shape, stride, relu)
    g = _compile(device, text, 27, vectorize=True, vectorize_gathers=True, window_outputs_per_thread=4,
                 elementwise_per_thread=4)
    assert len(g.executable.kernels) == 1
    np.testing.assert_allclose(g(x, w, b)[0], ref, rtol=1e-5, atol=1e-5)


def _vector_loads(src: str, arg: str) -> int:
    """float4 loads from kernel argument `arg` in OpenCL C (vload4 or an aligned float4 pointer)."""
    return len(re.findall(rf"float4 v\d+ = .*[(]{arg} \+", src))


def _nvidia_kernel(text: str, target: str, **overrides):
    opts = dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]), **overrides)
    exe = compile_module(text, opts, (target,))
    assert len(exe.kernels) == 1
    return exe


@pytest.mark.parametrize("target", ["opencl", "vulkan"])
def test_window_rows_share_their_input_loads(target):
    """nvidia, 3x3 depthwise 8x112x112x32: 4 outputs along the width per thread read 3 rows of 6 input vectors
    (not 4 x 9) and the 9 filter vectors once; on Vulkan as 128-bit loads (the input buffer retyped to vec4)."""
    exe = _nvidia_kernel(depthwise_mlir(8, 112, 112, 32, bias=False), target)
    k = exe.kernels[0]
    assert tuple(k.workgroup_size) == (8, 28, 1) and tuple(exe.dispatches[0].grid) == (8 * 112, 1, 1)
    if target == "opencl":
        assert _vector_loads(k.opencl, "a1") == 18 and _vector_loads(k.opencl, "a2") == 9
    else:
        from portable.codegen_spirv import disassemble

        loads = [ln for ln in disassemble(k.spirv).splitlines() if " OpLoad " in ln]
        assert sum("%v4float" in ln for ln in loads) == 27
        assert not any(ln.split()[3] == "%float" for ln in loads)  # no scalar loads left


def test_window_rows_off_gives_one_output_per_thread():
    exe = _nvidia_kernel(depthwise_mlir(8, 112, 112, 32, bias=False), "opencl", window_outputs_per_thread=1)
    assert _vector_loads(exe.kernels[0].opencl, "a1") == 9 and tuple(exe.dispatches[0].grid) == (3584, 1, 1)


def test_vulkan_vectorizes_only_contiguous_gathers():
    """A pad along channels (the innermost dim) reads each lane checked: a load per lane, which OpenCL C has and
    SPIR-V does not, so the Vulkan compile keeps that gather scalar; OpenCL vectorizes it."""
    text = """module {
  func.func @main(%x: tensor<1x8x8x6xf32>) -> tensor<1x8x8x8xf32> {
    %zero = arith.constant 0.0 : f32
    %p = tensor.pad %x low[0, 0, 0, 1] high[0, 0, 0, 1] {
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : f32
    } : tensor<1x8x8x6xf32> to tensor<1x8x8x8xf32>
    return %p : tensor<1x8x8x8xf32>
  }
}"""
    from portable.codegen_spirv import disassemble

    vk = _nvidia_kernel(text, "vulkan")
    assert "v4float" not in disassemble(vk.kernels[0].spirv)
    cl = _nvidia_kernel(text, "opencl")
    assert "float4" in cl.kernels[0].opencl


def test_pocl_pools_are_one_unrolled_kernel():
    """pocl.toml's window_taps: a 3x3 max pool is one gather kernel with the taps unrolled (no loops, no pad kernel),
    window_outputs_per_thread outputs per thread."""
    opts = profiles.codegen_options(profiles.all_profiles()["pocl"])
    exe = compile_module(MAX_POOL, opts, ("opencl",))
    assert len(exe.kernels) == 1 and "for (" not in exe.kernels[0].opencl
