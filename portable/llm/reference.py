"""The same decoder on onnxruntime (CPU), the cache growing through the host: the reference and the CPU peer."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np


class OrtDecoder:
    """feed(tokens) -> logits of the last token, like DecoderSession, on the unmodified export."""

    def __init__(self, model: str | Path | bytes, threads: int = 0):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        src = str(model) if isinstance(model, (str, Path)) else model
        self.sess = ort.InferenceSession(src, opts, providers=["CPUExecutionProvider"])
        self.inputs = self.sess.get_inputs()
        self.past = [i for i in self.inputs if i.name.startswith(("past_key_values", "past."))]
        self.reset()

    def reset(self) -> None:
        self.length = 0
        self.cache = [np.zeros((1, int(i.shape[1]), 0, int(i.shape[3])), np.float32) for i in self.past]

    def feed(self, tokens: Sequence[int]) -> np.ndarray:
        s, n = len(tokens), self.length
        feeds: dict[str, Any] = {"input_ids": np.array([tokens], np.int64),
                                 "attention_mask": np.ones((1, n + s), np.int64),
                                 "position_ids": np.arange(n, n + s, dtype=np.int64)[None]}
        for i, c in zip(self.past, self.cache):
            feeds[i.name] = c
        names = {i.name for i in self.inputs}
        out = self.sess.run(None, {k: v for k, v in feeds.items() if k in names})
        self.cache = out[1:1 + len(self.past)]
        self.length = n + s
        return out[0][0, -1]


def run_loop(feed: Callable[[Sequence[int]], np.ndarray], prompt: Sequence[int], new: int,
             pick: Callable[[np.ndarray], int], on_token: Callable[[int], None] | None = None,
             stop: Callable[[int], bool] | None = None) -> tuple[list[int], list[np.ndarray], float, float]:
    """Prefill `prompt`, then generate up to `new` tokens: (generated tokens, their logits, prefill s, decode s)."""
    t0 = time.perf_counter()
    logits = feed(list(prompt))
    t1 = time.perf_counter()
    out: list[int] = []
    seen: list[np.ndarray] = []
    for k in range(new):
        seen.append(logits)
        tok = pick(logits)
        out.append(tok)
        if on_token is not None:
            on_token(tok)
        if (stop is not None and stop(tok)) or k == new - 1:
            break
        logits = feed([tok])
    t2 = time.perf_counter()
    return out, seen, t1 - t0, t2 - t1
