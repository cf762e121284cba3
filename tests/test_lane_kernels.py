"""Rewrites of lowered kernels for CPU Vulkan drivers (codegen_spirv/lanes/lane_kernels.py; lavapipe's profile turns
them on): each forced on and off on every Vulkan device, against numpy, and seen in the SPIR-V."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import depthwise_mlir

import portable
from portable import profiles
from portable.api import CompiledGraph
from portable.codegen_spirv import disassemble, validate
from portable.compiler.pipeline import compile_module
from portable.devices import open_device

RNG = np.random.default_rng(5)
OFF = dict(wide_buffers=False, loop_vectorize=0, subgroup_shared_reads=0,
           elementwise_per_thread=4, gelu_as_sigmoid=False, recompute_private_rows=False,
           subgroup_rows=0, elementwise_rows_per_thread=1)


def _compile(device: str, text: str, **overrides):
    live = open_device(device)
    if live.info.api != "vulkan":
        pytest.skip("the rewrites run on the Vulkan path only")
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), **OFF)
    opts.update(overrides)
    exe = compile_module(text, opts, ("vulkan",))
    spirv = ""
    for k in exe.kernels:
        validate(k.spirv)
        spirv += disassemble(k.spirv)
    return CompiledGraph(exe, live), spirv


def _private_row(spirv: str, cols: int) -> bool:
    """Whether the SPIR-V has a Function-storage variable holding an array of `cols` floats."""
    structs = re.findall(rf"(%_struct_\d+) = OpTypeStruct %_arr_float_uint_{cols}\n", spirv)
    return any(re.search(rf"OpTypePointer Function {s}\n", spirv) for s in structs)


def test_wide_buffers(device):
    g = portable.Graph()
    a, b, c = g.input((100, 64)), g.input((64,)), g.input((7, 5))
    g.output(g.relu(g.add(a, b)), g.mul(c, c))  # 5 columns: not 4-aligned, stays f32
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((100, 64), (64,), (7, 5))]
    exe, spirv = _compile(device, g.to_mlir(), wide_buffers=True)
    assert "%v2ulong" in spirv
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("f16_math", [True, False])
def test_wide_buffers_of_f16(device, f16_math):
    """f16 buffers read 4 at a time are arrays of i64 where the kernel computes in f16 (an f16 matmul's operands
    were loaded one half per lane and component on llvmpipe); where f16 is storage only they stay halves, which
    codegen_spirv/f16_storage.py converts one by one."""
    g = portable.Graph()
    g.output(g.matmul(g.input((64, 96), "float16"), g.input((96, 32), "float16")))
    xs = [RNG.standard_normal(s).astype(np.float16) for s in ((64, 96), (96, 32))]
    caps = ["Shader", "Int64", "GroupNonUniform", "GroupNonUniformShuffle", "StorageBuffer16BitAccess"] + \
        (["Float16"] if f16_math else [])
    # Without texel reads, which would read the i64 arrays as texels (test_texel_reads.py).
    exe, spirv = _compile(device, g.to_mlir(), wide_buffers=True, spirv_caps=caps, texel_reads=False,
                          spirv_exts=["SPV_KHR_storage_buffer_storage_class", "SPV_KHR_16bit_storage"])
    assert bool(re.search(r"OpTypeArray %ulong", spirv)) == f16_math
    ref = g.reference(*xs)[0].astype(np.float32)
    err = np.max(np.abs(exe(*xs)[0].astype(np.float32) - ref)) / np.max(np.abs(ref))
    assert err < 1e-2, err  # f16 sums over K = 96, against the largest output


@pytest.mark.parametrize("texel", [False, True])
def test_wide_buffers_with_texel_reads_keep_vec4_stores(device, texel):
    """With texel_reads the widened buffers are the ones read (through texels); the output keeps vec4 stores."""
    g = portable.Graph()
    a, b = g.input((64, 256)), g.input((64, 256))
    g.output(g.add(a, b))
    xs = [RNG.standard_normal((64, 256)).astype(np.float32) for _ in range(2)]
    exe, spirv = _compile(device, g.to_mlir(), wide_buffers=True, texel_reads=texel, elementwise_per_thread=8)
    stored = re.findall(r"OpStore %\w+ %\w+", spirv)
    ptr_types = dict(re.findall(r"(%\w+) = OpTypePointer StorageBuffer (%\w+)", spirv))
    assert stored
    assert ("OpImageFetch" in spirv) == texel
    # What the stores write: vec4 of float with texel reads, 64-bit lanes without.
    assert any(t in ("%v4float",) for t in ptr_types.values()) == texel
    assert any(t in ("%v4ulong", "%v2ulong") for t in ptr_types.values()) != texel
    (out,) = exe(*xs)
    np.testing.assert_allclose(out, xs[0] + xs[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 20, 32), (2, 9, 5)])
def test_depthwise_conv_taps_carried_in_registers(device, shape):
    """A scalar depthwise convolution's output element is carried in a register across the tap loops
    (compiler/lowering/loop_registers.py, every profile); with loop_vectorize the channel loop runs on vec4."""
    n, hw, c = shape
    text = depthwise_mlir(n, hw, hw, c, bias=False)
    x = RNG.standard_normal((n, hw, hw, c)).astype(np.float32)
    w = RNG.standard_normal((3, 3, c)).astype(np.float32)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(xp[:, i:i + hw, j:j + hw, :] * w[i, j] for i in range(3) for j in range(3))
    exe, scalar = _compile(device, text, conv_vector_taps=False)  # the scalar taps path (register tiles: below)
    # The output element is read and written once per output, not once per tap: the loops keep it in a phi.
    assert "OpPhi %float" in scalar
    np.testing.assert_allclose(exe(x, w)[0], ref, rtol=1e-5, atol=1e-5)
    # Then the channel loop runs on vec4, the tap loops carrying vec4 accumulators (loop_vectorize.py).
    exe, vec = _compile(device, text, loop_vectorize=4, conv_vector_taps=False)
    assert ("OpPhi %v4float" in vec) == (c % 4 == 0)
    np.testing.assert_allclose(exe(x, w)[0], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cols", [64, 12])
def test_elementwise_tiles_of_eight_split_in_halves(device, cols):
    """Eight elements per thread: 32-byte buffer accesses, vec4 math (codegen_spirv/lanes/split_vectors.py); 12 columns
    take tiles of 4."""
    g = portable.Graph()
    a, bias, c = g.input((48, cols)), g.input((cols,)), g.input((48, cols))
    g.output(g.add(g.mul(g.gelu(g.add(a, bias)), c), 1.5), g.relu(a))
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((48, cols), (cols,), (48, cols))]
    exe, spirv = _compile(device, g.to_mlir(), wide_buffers=True, elementwise_per_thread=8)
    assert ("%v4ulong" in spirv) == (cols % 8 == 0)
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows,cols", [(64, 1000), (6, 1001)])
def test_row_loops_vectorized(device, rows, cols):
    """softmax and a layernorm-like chain: one row per thread, column loops on vec4 with vec4 partial sums and
    maxima (compiler/lowering/loop_vectorize.py); of 1001 columns the last stays in the scalar loop, which goes on
    from the vector loop's partials."""
    g = portable.Graph()
    x, gamma = g.input((rows, cols)), g.input((cols,))
    xc = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    g.output(g.softmax(x, axis=-1), g.mul(g.mul(xc, g.rsqrt(g.add(g.mean(g.mul(xc, xc), axis=-1, keepdims=True),
                                                                 1e-5))), gamma))
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((rows, cols), (cols,))]
    _, before = _compile(device, g.to_mlir())
    exe, after = _compile(device, g.to_mlir(), loop_vectorize=4)
    assert "OpLoad %v4float" not in before
    assert "OpLoad %v4float" in after
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows,cols", [(64, 1000), (128, 1001), (16, 12), (6, 1001), (3, 7)])
@pytest.mark.parametrize("vectorized", [False, True])
def test_private_rows_recomputed(device, rows, cols, vectorized):
    """softmax's exp(x - max) and layernorm's x - mean are recomputed where read instead of kept as a private row
    of the thread (codegen_spirv/lanes/private_rows.py): no private array of the row's length is left, whatever the
    row count (threads divide the rows, strategy/choice.py, so no thread's rows are counted at run time)."""
    g = portable.Graph()
    x, gamma, beta = g.input((rows, cols)), g.input((cols,)), g.input((cols,))
    xc = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.mul(xc, xc), axis=-1, keepdims=True)
    g.output(g.softmax(g.mul(x, 0.125), axis=-1), g.add(g.mul(g.mul(xc, g.rsqrt(g.add(var, 1e-5))), gamma), beta))
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((rows, cols), (cols,), (cols,))]
    _, before = _compile(device, g.to_mlir(), loop_vectorize=4 if vectorized else 0)
    exe, after = _compile(device, g.to_mlir(), loop_vectorize=4 if vectorized else 0, recompute_private_rows=True)
    assert _private_row(before, cols)
    assert not _private_row(after, cols)
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rows,cols,wide", [(64, 1024, True), (128, 96, True), (8, 32, True), (16, 2048, True),
                                             (16, 4096, True), (64, 1000, True), (6, 64, True), (64, 1024, False),
                                             (16, 2048, False)])
