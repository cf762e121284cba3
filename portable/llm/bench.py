"""Prefill and decode tokens/s of a Hugging Face decoder export on portable devices against onnxruntime on the same
ONNX file, in one run (greedy, tokens checked equal before timing counts).

    python -m portable.llm.bench --devices vulkan:0,opencl:0 --out benchmarks/results/llm/DATE
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

from .reference import OrtDecoder, run_loop
from .sampling import Sampler
from .session import DecoderSession


def _median_run(feed_reset, feed, prompt, new, repeats):
    runs = []
    for _ in range(repeats):
        feed_reset()
        runs.append(run_loop(feed, prompt, new, Sampler().picker()))
    pre = statistics.median(r[2] for r in runs)
    dec = statistics.median(r[3] for r in runs)
    return runs[-1][0], pre, dec, [r[2] for r in runs], [r[3] for r in runs]


def main() -> None:
    from . import hf_export

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="llama", choices=hf_export.ARCHS)
    ap.add_argument("--exporter", default="legacy", choices=("legacy", "dynamo"))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--devices", default="vulkan:0,opencl:0")
    ap.add_argument("--buckets", default="64,256")
    ap.add_argument("--prefill-chunk", type=int, default=16)
    ap.add_argument("--out", type=Path, required=True, help="a new folder for results.json and results.md")
    a = ap.parse_args()
    if a.out.exists() and any(a.out.iterdir()):
        raise SystemExit(f"{a.out} is not empty; results never overwrite earlier ones: pick a new folder")
    a.out.mkdir(parents=True, exist_ok=True)
    model = hf_export.build(a.arch, a.hidden, a.layers, a.vocab)
    params = sum(p.numel() for p in model.parameters())
    path = hf_export.export(model, a.out / "_model.onnx", a.exporter)
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, a.vocab, a.prompt_len)]
    rows = []
    ort = OrtDecoder(path)
    ref, pre, dec, pres, decs = _median_run(ort.reset, ort.feed, prompt, a.new, a.repeats + 1)
    rows.append({"runner": "onnxruntime CPU", "prefill_tok_s": a.prompt_len / pre, "decode_tok_s": (a.new - 1) / dec,
                 "prefill_s": pres, "decode_s": decs, "same_tokens": True, "compiles": 0})
    buckets = tuple(int(b) for b in a.buckets.split(","))
    for dev in a.devices.split(","):
        s = DecoderSession(path, dev, buckets=buckets, prefill_chunks=(a.prefill_chunk,))
        s.prepare(a.prompt_len, a.prompt_len + a.new - 1)
        toks, pre, dec, pres, decs = _median_run(s.reset, s.feed, prompt, a.new, a.repeats + 1)
        rows.append({"runner": f"portable {dev}", "prefill_tok_s": a.prompt_len / pre,
                     "decode_tok_s": (a.new - 1) / dec, "prefill_s": pres, "decode_s": decs,
                     "same_tokens": toks == ref, "compiles": s.stats.compiles, "variants": s.stats.variants})
        s.close()
    path.unlink()
    import onnxruntime

    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": platform.node(),
              "cpu": platform.processor(), "model": f"{a.arch} random-init ({a.exporter} export)",
              "hidden": a.hidden, "layers": a.layers, "vocab": a.vocab, "parameters": params,
              "prompt_tokens": a.prompt_len, "new_tokens": a.new, "buckets": buckets, "prefill_chunk": a.prefill_chunk,
              "repeats": a.repeats, "onnxruntime": onnxruntime.__version__, "rows": rows,
              "command": "python -m portable.llm.bench " + " ".join(f"--{k.replace('_', '-')} {v}"
                                                                   for k, v in vars(a).items())}
    (a.out / "results.json").write_text(json.dumps(report, indent=1, default=str))
    lines = [f"# {report['model']}, {params} parameters, prompt {a.prompt_len}, {a.new} new tokens (greedy)", "",
             "| runner | prefill tokens/s | decode tokens/s | decode vs onnxruntime | same tokens | step graphs |",
             "|---|---|---|---|---|---|"]
    base = rows[0]["decode_tok_s"]
    for r in rows:
        lines.append(f"| {r['runner']} | {r['prefill_tok_s']:.1f} | {r['decode_tok_s']:.1f} | "
                     f"{r['decode_tok_s'] / base:.3f}x | {r['same_tokens']} | {r['compiles']} |")
    (a.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
