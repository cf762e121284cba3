"""`portable bench --models --zoo PATTERN`: zoo networks (portable/zoo/registry.py) on each device against
onnxruntime (CPU) and PyTorch eager, with geomean ratios, into a dated report.

Per network, as `portable zoo` runs it: one process exports the ONNX file (or reuses the zoo cache) and times
onnxruntime, the reference every output is checked against (status pass); one process per device compiles, checks and
times portable (steady-state median); one process times the PyTorch module the file was exported from, eager (CPU
here; on CUDA where the host has it); one process converts the file with pnnx and times ncnn on its Vulkan
backend and on its CPU backend (bench/ncnn_peer.py). A ratio is peer time / portable time: above 1, portable is
faster.

    python -m portable.bench.zoo_models torch NAME CACHE RESULT.json     # the PyTorch worker
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from . import ncnn_peer, peer_process

DEFAULT_ZOO = r"^(mobilenet_v2-legacy13|mobilenet_v3_large-dynamo18|efficientnet_b0-legacy17|resnet18-legacy17|" \
              r"bert_mini-legacy17)$"
TORCH_RUNS, TORCH_BUDGET_S = 20, 20.0
RATIOS = ("vs_onnxruntime", "vs_pytorch", "vs_ncnn_vulkan")
# ncnn's defaults store and compute in fp16 where the device can (deep random-weight networks drift to ~0.1); past
# this its outputs are not the model's (ppocr_v4_det's came back unrelated): no ratio against a wrong answer.
NCNN_WRONG = 0.5


def torch_worker(name: str, cache: Path) -> dict:
    """Median ms of the entry's torch module on the entry's inputs (CUDA where available, else CPU)."""
    import numpy as np
    import torch

    from ..zoo import builders
    from ..zoo.registry import get

    entry = get(name)
    io = np.load(cache / entry.name / "io.npz")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    model = builders.build(entry).to(dev)
    args = tuple(torch.from_numpy(io[f"in_{i.name}"]).to(dev) for i in entry.inputs)
    times: list[float] = []
    with torch.no_grad():
        model(*args)
        t_end = time.perf_counter() + TORCH_BUDGET_S
        while len(times) < TORCH_RUNS and (not times or time.perf_counter() < t_end):
            t = time.perf_counter()
            model(*args)
            if dev == "cuda":
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
    return {"torch_ms": round(statistics.median(times), 3), "torch_runs": len(times), "torch_device": dev,
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def run(pattern: str | None, devices: list[str], out: Path | None, cache: Path, timeout_s: float,
        command: str) -> dict:
    from .. import config
    from ..zoo import registry
    from ..zoo.runner import EXPORT_TIMEOUT_S, run_worker

    entries = registry.entries(pattern or DEFAULT_ZOO)
    if not entries:
        raise ValueError(f"--zoo {pattern!r} matches no zoo model; `portable zoo --list` lists them")
    stamp = datetime.datetime.now(datetime.UTC)
    out = out or Path("benchmarks/results") / f"models-{stamp:%Y-%m-%d}-{platform.node() or 'host'}"
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    res: dict = {"command": command, "date": stamp.isoformat(timespec="seconds"), "host": platform.node(),
                 "cpu_count": os.cpu_count(), "devices": devices, "models": {}, "portable": config.VERSION}
    for e in entries:
        rec: dict = {"family": e.family, "inputs": {i.name: list(i.shape) for i in e.inputs}}
        res["models"][e.name] = rec
        prep = run_worker(["prepare", e.name, str(cache)], EXPORT_TIMEOUT_S, env)
        rec["onnxruntime"] = {k: prep.get(k) for k in ("ort_ms", "status", "error") if k in prep}
        if "ort_ms" not in prep:
            print(f"{e.name}: export/onnxruntime failed: {prep.get('error', prep)}", flush=True)
            _save(res, out)
            continue
        tj = _job_torch(e.name, cache, timeout_s, env)
        rec["pytorch"] = tj
        nc = ncnn_peer.job(e.name, cache, timeout_s, env)
        rec["ncnn"] = nc
        ncnn_vk = nc.get("vulkan", {})
        ncnn_ms = ncnn_vk.get("ms") if ncnn_vk.get("max_rel", 1.0) <= NCNN_WRONG else None
        for d in devices:
            r = run_worker(["run", e.name, str(cache), d], timeout_s, env)
            rec[d] = {k: r.get(k) for k in ("status", "steady_ms", "steady_runs", "compile_s", "dispatches",
                                            "max_rel", "error") if k in r}
            ms = r.get("steady_ms") if r.get("status") == "pass" else None
            if ms:
                rec[d]["vs_onnxruntime"] = prep["ort_ms"] / ms
                if tj.get("torch_ms"):
                    rec[d]["vs_pytorch"] = tj["torch_ms"] / ms
                if ncnn_ms:
                    rec[d]["vs_ncnn_vulkan"] = ncnn_ms / ms
            print(f"{e.name} {d}: {r.get('status')} {ms} ms (onnxruntime {prep['ort_ms']} ms, pytorch "
                  f"{tj.get('torch_ms')} ms, ncnn-vulkan {ncnn_ms} ms)", flush=True)
        _save(res, out)
    res["geomean"] = {d: {**{k: _geomean([m.get(d, {}).get(k) for m in res["models"].values()]) for k in RATIOS},
                          **{f"{k}_models": sum(1 for m in res["models"].values() if m.get(d, {}).get(k))
                             for k in RATIOS}, "models": sum(1 for m in res["models"].values()
                                                             if m.get(d, {}).get("vs_onnxruntime"))}
                      for d in devices}
    _save(res, out)
    return res


def _job_torch(name: str, cache: Path, timeout_s: float, env: dict) -> dict:
    return peer_process.run("portable.bench.zoo_models", ["torch", name, str(cache)], timeout_s, env)


def _save(res: dict, out: Path) -> None:
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "results.md").write_text(markdown(res))


def _f(x, fmt="{:.2f}") -> str:
    return fmt.format(x) if isinstance(x, (int, float)) and x is not None else "-"


def _peer_ms(m: dict, path: tuple[str, ...]) -> str:
    r = m
    for k in path:
        r = r.get(k, {}) if isinstance(r, dict) else {}
    if isinstance(r, dict) and "ms" in r:
        return _f(r["ms"]) if r.get("max_rel", 0.0) <= NCNN_WRONG else f"wrong ({_f(r['ms'])})"
    return "-"


def markdown(res: dict) -> str:
    devs = res["devices"]
    intro = (f"Host {res['host']}, {res['cpu_count']} CPUs. Command: `{res['command']}`. Times are medians of "
             f"steady-state calls (ms); a ratio is peer time / portable time (above 1: portable faster). ncnn runs "
             f"the pnnx conversion of the same ONNX file with its default options (fp16 storage and arithmetic "
             f"where the device has them); its max relative error vs onnxruntime is in results.json, and in the "
             f"notes where it passes 1e-2.")
    lines = [f"# Whole models: portable vs onnxruntime (CPU), PyTorch eager and ncnn ({res['date']})", "", intro, "",
             "| model | onnxruntime | pytorch | ncnn-vulkan | ncnn-cpu | "
             + " | ".join(f"{d} ms | x ort | x torch | x ncnn-vk" for d in devs) + " |",
             "|---|---|---|---|---|" + "---|---|---|---|" * len(devs)]
    for name, m in res["models"].items():
        cells = [name, _f(m.get("onnxruntime", {}).get("ort_ms")), _f(m.get("pytorch", {}).get("torch_ms")),
                 _peer_ms(m, ("ncnn", "vulkan")), _peer_ms(m, ("ncnn", "cpu"))]
        for d in devs:
            r = m.get(d, {})
            ms = r.get("steady_ms") if r.get("status") == "pass" else None
            cells += [_f(ms) if ms else (r.get("status") or "-")] + [_f(r.get(k), "{:.3f}") for k in RATIOS]
        lines.append("| " + " | ".join(cells) + " |")
    notes = []
    for name, m in res["models"].items():
        nc = m.get("ncnn", {})
        if nc.get("error"):
            notes.append(f"- {name}: ncnn: {nc['error']}")
        drift = [f"{k} {nc[k]['max_rel']:.1e}" for k in ("vulkan", "cpu")
                 if isinstance(nc.get(k), dict) and nc[k].get("max_rel", 0.0) > 1e-2]
        if drift:
            notes.append(f"- {name}: ncnn's max relative error vs onnxruntime: {', '.join(drift)}"
                         + (f" (past {NCNN_WRONG}: not compared)" if any(
                             nc[k].get("max_rel", 0.0) > NCNN_WRONG for k in ("vulkan", "cpu")
                             if isinstance(nc.get(k), dict)) else ""))
    if notes:
        lines += ["", *notes]
    if "geomean" in res:
        lines += ["", "Geomean over the models that ran: " + "; ".join(
            f"{d}: {_f(g['vs_onnxruntime'], '{:.3f}')}x onnxruntime, {_f(g['vs_pytorch'], '{:.3f}')}x PyTorch, "
            f"{_f(g.get('vs_ncnn_vulkan'), '{:.3f}')}x ncnn-vulkan ({g['models']} models"
            + (f"; {g['vs_ncnn_vulkan_models']} with ncnn" if "vs_ncnn_vulkan_models" in g else "") + ")"
            for d, g in res["geomean"].items())]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "torch":
        raise SystemExit(f"unknown mode {argv[:1]!r}")
    return peer_process.serve(torch_worker, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
