"""The cooperative-matrix matmul strategy (portable/compiler/coop_matrix.py), compiled for a profile that lists
VK_KHR_cooperative_matrix shapes (nvidia). No device here has the extension (lavapipe, PoCL), so these tests
check what is generated and when the strategy is (not) chosen; the numbers are checked on the GPU host by
`portable bench` (f16 matmul, output compared with numpy before timing)."""

from __future__ import annotations

import struct

import pytest

import portable
from portable import profiles
from portable.compiler import coop_matrix
from portable.compiler.pipeline import compile_module

OP_COOP_MULADD = 4459  # OpCooperativeMatrixMulAddKHR (SPV_KHR_cooperative_matrix)
OP_COOP_LOAD = 4457  # OpCooperativeMatrixLoadKHR


def _opcodes(spirv: bytes) -> set[int]:
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    ops, i = set(), 5
    while i < len(words):
        n, op = words[i] >> 16, words[i] & 0xFFFF
        ops.add(op)
        i += max(n, 1)
    return ops


def _matmul(m: int, k: int, n: int, out: str = "float32") -> str:
    g = portable.Graph("mm_f16")
    g.output(g.matmul(g.input((m, k), "float16"), g.input((k, n), "float16"), out_dtype=out))
    return g.to_mlir()


NVIDIA = profiles.codegen_options(profiles.all_profiles()["nvidia"])


@pytest.mark.parametrize("out", ["float32", "float16"])
def test_f16_matmul_uses_cooperative_matrices_on_vulkan(out):
    exe = compile_module(_matmul(128, 64, 192, out), NVIDIA, ("vulkan",))
    (kernel,) = exe.kernels
    assert kernel.workgroup_size == coop_matrix.WORKGROUP_SIZE
    assert {OP_COOP_MULADD, OP_COOP_LOAD} <= _opcodes(kernel.spirv)
    (d,) = exe.dispatches
    assert tuple(d.grid) == (192 // coop_matrix.WG_TILE[1], 128 // coop_matrix.WG_TILE[0], 1)
    assert struct.unpack("<I", kernel.spirv[4:8])[0] == 0x00010600  # SPIR-V 1.6: where the KHR ops exist


@pytest.mark.parametrize("why, text, profile, targets", [
    ("OpenCL C has no cooperative matrices", _matmul(128, 64, 192), NVIDIA, ("vulkan", "opencl")),
    ("m is not a multiple of the workgroup tile", _matmul(100, 64, 192), NVIDIA, ("vulkan",)),
    ("k is not a multiple of 16", _matmul(128, 40, 192), NVIDIA, ("vulkan",)),
    ("lavapipe lists no cooperative-matrix shapes",
     _matmul(128, 64, 192), profiles.codegen_options(profiles.all_profiles()["lavapipe"]), ("vulkan",)),
])
def test_falls_back_to_the_fma_strategy(why, text, profile, targets):
    exe = compile_module(text, profile, targets)
    for kernel in exe.kernels:
        assert kernel.workgroup_size != coop_matrix.WORKGROUP_SIZE, why
        if kernel.spirv:
            assert OP_COOP_MULADD not in _opcodes(kernel.spirv), why


def test_f32_matmul_stays_on_fma():
    g = portable.Graph("mm_f32")
    g.output(g.matmul(g.input((128, 64)), g.input((64, 192))))
    exe = compile_module(g.to_mlir(), NVIDIA, ("vulkan",))
    assert all(OP_COOP_MULADD not in _opcodes(k.spirv) for k in exe.kernels)
