"""A GGUF file (llama.cpp's format, read with the `gguf` package) as the same decoder step a Hugging Face export is:
inputs input_ids, attention_mask, position_ids, past_key_values.{i}.key/value; outputs logits, present.{i}.key/value.

Weights keep their GGUF form where ONNX has one: Q4_0 becomes `com.microsoft:MatMulNBits` (4 bits, block 32, no zero
point: q - 8, the nibbles repacked low-first), Q8_0 int8 blocks times their scales, Q4_K int8 codes times their
sub-block scales less their mins (q4_k_codes), F16 a float16 constant cast to float32. The three quantized forms
hold a byte a weight on the device, scaled inside the matvec that reads them. Other types (Q5_K, Q6_K, ...) are
dequantized to float32 by the `gguf` package. Llama-architecture files store the query and key rows permuted for
llama.cpp's interleaved rotary; they are put back in the order of the Hugging Face rotary (rotate_half) that the
graph uses."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgument, UnsupportedOp

ARCHITECTURES = ("llama",)
NEG = -1e30  # additive mask value: a fully masked row stays finite


def _reader(path: str | Path) -> Any:
    try:
        import gguf
    except ImportError:
        raise InvalidArgument("reading .gguf files needs the `gguf` package: pip install 'portable[llm]'") from None
    p = Path(path)
    if not p.is_file():
        raise InvalidArgument(f"GGUF file {p} does not exist")
    try:
        return gguf.GGUFReader(str(p))
    except Exception as e:  # a truncated or foreign file: the gguf package raises ValueError, struct.error, ...
        raise InvalidArgument(f"{p} is not a readable GGUF file: {type(e).__name__}: {e}") from e


def metadata(reader: Any) -> dict[str, Any]:
    """{key: value} of a GGUF file's metadata (strings, numbers, lists)."""
    out = {}
    for name, f in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        try:
            out[name] = f.contents()
        except (ValueError, TypeError, IndexError, UnicodeDecodeError):  # a value the gguf package cannot show
            out[name] = None
    return out


@dataclass(frozen=True)
class LlamaParams:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    eps: float
    rope_base: float


def _params(meta: dict[str, Any], tensors: dict[str, Any], path: Path) -> LlamaParams:
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise UnsupportedOp(f"{path}: GGUF architecture {arch!r}; portable maps {', '.join(ARCHITECTURES)} (export "
                            f"other models to ONNX with torch.onnx or optimum instead)")

    def need(key: str) -> Any:
        if f"{arch}.{key}" not in meta:
            raise InvalidArgument(f"{path}: GGUF metadata lacks {arch}.{key}; the file is incomplete")
        return meta[f"{arch}.{key}"]

    hidden, heads = int(need("embedding_length")), int(need("attention.head_count"))
    kv = int(meta.get(f"{arch}.attention.head_count_kv", heads))
    head_dim = int(meta.get(f"{arch}.rope.dimension_count", hidden // heads))
    if head_dim != hidden // heads:
        raise UnsupportedOp(f"{path}: rotary over {head_dim} of {hidden // heads} head dims (partial rotary) is not "
                            f"mapped")
    if meta.get(f"{arch}.rope.scaling.type", "none") not in ("none", b"none"):
        raise UnsupportedOp(f"{path}: rope scaling {meta[f'{arch}.rope.scaling.type']!r} is not mapped")
    vocab = int(tensors["token_embd.weight"].data.shape[0])
    return LlamaParams(hidden=hidden, layers=int(need("block_count")), heads=heads, kv_heads=kv, head_dim=head_dim,
                       ffn=int(need("feed_forward_length")), vocab=vocab,
                       eps=float(meta.get(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)),
                       rope_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)))


