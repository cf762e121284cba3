"""GGUF files (written with the gguf package's writer from a random-init Hugging Face Llama, quantized to Q4_0, Q8_0,
Q4_K, F16) run as the same decoder step as the ONNX path: logits against the model in torch with the weights the
file holds (dequantized), the tokenizer from the file's vocabulary, `portable generate model.gguf`."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers", reason="the tiny decoders are built with transformers")
pytest.importorskip("gguf", reason="GGUF files are written and read with the gguf package")

from gguf import GGMLQuantizationType as Q

from portable.llm import DecoderSession, Sampler, gguf_export, gguf_model
from portable.llm.hf_export import build, train_tokenizer
from portable.llm.reference import run_loop

PROMPT = [5, 17, 300, 42, 7, 99, 123, 8, 1, 2, 3]


def mixed(name: str):
    """Attention Q4_0 (query, key, value) and Q8_0 (output), feed-forward Q4_K, the head F16."""
    if name.endswith(("attn_q.weight", "attn_k.weight", "attn_v.weight")):
        return Q.Q4_0
    if name.endswith("attn_output.weight"):
        return Q.Q8_0
    if ".ffn_" in name:
        return Q.Q4_K
    return Q.F16


def torch_reference(model, weights):
    """(feed, reset) running the model in torch on the whole sequence so far with the file's weights."""
    import torch

    model.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=False)
    seq: list[int] = []

    def feed(tokens):
        seq.extend(tokens)
        with torch.no_grad():
            return model(torch.tensor([seq])).logits[0, -1].numpy()

    return feed, seq.clear


def test_q4k_codes_are_the_gguf_values():
    """Q4_K blocks of arbitrary bytes (finite d, dmin) read as int8 codes, scales and offsets give exactly what the
    gguf package dequantizes: the decoder keeps the codes (a byte a weight) and scales them in the matvec."""
    from gguf import quants

    b = np.random.default_rng(1).integers(0, 256, (8, 3, 144), dtype=np.uint8)
    b[..., 0:2] = np.float16(0.013).reshape(1).view(np.uint8)
    b[..., 2:4] = np.float16(0.007).reshape(1).view(np.uint8)
    b = b.reshape(8, -1)
    codes, scale, offset = gguf_model.q4_k_codes(b)
    assert codes.dtype == np.int8 and codes.shape == (8, 24, 32) and codes.min() >= 0 and codes.max() <= 15
    np.testing.assert_array_equal((codes * scale - offset).reshape(8, -1), quants.dequantize(b, Q.Q4_K))


def test_q4k_quantizer_round_trip():
    from gguf import quants

    w = np.random.default_rng(0).standard_normal((6, 512)).astype(np.float32)
    back = quants.dequantize(gguf_export.quantize_q4_k(w), Q.Q4_K)
    assert back.shape == w.shape
    q40 = quants.dequantize(quants.quantize(w, Q.Q4_0), Q.Q4_0)
    assert np.abs(back - w).mean() < 1.2 * np.abs(q40 - w).mean()  # 4 bits a value, like Q4_0
    assert np.abs(back - w).max() < 0.25


def test_mixed_types_gqa_match_torch(device, tmp_path):
    """A GQA Llama (4 query heads, 2 KV heads) whose matrices are Q4_0, Q8_0, Q4_K and F16 in one file: prefill in
    chunks of 8 then greedy decoding, logits within 1e-3 of torch on the dequantized weights, the same tokens."""
    model = build("llama", hidden=256, layers=2, kv_heads=2)
    path = tmp_path / "mixed.gguf"
    weights = gguf_export.write(model, path, qtype_of=mixed)
    onnx_model = gguf_model.to_onnx(path)
    ops = {n.op_type for n in onnx_model.graph.node}
    assert "MatMulNBits" in ops  # Q4_0 kept 4-bit
    assert any(t.data_type == 3 for t in onnx_model.graph.initializer)  # Q8_0 kept int8
    assert any(t.data_type == 10 for t in onnx_model.graph.initializer)  # F16 kept float16
    feed, _ = torch_reference(model, weights)
    ref, ref_logits, _, _ = run_loop(feed, PROMPT, 6, Sampler().picker())
    with DecoderSession(path, device, buckets=(32,), prefill_chunks=(8,)) as s:
        tokens, logits, _, _ = run_loop(s.feed, PROMPT, 6, Sampler().picker())
    assert np.abs(ref_logits[0]).max() > 0.1
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < 1e-3
    assert tokens == ref


def test_generate_gguf_with_its_vocabulary(device, tmp_path, capsys):
    """`portable generate model.gguf` with no tokenizer.json: the byte-level BPE vocabulary and merges stored in
    the file encode the prompt as the original tokenizer does; greedy tokens equal torch's on the Q8_0 weights."""
    from tokenizers import Tokenizer

    from portable.cli import main
    from portable.llm.generate import generate

    (tmp_path / "tok").mkdir()
    tok_json = train_tokenizer(tmp_path / "tok" / "tokenizer.json")
    model = build("llama")
    path = tmp_path / "model.gguf"
    weights = gguf_export.write(model, path, "Q8_0", tokenizer_json=tok_json)
    prompt = "the decoder keeps its cache on the device"
    ids = Tokenizer.from_file(str(tok_json)).encode(prompt).ids
    tok = gguf_model.tokenizer(path)
    assert tok.encode(prompt).ids == ids and tok.decode(ids) == prompt
    feed, _ = torch_reference(model, weights)
    ref, _, _, _ = run_loop(feed, ids, 8, Sampler().picker())
    r = generate(path, prompt, device=device, max_new_tokens=8, buckets=(32,), prefill_chunks=(8,))
    assert r.prompt_tokens == ids and r.tokens == ref
    capsys.readouterr()
    assert main(["generate", str(path), "--device", device, "--prompt", prompt, "--max-new-tokens", "8",
                 "--buckets", "32", "--prefill-chunk", "8"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == (prompt + r.text).strip()
    assert "decode: 8 tokens" in err


def test_gguf_errors(tmp_path):
    import gguf

    from portable.errors import InvalidArgument, UnsupportedOp

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00")
    with pytest.raises(InvalidArgument, match="not a readable GGUF file"):
        gguf_model.to_onnx(bad)
    other = tmp_path / "other.gguf"
    w = gguf.GGUFWriter(str(other), "mamba")
    w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(UnsupportedOp, match="architecture 'mamba'"):
        gguf_model.to_onnx(other)
    with pytest.raises(InvalidArgument, match="no tokenizer vocabulary"):
        gguf_model.tokenizer(other)
