"""The Llama-style decoder step (models/decoder.py, exported to ONNX and committed) on every device: greedy
generation with the KV cache carried on the device matches onnxruntime running the same ONNX on the CPU,
logits step by step and tokens exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import portable
from models.generate import cache_layout, generate_onnxruntime, generate_portable

MODEL = Path(__file__).resolve().parents[1] / "models" / "onnx" / "decoder_tiny.onnx"
# A regression in fusion shows here: 2 layers of RMSNorm, rotary attention over the cache and a SwiGLU MLP.
MAX_DISPATCHES = 65

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
