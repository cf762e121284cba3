"""Greedy text generation with the decoder step of `models/decoder.py` on any portable device: the prompt,
then one token at a time, with the KV cache kept on the device between steps (`CompiledGraph.with_state`).
onnxruntime runs the same ONNX step on the CPU (cache passed through the host) as the reference and the peer.

    python -m models.generate --device vulkan:0 --new 32                 # compiles models/onnx/decoder_tiny.onnx
    python -m models.generate --device opencl:0 --model step.ptx         # a saved executable: no MLIR needed

Prefill runs the prompt through the same one-token step (one compiled graph for the whole loop); tokens/s
counts generated tokens only, host sampling included. A greedy step (`python -m models.decoder --greedy`) picks
its token on the device and carries token and pos with the cache: after the prompt, 32 steps go to the device
per submission (`StatefulGraph.run_steps`, recorded once before the timed loop) and the host only reads tokens.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_MODEL = HERE / "onnx" / "decoder_tiny.onnx"
CHUNK = 32  # greedy steps per submission (run_steps)


@dataclass
class Generation:
    tokens: list[int]  # prompt + generated
    prompt_len: int
    prefill_s: float
    decode_s: float
    logits: list[np.ndarray]  # per generated token, for comparisons

    @property
    def tokens_per_s(self) -> float:
        n = len(self.tokens) - self.prompt_len
        return n / self.decode_s if self.decode_s > 0 else float("inf")


def cache_layout(inputs, outputs=None) -> tuple[int, dict[int, int]]:
    """(max_len, carry): the decoder step's inputs are token, pos, then the caches; output 1 + j feeds input
    2 + j. A greedy step (models.decoder.GreedyStep, one output more than inputs) carries its token and pos too:
    output 1 + j feeds input j. Read from the signatures, so any decoder exported by models/decoder.py fits."""
    caches = inputs[2:]
    if len(inputs) < 3 or any(len(s.shape) != 3 for s in caches):
        raise ValueError("not a decoder step: expected inputs (token, pos, past caches of rank 3)")
    if is_greedy(inputs, outputs):
        return int(caches[0].shape[1]), {1 + j: j for j in range(len(inputs))}
    return int(caches[0].shape[1]), {1 + j: 2 + j for j in range(len(caches))}


def is_greedy(inputs, outputs) -> bool:
    """A GreedyStep: its first output is [pos, chosen token] (int32), the rest match the inputs one for one."""
    return outputs is not None and len(outputs) == len(inputs) + 1 and len(outputs[0].shape) == 2 and \
        str(outputs[0].dtype) == "int32"


def greedy(step, prompt: list[int], new: int) -> Generation:
    """Greedy decoding around `step(token, pos) -> logits` (one token through the decoder, its cache updated
    wherever the runner keeps it): the prompt token by token, then `new` generated tokens."""
    tokens, logits = list(prompt), []
    t0 = time.perf_counter()
    for pos in range(len(prompt) - 1):
        step(tokens[pos], pos)
    last = step(tokens[-1], len(prompt) - 1)
    t1 = time.perf_counter()
    for _ in range(new):
        logits.append(last)
        tokens.append(int(np.argmax(last)))
        if len(logits) < new:
            last = step(tokens[-1], len(tokens) - 1)
    t2 = time.perf_counter()
    return Generation(tokens, len(prompt), t1 - t0, t2 - t1, logits)


def _ids(token: int, pos: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array([[token]], np.int64), np.array([pos], np.int64)


def generate_portable(exe, prompt: list[int], new: int, chunk: int = CHUNK) -> Generation:
    """Greedy decoding with the cache on the device; `exe` is a portable CompiledGraph of the step. A greedy step
    (models.decoder.GreedyStep) runs `chunk` steps per submission once past the prompt (StatefulGraph.run_steps)."""
    outputs = [sig for _, sig in exe.executable.outputs]
    max_len, carry = cache_layout(exe.inputs, outputs)
    if len(prompt) + new > max_len:
        raise ValueError(f"prompt ({len(prompt)}) + new tokens ({new}) exceed the cache window ({max_len})")
    with exe.with_state(carry) as run:
        if not is_greedy(exe.inputs, outputs):
            return greedy(lambda token, pos: run(*_ids(token, pos))[0][0], prompt, new)
        tokens = list(prompt)
        t0 = time.perf_counter()
        for token in prompt:  # pos is carried from 0; the token is the prompt's until it runs out
            run.set_state({0: np.array([[token]], np.int64)})
            chosen = int(run()[0][0, 1])
        tokens.append(chosen)
        run.prepare_steps(chunk)  # recorded once, like a captured graph; the prefill's time includes it
        t1 = time.perf_counter()
        while len(tokens) - len(prompt) < new:
            if new - (len(tokens) - len(prompt)) >= chunk:
                tokens += [int(outs[0][0, 1]) for outs in run.run_steps(chunk)]
            else:  # the tail one step at a time (a recording of its own length would be used once)
                tokens.append(int(run()[0][0, 1]))
        t2 = time.perf_counter()
        return Generation(tokens[:len(prompt) + new], len(prompt), t1 - t0, t2 - t1, [])


def generate_onnxruntime(path: str | Path, prompt: list[int], new: int) -> Generation:
    """The same loop on onnxruntime (CPU): the reference numerics and the CPU peer."""
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    caches = [np.zeros([int(d) for d in i.shape], np.float32) for i in sess.get_inputs()[2:]]
    greedy_step = len(sess.get_outputs()) == len(names) + 1  # GreedyStep: (chosen, next token, next pos, *caches)

    def step(token: int, pos: int) -> np.ndarray:
        nonlocal caches
        out, *rest = sess.run(None, dict(zip(names, [*_ids(token, pos), *caches])))
        caches = rest[2:] if greedy_step else rest
        if greedy_step:  # the step chose the token ([pos, token]): scores whose argmax is that token
            return np.arange(int(out[0, 1]) + 1) == int(out[0, 1])
        return out[0]

    return greedy(step, prompt, new)


def generate_torch(config: str, prompt: list[int], new: int, device: str = "") -> Generation:
    """The same loop in PyTorch eager (the GPU peer on a CUDA host), on the weights models/decoder.py builds
    for `config` (its fixed seed): the cache stays on the torch device between steps."""
    import torch

    from .decoder import CONFIGS, build, example_inputs

    cfg = CONFIGS[config]
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model = build(cfg).to(dev)
    caches = [c.to(dev) for c in example_inputs(cfg)[2:]]

    @torch.no_grad()
    def step(token: int, pos: int) -> np.ndarray:
        nonlocal caches
        out, *caches = model(*(torch.from_numpy(x).to(dev) for x in _ids(token, pos)), *caches)
        return out[0].float().cpu().numpy()  # the host needs the logits to pick the next token

    step(prompt[0], 0)  # warm-up: CUDA context and kernels outside the timing
    caches = [c.to(dev) for c in example_inputs(cfg)[2:]]
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return greedy(step, prompt, new)


def _logit_error(ours: Generation, ref: Generation) -> float | None:
    """Largest |logit difference| over the generated tokens; None for a greedy step (no logits leave the device)."""
    if not ours.logits:
        return None
    return max(float(np.abs(x - y).max()) for x, y in zip(ours.logits, ref.logits))


def main() -> None:
    import portable

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="decoder step: .onnx, or a saved .ptx/.ptpk")
    ap.add_argument("--expect-hash", help="for a .ptpk/.ptx: the hash `portable compile` printed (or `portable verify` "
                    "prints); without it the file must be signed by a key in PORTABLE_TRUSTED_KEYS or built by this "
                    "user")
    ap.add_argument("--device", default="vulkan:0")
    ap.add_argument("--prompt", default="portable runs models on every GPU")
    ap.add_argument("--new", type=int, default=24, help="tokens to generate")
    ap.add_argument("--no-reference", action="store_true", help="skip onnxruntime (e.g. no .onnx on this host)")
    ap.add_argument("--torch", metavar="CONFIG", help="also run PyTorch eager on the weights models/decoder.py "
                    "builds for CONFIG (tiny|small): the GPU peer where CUDA is present")
    ap.add_argument("--json", type=Path, help="write the figures here")
    a = ap.parse_args()
    if a.model.suffix == ".onnx":
        exe = portable.compile(a.model, device=a.device)
    else:
        exe = portable.load(a.model, device=a.device, expect_hash=a.expect_hash)
    vocab = exe.outputs[0].shape[-1]
    prompt = [b % vocab for b in a.prompt.encode()]
    try:
        ours = generate_portable(exe, prompt, a.new)
    except ValueError as e:
        raise SystemExit(f"models.generate: {e}; use a shorter --prompt or fewer --new tokens") from None
    report = {"device": a.device, "model": a.model.name, "prompt_tokens": len(prompt), "new_tokens": a.new,
              "kernels_per_step": len(exe.executable.dispatches), "portable_tokens_per_s": ours.tokens_per_s,
              "portable_prefill_s": ours.prefill_s, "tokens": ours.tokens[len(prompt):]}
    print(f"portable {a.device}: {ours.tokens_per_s:.1f} tokens/s ({len(exe.executable.dispatches)} dispatches "
          f"per token), prefill {ours.prefill_s * 1e3:.1f} ms for {len(prompt)} tokens")
    if not a.no_reference and a.model.suffix == ".onnx":
        ref = generate_onnxruntime(a.model, prompt, a.new)
        same = ref.tokens == ours.tokens
        err = _logit_error(ours, ref)
        report.update(onnxruntime_tokens_per_s=ref.tokens_per_s, same_tokens=same, max_abs_logit_error=err)
        print(f"onnxruntime CPU: {ref.tokens_per_s:.1f} tokens/s; same tokens: {same}; max |logit error| {err}")
    if a.torch:
        ref = generate_torch(a.torch, prompt, a.new)
        same = ref.tokens == ours.tokens
        err = _logit_error(ours, ref)
        report.update(torch_tokens_per_s=ref.tokens_per_s, torch_same_tokens=same, torch_max_abs_logit_error=err)
        print(f"PyTorch eager: {ref.tokens_per_s:.1f} tokens/s; same tokens: {same}; max |logit error| {err}")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
