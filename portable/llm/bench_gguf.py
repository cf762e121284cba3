"""Prefill and decode tokens/s of one GGUF file per quantization (a random-init Llama written by gguf_export) on
portable devices, onnxruntime (the same decoder graph: MatMulNBits for Q4_0) and llama.cpp (llama-cpp-python), in
one run; greedy tokens of each runner compared with llama.cpp's and onnxruntime's.

    python -m portable.llm.bench_gguf --devices opencl:0,vulkan:0 --out benchmarks/results/llm/DATE-gguf
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .reference import OrtDecoder, run_loop
from .sampling import Sampler


class LlamaCpp:
    """feed(tokens) -> logits of the last token, on llama.cpp (CPU)."""

    def __init__(self, path: Path, context: int, threads: int):
        import llama_cpp

        self.llm = llama_cpp.Llama(str(path), n_ctx=context, n_threads=threads, n_threads_batch=threads,
                                   n_batch=context, verbose=False)

    def reset(self) -> None:
        self.llm.reset()

    def feed(self, tokens: list[int]) -> np.ndarray:
        self.llm.eval(tokens)
        return np.array(self.llm.scores[self.llm.n_tokens - 1])


def _llama_cpp(path: Path, context: int, threads: int, prompt: list[int], new: int, repeats: int) -> dict[str, Any]:
    cpp = LlamaCpp(path, context, threads)
    return _median(cpp.reset, cpp.feed, prompt, new, repeats)


def _median(reset: Any, feed: Any, prompt: list[int], new: int, repeats: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeats + 1):  # the first run warms up (driver program builds, first-touch allocations)
        reset()
        runs.append(run_loop(feed, prompt, new, Sampler().picker()))
    runs = runs[1:]
    pre = statistics.median(r[2] for r in runs)
    dec = statistics.median(r[3] for r in runs)
    return {"tokens": runs[-1][0], "prefill_tok_s": len(prompt) / pre, "decode_tok_s": (new - 1) / dec,
            "prefill_s": [r[2] for r in runs], "decode_s": [r[3] for r in runs]}


def main() -> None:
    from . import hf_export

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--qtypes", default="Q4_0,Q8_0")
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads for onnxruntime and llama.cpp")
    ap.add_argument("--devices", default="opencl:0,vulkan:0")
    ap.add_argument("--bucket", type=int, default=128)
    ap.add_argument("--prefill-chunk", type=int, default=32)
    ap.add_argument("--out", type=Path, required=True, help="a new folder for results.json and results.md")
    a = ap.parse_args()
    if a.out.exists() and any(a.out.iterdir()):
        raise SystemExit(f"{a.out} is not empty; results never overwrite earlier ones: pick a new folder")
    a.out.mkdir(parents=True, exist_ok=True)
    tf = hf_export._transformers()
    import torch

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.ffn, num_hidden_layers=a.layers,
                         num_attention_heads=a.heads, num_key_value_heads=a.heads, max_position_embeddings=2048,
                         tie_word_embeddings=False)
    model = tf.LlamaForCausalLM(cfg).eval()
    params = sum(p.numel() for p in model.parameters())
    work = Path(tempfile.mkdtemp(prefix="portable-bench-gguf-"))  # model files stay out of the results folder
    try:
        _run(a, model, params, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(a: Any, model: Any, params: int, work: Path) -> None:
    import onnx

    from . import gguf_export, gguf_model, hf_export
    from .session import DecoderSession

    tok = hf_export.train_tokenizer(work / "tokenizer.json")
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, a.vocab, a.prompt_len)]
    total = a.prompt_len + a.new
    rows = []
    for qtype in a.qtypes.split(","):
        path = work / f"model-{qtype}.gguf"
        gguf_export.write(model, path, qtype, tokenizer_json=tok)
        size = path.stat().st_size
        runners: list[tuple[str, Any, Any, Any]] = [("llama.cpp CPU", None, None, None)]
        onnx_path = work / f"model-{qtype}.onnx"
        onnx.save(gguf_model.to_onnx(path), str(onnx_path))
        ort = OrtDecoder(onnx_path, threads=a.threads)
        runners.append(("onnxruntime CPU", ort.reset, ort.feed, None))
        for dev in a.devices.split(","):
            t0 = time.perf_counter()
            s = DecoderSession(path, dev, buckets=(a.bucket,), prefill_chunks=(a.prefill_chunk,))
            s.prepare(a.prompt_len, total - 1)
            runners.append((f"portable {dev}", s.reset, s.feed, (s, time.perf_counter() - t0)))
        ref: dict[str, list[int]] = {}
        for name, reset, feed, extra in runners:
            if name == "llama.cpp CPU":  # a process of its own: no driver threads of portable's devices beside it
                with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                    r = pool.submit(_llama_cpp, path, max(a.bucket, total), a.threads, prompt, a.new,
                                    a.repeats).result()
            else:
                r = _median(reset, feed, prompt, a.new, a.repeats)
            ref.setdefault(name, r["tokens"])
            row = {"qtype": qtype, "file_bytes": size, "runner": name, **r}
            row["same_tokens_as_llama_cpp"] = r["tokens"] == ref["llama.cpp CPU"]
            row["same_tokens_as_onnxruntime"] = r["tokens"] == ref.get("onnxruntime CPU", r["tokens"])
            if extra is not None:
                row["compiles"], row["compile_s"] = extra[0].stats.compiles, extra[1]
                extra[0].close()
            del row["tokens"]
            rows.append(row)
            print(f"{qtype} {name}: prefill {r['prefill_tok_s']:.1f} tok/s, decode {r['decode_tok_s']:.1f} tok/s",
                  flush=True)
        _report(a, params, rows)


def _report(a: Any, params: int, rows: list[dict[str, Any]]) -> None:
    """results.json and results.md of the rows so far (rewritten after each quantization)."""
    import llama_cpp
    import onnxruntime

    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": platform.node(),
              "cpu": platform.processor(), "model": "llama random-init (torch seed 0), written as GGUF by "
              "portable.llm.gguf_export", "parameters": params, "hidden": a.hidden, "layers": a.layers,
              "heads": a.heads, "ffn": a.ffn, "vocab": a.vocab, "prompt_tokens": a.prompt_len, "new_tokens": a.new,
              "repeats": a.repeats, "threads": a.threads, "bucket": a.bucket, "prefill_chunk": a.prefill_chunk,
              "onnxruntime": onnxruntime.__version__, "llama_cpp_python": llama_cpp.__version__, "rows": rows,
              "command": "python -m portable.llm.bench_gguf " + " ".join(
                  f"--{k.replace('_', '-')} {v}" for k, v in vars(a).items())}
    (a.out / "results.json").write_text(json.dumps(report, indent=1, default=str))
    lines = [(f"# {report['model']}: {params / 1e6:.0f}M parameters, prompt {a.prompt_len}, {a.new} new tokens "
              f"(greedy), {a.threads} CPU threads for the peers"), "",
             ("| weights | runner | prefill tokens/s | decode tokens/s | prefill vs llama.cpp | decode vs llama.cpp "
              "| same tokens as llama.cpp / onnxruntime |"), "|---|---|---|---|---|---|---|"]
    for r in rows:
        base = next(x for x in rows if x["qtype"] == r["qtype"] and x["runner"] == "llama.cpp CPU")
        pre, dec = r["prefill_tok_s"] / base["prefill_tok_s"], r["decode_tok_s"] / base["decode_tok_s"]
        lines.append(f"| {r['qtype']} | {r['runner']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.2f} | "
                     f"{pre:.3f}x | {dec:.3f}x | {r['same_tokens_as_llama_cpp']} / {r['same_tokens_as_onnxruntime']} |")
    (a.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