def unpermute_rows(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo convert_hf_to_gguf's query/key row permutation (rows = output features, any per-row payload)."""
    n = rows.shape[0]
    return rows.reshape(heads, n // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def dequantize(t: Any) -> np.ndarray:
    """A GGUF tensor as float32 in numpy order ([rows, columns] for a matrix)."""
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    if t.tensor_type == Q.F32:
        return np.asarray(t.data, np.float32)
    try:
        return np.asarray(quants.dequantize(np.asarray(t.data), t.tensor_type), np.float32)
    except NotImplementedError:
        raise UnsupportedOp(f"GGUF tensor {t.name}: type {t.tensor_type.name} cannot be dequantized by the gguf "
                            f"package; requantize the file (Q4_0, Q8_0, Q4_K, F16 and F32 are mapped)") from None


class _Builder:
    """ONNX nodes and initializers under unique names."""

    def __init__(self):
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.n = 0

    def const(self, value: np.ndarray, name: str = "c") -> str:
        from onnx import numpy_helper

        self.n += 1
        full = f"{name}__{self.n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), full))
        return full

    def op(self, op: str, inputs: list[str], out: str | None = None, domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        self.n += 1
        out = out or f"{op.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{self.n}", domain=domain or None,
                                           **attrs))
        return out


def _linear(b: _Builder, x: str, t: Any, heads_permuted: int = 0) -> str:
    """x [1, S, K] @ W^T for the GGUF matrix t [N, K], in the weight's own form where ONNX has one."""
    from gguf import GGMLQuantizationType as Q

    data = np.asarray(t.data)
    if heads_permuted:
        data = unpermute_rows(data, heads_permuted)
    n = data.shape[0]
    if t.tensor_type == Q.Q4_0:
        blocks = data.reshape(n, -1, 18)
        nb = blocks.shape[1]
        scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32).reshape(n * nb)
        qs = blocks[:, :, 2:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # element j is qs[j] low, element j + 16 qs[j] high
        packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)  # MatMulNBits: low nibble first
        return b.op("MatMulNBits", [x, b.const(packed, t.name), b.const(scale, t.name + ".scale")],
                    domain="com.microsoft", K=nb * 32, N=n, bits=4, block_size=32)
    if t.tensor_type == Q.Q8_0:
        blocks = data.reshape(n, -1, 34)
        nb = blocks.shape[1]
        scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32)  # [N, nb, 1]
        q = blocks[:, :, 2:].copy().view(np.int8)  # [N, nb, 32]
        w = b.op("Mul", [b.op("Cast", [b.const(q, t.name)], to=1), b.const(scale, t.name + ".scale")])
        w = b.op("Reshape", [w, b.const(np.array([n, nb * 32], np.int64))])
        return b.op("MatMul", [x, b.op("Transpose", [w], perm=[1, 0])])
    if t.tensor_type == Q.Q4_K:
        codes, scale, offset = q4_k_codes(data)  # [N, sub-blocks, 32], [N, sub-blocks, 1] twice
        w = b.op("Mul", [b.op("Cast", [b.const(codes, t.name)], to=1), b.const(scale, t.name + ".scale")])
        w = b.op("Sub", [w, b.const(offset, t.name + ".min")])
        w = b.op("Reshape", [w, b.const(np.array([n, codes.shape[1] * 32], np.int64))])
        return b.op("MatMul", [x, b.op("Transpose", [w], perm=[1, 0])])
    if t.tensor_type == Q.F16:
        w = b.op("Cast", [b.const(np.ascontiguousarray(data.reshape(n, -1).T), t.name)], to=1)
        return b.op("MatMul", [x, w])
    w = dequantize(t) if not heads_permuted else unpermute_rows(dequantize(t), heads_permuted)
    return b.op("MatMul", [x, b.const(np.ascontiguousarray(w.T), t.name)])


