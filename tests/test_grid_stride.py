"""1-d elementwise kernels past the grid run as a grid-stride loop (compiler/schedule/grid_stride.py): one dispatch of a
bounded number of workgroups, each thread one vector per pass."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.api import CompiledGraph
from portable.compiler.pipeline import compile_module
from portable.devices import open_device


def _add(n: int):
    g = portable.Graph()
    x, y = g.input((n,)), g.input((n,))
    g.output(g.add(g.mul(x, 2.0), y))
    return g


def _compile_and_run(device, n, **overrides):
    live = open_device(device)
    opts = dict(profiles.codegen_options(profiles.match(live.info), live.info), workgroup_invocations=64,
                elementwise_workgroup_invocations=64, elementwise_per_thread=4, max_bind_bytes=0, **overrides)
    exe = compile_module(_add(n).to_mlir(), opts, (live.info.api,))
    rng = np.random.default_rng(2)
    xs, ys = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
    with CompiledGraph(exe, live) as cg:
        out, = cg(xs, ys)
    np.testing.assert_allclose(out, xs * 2 + ys, rtol=1e-6, atol=1e-6)
    return exe, live


@pytest.mark.parametrize("n", [64 * 256 * 3 + 1024, 64 * 256 * 3 + 1027, 64 * 256 - 512])
def test_past_the_workgroup_count(device, n):
    """A grid that would pass the device's workgroup count in x (64 here; 65535 on Mali, Adreno and Intel) becomes
    that many workgroups looping over the tiles, one dispatch, each thread still one vector (a tail too); a grid
    that fits keeps a workgroup per tile and no loop."""
    exe, live = _compile_and_run(device, n, max_workgroup_count=[64, 64, 64])
    tiles = -(-n // 256)
    assert len(exe.dispatches) == 1 and exe.dispatches[0].grid == (min(tiles, 64), 1, 1)
    if live.info.api == "vulkan":
        from portable.codegen_spirv import disassemble
        asm = disassemble(exe.kernels[0].spirv)
        assert ("OpLoopMerge" in asm) == (tiles > 64)
        if n % 4 == 0:
            assert "OpFAdd %v4float" in asm  # each thread one vector
    else:
        assert ("i0 += 64)" in exe.kernels[0].opencl) == (tiles > 64), exe.kernels[0].opencl


def test_profile_caps_the_workgroups(device):
    """`elementwise_grid_workgroups` launches fewer workgroups than the device allows (each then takes more
    passes): 7 here over 3 * 64 + 4 tiles."""
    exe, _ = _compile_and_run(device, 64 * 256 * 3 + 1024, elementwise_grid_workgroups=7)
    assert exe.dispatches[0].grid == (7, 1, 1)


@pytest.mark.parametrize("profile", ["arm-mali-valhall", "qualcomm-adreno-7xx", "intel-xe"])
def test_family_profiles_add_64_mebi_floats_a_vector_per_thread(profile):
    """The bench's add of 64 Mi floats on the profiles that count 65535 workgroups: the buffers bind in two 128 MiB
    chunks (their storage-buffer range), each 65536 tiles of 128 x 4 floats, so each dispatch is 65535 workgroups
    in a grid-stride loop, vec4 per thread, for both APIs (compiled only)."""
    opts = profiles.codegen_options(profiles.all_profiles()[profile])
    g = portable.Graph()
    x, y = g.input((1 << 26,)), g.input((1 << 26,))
    g.output(g.add(x, y))
    exe = compile_module(g.to_mlir(), opts, ("vulkan", "opencl"))
    assert len(exe.kernels) == 1 and [d.grid for d in exe.dispatches] == [(65535, 1, 1)] * 2
    from portable.codegen_spirv import disassemble
    asm = disassemble(exe.kernels[0].spirv)
    assert "OpFAdd %v4float" in asm and "OpLoopMerge" in asm
    assert "float4" in exe.kernels[0].opencl
