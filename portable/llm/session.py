"""A decoder run step by step on one device with its KV cache kept there, compiled once per bucket.

The step graph (graph.with_cache_write) has a fixed cache capacity C and chunk length S. A session compiles it
for each capacity bucket it reaches (e.g. 64, 256, 1024) and each chunk length it uses (prefill chunks, 1 for
decoding): never per token. Rows of the cache past the tokens seen so far are padding, masked out through
attention_mask; each step writes its new rows into the next free slots on the device (the Gather through
kv_index) and the cache is carried from one step to the next without leaving the device. When a bucket is full
the cache moves once to the next one (through the host: once per bucket, not per token)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PortableError, ShapeMismatch
from ..frontend.onnx_weights import SplitModel
from .graph import KV_INDEX, DecoderSignature, load, load_apart, with_cache_write

DEFAULT_BUCKETS = (64, 256, 1024)
DEFAULT_PREFILL_CHUNKS = (16,)


class ContextFull(PortableError):
    """The tokens do not fit the largest KV-cache bucket of the session."""


@dataclass
class _Variant:
    capacity: int
    chunk: int
    graph: Any  # CompiledGraph
    state: Any  # StatefulGraph


@dataclass
class SessionStats:
    compiles: int = 0  # step graphs this session built (one per (capacity, chunk) it used)
    bucket_moves: int = 0  # times the cache moved to a larger bucket (a host round trip each)
    state_moves: int = 0  # cache copies between the prefill and decode graphs of one bucket
    variants: list[tuple[int, int]] = field(default_factory=list)


class DecoderSession:
    """`feed(tokens)` runs tokens through the decoder (prefill in chunks, or one decode token) and returns the
    logits of the last one; the cache stays on `device` between calls. `reset()` starts a new sequence."""

    def __init__(self, model: Any, device: str = "vulkan:0", *, buckets: Sequence[int] = DEFAULT_BUCKETS,
                 prefill_chunks: Sequence[int] = DEFAULT_PREFILL_CHUNKS,
                 graphs: Mapping[tuple[int, int], Any] | None = None):
        """`graphs`: step graphs already compiled or loaded, by (capacity, chunk), e.g. packages of
        `step_graph(model)` opened with portable.load on a host without MLIR; a step they do not cover is compiled.
        Their weights are the packages' own: `model` then serves only for the signature (it may hold no weights)."""
        from .. import api

        apart = load_apart(model)
        step, self.sig = with_cache_write(apart.model)
        self.model = SplitModel(step, apart.weights)
        self._given = dict(graphs or {})
        self.device = device
        self.buckets = tuple(sorted(int(b) for b in buckets))
        self.prefill_chunks = tuple(sorted({int(c) for c in prefill_chunks if int(c) > 1}))
        if not self.buckets or self.buckets[0] < 1:
            raise ShapeMismatch(f"buckets must be positive cache capacities, got {tuple(buckets)}")
        self._api = api
        self._root: Any = None  # the first CompiledGraph: others are its shape variants (one ONNX import)
        self._variants: dict[tuple[int, int], _Variant] = {}
        self._active: _Variant | None = None
        self.stats = SessionStats()
        self.length = 0  # tokens in the cache
        self.vocab: int | None = None
        self._warm: set[tuple[int, int]] = set()

    # ---- compiled variants --------------------------------------------------------------------------
    def _shapes(self, capacity: int, chunk: int) -> list[tuple[int, ...]]:
        sig = self.sig
        shapes: list[tuple[int, ...]] = []
        for i, name in enumerate(sig.input_names):
            if i in sig.past:
                j = sig.past.index(i)
                shapes.append((1, sig.kv_heads[j], capacity, sig.head_dims[j]))
            elif name in ("input_ids", "position_ids"):
                shapes.append((1, chunk))
            elif name == "attention_mask":
                shapes.append((1, capacity + chunk))
            elif name == KV_INDEX:
                shapes.append((capacity,))
            else:
                raise ShapeMismatch(f"decoder input {name!r} is not one a session knows how to feed "
                                    f"(input_ids, attention_mask, position_ids, past key/values)")
        return shapes

    def _variant(self, capacity: int, chunk: int) -> _Variant:
        v = self._variants.get((capacity, chunk))
        if v is not None:
            return v
        shapes = self._shapes(capacity, chunk)
        given = self._given.get((capacity, chunk))
        if given is not None:
            want = [tuple(x) for x in shapes]
            have = [tuple(i.shape) for i in given.inputs]
            if have != want:
                raise ShapeMismatch(f"the step graph given for capacity {capacity}, chunk {chunk} takes inputs "
                                    f"{have}; this decoder's step at that size takes {want}")
            v = _Variant(capacity, chunk, given, given.with_state(self.sig.carry()))
            self._variants[(capacity, chunk)] = v
            self.stats.variants.append((capacity, chunk))
            if self.vocab is None:
                self.vocab = int(given.outputs[self.sig.logits].shape[-1])
            return v
        if self._root is None:
            graph = self._api.compile(self.model, device=self.device, input_shapes=shapes)
            self._root = graph
            self.model = None  # every other variant is the root's (its import holds the weights once)
        else:
            graph = self._root.for_inputs(*[_Shape(s) for s in shapes])
        v = _Variant(capacity, chunk, graph, graph.with_state(self.sig.carry()))
        self._variants[(capacity, chunk)] = v
        self.stats.compiles += 1
        self.stats.variants.append((capacity, chunk))
        if self.vocab is None:
            self.vocab = int(graph.outputs[self.sig.logits].shape[-1])
        return v

    def _bucket(self, need: int) -> int:
        for b in self.buckets:
            if b >= need:
                return b
        raise ContextFull(f"{need} tokens do not fit the largest KV-cache bucket ({self.buckets[-1]}); pass larger "
                          f"buckets= to DecoderSession (or --max-context to portable generate)")

    def _switch(self, capacity: int, chunk: int) -> _Variant:
        """The variant for (capacity, chunk), holding the cache of the sequence so far."""
        old = self._active
        v = self._variant(capacity, chunk)
        if old is v:
            return v
        if old is not None and self.length:
            state = old.state.get_state()  # {input index: [1, kv, C_old, hd]}
            moved = {}
            for i, arr in state.items():
                pad = np.zeros(arr.shape[:2] + (capacity,) + arr.shape[3:], arr.dtype)
                n = min(self.length, arr.shape[2], capacity)
                pad[:, :, :n] = arr[:, :, :n]
                moved[i] = pad
            v.state.set_state(moved)
            if old.capacity != capacity:
                self.stats.bucket_moves += 1
            else:
                self.stats.state_moves += 1
        elif self.length == 0:
            v.state.reset()
        self._active = v
        return v

    # ---- running ------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the sequence: the next feed starts at position 0."""
        self.length = 0
        self._active = None

    def _chunk_for(self, remaining: int) -> int:
        fits = [c for c in self.prefill_chunks if c <= remaining]
        if fits:
            return fits[-1]
        return self.prefill_chunks[0] if remaining > 1 and self.prefill_chunks else 1

    def plan(self, prompt_len: int, total: int) -> list[tuple[int, int]]:
        """The (capacity, chunk) step graphs a prompt of `prompt_len` tokens then decoding up to `total` use."""
        out: list[tuple[int, int]] = []
        n, cap = 0, 0
        while n < total:
            chunk = self._chunk_for(prompt_len - n) if n < prompt_len else 1
            real = min(chunk, prompt_len - n) if n < prompt_len else 1
            cap = max(cap, self._bucket(n + real))
            if (cap, chunk) not in out:
                out.append((cap, chunk))
            n += real
        return out

    def prepare(self, prompt_len: int, total: int, warm_up: bool = True) -> None:
        """Compile (or load from the cache) every step graph that plan() lists, ahead of a timed loop; `warm_up`
        runs each once on an empty cache, so the driver's own program builds (PoCL builds at first launch) happen
        here too. The sequence so far is kept."""
        for capacity, chunk in self.plan(prompt_len, total):
            v = self._variant(capacity, chunk)
            if warm_up and v is not self._active and (capacity, chunk) not in self._warm:
                self._run(v, [0], chunk, 0)
                v.state.reset()
                self._warm.add((capacity, chunk))

    def feed(self, tokens: Sequence[int]) -> np.ndarray:
        """Run `tokens` after the sequence so far; the logits (vocab,) after the last of them."""
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise ShapeMismatch("feed needs at least one token")
        last = None
        k = 0
        while k < len(tokens):
            chunk = self._chunk_for(len(tokens) - k)
            real = min(chunk, len(tokens) - k)
            last = self._step(tokens[k:k + real], chunk)
            k += real
        return last

    def _step(self, toks: list[int], chunk: int) -> np.ndarray:
        n, real = self.length, len(toks)
        capacity = self._bucket(n + real)
        if self._active is not None and self._active.capacity > capacity:
            capacity = self._active.capacity  # never move to a smaller bucket
        v = self._switch(capacity, chunk)
        logits = self._run(v, toks, chunk, n)
        self.length = n + real
        return logits

    def _run(self, v: _Variant, toks: list[int], chunk: int, n: int) -> np.ndarray:
        """One call of the variant: `toks` (up to `chunk`) after `n` cached tokens; the logits of the last one."""
        capacity, real = v.capacity, len(toks)
        ids = np.zeros((1, chunk), np.int64)
        ids[0, :real] = toks
        pos = np.arange(n, n + chunk, dtype=np.int64)[None]
        mask = np.zeros((1, capacity + chunk), np.int64)
        mask[0, :n] = 1
        mask[0, capacity:capacity + real] = 1
        index = np.arange(capacity, dtype=np.int64)
        index[n:n + real] = capacity + np.arange(real)
        feeds = {"input_ids": ids, "attention_mask": mask, "position_ids": pos, KV_INDEX: index}
        args = [feeds[name] for i, name in enumerate(self.sig.input_names) if i not in self.sig.past]
        outs = v.state(*args)
        logits = outs[0] if self.sig.logits == 0 else outs[[k for k in range(len(self.sig.output_names))
                                                             if k not in self.sig.present].index(self.sig.logits)]
        return np.asarray(logits[0, real - 1])

    def close(self) -> None:
        for v in self._variants.values():
            v.state.close()
        for v in self._variants.values():
            v.graph.close()
        self._variants.clear()
        self._active = None

    def __enter__(self) -> DecoderSession:  # noqa: PYI034 - a plain class
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Shape:
    """Stands for an array of a shape when asking a CompiledGraph for its variant (np.shape reads .shape)."""

    def __init__(self, shape: tuple[int, ...]):
        self.shape = tuple(shape)


def step_graph(model: Any) -> Any:
    """The step graph a session compiles (onnx.ModelProto), for building packages of it ahead of time: compile it
    for `DecoderSession._shapes(capacity, chunk)` and pass the loaded packages as `graphs=`."""
    return with_cache_write(load(model))[0]


def signature(model: Any) -> DecoderSignature:
    return with_cache_write(load_apart(model).model)[1]
