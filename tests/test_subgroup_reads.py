"""Matmul operand reads shared across a subgroup by shuffles (codegen_spirv/lanes/subgroup_reads.py; lavapipe's profile
picks it): forced on every Vulkan device with that device's subgroup size, against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable import profiles
from portable.codegen_spirv import disassemble, validate
from portable.compiler.pipeline import compile_module
from portable.devices import open_device

RNG = np.random.default_rng(11)


def _options(device: str, **overrides) -> dict:
    live = open_device(device)
    lanes = int(live.info.limits.get("subgroup_size") or 0)
    if live.info.api != "vulkan" or lanes < 2:
        pytest.skip("subgroup shuffles are a Vulkan path (needs the device's subgroup size)")
    opts = profiles.codegen_options(profiles.match(live.info), live.info)
    caps = list(opts["spirv_caps"]) + [c for c in ("GroupNonUniform", "GroupNonUniformShuffle")
                                       if c not in opts["spirv_caps"]]
    return dict(opts, subgroup_shared_reads=lanes, matmul_k_tile=4 * lanes, matmul_thread_tile=[8, 4],
                matmul_threads_x=lanes, spirv_caps=caps, **overrides)


def _run(device: str, text: str, inputs: list[np.ndarray], opts: dict) -> tuple[list[np.ndarray], int]:
    """Outputs, and the number of shuffles in the kernels."""
    exe = compile_module(text, opts, ("vulkan",))
    shuffles = 0
    for k in exe.kernels:
        validate(k.spirv)
        shuffles += disassemble(k.spirv).count("OpGroupNonUniformShuffle ")
    from portable.api import CompiledGraph

    return CompiledGraph(exe, open_device(device))(*inputs), shuffles


def _rand(shape, dtype="float32"):
    if dtype == "int32":
        return RNG.integers(-20, 20, size=shape, dtype=np.int32)
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("m,k,n", [(64, 128, 96), (100, 64, 64), (7, 96, 32)])
def test_matmul_bias_relu(device, m, k, n):
    opts = _options(device)
    g = portable.Graph()
    a, b, bias = g.input((m, k)), g.input((k, n)), g.input((n,))
    g.output(g.relu(g.add(g.matmul(a, b), bias)))
    xs = [_rand((m, k)), _rand((k, n)), _rand((n,))]
    (out,), shuffles = _run(device, g.to_mlir(), xs, opts)
    assert shuffles > 0
    np.testing.assert_allclose(out, g.reference(*xs)[0], rtol=1e-4, atol=1e-4)


def test_batch_matmul_and_int32(device):
    opts = _options(device)
    g = portable.Graph()
    a, b = g.input((3, 40, 64)), g.input((3, 64, 48))
    c, d = g.input((16, 64), "int32"), g.input((64, 64), "int32")
    g.output(g.matmul(a, b), g.matmul(c, d))
    xs = [_rand((3, 40, 64)), _rand((3, 64, 48)), _rand((16, 64), "int32"), _rand((64, 64), "int32")]
    outs, shuffles = _run(device, g.to_mlir(), xs, opts)
    assert shuffles > 0
    refs = g.reference(*xs)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[1], refs[1])


def test_f16_operands_shuffled_as_f32(device):
    opts = _options(device)
    if "Float16" not in opts["spirv_caps"]:
        pytest.skip("no f16 arithmetic on this device")
    g = portable.Graph()
    a, b = g.input((32, 64), "float16"), g.input((64, 64), "float16")
    g.output(g.matmul(a, b, out_dtype="float32"))
    xs = [_rand((32, 64), "float16"), _rand((64, 64), "float16")]
    (out,), shuffles = _run(device, g.to_mlir(), xs, opts)
    assert shuffles > 0
    np.testing.assert_allclose(out, g.reference(*xs)[0], rtol=1e-5, atol=1e-5)


def test_columns_narrower_than_a_subgroup_are_not_shared(device):
    """Eight columns take two threads across: a subgroup would span rows, so A is read per lane as before."""
    opts = _options(device)
    g = portable.Graph()
    a, b = g.input((64, 64)), g.input((64, 8))
    g.output(g.matmul(a, b))
    xs = [_rand((64, 64)), _rand((64, 8))]
    (out,), shuffles = _run(device, g.to_mlir(), xs, opts)
    assert shuffles == 0
    np.testing.assert_allclose(out, g.reference(*xs)[0], rtol=1e-4, atol=1e-4)
