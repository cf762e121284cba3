"""Decode tokens/s of a Llama-architecture decoder (random weights from a seed) on a GPU host without MLIR, through
DecoderSession on packages compiled here, against Hugging Face generate in PyTorch eager on the same card.

    python benchmarks/h200_llm.py export .h200l [--size 1b] [--prefill 128]   # here: ONNX export, seeded weights,
                                                                             # packages, skeletons
    python benchmarks/h200_llm.py run .h200l --out r.json       # GPU host: portable per API vs PyTorch eager

The decode step (chunk 1) at one cache capacity is packaged; the decode prompt is fed one token at a time through
it. With --prefill S the prefill step (chunk S) is packaged too, and `run` times a prompt of 2 S tokens through it
(prefill tokens/s and TFLOP/s: 2 x multiply-adds of the weight products and of attention over the tokens before
each, per token) against one PyTorch forward over the same prompt.
Its weights travel as a seed (portable/bench/weightless.py) and are drawn again there; the weightless ONNX graph
gives DecoderSession its signature and, restored, onnxruntime (CPU) the reference tokens. PyTorch eager builds the
same configuration with its own random initialization (the time does not depend on the values).

HBM fraction: bytes read per decoded token (every weight but the embedding table, of which one row is read, plus
the K and V rows the step reads: the whole capacity for portable's fixed-capacity step, the tokens so far for
PyTorch's growing cache) x tokens/s over the card's datasheet bandwidth (H100 SXM 3.35 TB/s, H200 4.8 TB/s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 0
_COMMON = {"vocab_size": 32000, "max_position_embeddings": 2048, "tie_word_embeddings": False}
SIZES = {  # --size: Llama configurations (f32 weights)
    "tiny": {**_COMMON, "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 704, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 2},  # a check of this script on the CPU drivers
    "140m": {**_COMMON, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
             "num_attention_heads": 16, "num_key_value_heads": 16},
    "440m": {**_COMMON, "hidden_size": 1536, "intermediate_size": 4096, "num_hidden_layers": 12,
             "num_attention_heads": 12, "num_key_value_heads": 12},
    # TinyLlama-1.1B's shape (GQA: 4 KV heads for 32 query heads); its ONNX file keeps the weights beside it. Its
    # export needs about 18 GB of host memory and 22 GB of disk (export, step graph, package, compile cache).
    "1b": {**_COMMON, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
           "num_attention_heads": 32, "num_key_value_heads": 4},
}
CAPACITY = 256
TARGETS = ("vulkan:nvidia", "opencl:nvidia")
PEAK_BW = {"H200": 4.8e12, "H100": 3.35e12}


def _model(config: dict):
    import torch

    from portable.llm import hf_export

    tf = hf_export._transformers()
    torch.manual_seed(SEED)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(**config))
    model.config._attn_implementation = "eager"
    return model.eval()


def export(out: Path, size: str, sources: bool = False, prefill: int = 0,
           targets: tuple[str, ...] = TARGETS) -> None:
    import onnx
    from onnx.external_data_helper import load_external_data_for_model

    from portable import package
    from portable.bench import weightless
    from portable.llm import hf_export
    from portable.llm.session import DecoderSession, step_graph

    out.mkdir(parents=True, exist_ok=True)
    path = out / "llm.onnx"
    if not path.exists():
        model = _model(SIZES[size])
        hf_export.export(model, path)
        del model
    # Every float weight is drawn again from the seed: the exported values are never read (only what is not drawn).
    seeded = weightless.seed_initializers(onnx.load(str(path), load_external_data=False), SEED)
    load_external_data_for_model(seeded, str(out))
    graph = weightless.without_weights(seeded)
    onnx.save(graph, str(out / "llm.graph.onnx"))
    # The step graph goes to the compiler as a file with its weights beside it (mapped, not held twice in memory).
    step_path = out / "llm.step.onnx"
    Path(str(step_path) + ".data").unlink(missing_ok=True)  # onnx appends to an existing data file
    onnx.save(step_graph(seeded), str(step_path), save_as_external_data=True, location=step_path.name + ".data")
    del seeded
    step = str(step_path)
    session = DecoderSession(graph, buckets=(CAPACITY,))
    meta = {"config": SIZES[size], "size": size, "capacity": CAPACITY, "seed": SEED}
    # The decode step (chunk 1) and, with --prefill S, the prefill step (chunk S) at the same capacity: one package
    # each, named by _stem.
    for chunk in (1, prefill) if prefill > 1 else (1,):
        shapes = session._shapes(CAPACITY, chunk)
        stem = _stem(CAPACITY, chunk)
        pkg = out / f"{stem}.ptpk"
        t = time.perf_counter()
        if not pkg.exists():
            package.build(step, targets, pkg, input_shapes=shapes)
        if sources:  # per-dispatch ONNX nodes for `portable profile --sources` on the GPU host
            from portable import profiling

            for target in targets:
                api = target.split(":")[0]
                profiling.source_map(step, target.split(":")[1], api, out / f"{stem}.{api}.sources.json", shapes)
        stats = weightless.strip(pkg, out / f"{stem}.skel", onnx.load(step))
        (out / f"{stem}.hash").write_text(package.Package(pkg).content_hash)
        meta["shapes" if chunk == 1 else "prefill_shapes"] = [list(s) for s in shapes]
        if chunk > 1:
            meta["prefill_chunk"] = chunk
        print(f"llm {stem}: compiled in {time.perf_counter() - t:.0f} s; package {pkg.stat().st_size / 2**20:.1f} "
              f"MiB, skeleton {(out / f'{stem}.skel').stat().st_size / 2**20:.2f} MiB {stats}", flush=True)
    (out / "llm.json").write_text(json.dumps(meta))


def _stem(capacity: int, chunk: int) -> str:
    return f"llm-c{capacity}" + (f"-s{chunk}" if chunk > 1 else "")


# ---- GPU host ---------------------------------------------------------------------------------------------
def _layer_products(c: dict) -> int:
    """Weights of one layer's products: Q, O, K, V (GQA: fewer K and V rows), gate, up, down."""
    h = c["hidden_size"]
    hd = h // c["num_attention_heads"]
    return 2 * h * h + 2 * h * c["num_key_value_heads"] * hd + 3 * h * c["intermediate_size"]


