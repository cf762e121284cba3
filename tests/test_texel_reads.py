"""Read-only buffers as uniform texel buffers (codegen_spirv/texel_reads.py, lavapipe's `texel_reads`): which
buffers the rewrite takes, the SPIR-V it makes, the package format, and the runtime's buffer views, on every
Vulkan device against numpy."""

from __future__ import annotations

import dataclasses
import json
import zipfile

import numpy as np
import pytest
from conftest import compile_and_load, matmul_mlir

import portable
from portable import profiles
from portable.codegen_spirv import disassemble
from portable.codegen_spirv.texel_reads import texel_reads
from portable.devices import open_device
from portable.errors import KernelBuildError, OutOfDeviceMemory
from portable.ir.mlir import ir

RNG = np.random.default_rng(11)

_VAR = "!spirv.ptr<!spirv.struct<(!spirv.array<{n} x {t}, stride={s}> [0])>, StorageBuffer>"


def _module(vars_: list[tuple[str, int, int]], store: bool = False) -> str:
    """A spirv.module with one buffer per (element type, element bytes, count), each loaded once at index %i
    (and the first one also stored to when `store`)."""
    decls, body = [], []
    for b, (t, size, n) in enumerate(vars_):
        ty = _VAR.format(n=n, t=t, s=size)
        decls.append(f"spirv.GlobalVariable @buf{b} bind(0, {b}) : {ty}")
        body.append(f"%a{b} = spirv.mlir.addressof @buf{b} : {ty}")
        body.append(f"%p{b} = spirv.AccessChain %a{b}[%c0, %i] : {ty}, i32, i32 -> !spirv.ptr<{t}, StorageBuffer>")
        body.append(f"%v{b} = spirv.Load \"StorageBuffer\" %p{b} : {t}")
        if store and b == 0:
            body.append(f"spirv.Store \"StorageBuffer\" %p{b}, %v{b} : {t}")
    return ("spirv.module Logical GLSL450 requires #spirv.vce<v1.3, [Shader, Int64], []> {\n"
            + "\n".join(decls) + "\nspirv.func @k(%i: i32) \"None\" {\n%c0 = spirv.Constant 0 : i32\n"
            + "\n".join(body) + "\nspirv.Return\n}\n}")


def _rewrite(text: str, access: tuple[str, ...], max_texels: int = 1 << 20) -> tuple[tuple[int, ...], str]:
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        got = texel_reads(module, access, max_texels)
        module.operation.verify()
        return got, str(module)


def test_rewrite_takes_read_only_buffers_of_whole_texels():
    vars_ = [("vector<4xf32>", 16, 64), ("vector<4xi64>", 32, 64), ("vector<2xi64>", 16, 64),
             ("f32", 4, 64), ("i64", 8, 63), ("vector<4xi32>", 16, 64), ("i64", 8, 64), ("vector<2xf32>", 8, 64)]
    got, text = _rewrite(_module(vars_), ("r", "r", "r", "r", "r", "w", "r", "r"))
    # 4-byte elements are not whole texels, nor 63 8-byte ones (a view would miss the last); a written buffer stays
    assert got == (0, 1, 2, 6, 7)
    assert text.count("spirv.ImageFetch") == 1 + 2 + 1 + 1 + 1  # a 32-byte element is two texels
    assert "SampledBuffer" in text
    assert text.count("StorageBuffer>") >= 3  # the others keep their storage-buffer variables
    assert "spirv.CompositeConstruct" in text and "vector<4xi32> to vector<4xf32>" in text
    # 8-byte elements at %i, of unknown parity: texel %i >> 1, its .zw where %i is odd, else its .xy
    assert text.count("spirv.ShiftRightLogical") == text.count("spirv.Select") == 2
    assert "vector<2xi32> to i64" in text and "vector<2xi32> to vector<2xf32>" in text