def test_subgroup_rows(device, rows, cols, wide):
    """softmax, layernorm and a row sum with each subgroup's rows taken one after the other, columns across its
    lanes, reductions by xor shuffles (codegen_spirv/lanes/subgroup_rows.py): only where the columns are a multiple of
    32 up to subgroup_row_columns and every thread has a row. Without wide_buffers too: the rows' 8-element vectors
    are still split into vec4 halves."""
    g = portable.Graph()
    x, gamma, beta = g.input((rows, cols)), g.input((cols,)), g.input((cols,))
    xc = g.sub(x, g.mean(x, axis=-1, keepdims=True))
    var = g.mean(g.mul(xc, xc), axis=-1, keepdims=True)
    g.output(g.softmax(g.mul(x, 0.125), axis=-1), g.add(g.mul(g.mul(xc, g.rsqrt(g.add(var, 1e-5))), gamma), beta),
             g.sum(g.mul(x, x), axis=-1))
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((rows, cols), (cols,), (cols,))]
    keys = dict(loop_vectorize=4, recompute_private_rows=True, subgroup_row_columns=2048)
    _, before = _compile(device, g.to_mlir(), **keys)
    exe, after = _compile(device, g.to_mlir(), subgroup_rows=8, wide_buffers=wide, **keys)
    assert "OpGroupNonUniformShuffleXor" not in before
    assert ("OpGroupNonUniformShuffleXor" in after) == (cols % 32 == 0 and cols <= 2048 and rows % 8 == 0)
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows,cols", [(64, 1024), (32, 64), (12, 64), (6, 64), (8, 36)])
def test_elementwise_rows_per_thread(device, rows, cols):
    """bias + GELU + residual with 4 rows of 8 columns per thread where they divide, the bias read once for the 4
    rows (codegen_spirv/lanes/row_vectors.py): a workgroup's row of 128 threads then covers 4 rows (a quarter of the
    grid)."""
    g = portable.Graph()
    x, bias, res = g.input((rows, cols)), g.input((cols,)), g.input((rows, cols))
    g.output(g.add(g.gelu(g.add(x, bias)), res))
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((rows, cols), (cols,), (rows, cols))]
    keys = dict(wide_buffers=True, elementwise_per_thread=8, gelu_as_sigmoid=True)
    plain, _ = _compile(device, g.to_mlir(), **keys)
    exe, _ = _compile(device, g.to_mlir(), elementwise_rows_per_thread=4, **keys)
    grid = [d.grid for d in exe.executable.dispatches]
    grid0 = [d.grid for d in plain.executable.dispatches]
    if cols == 1024:
        assert grid == [(1, rows // 4, 1)] and grid0 == [(1, rows, 1)]
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_gelu_as_sigmoid(device):
    """0.5x(1 + tanh(u)) as x / (1 + exp(-2u)), down to large |x| where 1 + tanh(u) cancels (gelu_form.py)."""
    g = portable.Graph()
    a = g.input((4, 64))
    g.output(g.gelu(a))
    x = np.concatenate([RNG.standard_normal((2, 64)), np.linspace(-12, 12, 128).reshape(2, 64)]).astype(np.float32)
    _, before = _compile(device, g.to_mlir())
    exe, after = _compile(device, g.to_mlir(), gelu_as_sigmoid=True)
    assert "Tanh" in before and "Tanh" not in after and "Exp" in after
    ref = 0.5 * x.astype(np.float64) * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x.astype(np.float64) ** 3)))
    np.testing.assert_allclose(exe(x)[0], ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["bias", "f16_column_broadcast"])
