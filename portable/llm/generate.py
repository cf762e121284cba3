"""Text generation: a tokenizer (the `tokenizers` package), a DecoderSession and a Sampler, tokens streamed as they
come, prefill and decode speeds reported apart. `portable generate MODEL.onnx --prompt ...` runs it."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgument
from .reference import run_loop
from .sampling import Sampler
from .session import DEFAULT_BUCKETS, DEFAULT_PREFILL_CHUNKS, DecoderSession


@dataclass
class GenerationResult:
    text: str
    prompt_tokens: list[int]
    tokens: list[int]  # generated
    prefill_s: float
    decode_s: float
    compiles: int = 0
    logits: list[np.ndarray] = field(default_factory=list, repr=False)

    @property
    def prefill_tokens_per_s(self) -> float:
        return len(self.prompt_tokens) / self.prefill_s if self.prefill_s > 0 else float("inf")

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens through the decode step per second (the first generated token comes from the prefill)."""
        steps = max(len(self.tokens) - 1, 0)
        return steps / self.decode_s if self.decode_s > 0 else float("inf")


def load_tokenizer(model: str | Path, tokenizer: str | Path | None = None) -> Any:
    """A `tokenizers.Tokenizer` from `tokenizer`, else the vocabulary of a GGUF model, else tokenizer.json next to
    the model."""
    from .graph import is_gguf

    if not tokenizer and is_gguf(model):
        from .gguf_model import tokenizer as gguf_tokenizer

        return gguf_tokenizer(model)
    path = Path(tokenizer) if tokenizer else Path(model).with_name("tokenizer.json")
    if not path.is_file():
        raise InvalidArgument(f"no tokenizer at {path}: put a tokenizer.json (Hugging Face `tokenizers` format) next "
                              f"to the model or pass --tokenizer PATH")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise InvalidArgument("the `tokenizers` package is needed: pip install 'portable[llm]'") from None
    return Tokenizer.from_file(str(path))


def generate(model: str | Path, prompt: str | Sequence[int], *, device: str = "vulkan:0", max_new_tokens: int = 32,
             tokenizer: Any = None, sampler: Sampler | None = None, buckets: Sequence[int] = DEFAULT_BUCKETS,
             prefill_chunks: Sequence[int] = DEFAULT_PREFILL_CHUNKS, on_text: Callable[[str], None] | None = None,
             stop_tokens: Sequence[int] = (), session: DecoderSession | None = None) -> GenerationResult:
    """Generate up to `max_new_tokens` after `prompt` (text, encoded with `tokenizer` — a tokenizers.Tokenizer or
    a path — or token ids). `on_text` receives each piece of text as it is decoded (streaming)."""
    if max_new_tokens < 1:
        raise InvalidArgument(f"max_new_tokens must be at least 1, got {max_new_tokens}")
    if isinstance(tokenizer, (str, Path)) or (tokenizer is None and isinstance(prompt, str)):
        tokenizer = load_tokenizer(model, tokenizer)
    ids = list(tokenizer.encode(prompt).ids) if isinstance(prompt, str) else [int(t) for t in prompt]
    if isinstance(prompt, str) and isinstance(model, (str, Path)):
        from .graph import is_gguf

        if is_gguf(model):
            from .gguf_model import bos_token

            bos = bos_token(model)
            ids = ([bos] if bos is not None else []) + ids
    if not ids:
        raise InvalidArgument("the prompt encodes to no tokens; give a non-empty prompt")
    own = session is None
    sess = session or DecoderSession(model, device, buckets=buckets, prefill_chunks=prefill_chunks)
    sess.reset()
    sess.prepare(len(ids), len(ids) + max_new_tokens - 1)  # no compile inside the timed loop
    shown = [""]
    out: list[int] = []

    def on_token(tok: int) -> None:
        out.append(tok)
        if on_text is not None and tokenizer is not None:
            text = tokenizer.decode(out)
            if text.startswith(shown[0]):  # stream the new suffix (decoding may merge pieces)
                on_text(text[len(shown[0]):])
                shown[0] = text

    stops = {int(t) for t in stop_tokens}
    try:
        tokens, logits, pre, dec = run_loop(sess.feed, ids, max_new_tokens, (sampler or Sampler()).picker(),
                                            on_token, (lambda t: t in stops) if stops else None)
        compiles = sess.stats.compiles
    finally:
        if own:
            sess.close()
    text = tokenizer.decode(tokens) if tokenizer is not None else ""
    return GenerationResult(text, ids, tokens, pre, dec, compiles, logits)


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("generate",
                              help="generate text with a decoder LLM (ONNX export with a KV cache, or GGUF)")
    p.add_argument("model", help="the decoder's .onnx (input_ids, attention_mask, position_ids, past_key_values.*) "
                                 "or a llama-architecture .gguf (Q4_0, Q8_0, Q4_K, F16, F32 weights)")
    p.add_argument("--device", default="vulkan:0")
    p.add_argument("--prompt", required=True)
    p.add_argument("--tokenizer", help="tokenizer.json (default: a GGUF file's vocabulary, or tokenizer.json next to "
                                        "the model)")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0, help="0 is greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--buckets", default=",".join(map(str, DEFAULT_BUCKETS)),
                   help="KV-cache capacities compiled for, e.g. 64,256,1024 (the largest bounds the context)")
    p.add_argument("--prefill-chunk", type=int, action="append",
                   help=f"prompt chunk lengths compiled for (repeatable; default {DEFAULT_PREFILL_CHUNKS[0]})")
    p.set_defaults(fn=_cli)


def _cli(args: Any) -> int:
    try:
        buckets = tuple(int(b) for b in args.buckets.split(",") if b.strip())
    except ValueError:
        raise InvalidArgument(f"--buckets {args.buckets!r}: give capacities like 64,256,1024") from None
    sampler = Sampler(args.temperature, args.top_k, args.top_p, args.seed)

    def show(piece: str) -> None:
        sys.stdout.write(piece)
        sys.stdout.flush()

    sys.stdout.write(args.prompt)
    r = generate(args.model, args.prompt, device=args.device, max_new_tokens=args.max_new_tokens,
                 tokenizer=args.tokenizer, sampler=sampler, buckets=buckets,
                 prefill_chunks=tuple(args.prefill_chunk or DEFAULT_PREFILL_CHUNKS), on_text=show)
    sys.stdout.write("\n")
    print(f"prefill: {len(r.prompt_tokens)} tokens, {r.prefill_tokens_per_s:.1f} tokens/s; decode: {len(r.tokens)} "
          f"tokens, {r.decode_tokens_per_s:.1f} tokens/s; {r.compiles} step graph(s) compiled or loaded "
          f"({args.device})", file=sys.stderr)
    return 0
