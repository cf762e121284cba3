"""A Llama-family transformer decoder (RMSNorm, rotary positions, multi-head attention with a KV cache,
SwiGLU MLP), written from the published architecture, exported to ONNX as one decode step.

The step graph has static shapes so that it compiles once: the KV cache is a fixed `max_len` window per layer,
`pos` says which row this token fills, and positions after it are masked. Inputs: token (1, 1) int64,
pos (1,) int64, then past_k_0, past_v_0, past_k_1, ... (heads, max_len, head_dim) float32. Outputs: logits
(1, vocab) float32, then present_k_0, present_v_0, ... shaped like the past ones. Output 1 + j feeds input
2 + j on the next step, which is exactly what `CompiledGraph.with_state` carries on the device.

    python -m models.decoder            # writes models/onnx/decoder_tiny.onnx (committed, used by the tests)
    python -m models.decoder --greedy   # decoder_tiny_greedy.onnx: the step also picks the next token (argmax)
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int = 256
    dim: int = 64
    layers: int = 2
    heads: int = 4
    ffn: int = 176
    max_len: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


TINY = DecoderConfig()
# Large enough for a tokens/s figure on a GPU, small enough (~30 MB of f32 weights) to travel to the GPU host.
SMALL = DecoderConfig(vocab=2048, dim=384, layers=4, heads=6, ffn=1024, max_len=256)
CONFIGS = {"tiny": TINY, "small": SMALL}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(cfg: DecoderConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin per (position, rotary pair): the rotation angle of pair i at position p is p * base^(-2i/d)."""
    inv = cfg.rope_base ** (-torch.arange(0, cfg.head_dim, 2, dtype=torch.float32) / cfg.head_dim)
    angles = torch.arange(cfg.max_len, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cos(angles), torch.sin(angles)


def rotate(x, cos, sin):
    """Rotary embedding on (heads, 1, head_dim) with the two halves of head_dim as the pair components."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.dim, cfg.eps)
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.eps)
        self.w_gate = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        self.w_up = nn.Linear(cfg.dim, cfg.ffn, bias=False)
        self.w_down = nn.Linear(cfg.ffn, cfg.dim, bias=False)

    def forward(self, x, cos, sin, here, visible, past_k, past_v):
        cfg = self.cfg
        h = self.attn_norm(x)  # (1, dim)
        q = self.wq(h).view(cfg.heads, 1, cfg.head_dim)
        k = self.wk(h).view(cfg.heads, 1, cfg.head_dim)
        v = self.wv(h).view(cfg.heads, 1, cfg.head_dim)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        # The new row goes where `here` (max_len, 1) is true; every other row keeps the cache.
        present_k = torch.where(here, k, past_k)
        present_v = torch.where(here, v, past_v)
        scores = torch.matmul(q, present_k.transpose(1, 2)) / math.sqrt(cfg.head_dim)  # (heads, 1, max_len)
        scores = scores.masked_fill(~visible, float("-inf"))
        att = torch.matmul(torch.softmax(scores, dim=-1), present_v)  # (heads, 1, head_dim)
        x = x + self.wo(att.reshape(1, cfg.dim))
        h = self.mlp_norm(x)
        x = x + self.w_down(nn.functional.silu(self.w_gate(h)) * self.w_up(h))
        return x, present_k, present_v


class DecoderStep(nn.Module):
    """One token through the decoder: (token, pos, *past) -> (logits, *present)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim, cfg.eps)
        self.head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        cos, sin = rope_tables(cfg)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("rows", torch.arange(cfg.max_len), persistent=False)

    def forward(self, token, pos, *past):
        cfg = self.cfg
        x = self.embed(token).view(1, cfg.dim)
        cos, sin = self.cos[pos], self.sin[pos]  # (1, head_dim / 2): broadcast over heads
        here = (self.rows == pos).view(cfg.max_len, 1)
        visible = (self.rows <= pos).view(1, 1, cfg.max_len)
        presents = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, cos, sin, here, visible, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.head(self.norm(x)), *presents)


class GreedyStep(nn.Module):
    """The step picking its token on the device: (token, pos, *past) -> ([pos, chosen token] for the host (1, 2)
    int32, next token, pos + 1, *present). Outputs 1 + j feed inputs j, so every input is carried and
    `CompiledGraph.with_state(...).run_steps(n)` generates n tokens per submission, no host round trip between.
    The host's output is a tensor of its own (with the position) so that it keeps a buffer of its own where int64
    is computed as int32 (compiler/graph/narrow_i64.py) and the chosen token would otherwise be the carried one."""

    def __init__(self, step: DecoderStep):
        super().__init__()
        self.step = step

    def forward(self, token, pos, *past):
        logits, *presents = self.step(token, pos, *past)
        chosen = torch.argmax(logits, dim=-1, keepdim=True)  # (1, 1) int64, as the token input
        return (torch.cat([pos.view(1, 1), chosen], dim=1).to(torch.int32), chosen, pos + 1, *presents)


def build(cfg: DecoderConfig, seed: int = 0) -> DecoderStep:
    """Random weights with a fixed seed; norms get non-trivial scales so they are really tested."""
    torch.manual_seed(seed)
    model = DecoderStep(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (0.5 / math.sqrt(p.shape[-1])))
    return model


def example_inputs(cfg: DecoderConfig) -> tuple[torch.Tensor, ...]:
    cache = torch.zeros(cfg.heads, cfg.max_len, cfg.head_dim)
    return (torch.tensor([[1]]), torch.tensor([0]), *([cache] * (2 * cfg.layers)))


def export(cfg: DecoderConfig, path: Path, seed: int = 0, greedy: bool = False) -> Path:
    model = GreedyStep(build(cfg, seed)).eval() if greedy else build(cfg, seed)
    names = ["token", "pos"] + [f"past_{kv}_{i}" for i in range(cfg.layers) for kv in "kv"]
    first = ["chosen", "next_token", "next_pos"] if greedy else ["logits"]
    outs = first + [f"present_{kv}_{i}" for i in range(cfg.layers) for kv in "kv"]
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, example_inputs(cfg), str(path), input_names=names, output_names=outs,
                      opset_version=18, dynamo=False, do_constant_folding=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    ap.add_argument("-o", "--out", type=Path)
    ap.add_argument("--greedy", action="store_true", help="the step picks its next token on the device (GreedyStep)")
    a = ap.parse_args()
    cfg = CONFIGS[a.config]
    out = export(cfg, a.out or HERE / "onnx" / f"decoder_{a.config}{'_greedy' if a.greedy else ''}.onnx",
                 greedy=a.greedy)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
