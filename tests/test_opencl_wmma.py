"""f16 matmuls on NVIDIA's OpenCL: the cooperative-matrix strategy (compiler/schedule/coop_matrix.py) printed as inline
PTX `wmma` (codegen_opencl/matrix.py), where the profile says the device's OpenCL C takes PTX (`opencl_asm`).

No device here runs PTX (PoCL compiles for the CPU), so these tests check what is generated and when it is
chosen; the H200 runs it through `portable bench`, which compares the output with numpy before timing
(benchmarks/results/nvidia-h200-opencl)."""

from __future__ import annotations

import re

import pytest

import portable
from portable import profiles
from portable.codegen_opencl import emit_opencl
from portable.compiler.pipeline import compile_module
from portable.compiler.schedule import coop_matrix
from portable.errors import UnsupportedOp
from portable.ir.mlir import ir


def _tiles(opts, *shape):
    return coop_matrix.tiles(profiles.Options.of(opts), *shape)


# The profile's large tiles at every shape here (coop_small_tiles off; the choice: test_coop_matrix.py).
NVIDIA = dict(profiles.codegen_options(profiles.all_profiles()["nvidia"]), coop_small_tiles=())
UNSTAGED = dict(NVIDIA, coop_stage_k=0)
(WG_M, WG_N), (SG_M, SG_N) = _tiles(NVIDIA)
COOP_WORKGROUP = (32 * (WG_N // SG_N), WG_M // SG_M, 1)
FRAGMENTS = (SG_M // 16) * (SG_N // 16)  # accumulators per subgroup


def _matmul(m: int, k: int, n: int, out: str = "float32") -> str:
    g = portable.Graph("mm_f16")
    g.output(g.matmul(g.input((m, k), "float16"), g.input((k, n), "float16"), out_dtype=out))
    return g.to_mlir()


def _calls(src: str, fn: str) -> list[str]:
    """The argument lists of the calls to helper `fn` in the kernel body (not its definition)."""
    body = src[src.index("__kernel"):]
    return re.findall(rf"\b{fn}\(([^;]*)\);", body)


@pytest.mark.parametrize("out, acc", [("float32", "f32"), ("float16", "f16")])
def test_staged_f16_matmul_is_wmma_on_nvidia_opencl(out, acc):
    k_steps = NVIDIA["coop_stage_k"] // 16
    exe = compile_module(_matmul(2 * WG_M, 4 * NVIDIA["coop_stage_k"], 2 * WG_N, out), NVIDIA, ("opencl",))
    (kernel,) = exe.kernels
    src = kernel.opencl
    assert kernel.workgroup_size == COOP_WORKGROUP
    assert f"wmma.mma.sync.aligned.row.row.m16n16k16.{acc}.{acc}" in src
    assert len(_calls(src, f"pt_wmma_mma_{acc}")) == FRAGMENTS * k_steps  # one K step, straight-line
    # Fragments come from the workgroup tiles, which the K loop fills with 16-byte words (no f16 conversions).
    loads = _calls(src, "pt_wmma_load_a_f16_shared") + _calls(src, "pt_wmma_load_b_f16_shared")
    assert loads and all(a.startswith("lm") for a in loads)
    assert re.search(r"__local int4 lm0\[\d+\] __attribute__\(\(aligned\(32\)\)\)", src)
    assert "__global const int4* restrict a1" in src and "vload_half" not in src
    # The stride wmma takes counts f16 elements: the 16-byte words' leadDimension times 8.
    assert {a.rsplit(",", 1)[1].strip() for a in loads} == {str(NVIDIA["coop_stage_k"] + 8), str(WG_N + 8)}
    stores = _calls(src, f"pt_wmma_store_{acc}_global")
    assert len(stores) == FRAGMENTS and all(s.startswith("a0 + ") for s in stores)
    assert src.count("barrier(") == 2


def test_unstaged_fragments_load_from_the_buffers():
    exe = compile_module(_matmul(WG_M, 64, WG_N), UNSTAGED, ("opencl",))
    src = exe.kernels[0].opencl
    assert _calls(src, "pt_wmma_load_a_f16_global") and _calls(src, "pt_wmma_load_b_f16_global")
    assert ".global.f16" in src and "barrier(" not in src


@pytest.mark.parametrize("why, profile, targets", [
    ("the device's OpenCL C takes no inline PTX", dict(NVIDIA, opencl_asm=None), ("opencl",)),
    ("one strategy serves both targets of an executable", NVIDIA, ("vulkan", "opencl")),
    ("PoCL", profiles.codegen_options(profiles.all_profiles()["pocl"]), ("opencl",)),
])
def test_other_opencl_devices_keep_the_fma_strategy(why, profile, targets):
    exe = compile_module(_matmul(2 * WG_M, 64, 2 * WG_N), profile, targets)
    assert all("wmma" not in k.opencl for k in exe.kernels), why


FRAGMENT_KERNEL = """
gpu.module @m {
  gpu.func @k(%out: memref<16x16xf32>) workgroup(%t : memref<16x24xf16, #gpu.address_space<workgroup>>)
      kernel attributes {known_block_size = array<i32: 32, 1, 1>} {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %h = arith.constant 1.0 : f16
    memref.store %h, %t[%c0, %c0] : memref<16x24xf16, #gpu.address_space<workgroup>>
    gpu.barrier
    %a = gpu.subgroup_mma_load_matrix %t[%c0, %c0] {leadDimension = 24 : index}
        : memref<16x24xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<16x16xf16, "AOp">
    %b = gpu.subgroup_mma_load_matrix %t[%c0, %c0] {leadDimension = 24 : index}
        : memref<16x24xf16, #gpu.address_space<workgroup>> -> !gpu.mma_matrix<16x16xf16, "BOp">
    %c = gpu.subgroup_mma_constant_matrix %z : !gpu.mma_matrix<16x16xf32, "COp">
    %d = gpu.subgroup_mma_compute %a, %b, %c : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp">
        -> !gpu.mma_matrix<16x16xf32, "COp">
    gpu.subgroup_mma_store_matrix %d, %out[%c0, %c0] {leadDimension = 16 : index}
        : !gpu.mma_matrix<16x16xf32, "COp">, memref<16x16xf32>
    gpu.return
  }
}
"""


def test_f16_tiles_that_fragments_read_hold_f16_bits():
    """Without cl_khr_fp16 a local f16 array holds floats, which wmma cannot read: one that fragments are loaded
    from holds the f16 bits (ushort), written through vstore_half like a buffer, and is 32-byte aligned."""
    with ir.Context():
        src = emit_opencl(ir.Module.parse(FRAGMENT_KERNEL), fp16=False, asm="ptx").source
    assert re.search(r"__local ushort lm0\[384\] __attribute__\(\(aligned\(32\)\)\);", src)
    assert "vstore_half_rte(1.0f, 0, ((__local half*)lm0));" in src
    assert re.search(r"pt_frag_float8 v\d+ = \{\{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f\}\};", src)
    assert "pt_wmma_store_f32_global(a0, " in src and "__global float* restrict a0" in src  # written: not const


def test_fragments_need_the_devices_inline_assembly():
    with ir.Context(), pytest.raises(UnsupportedOp, match="gpu.subgroup_mma_load_matrix has no OpenCL C form"):
        emit_opencl(ir.Module.parse(FRAGMENT_KERNEL), fp16=False)