def test_grid_past_workgroup_count_gives_threads_rows(device, case):
    """More rows than the device's workgroup count: each thread takes several rows (strategy.choose). SPIR-V has no
    2-d vectors, so those tiles are unrolled into rows (row_vectors.py) where they can be, and stay scalar where
    they cannot (f16 operands, a column broadcast). The Mali profiles (65535 workgroups) met this at 65536 rows."""
    rows, cols = 256, 256
    g = portable.Graph()
    if case == "bias":
        x, b = g.input((rows, cols)), g.input((cols,))
        g.output(g.add(g.mul(x, 0.125), b))
        xs = [RNG.standard_normal(s).astype(np.float32) for s in ((rows, cols), (cols,))]
    else:
        x, y = g.input((rows, cols), "float16"), g.input((rows, 1), "float16")
        g.output(g.mul(g.add(x, y), x))
        xs = [RNG.standard_normal(s).astype(np.float16) for s in ((rows, cols), (rows, 1))]
    exe, spirv = _compile(device, g.to_mlir(), max_workgroup_count=[65535, 64, 64],
                          elementwise_workgroup_invocations=64)
    assert [int(np.prod(d.grid)) for d in exe.executable.dispatches] == [64]  # 4 rows per thread
    if case == "bias":
        assert "OpFAdd %v4float" in spirv  # the rows stay vec4 arithmetic
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)