def _bytes_per_token(c: dict, context_rows: float) -> float:
    h, v, n = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
    hd = h // c["num_attention_heads"]
    weights = 4.0 * (n * (_layer_products(c) + 2 * h) + h + h * v + h)  # layers + norms, final norm, lm_head, a row
    kv = 4.0 * 2 * n * c["num_key_value_heads"] * hd * context_rows
    return weights + kv


def run(src: Path, out: Path, prompt_len: int, new: int, repeats: int, devices: list[str],
        torch_peer: bool = True) -> None:
    import onnx

    import portable
    from portable.bench import weightless
    from portable.llm.reference import OrtDecoder, run_loop
    from portable.llm.session import DecoderSession

    meta = json.loads((src / "llm.json").read_text())
    cap, config = meta["capacity"], meta["config"]
    prompt = [int(t) for t in np.random.default_rng(0).integers(0, config["vocab_size"], prompt_len)]
    pre = meta.get("prefill_chunk")  # the prefill measurement's prompt: two chunks
    long_prompt = [int(t) for t in np.random.default_rng(1).integers(0, config["vocab_size"], 2 * (pre or 0))]
    params = None
    res: dict = {"config": config, "capacity": cap, "prompt_tokens": prompt_len, "new_tokens": new,
                 "repeats": repeats, "rows": []}
    peak = None
    try:
        import torch

        res["torch"] = torch.__version__
        res["gpu"] = torch.cuda.get_device_name(0)
        peak = next((bw for k, bw in PEAK_BW.items() if k in res["gpu"]), None)
        torch.backends.cuda.matmul.allow_tf32 = False
        if not torch_peer:
            raise RuntimeError("PyTorch eager not run (--no-torch)")
        model = _model(config).cuda()
        params = sum(p.numel() for p in model.parameters())
        ids = torch.tensor([prompt], device="cuda")

        def gen(n, model=model):
            with torch.no_grad():
                torch.cuda.synchronize()
                t = time.perf_counter()
                model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                               do_sample=False, pad_token_id=0)
                torch.cuda.synchronize()
                return time.perf_counter() - t

        for attn in ("eager", "sdpa"):
            try:
                if hasattr(model, "set_attn_implementation"):
                    model.set_attn_implementation(attn)
                else:
                    model.config._attn_implementation = attn
                gen(8)
            except Exception as e:  # noqa: BLE001 - the other attention still runs
                res[f"torch_{attn}_error"] = f"{type(e).__name__}: {str(e)[:300]}"
                continue
            one = statistics.median(gen(1) for _ in range(repeats))
            full = [gen(new) for _ in range(repeats)]
            dec = (statistics.median(full) - one) / (new - 1)
            bpt = _bytes_per_token(config, prompt_len + new / 2)
            row = {"runner": f"pytorch eager generate ({attn} attention)", "decode_tok_s": 1 / dec,
                   "bytes_per_token": bpt, "generate_s": full, "first_token_s": one}
            if peak:
                row["hbm_fraction"] = bpt / dec / peak
            res["rows"].append(row)
            print(f"pytorch {attn}: {1 / dec:.1f} tok/s, HBM {row.get('hbm_fraction', float('nan')):.3f}", flush=True)
            if pre:
                res["rows"].append(_torch_prefill(model, attn, long_prompt, config, repeats))
        del model
        torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001 - portable's figures stand without the peer
        res["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(res["torch_error"], flush=True)
    res["parameters"] = params
    res["peak_bandwidth"] = peak
    graph = onnx.load(str(src / "llm.graph.onnx"))
    t = time.perf_counter()
    # Its own copy of the weightless graph: restore_onnx fills in (and onnx.save then moves out) the weights of the
    # model it is given, and `graph` must stay weightless for the sessions below.
    ref_model = weightless.restore_onnx(onnx.load(str(src / "llm.graph.onnx")))
    # Through a file with its weights beside it: a ~1B f32 model is past protobuf's 2 GB limit for one message.
    ref_dir = Path(tempfile.mkdtemp(prefix="h200_llm_ref"))
    onnx.save(ref_model, str(ref_dir / "ref.onnx"), save_as_external_data=True, location="ref.onnx.data")
    del ref_model
    ort = OrtDecoder(ref_dir / "ref.onnx")
    check = min(8, new)
    ref_tokens, ref_logits, _, _ = run_loop(ort.feed, prompt, check, lambda x: int(np.argmax(x)))
    if pre:
        ort.reset()
        ref_prefill = ort.feed(long_prompt)
    del ort
    shutil.rmtree(ref_dir)
    print(f"onnxruntime reference: {check} tokens in {time.perf_counter() - t:.1f} s", flush=True)
    pkg = src / f"llm-c{cap}.ptpk"
    h = weightless.restore(src / f"llm-c{cap}.skel", pkg)
    res["content_hash"] = h
    ppkg = src / f"{_stem(cap, pre)}.ptpk" if pre else None
    if ppkg is not None:
        weightless.restore(src / f"{_stem(cap, pre)}.skel", ppkg)
    for dev in devices:
        try:
            g = portable.load(pkg, device=dev, expect_hash=(src / f"llm-c{cap}.hash").read_text().strip())
            s = DecoderSession(graph, dev, buckets=(cap,), prefill_chunks=(), graphs={(cap, 1): g})
            toks, logits, _, _ = run_loop(s.feed, prompt, check, lambda x: int(np.argmax(x)))
            err = max(float(np.abs(a - b).max() / (np.abs(b).max() + 1e-12)) for a, b in zip(logits, ref_logits))
            runs = []
            for _ in range(repeats):
                s.reset()
                runs.append(run_loop(s.feed, prompt, new, lambda x: int(np.argmax(x))))
            dec = statistics.median(r[3] for r in runs) / (new - 1)
            bpt = _bytes_per_token(config, cap)
            row = {"runner": f"portable {dev} (DecoderSession on a package)", "decode_tok_s": 1 / dec,
                   "bytes_per_token": bpt, "decode_s": [r[3] for r in runs],
                   "prompt_s_one_token_at_a_time": [r[2] for r in runs],
                   "same_tokens_as_onnxruntime": toks == ref_tokens, "max_rel_logit_err": err,
                   "compiles": s.stats.compiles, "dispatches": len(g.executable.dispatches)}
            if peak:
                row["hbm_fraction"] = bpt / dec / peak
            res["rows"].append(row)
            print(f"portable {dev}: {1 / dec:.1f} tok/s, HBM {row.get('hbm_fraction', float('nan')):.3f}, "
                  f"same tokens {toks == ref_tokens}, err {err:.2e}, {row['dispatches']} dispatches", flush=True)
            s.close()
            if ppkg is not None:
                res["rows"].append(_portable_prefill(dev, graph, g, ppkg, src, cap, pre, long_prompt, ref_prefill,
                                                     config, repeats))
            g.close()
        except Exception as e:  # noqa: BLE001 - one API failing is reported, the other still runs
            res["rows"].append({"runner": f"portable {dev}", "error": f"{type(e).__name__}: {str(e)[:500]}"})
            print(f"portable {dev}: {type(e).__name__}: {e}", flush=True)
        out.write_text(json.dumps(res, indent=1))
    pkg.unlink()
    if ppkg is not None:
        ppkg.unlink()
    out.write_text(json.dumps(res, indent=1))


def _flops_per_token(c: dict, context: float) -> float:
    """Multiply-adds x 2 of one token through the decoder: every weight product (the LM head included) and the
    attention over `context` earlier tokens."""
    h, n = c["hidden_size"], c["num_hidden_layers"]
    return 2.0 * (n * _layer_products(c) + h * c["vocab_size"]) + 4.0 * n * h * context


def _torch_prefill(model, attn: str, prompt: list[int], config: dict, repeats: int) -> dict:
    """Prefill tokens/s and TFLOP/s of one forward over `prompt` in PyTorch eager."""
    import torch

    ids = torch.tensor([prompt], device="cuda")

    def fwd():
        with torch.no_grad():
            torch.cuda.synchronize()
            t = time.perf_counter()
            model(ids)
            torch.cuda.synchronize()
            return time.perf_counter() - t

    fwd()
    times = [fwd() for _ in range(repeats)]
    sec, n = statistics.median(times), len(prompt)
    row = {"runner": f"pytorch eager forward ({attn} attention), prefill {n} tokens", "prefill_tok_s": n / sec,
           "prefill_tflop_s": n * _flops_per_token(config, n / 2) / sec / 1e12, "prefill_s": times}
    print(f"pytorch {attn} prefill: {n / sec:.1f} tok/s, {row['prefill_tflop_s']:.2f} TFLOP/s", flush=True)
    return row


def _portable_prefill(dev, graph, g, ppkg, src, cap, chunk, prompt, ref_logits, config, repeats) -> dict:
    """Prefill tokens/s and TFLOP/s of `prompt` (two chunks) through the prefill package beside decode graph `g`."""
    import portable
    from portable.llm.session import DecoderSession

    gp = portable.load(ppkg, device=dev, expect_hash=(src / f"{_stem(cap, chunk)}.hash").read_text().strip())
    s = DecoderSession(graph, dev, buckets=(cap,), prefill_chunks=(chunk,), graphs={(cap, 1): g, (cap, chunk): gp})
    logits = s.feed(prompt)  # warm-up, and the logits checked against onnxruntime
    err = float(np.abs(logits - ref_logits).max() / (np.abs(ref_logits).max() + 1e-12))
    times = []
    for _ in range(repeats):
        s.reset()
        t = time.perf_counter()
        s.feed(prompt)
        times.append(time.perf_counter() - t)
    sec = statistics.median(times)
    n = len(prompt)
    flops = n * _flops_per_token(config, n / 2)
    row = {"runner": f"portable {dev} prefill ({n} tokens in chunks of {chunk})", "prefill_tok_s": n / sec,
           "prefill_tflop_s": flops / sec / 1e12, "prefill_s": times, "same_argmax_as_onnxruntime":
           int(np.argmax(logits)) == int(np.argmax(ref_logits)), "max_rel_logit_err": err,
           "compiles": s.stats.compiles, "dispatches": len(gp.executable.dispatches)}
    print(f"portable {dev} prefill: {n / sec:.1f} tok/s, {row['prefill_tflop_s']:.2f} TFLOP/s, err {err:.2e}, "
          f"{row['dispatches']} dispatches", flush=True)
    s.close()
    gp.close()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("dir", type=Path)
    e.add_argument("--size", choices=sorted(SIZES), default="140m")
    e.add_argument("--sources", action="store_true", help="also the per-dispatch source maps (portable profile)")
    e.add_argument("--prefill", type=int, default=0, metavar="S",
                   help="also package the prefill step of S tokens (prefill tokens/s and TFLOP/s on the GPU host)")
    e.add_argument("--targets", default=",".join(TARGETS), help="package targets (e.g. opencl:pocl to check here)")
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--prompt-len", type=int, default=32)
    r.add_argument("--new", type=int, default=128)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--device", default="vulkan:0,opencl:0")
    r.add_argument("--no-torch", action="store_true", help="portable only (a second build measured beside a first)")
    a = ap.parse_args(argv)
    if a.cmd == "export":
        export(a.dir, a.size, a.sources, a.prefill, tuple(a.targets.split(",")))
    else:
        run(a.dir, a.out, a.prompt_len, a.new, a.repeats, a.device.split(","), not a.no_torch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
