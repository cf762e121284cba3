"""The Llama-style decoder step (models/decoder.py, exported to ONNX and committed) on every device: greedy
generation with the KV cache carried on the device matches onnxruntime running the same ONNX on the CPU,
logits step by step and tokens exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import foreign_profile, longest_chain

import portable
from models.generate import cache_layout, generate_onnxruntime, generate_portable

MODEL = Path(__file__).resolve().parents[1] / "models" / "onnx" / "decoder_tiny.onnx"
# models.decoder.GreedyStep: the step also picks its token (ArgMax) and carries token and pos (`--greedy`).
GREEDY = MODEL.with_name("decoder_tiny_greedy.onnx")
# A regression in fusion shows here: 2 layers of RMSNorm (one kernel each), rotary attention over the cache,
# a SwiGLU MLP; 59 on lavapipe and PoCL (2026-11-29), 41, then 35 with Q/K/V and gate/up each one matmul
# (compiler/graph/horizontal.py, 2026-11-30).
MAX_DISPATCHES = 35

pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for the model tests (test extra)")


@pytest.fixture(scope="module")
def reference():
    prompt = [ord(c) for c in "a KV cache"]
    return prompt, generate_onnxruntime(MODEL, prompt, 12)


def test_decoder_generation_matches_onnxruntime(device, reference):
    prompt, ref = reference
    exe = portable.compile(MODEL, device=device)
    assert len(exe.executable.dispatches) <= MAX_DISPATCHES
    ours = generate_portable(exe, prompt, 12)
    assert ours.tokens == ref.tokens
    for step, (o, r) in enumerate(zip(ours.logits, ref.logits)):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4, err_msg=f"logits of generated token {step}")
    exe.close()


def test_cache_window_is_checked(device):
    exe = portable.compile(MODEL, device=device)
    max_len, carry = cache_layout(exe.inputs)
    assert carry == {1 + j: 2 + j for j in range(len(exe.inputs) - 2)}
    with pytest.raises(ValueError, match="exceed the cache window"):
        generate_portable(exe, [1] * (max_len - 2), 3)
    exe.close()


def test_decoder_compiled_for_another_profile_runs_here(device):
    """The nvidia profile's kernels (workgroup reductions), here without 8-bit storage in SPIR-V (i8/bool buffers
    emulated on 32-bit words), compiled here and run on this device: what an ahead-of-time package does."""
    from portable import profiles
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    live = open_device(device)
    opts = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    # Without 8-bit storage, as on devices that lack it: the emulated path is the one that went wrong.
    opts = dict(opts, spirv_caps=[c for c in opts["spirv_caps"] if c not in ("Int8", "StorageBuffer8BitAccess")],
                spirv_exts=[e for e in opts["spirv_exts"] if e != "SPV_KHR_8bit_storage"])
    exe = CompiledGraph(compile_module(graph_text(MODEL), opts, (live.info.api,)), live)
    prompt = [ord(c) for c in "a KV cache"]
    ours, ref = generate_portable(exe, prompt, 6), generate_onnxruntime(MODEL, prompt, 6)
    assert ours.tokens == ref.tokens
    for o, r in zip(ours.logits, ref.logits):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4)
    exe.close()


def test_norms_run_beside_the_projections_on_gpu_profiles():
    """The nvidia profile splits the step's matrix-vector products along K. Each RMSNorm's reduction then runs
    beside the partial sums of the projection after it, and its row factor is applied when they are summed
    (compiler/graph/norm_factor.py): 36 -> 31 kernels deep for 2 layers (4 norms and the final one), still 46 kernels.
    Attention's scores then compute the rotated q and the cache write themselves (compiler/graph/reduction_inputs.py):
    the rotated q's kernel goes and the scores run beside the cache writes, 44 kernels, 29 deep. SwiGLU stays in
    the down projection's partial sums (the profile's launch_ops, compiler/graph/split_k.py): 42 kernels, 27 deep."""
    from portable import profiles
    from portable.api import graph_text
    from portable.compiler.pipeline import compile_module

    exe = compile_module(graph_text(MODEL), profiles.codegen_options(profiles.all_profiles()["nvidia"]), ("vulkan",))
    assert len(exe.dispatches) == 42
    assert longest_chain(exe) == 27


@pytest.mark.parametrize("profile", ["", "nvidia", "arm-mali-valhall"])
def test_greedy_step_generates_chunks_on_the_device(device, profile):
    """The greedy step carries every input, so generation runs 4 steps per submission (run_steps) plus single
    steps for the tail, and gives onnxruntime's tokens; also with the nvidia profile's kernels, whose ArgMax over
    the vocabulary (two results: value and index) stays a per-thread reduction (the workgroup one takes one), and
    with Mali's, which on Vulkan compute the int64 token, position and index as int32 (compiler/graph/narrow_i64.py)."""
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    if profile:
        live = open_device(device)
        opts = foreign_profile(profile, live)
        if profile == "arm-mali-valhall":  # as on Mali: no 64-bit integers (this device's limits would add them)
            opts["spirv_caps"] = [c for c in opts["spirv_caps"] if c != "Int64"]
        exe = CompiledGraph(compile_module(graph_text(GREEDY), opts, (live.info.api,)), live)
    else:
        exe = portable.compile(GREEDY, device=device)
    outputs = [sig for _, sig in exe.executable.outputs]
    assert cache_layout(exe.inputs, outputs)[1] == {1 + j: j for j in range(len(exe.inputs))}
    narrowed = profile == "arm-mali-valhall" and device.startswith("vulkan")
    assert [s.device for s in exe.inputs[:2]] == (["int32"] * 2 if narrowed else ["", ""])
    prompt = [ord(c) for c in "greedy"]
    ours, ref = generate_portable(exe, prompt, 11, chunk=4), generate_onnxruntime(GREEDY, prompt, 11)
    assert len(ours.tokens) == len(prompt) + 11
    assert ours.tokens == ref.tokens
    exe.close()
