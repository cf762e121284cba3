"""A softmax's division taken out of the values product that reads it (compiler/graph/softmax_rows.py): a decode
step's attention over a cache and this step's row, softmax(q . K^T) . concat(past V, new V), runs its softmax as
one kernel; on every device against numpy, and as the NVIDIA profile compiles it (no device needed)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import foreign_profile

import portable
from portable import profiles, profiling

RNG = np.random.default_rng(11)
FLOAT_DIVISION = re.compile(r"float v\d+ = v\d+ / v\d+;")


def _attention(heads: int, past: int, dim: int, softmax_out: bool = False):
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("q", f, [heads, 1, dim]),
              helper.make_tensor_value_info("k", f, [heads, past + 1, dim]),
              helper.make_tensor_value_info("past_v", f, [heads, past, dim]),
              helper.make_tensor_value_info("new_v", f, [heads, 1, dim])]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="Transpose"),
             helper.make_node("MatMul", ["q", "kt"], ["scores"], name="MatMul"),
             helper.make_node("Softmax", ["scores"], ["p"], axis=-1, name="Softmax"),
             helper.make_node("Concat", ["past_v", "new_v"], ["v"], axis=1, name="Concat"),
             helper.make_node("MatMul", ["p", "v"], ["out"], name="MatMul_1")]
    outputs = [helper.make_tensor_value_info("out", f, [heads, 1, dim])]
    if softmax_out:
        outputs.append(helper.make_tensor_value_info("p", f, [heads, 1, past + 1]))
    g = helper.make_graph(nodes, "attention", inputs, outputs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reference(q, k, past_v, new_v):
    s = q @ k.transpose(0, 2, 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    p = e / e.sum(-1, keepdims=True)
    return p @ np.concatenate([past_v, new_v], axis=1), p


def _inputs(heads, past, dim):
    return [RNG.standard_normal(s).astype(np.float32) for s in
            ((heads, 1, dim), (heads, past + 1, dim), (heads, past, dim), (heads, 1, dim))]


@pytest.mark.parametrize("profile", ["", "nvidia"])
@pytest.mark.parametrize("heads,past,dim", [(8, 256, 64), (4, 31, 16), (1, 7, 8)])
def test_decode_attention_matches(device, heads, past, dim, profile):
    """On the device's own profile, and with the NVIDIA profile's kernels (one workgroup per softmax row) run on
    it."""
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    model = _attention(heads, past, dim)
    args = _inputs(heads, past, dim)
    shapes = [a.shape for a in args]
    if profile:
        live = open_device(device)
        exe = CompiledGraph(compile_module(graph_text(model, shapes), foreign_profile(profile, live),
                                           (live.info.api,)), live)
    else:
        exe = portable.compile(model, device=device, input_shapes=shapes)
    (out,) = exe(*args)
    np.testing.assert_allclose(out, _reference(*args)[0], rtol=2e-5, atol=2e-5)
    exe.close()


def test_probabilities_read_elsewhere(device):
    """The probabilities are an output too: both come back right."""
    model = _attention(4, 40, 16, softmax_out=True)
    args = _inputs(4, 40, 16)
    exe = portable.compile(model, device=device, input_shapes=[a.shape for a in args])
    out, p = exe(*args)
    ref_out, ref_p = _reference(*args)
    np.testing.assert_allclose(out, ref_out, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(p, ref_p, rtol=2e-5, atol=2e-6)
    exe.close()


@pytest.mark.parametrize("api", ["vulkan", "opencl"])
def test_softmax_is_one_kernel(api):
    """Compiled for the NVIDIA profile: one kernel holds the whole softmax (max, exp, sum, division) and the
    values product reads its probabilities; the division is no longer in the product's kernel."""
    model = _attention(8, 256, 64)
    shapes = [(8, 1, 64), (8, 257, 64), (8, 256, 64), (8, 1, 64)]
    prof = profiles.all_profiles()["nvidia"]
    exe, sources = profiling.compile_with_sources(model, profiles.codegen_options(prof), api, shapes)
    softmax = [i for i, s in enumerate(sources) if "Softmax" in s["nodes"]]
    assert len(softmax) == 1, [s["nodes"] for s in sources]
    if api == "opencl":
        src = exe.kernels[exe.dispatches[softmax[0]].kernel].opencl
        assert "exp(" in src and FLOAT_DIVISION.search(src)  # the exponentials and the division, in one kernel
        product = exe.kernels[exe.dispatches[-1].kernel].opencl
        assert not FLOAT_DIVISION.search(product) and "exp(" not in product


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_exported_decoder_softmax_is_one_kernel(tmp_path, kv_heads):
    """A Hugging Face Llama's decode step (multi-head, and grouped-query with two query heads per KV head, whose
    product reads the heads split as (KV heads, group)), compiled for the NVIDIA profile: one softmax kernel a
    layer (rows too short to share a workgroup keep their kernels: test_short_rows_unchanged)."""
    pytest.importorskip("transformers", reason="the decoder is built with transformers")
    from portable.llm import with_cache_write
    from portable.llm.hf_export import build, export
    from portable.llm.session import DecoderSession

    path = export(build("llama", kv_heads=kv_heads), tmp_path / "llama.onnx")
    step, _ = with_cache_write(__import__("onnx").load(str(path)))
    shapes = DecoderSession(path, buckets=(256,))._shapes(256, 1)  # rows of 257: long enough to share a workgroup
    prof = profiles.all_profiles()["nvidia"]
    _, sources = profiling.compile_with_sources(step, profiles.codegen_options(prof), "vulkan", shapes)
    softmax = [s["nodes"] for s in sources if any(n.endswith("/Softmax") for n in s["nodes"])]
    assert len(softmax) == 2, softmax  # two layers


def test_short_rows_unchanged():
    """Rows of 8 columns are too short for the NVIDIA profile to share a workgroup: the softmax stays as it was
    (max, exp, sum apart) and the division stays in the product instead of becoming one more kernel."""
    model = _attention(4, 7, 8)
    shapes = [(4, 1, 8), (4, 8, 8), (4, 7, 8), (4, 1, 8)]
    prof = profiles.all_profiles()["nvidia"]
    exe, sources = profiling.compile_with_sources(model, profiles.codegen_options(prof), "opencl", shapes)
    product = exe.kernels[exe.dispatches[-1].kernel].opencl
    assert FLOAT_DIVISION.search(product) and not any("MatMul_1" in s["nodes"] and "Softmax" in s["nodes"]
                                                      for s in sources)