def test_rewrite_picks_the_half_of_a_known_parity():
    text = _module([("i64", 8, 64), ("i64", 8, 64)]).replace("%c0 = spirv.Constant 0 : i32", """\
%c0 = spirv.Constant 0 : i32
%c1 = spirv.Constant 1 : i32
%c6 = spirv.Constant 6 : i32
%even = spirv.IMul %i, %c6 : i32
%odd = spirv.IAdd %even, %c1 : i32""")
    text = text.replace("%a0[%c0, %i]", "%a0[%c0, %even]").replace("%a1[%c0, %i]", "%a1[%c0, %odd]")
    got, text = _rewrite(text, ("r", "r"))
    assert got == (0, 1) and "spirv.Select" not in text
    assert "spirv.VectorShuffle [0 : i32, 1 : i32]" in text and "spirv.VectorShuffle [2 : i32, 3 : i32]" in text


def test_rewrite_leaves_written_large_and_otherwise_used_buffers():
    text = _module([("vector<4xf32>", 16, 64)], store=True)
    assert _rewrite(text, ("r",))[0] == ()  # a store the access tuple did not mention: still not taken
    assert _rewrite(_module([("vector<4xf32>", 16, 64)]), ("rw",))[0] == ()
    assert _rewrite(_module([("vector<4xi64>", 32, 64)]), ("r",), max_texels=127)[0] == ()  # 128 texels
    assert _rewrite(_module([("vector<4xi64>", 32, 64)]), ("r",), max_texels=128)[0] == (0,)


def _graph():
    g = portable.Graph()
    a, b, c = g.input((64, 128)), g.input((128,)), g.input((7, 5))
    g.output(g.relu(g.add(a, b)), g.mul(c, c))  # 5 columns: no whole texels, stays a storage buffer
    return g


def _vulkan(device):
    if open_device(device).info.api != "vulkan":
        pytest.skip("texel buffers are a Vulkan descriptor kind; OpenCL ignores them")


