"""Tiny random-init Hugging Face decoders exported to ONNX the way users export them: inputs input_ids,
attention_mask, position_ids (where the model takes them) and past_key_values.{i}.key/value with a dynamic past
length; outputs logits and present.{i}.key/value. Used by the tests and the LLM benchmark (needs torch and
transformers; nothing is downloaded: the weights come from a fixed seed)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

ARCHS = ("llama", "qwen2", "gpt2", "phi", "gemma")


def build(arch: str, hidden: int = 64, layers: int = 2, vocab: int = 1000, seed: int = 0,
          kv_heads: int | None = None) -> Any:
    """A random-init decoder of `arch` (llama: MHA, or GQA with `kv_heads`; qwen2: GQA with 4 query heads per KV
    head; gpt2)."""
    import torch

    tf = _transformers()
    torch.manual_seed(seed)
    if arch == "llama":
        cfg = tf.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                             num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=kv_heads or 4,
                             max_position_embeddings=2048, tie_word_embeddings=False)
        model = tf.LlamaForCausalLM(cfg)
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                             num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=1,
                             max_position_embeddings=2048, tie_word_embeddings=True)
        model = tf.Qwen2ForCausalLM(cfg)
    elif arch == "phi":  # LayerNorm, partial rotary, parallel attention and MLP, GELU
        cfg = tf.PhiConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=4,
                           partial_rotary_factor=0.5, max_position_embeddings=2048)
        model = tf.PhiForCausalLM(cfg)
    elif arch == "gemma":  # RMSNorm (1 + w), scaled embedding, MQA, GELU-tanh gate, tied embedding
        cfg = tf.GemmaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                             num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                             max_position_embeddings=2048)
        model = tf.GemmaForCausalLM(cfg)
    elif arch == "gpt2":
        cfg = tf.GPT2Config(vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=4, n_positions=2048)
        model = tf.GPT2LMHeadModel(cfg)
    else:
        raise ValueError(f"unknown arch {arch!r}; one of {ARCHS}")
    model.config._attn_implementation = "eager"
    return model.eval()


def _transformers() -> Any:
    # transformers imports torchvision where it is installed, whose fake-kernel registrations fail on a CPU-only
    # torch with another op schema; decoders never use them.
    name = "torchvision._meta_registrations"
    if name not in sys.modules:
        sys.modules[name] = types.ModuleType(name)
    import transformers

    return transformers


def kv_shape(model: Any) -> tuple[int, int, int]:
    """(layers, kv heads, head dim) of a model from build()."""
    c = model.config
    heads = getattr(c, "num_attention_heads", None) or c.n_head
    kv = getattr(c, "num_key_value_heads", None) or heads
    hidden = getattr(c, "hidden_size", None) or c.n_embd
    layers = getattr(c, "num_hidden_layers", None) or c.n_layer
    return layers, kv, hidden // heads


class _Flat:
    """forward(input_ids, attention_mask, position_ids, *past) -> (logits, *present): the signature an ONNX
    export of a decoder with a cache has (past as flat key/value tensors, not a Cache object)."""

    def __new__(cls, model: Any, layers: int):
        import torch
        DynamicCache = _transformers().DynamicCache

        class Flat(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, input_ids, attention_mask, position_ids, *past):
                cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(layers)],
                                     config=model.config)
                out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                 past_key_values=cache, use_cache=True)
                present = out.past_key_values
                flat = []
                for i in range(layers):
                    layer = present.layers[i]
                    flat += [layer.keys, layer.values]
                return (out.logits, *flat)

        return Flat()


def names(layers: int) -> tuple[list[str], list[str]]:
    ins = ["input_ids", "attention_mask", "position_ids"]
    outs = ["logits"]
    for i in range(layers):
        ins += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
        outs += [f"present.{i}.key", f"present.{i}.value"]
    return ins, outs


def export(model: Any, path: str | Path, exporter: str = "legacy", opset: int = 17) -> Path:
    """Export `model` (from build()) with torch.onnx: exporter "legacy" (TorchScript) or "dynamo"."""
    import torch

    layers, kv, hd = kv_shape(model)
    flat = _Flat(model, layers).eval()
    seq, past = 3, 5
    args = (torch.ones(1, seq, dtype=torch.int64), torch.ones(1, past + seq, dtype=torch.int64),
            torch.arange(past, past + seq, dtype=torch.int64)[None],
            *[torch.randn(1, kv, past, hd) for _ in range(2 * layers)])
    ins, outs = names(layers)
    path = Path(path)
    if exporter == "legacy":
        dyn = {"input_ids": {1: "seq"}, "attention_mask": {1: "total"}, "position_ids": {1: "seq"},
               "logits": {1: "seq"}}
        for n in ins[3:]:
            dyn[n] = {2: "past"}
        for n in outs[1:]:
            dyn[n] = {2: "total"}
        torch.onnx.export(flat, args, str(path), input_names=ins, output_names=outs, dynamic_axes=dyn,
                          opset_version=opset, dynamo=False)
    elif exporter == "dynamo":
        dyn = torch.export.Dim.DYNAMIC
        shapes = {"input_ids": {1: dyn}, "attention_mask": {1: dyn}, "position_ids": {1: dyn},
                  "past": tuple([{2: dyn}] * (2 * layers))}
        torch.onnx.export(flat, args, str(path), input_names=ins, output_names=outs, dynamic_shapes=shapes,
                          opset_version=max(opset, 18), dynamo=True, external_data=False)
    else:
        raise ValueError(f"exporter must be 'legacy' or 'dynamo', got {exporter!r}")
    return path


SAMPLE_TEXT = ("portable runs models on every GPU through Vulkan and OpenCL; a decoder keeps its cache on the device "
               "and generates one token after another. The quick brown fox jumps over the lazy dog. ") * 20


def train_tokenizer(path: str | Path, vocab: int = 1000, text: str = SAMPLE_TEXT) -> Path:
    """A small byte-level BPE tokenizer.json trained on `text` (ids below `vocab`), for tests and benchmarks."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([text], trainer)
    tok.save(str(path))
    return Path(path)