def q4_k_codes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_K rows (uint8 [N, K / 256 * 144]) -> (codes int8 [N, K / 32, 32] in 0..15, scale and offset float32
    [N, K / 32, 1]) with w = codes * scale - offset: per 256 values a float16 d and dmin, per 32 a 6-bit scale sc
    and min m (scale = d * sc, offset = dmin * m), per byte of qs two codes (32 bytes hold sub-block 2c in their
    low nibbles and 2c + 1 in their high ones)."""
    n = data.shape[0]
    blocks = data.reshape(n, -1, 144)
    nb = blocks.shape[1]
    d = blocks[..., 0:2].copy().view(np.float16).astype(np.float32)  # [N, nb, 1]
    dmin = blocks[..., 2:4].copy().view(np.float16).astype(np.float32)
    s = blocks[..., 4:16].astype(np.uint8)
    sc = np.concatenate([s[..., 0:4] & 63, (s[..., 8:12] & 15) | ((s[..., 0:4] >> 6) << 4)], axis=-1)
    m = np.concatenate([s[..., 4:8] & 63, (s[..., 8:12] >> 4) | ((s[..., 4:8] >> 6) << 4)], axis=-1)
    qs = blocks[..., 16:].reshape(n, nb, 4, 32)
    codes = np.stack([qs & 15, qs >> 4], axis=3).reshape(n, nb * 8, 32).astype(np.int8)
    scale = (d * sc).reshape(n, nb * 8, 1)
    offset = (dmin * m).reshape(n, nb * 8, 1)
    return codes, scale.astype(np.float32), offset.astype(np.float32)


def _rms_norm(b: _Builder, x: str, weight: np.ndarray, eps: float) -> str:
    ms = b.op("ReduceMean", [b.op("Mul", [x, x])], axes=[-1], keepdims=1)
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [ms, b.const(np.array(eps, np.float32))])])])
    return b.op("Mul", [b.op("Mul", [x, inv]), b.const(weight.astype(np.float32), "norm")])


def _heads(b: _Builder, x: str, heads: int, hd: int) -> str:
    """[1, S, heads * hd] -> [1, heads, S, hd]."""
    return b.op("Transpose", [b.op("Reshape", [x, b.const(np.array([1, -1, heads, hd], np.int64))])],
                perm=[0, 2, 1, 3])


def _rotary(b: _Builder, x: str, cos: str, sin: str, hd: int) -> str:
    h = hd // 2
    first = b.op("Slice", [x, b.const(np.array([0], np.int64)), b.const(np.array([h], np.int64)),
                           b.const(np.array([3], np.int64))])
    second = b.op("Slice", [x, b.const(np.array([h], np.int64)), b.const(np.array([hd], np.int64)),
                            b.const(np.array([3], np.int64))])
    rot = b.op("Concat", [b.op("Neg", [second]), first], axis=-1)
    return b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [rot, sin])])


def _repeat_kv(b: _Builder, x: str, p: LlamaParams) -> str:
    rep = p.heads // p.kv_heads
    if rep == 1:
        return x
    x5 = b.op("Unsqueeze", [x, b.const(np.array([2], np.int64))])  # [1, kv, 1, T, hd]
    x5 = b.op("Expand", [x5, b.const(np.array([1, 1, rep, 1, 1], np.int64))])
    return b.op("Reshape", [x5, b.const(np.array([1, p.heads, -1, p.head_dim], np.int64))])


def to_onnx(path: str | Path) -> Any:
    """The decoder step of a GGUF file as an onnx.ModelProto (see the module docstring)."""
    import onnx
    from onnx import TensorProto, helper

    path = Path(path)
    reader = _reader(path)
    meta = metadata(reader)
    tensors = {t.name: t for t in reader.tensors}
    if "token_embd.weight" not in tensors:
        raise InvalidArgument(f"{path}: no token_embd.weight tensor; not a decoder GGUF file")
    p = _params(meta, tensors, path)

    def tensor(name: str) -> Any:
        if name not in tensors:
            raise InvalidArgument(f"{path}: GGUF tensor {name} is missing; the file is incomplete or of another "
                                  f"architecture than its metadata says")
        return tensors[name]

    b = _Builder()
    hd, kv = p.head_dim, p.kv_heads
    x = b.op("Gather", [b.const(dequantize(tensor("token_embd.weight")), "token_embd"), "input_ids"], axis=0)
    # rotary tables [1, 1, S, hd] from position_ids
    inv_freq = (1.0 / p.rope_base ** (np.arange(0, hd, 2, dtype=np.float64) / hd)).astype(np.float32)
    freqs = b.op("Mul", [b.op("Unsqueeze", [b.op("Cast", ["position_ids"], to=1), b.const(np.array([-1], np.int64))]),
                         b.const(inv_freq, "inv_freq")])
    emb = b.op("Unsqueeze", [b.op("Concat", [freqs, freqs], axis=-1), b.const(np.array([1], np.int64))])
    cos, sin = b.op("Cos", [emb]), b.op("Sin", [emb])
    # mask [1, 1, S, T]: key j is seen by query i (at P + i) when j <= P + i and attention_mask[j] is 1
    zero, one = b.const(np.array(0, np.int64)), b.const(np.array(1, np.int64))
    total = b.op("Squeeze", [b.op("Shape", ["attention_mask"], start=1, end=2), b.const(np.array([0], np.int64))])
    seq = b.op("Squeeze", [b.op("Shape", ["input_ids"], start=1, end=2), b.const(np.array([0], np.int64))])
    past = b.op("Squeeze", [b.op("Shape", ["past_key_values.0.key"], start=2, end=3),
                            b.const(np.array([0], np.int64))])
    keys = b.op("Unsqueeze", [b.op("Range", [zero, total, one]), b.const(np.array([0], np.int64))])  # [1, T]
    queries = b.op("Unsqueeze", [b.op("Add", [b.op("Range", [zero, seq, one]), past]),
                                 b.const(np.array([1], np.int64))])  # [S, 1]
    allowed = b.op("And", [b.op("LessOrEqual", [keys, queries]),
                           b.op("Cast", ["attention_mask"], to=TensorProto.BOOL)])
    bias = b.op("Unsqueeze", [b.op("Where", [allowed, b.const(np.array(0.0, np.float32)),
                                             b.const(np.array(NEG, np.float32))]), b.const(np.array([0, 1], np.int64))])
    scale = b.const(np.array(1.0 / np.sqrt(hd), np.float32))
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", p.vocab])]
    for i in range(p.layers):
        pre = f"blk.{i}."
        h = _rms_norm(b, x, dequantize(tensor(pre + "attn_norm.weight")), p.eps)
        q = _rotary(b, _heads(b, _linear(b, h, tensor(pre + "attn_q.weight"), p.heads), p.heads, hd), cos, sin, hd)
        k = _rotary(b, _heads(b, _linear(b, h, tensor(pre + "attn_k.weight"), kv), kv, hd), cos, sin, hd)
        v = _heads(b, _linear(b, h, tensor(pre + "attn_v.weight")), kv, hd)
        pk, pv = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, kv, "past", hd]) for n in (pk, pv)]
        k = b.op("Concat", [pk, k], f"present.{i}.key", axis=2)
        v = b.op("Concat", [pv, v], f"present.{i}.value", axis=2)
        outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, kv, "total", hd]) for n in (k, v)]
        kt = b.op("Transpose", [_repeat_kv(b, k, p)], perm=[0, 1, 3, 2])
        scores = b.op("Add", [b.op("Mul", [b.op("MatMul", [q, kt]), scale]), bias])
        att = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), _repeat_kv(b, v, p)])  # [1, heads, S, hd]
        att = b.op("Reshape", [b.op("Transpose", [att], perm=[0, 2, 1, 3]),
                               b.const(np.array([1, -1, p.heads * hd], np.int64))])
        x = b.op("Add", [x, _linear(b, att, tensor(pre + "attn_output.weight"))])
        h = _rms_norm(b, x, dequantize(tensor(pre + "ffn_norm.weight")), p.eps)
        gate = _linear(b, h, tensor(pre + "ffn_gate.weight"))
        act = b.op("Mul", [b.op("Mul", [gate, b.op("Sigmoid", [gate])]), _linear(b, h, tensor(pre + "ffn_up.weight"))])
        x = b.op("Add", [x, _linear(b, act, tensor(pre + "ffn_down.weight"))])
    x = _rms_norm(b, x, dequantize(tensor("output_norm.weight")), p.eps)
    head = tensors.get("output.weight")
    if head is not None:
        b.op("Identity", [_linear(b, x, head)], "logits")
    else:  # tied to the embedding
        b.op("MatMul", [x, b.const(np.ascontiguousarray(dequantize(tensor("token_embd.weight")).T), "lm_head")],
             "logits")
    graph = helper.make_graph(b.nodes, f"gguf_{path.stem}", inputs, outputs, b.inits)
    opsets = [helper.make_opsetid("", 17)]
    if any(n.domain == "com.microsoft" for n in b.nodes):
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    return helper.make_model(graph, opset_imports=opsets, producer_name="portable.llm.gguf_model",
                             ir_version=onnx.IR_VERSION if onnx.IR_VERSION < 10 else 9)


def tokenizer(path: str | Path) -> Any:
    """A `tokenizers.Tokenizer` from the GGUF vocabulary (tokenizer.ggml.*): byte-level BPE for model "gpt2",
    a Unigram model over the pieces' scores for SentencePiece ("llama")."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        raise InvalidArgument("the `tokenizers` package is needed: pip install 'portable[llm]'") from None
    meta = metadata(_reader(path))
    kind = meta.get("tokenizer.ggml.model")
    tokens = meta.get("tokenizer.ggml.tokens")
    if kind is None or not tokens:
        raise InvalidArgument(f"{path} holds no tokenizer vocabulary (tokenizer.ggml.*): pass --tokenizer "
                              f"tokenizer.json")
    if kind == "gpt2":
        merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
    elif kind == "llama":
        scores = meta.get("tokenizer.ggml.scores") or [0.0] * len(tokens)
        unk = int(meta.get("tokenizer.ggml.unknown_token_id", 0))
        tok = Tokenizer(models.Unigram([(t, float(s)) for t, s in zip(tokens, scores)], unk, byte_fallback=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="\u2581",
                                                                                     prepend_scheme="first")])
    else:
        raise InvalidArgument(f"{path}: tokenizer model {kind!r} is not mapped (gpt2 and llama are); pass --tokenizer "
                              f"tokenizer.json")
    return tok


def bos_token(path: str | Path) -> int | None:
    """The id to put before a prompt, where the file asks for one (tokenizer.ggml.add_bos_token)."""
    meta = metadata(_reader(path))
    if meta.get("tokenizer.ggml.add_bos_token") and "tokenizer.ggml.bos_token_id" in meta:
        return int(meta["tokenizer.ggml.bos_token_id"])
    return None