@pytest.mark.parametrize("on", [True, False])
def test_texel_reads_run_and_round_trip(device, tmp_path, on):
    _vulkan(device)
    g = _graph()
    xs = [RNG.standard_normal(s).astype(np.float32) for s in ((64, 128), (128,), (7, 5))]
    exe, loaded = compile_and_load(g, device, tmp_path, texel_reads=on)
    texel = [k.texel_buffers for k in exe.kernels]
    spirv = "".join(disassemble(k.spirv) for k in exe.kernels)
    if on:
        assert any(texel) and "OpImageFetch" in spirv and "OpCapability SampledBuffer" in spirv
        for k in exe.kernels:  # only buffers the kernel reads
            assert all(k.access[b] == "r" for b in k.texel_buffers)
    else:
        assert not any(texel) and "OpImageFetch" not in spirv
    with zipfile.ZipFile(tmp_path / "g.ptx") as z:
        manifest = json.loads(z.read("manifest.json"))
    assert (manifest["format"] == 5) == on
    assert [k.texel_buffers for k in loaded.executable.kernels] == texel
    for out, ref in zip(loaded(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_texel_reads_of_f16_operands(device, tmp_path):
    """An f16 matmul's operands, four halves to an i64 (codegen_spirv/lanes/wide_buffers.py), are read as half
    texels."""
    _vulkan(device)
    live = open_device(device)
    if not {"Float16", "Int64"} <= set(profiles.codegen_options(profiles.match(live.info), live.info)["spirv_caps"]):
        pytest.skip("f16 buffers are widened to i64 only where the kernel computes on f16")
    a, b = (RNG.standard_normal(s).astype(np.float16) for s in ((64, 96), (96, 32)))
    exe, loaded = compile_and_load(matmul_mlir(64, 96, 32, "f16", "f32"), device, tmp_path,
                                   texel_reads=True, wide_buffers=True)
    spirv = "".join(disassemble(k.spirv) for k in exe.kernels)
    assert [k.texel_buffers for k in exe.kernels] == [(1, 2)]  # a and b; the f32 output is written
    assert "OpTypeArray %ulong" not in spirv and "OpBitcast %ulong" in spirv
    assert [k.texel_buffers for k in loaded.executable.kernels] == [(1, 2)]
    (out,) = loaded(a, b)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * np.max(np.abs(ref)))


def test_texel_reads_of_pooled_intermediates(device, tmp_path):
    """A chain of kernels whose intermediates live in pooled blocks at offsets: each reads the previous one's
    output through a buffer view of that range."""
    _vulkan(device)
    g = portable.Graph()
    x, w = g.input((32, 64)), g.input((64,))
    h = g.add(g.exp(g.mul(x, w)), x)
    g.output(g.softmax(g.matmul(h, g.transpose(h, (1, 0))), axis=-1))
    xs = [RNG.standard_normal((32, 64)).astype(np.float32) * 0.1, RNG.standard_normal(64).astype(np.float32)]
    exe, loaded = compile_and_load(g, device, tmp_path, texel_reads=True)
    assert sum(bool(k.texel_buffers) for k in exe.kernels) >= 1
    for _ in range(2):  # the second run reuses the cached views
        (out,) = loaded(*xs)
        np.testing.assert_allclose(out, g.reference(*xs)[0], rtol=2e-4, atol=1e-5)  # exp of sums: f32 order


def test_runtime_refuses_inconsistent_texel_bindings(device, tmp_path):
    _vulkan(device)
    from portable.runtime_vk.pipelines import check_kernel

    exe, _ = compile_and_load(_graph(), device, tmp_path, texel_reads=True)
    k = exe.kernels[0]
    bad = dataclasses.replace(k, texel_buffers=(k.num_buffers,))
    with pytest.raises(KernelBuildError, match=rf"texel buffer bindings \[{k.num_buffers}\] outside its"):
        check_kernel(bad, open_device(device).backend._device())
    assert bad.key() != k.key()


def test_texel_views_are_checked_cached_and_freed(device):
    _vulkan(device)
    from portable.runtime_vk import buffers

    backend = open_device(device).backend
    dev = backend._device()
    block = backend.allocate_block(1 << 16)
    try:
        whole = buffers.view(block, 0, 4096)
        v1 = buffers.texel_view(dev, whole)
        assert buffers.texel_view(dev, buffers.view(block, 0, 4096)) is v1  # same range: same VkBufferView
        assert buffers.texel_view(dev, buffers.view(block, 4096, 4096)) is not v1
        assert len(block.texel_views) == 2
        # A longer buffer is viewed as its whole texels (a kernel's array fits what it is given).
        assert buffers.texel_view(dev, buffers.view(block, 0, 4100)) is v1
        with pytest.raises(OutOfDeviceMemory, match="less than one 16-byte texel"):
            buffers.texel_view(dev, buffers.view(block, 8192, 12))
        align = int(dev.pd.info.limits["min_texel_buffer_offset_alignment"])
        if align > 4:
            with pytest.raises(OutOfDeviceMemory, match="minTexelBufferOffsetAlignment"):
                buffers.texel_view(dev, buffers.view(block, 4, 4096))
    finally:
        backend.free(block)
    assert block.texel_views == {}


def test_capabilities_join_a_triple_wherever_shader_stands():
    """vce.add_capability places a capability after Shader also where another capability comes first (an f16
    kernel's triple starts with Float16), and adds it once."""
    from portable.codegen_spirv.vce import add_capability
    from portable.ir.mlir import ir

    with ir.Context():
        module = ir.Module.parse("spirv.module Logical GLSL450 requires #spirv.vce<v1.6, [Float16, Shader, Int8], "
                                 "[SPV_KHR_storage_buffer_storage_class]> {}")
        spv = module.body.operations[0].operation
        add_capability(spv, "SampledBuffer")
        add_capability(spv, "SampledBuffer")
        assert str(spv.attributes["vce_triple"]) == ("#spirv.vce<v1.6, [Float16, Shader, SampledBuffer, Int8], "
                                                     "[SPV_KHR_storage_buffer_storage_class]>")
