"""Picking the next token from logits: greedy, or temperature with top-k / top-p (nucleus) sampling."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgument


@dataclass(frozen=True)
class Sampler:
    """temperature 0 (the default) is greedy; top_k 0 and top_p 1.0 leave the distribution whole."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise InvalidArgument(f"temperature must be >= 0 (0 is greedy), got {self.temperature}")
        if self.top_k < 0:
            raise InvalidArgument(f"top_k must be >= 0 (0 keeps every token), got {self.top_k}")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidArgument(f"top_p must be in (0, 1], got {self.top_p}")

    def picker(self):
        """A function logits -> token id, with its own random generator (seeded)."""
        rng = np.random.default_rng(self.seed)

        def pick(logits: np.ndarray) -> int:
            return sample(logits, self, rng)

        return pick


def sample(logits: np.ndarray, s: Sampler, rng: np.random.Generator) -> int:
    x = np.asarray(logits, np.float64).reshape(-1)
    if s.temperature == 0.0:
        return int(np.argmax(x))
    x = x / s.temperature
    order = np.argsort(-x, kind="stable")
    if s.top_k:
        order = order[:s.top_k]
    z = x[order] - x[order[0]]
    p = np.exp(z)
    p /= p.sum()
    if s.top_p < 1.0:
        keep = int(np.searchsorted(np.cumsum(p), s.top_p) + 1)  # the smallest prefix reaching top_p
        order, p = order[:keep], p[:keep] / p[:keep].sum()
    return int(order[rng.choice(len(order), p=p)])
