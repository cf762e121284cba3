"""A Hugging Face Llama model (hf_export.build) written as a GGUF file the way llama.cpp's convert_hf_to_gguf.py
writes one (tensor names, query/key rows permuted for llama.cpp's rotary, metadata, a byte-level BPE vocabulary),
with the matrices quantized to a chosen type. For tests and benchmarks: the same weights for portable and llama.cpp.

`write(model, path, qtype)` returns the model's weights as the file holds them, dequantized (the reference)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgument

QK_K = 256


def permute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """convert_hf_to_gguf's query/key row order (inverse of gguf_model.unpermute_rows)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def quantize_q4_k(w: np.ndarray) -> np.ndarray:
    """float32 [N, K] (K a multiple of 256) -> Q4_K blocks as uint8 [N, K / 256 * 144]: per 32 values a 6-bit scale
    and min, per 256 a float16 scale of each (w = d * sc * q - dmin * m, q in 0..15); the gguf package has no
    Q4_K quantizer."""
    n, k = w.shape
    if k % QK_K:
        raise InvalidArgument(f"Q4_K needs rows of a multiple of {QK_K} values, got {k}")
    x = w.reshape(-1, 8, 32).astype(np.float32)  # [blocks, sub-blocks, 32]
    lo = np.minimum(x.min(-1), 0.0)
    step = (x.max(-1) - lo) / 15.0  # [blocks, 8]
    d = step.max(-1) / 63.0
    dmin = (-lo).max(-1) / 63.0
    d16, dmin16 = d.astype(np.float16), dmin.astype(np.float16)
    df, dminf = d16.astype(np.float32)[:, None], dmin16.astype(np.float32)[:, None]
    sc = np.clip(np.round(np.divide(step, df, out=np.zeros_like(step), where=df > 0)), 0, 63).astype(np.uint8)
    m = np.clip(np.round(np.divide(-lo, dminf, out=np.zeros_like(lo), where=dminf > 0)), 0, 63).astype(np.uint8)
    scale = (df * sc)[..., None]
    q = np.clip(np.round(np.divide(x + (dminf * m)[..., None], scale, out=np.zeros_like(x), where=scale > 0)), 0, 15)
    q = q.astype(np.uint8)  # [blocks, 8, 32]
    qs = (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(-1, 128)  # 32 bytes per pair: sub-block 2c low, 2c + 1 high
    packed = np.empty((x.shape[0], 12), np.uint8)
    packed[:, 0:4] = (sc[:, :4] & 63) | ((sc[:, 4:] >> 4) << 6)
    packed[:, 4:8] = (m[:, :4] & 63) | ((m[:, 4:] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4)
    blocks = np.concatenate([d16[:, None].view(np.uint8), dmin16[:, None].view(np.uint8), packed, qs], axis=1)
    return blocks.reshape(n, -1)


def _quantize(w: np.ndarray, qtype: Any) -> np.ndarray:
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    if qtype == Q.F32:
        return w.astype(np.float32)
    if qtype == Q.F16:
        return w.astype(np.float16)
    if qtype == Q.Q4_K:
        return quantize_q4_k(w)
    return quants.quantize(w.astype(np.float32), qtype)


def _vocab(tokenizer_json: str | Path | None, vocab: int) -> tuple[list[str], list[int], list[str]]:
    """(tokens, token types, merges) of a byte-level BPE tokenizer.json, padded with unused tokens to `vocab`."""
    import json

    tokens, merges = [], []
    if tokenizer_json is not None:
        spec = json.loads(Path(tokenizer_json).read_text())["model"]
        by_id = sorted(spec["vocab"].items(), key=lambda kv: kv[1])
        tokens = [t for t, _ in by_id][:vocab]
        merges = [m if isinstance(m, str) else " ".join(m) for m in spec.get("merges", [])]
    types = [1] * len(tokens)  # NORMAL
    while len(tokens) < vocab:
        tokens.append(f"<unused_{len(tokens)}>")
        types.append(5)  # UNUSED
    return tokens, types, merges


def write(model: Any, path: str | Path, qtype: Any = "Q4_0", tokenizer_json: str | Path | None = None,
          qtype_of: Callable[[str], Any] | None = None) -> dict[str, np.ndarray]:
    """Write a LlamaForCausalLM to `path`: matrices in `qtype` (a GGMLQuantizationType or its name; `qtype_of(name)`
    overrides it per GGUF tensor name), norms and the token embedding in float32. Returns {HF parameter name:
    float32 weights as stored, dequantized}: load them into the model for a reference on the same weights."""
    import gguf
    from gguf import GGMLQuantizationType as Q

    c = model.config
    if c.model_type != "llama":
        raise InvalidArgument(f"gguf_export writes Llama models; got {c.model_type!r}")
    qt = Q[qtype] if isinstance(qtype, str) else qtype
    heads, kv = c.num_attention_heads, c.num_key_value_heads
    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    for i in range(c.num_hidden_layers):
        hf, g = f"model.layers.{i}.", f"blk.{i}."
        names.update({hf + "input_layernorm.weight": g + "attn_norm.weight",
                      hf + "post_attention_layernorm.weight": g + "ffn_norm.weight",
                      hf + "self_attn.q_proj.weight": g + "attn_q.weight",
                      hf + "self_attn.k_proj.weight": g + "attn_k.weight",
                      hf + "self_attn.v_proj.weight": g + "attn_v.weight",
                      hf + "self_attn.o_proj.weight": g + "attn_output.weight",
                      hf + "mlp.gate_proj.weight": g + "ffn_gate.weight",
                      hf + "mlp.up_proj.weight": g + "ffn_up.weight",
                      hf + "mlp.down_proj.weight": g + "ffn_down.weight"})
    if c.tie_word_embeddings:
        names.pop("lm_head.weight")
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("portable random-init llama")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_rope_dimension_count(c.hidden_size // heads)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(float(getattr(c, "rope_theta", None) or c.rope_parameters["rope_theta"]))
    w.add_vocab_size(c.vocab_size)
    w.add_file_type({Q.F32: 0, Q.F16: 1, Q.Q4_0: 2, Q.Q8_0: 7, Q.Q4_K: 15}.get(qt, 0))
    tokens, types, merges = _vocab(tokenizer_json, c.vocab_size)
    w.add_tokenizer_model("gpt2" if merges else "none")  # llama.cpp needs merges for a BPE vocabulary
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    if merges:
        w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(0)
    w.add_add_bos_token(False)
    reference = {}
    for hf, name in names.items():
        x = sd[hf]
        t = Q.F32 if x.ndim == 1 or name == "token_embd.weight" else (qtype_of(name) if qtype_of else None) or qt
        if name.endswith("attn_q.weight"):
            x = permute_rows(x, heads)
        elif name.endswith("attn_k.weight"):
            x = permute_rows(x, kv)
        data = _quantize(x, t)
        back = np.asarray(gguf.quants.dequantize(data, t), np.float32).reshape(x.shape)
        if name.endswith("attn_q.weight"):
            back = _unpermute(back, heads)
        elif name.endswith("attn_k.weight"):
            back = _unpermute(back, kv)
        reference[hf] = back
        w.add_tensor(name, data, raw_dtype=t if t not in (Q.F32, Q.F16) else None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return reference


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    from .gguf_model import unpermute_rows

    return unpermute_rows(w, heads)
