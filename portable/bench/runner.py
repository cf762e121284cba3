"""The benchmark run: pick devices and sizes, make the inputs and the numpy reference once, run every peer in
its own worker process (jobs.py: per-workload timeouts, rounds), and write JSON, Markdown and a chart.

Peers run one after another, never side by side, so none of them steals the CPU from another.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import workloads as W
from .harness import bench_one
from .jobs import best_of_rounds, record_line, run_jobs, say, slug
from .peers import PEERS, Unavailable, make_peer
from .peers.numpy_peer import reference


@dataclass
class BenchConfig:
    devices: str = "all"  # "all" or comma-separated URIs
    filter: str | None = None
    out: Path | None = None
    sizes: str = "auto"  # auto | gpu | cpu | tiny
    peers: tuple[str, ...] = PEERS
    timeout_s: float | None = None
    iters: int | None = None  # force the timed count (tests); None = the policy in timing.py
    import_dir: Path | None = None
    iree_target: str | None = None
    max_rss_gb: float | None = None  # a worker above this is killed (default: 40% of host memory)
    chart: bool = True
    command: str = ""
    log: bool = True  # progress lines on stderr
    models: bool = False  # the model table (whole networks exported from models/cv.py) instead of the op table
    rounds: int = 1  # every peer's job this many times, in alternating order; each record keeps its best round
    extra: dict = field(default_factory=dict)


def package_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("portable", "numpy", "vulkan", "pyopencl", "torch-mlir", "iree-base-compiler", "iree-base-runtime",
                "tinygrad", "onnxruntime", "onnx", "torch", "matplotlib"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def host_info() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    return {"hostname": platform.node(), "cpu": cpu, "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_at_start": load}


def source_info() -> dict:
    """Which portable source ran: git commit (+ whether the tree had uncommitted changes) and the compiler
    fingerprint that names its kernel caches. Best effort: a wheel install has no git."""
    from .. import cache

    root = Path(__file__).resolve().parents[2]
    info: dict = {"compiler_fingerprint": cache.compiler_fingerprint()[:16], "commit": None, "dirty": None}
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()

        info["commit"] = git("rev-parse", "--short=12", "HEAD")
        info["dirty"] = bool(git("status", "--porcelain", "--", "portable", "devices"))
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def pick_devices(cfg: BenchConfig) -> tuple[list[dict], list[str]]:
    """The portable devices to benchmark, each with its size class; plus driver failures worth reporting."""
    from ..devices import devices

    found, failures = devices()
    chosen = []
    wanted = None if cfg.devices in ("all", "", None) else [d.strip() for d in cfg.devices.split(",") if d.strip()]
    for d in found:
        if wanted is not None and d.uri not in wanted:
            continue
        i = d.info
        if cfg.sizes != "auto":
            size = cfg.sizes
        elif cfg.extra.get("manifest"):
            size = cfg.extra["manifest"]["size_class"]
            if wanted is None and i.device_type == "cpu" and size == "gpu":
                failures.append(f"{d.uri} ({i.name}): a CPU driver, skipped for GPU-sized imports (name it to run)")
                continue
        else:
            size = "cpu" if i.device_type == "cpu" else "gpu"
        chosen.append({"uri": d.uri, "api": i.api, "index": i.index, "name": i.name, "driver": i.driver,
                       "driver_version": i.driver_version, "device_type": i.device_type, "profile": d.profile,
                       "size_class": size})
    if wanted:
        missing = [u for u in wanted if u not in [c["uri"] for c in chosen]]
        if missing:
            from ..errors import DeviceNotFound

            have = ", ".join(d.uri for d in found) or "none"
            raise DeviceNotFound(f"{', '.join(missing)}: no such device (found: {have}); "
                                 f"run `portable devices` to list them")
    return chosen, failures


def default_out(devs: list[dict]) -> Path:
    gpus = [d for d in devs if d["device_type"] != "cpu"]
    name = "cpu" if not gpus else slug(gpus[0]["name"])
    return Path("benchmarks") / "results" / name


# ---- the run -----------------------------------------------------------------------------------------------
def run_bench(cfg: BenchConfig) -> dict:
    """Run everything cfg selects; write results.json / results.md / results.png; return the JSON dict."""
    started = time.time()
    devs, failures = pick_devices(cfg)
    manifest = cfg.extra.get("manifest")
    if cfg.models and manifest:
        raise ValueError("model workloads are not exported (their weights exceed what an export carries to the "
                         "GPU host); run `portable bench --models` where torch and the compiler are installed")
    ids = W.select(cfg.filter, models=cfg.models)
    if manifest:
        ids = [i for i in ids if i in manifest["workloads"]]
    if not ids:
        table = W.MODEL_TABLE if cfg.models else W.TABLE
        raise ValueError(f"--filter {cfg.filter!r} matches no workload; workloads are: {', '.join(table)}")
    out = Path(cfg.out) if cfg.out else default_out(devs) / ("models" if cfg.models else "")
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    classes = sorted({d["size_class"] for d in devs}, key=W.SIZE_CLASSES.index)
    if not devs:
        say(cfg, "no portable device selected: " + "; ".join(failures))
    result = {
        "schema": 1,
        "command": cfg.command or " ".join(shlex.quote(a) for a in sys.argv),
        "argv": [sys.executable, *sys.argv],
        "started": _dt.datetime.fromtimestamp(started).isoformat(timespec="seconds"),
        "host": host_info(),
        "packages": package_versions(),
        "source": source_info(),
        "mode": ({"kind": "import", "dir": str(cfg.import_dir), "profile": manifest.get("profile"),
                  "exported": manifest.get("created"), "export_command": manifest.get("command"),
                  "export_portable": manifest.get("portable_version")} if manifest else {"kind": "compile"}),
        "devices": devs,
        "driver_failures": failures,
        "peers": {},
        "workloads": {},
        "results": [],
        "timing": {"policy": "warm-up, then >= 10 timed calls (3 when one call > 1 s, 1 when > 10 s); "
                             "fast calls repeat to >= 0.3 s of timed work (at most 200)",
                   "device_ms": "inputs resident on the device; one call incl. host submit and the wait for "
                                "completion (fence / clFinish / synchronize), no transfers",
                   "e2e_ms": "numpy inputs in, numpy output out: upload + compute + download"},
    }
    with tempfile.TemporaryDirectory(prefix="portable-bench-") as tmp:
        work = Path(tmp)
        # 1. inputs and the numpy reference, once per size class (numpy is timed here, nothing else runs)
        items: dict[str, list[dict]] = {}
        np_peer = make_peer("numpy", {}) if "numpy" in cfg.peers else None
        if np_peer:
            result["peers"]["numpy"] = np_peer.describe()
        for sc in classes:
            result["workloads"][sc] = {}
            items[sc] = []
            for wid in ids:
                d = work / sc / wid
                if wid in W.MODEL_TABLE:
                    w = _export_model(cfg, wid, sc, d, failures)
                    if w is None:
                        continue
                else:
                    w = W.build(wid, sc)
                if manifest and manifest["workloads"][wid].get("mlir_sha") not in (None, w.mlir_sha):
                    failures.append(f"{wid}: the exported MLIR differs from this host's workload table "
                                    f"(export {manifest['workloads'][wid]['mlir_sha']}, here {w.mlir_sha})")
                result["workloads"][sc][wid] = {
                    "label": w.label, "family": w.family, "params": w.params, "dtype": w.dtype,
                    "inputs": [[list(s), d] for s, d in w.inputs], "output": [list(w.output[0]), w.output[1]],
                    "flops": w.flops, "bytes": w.bytes, "bound": w.bound, "built_with": w.built_with,
                    "mlir_sha": w.mlir_sha}
                d.mkdir(parents=True, exist_ok=True)
                xs = w.make_inputs()
                if w.family == "model":  # numpy has no whole networks: onnxruntime on the same file is the reference
                    from .model_workloads import ort_reference

                    ref = ort_reference(w.onnx_path, xs[0])
                    result["workloads"][sc][wid]["reference"] = "onnxruntime (CPUExecutionProvider)"
                else:
                    ref = reference(w, xs)
                for i, x in enumerate(xs):
                    np.save(d / f"in{i}.npy", x)
                np.save(d / "ref.npy", ref)
                items[sc].append({"id": wid, "size_class": sc, "data_dir": str(d), "onnx": w.onnx_path})
                if np_peer and w.family != "model":
                    rec = bench_one(np_peer, w, xs, ref, iters=cfg.iters)
                    rec["device"] = "host"
                    result["results"].append(rec)
                    say(cfg, "  " + record_line(rec))
                del xs, ref
        # 2. every other peer in its own worker process
        jobs = []
        for dv in devs:
            base = {"device": dv["uri"], "device_name": dv["name"], "device_index": dv["index"],
                    "import_dir": str(cfg.import_dir) if cfg.import_dir else None, "manifest": manifest,
                    "iree_target": cfg.iree_target if not manifest else (cfg.iree_target or (manifest.get(
                        "iree_targets") or ["default"])[0])}  # an export made without IREE lists none
            if base["iree_target"] == "default":
                base["iree_target"] = None
            if "portable" in cfg.peers:
                jobs.append(("portable", dv["uri"], base, dv["size_class"]))
            if dv["api"] == "vulkan" and "iree" in cfg.peers:
                jobs.append(("iree", dv["uri"], base, dv["size_class"]))
            if dv["api"] == "opencl" and "tinygrad" in cfg.peers:
                jobs.append(("tinygrad", dv["uri"], base, dv["size_class"]))
        for sc in classes:
            if "torch" in cfg.peers:
                jobs.append(("torch", "torch", {"torch_device": "auto"}, sc))
            if "onnxruntime" in cfg.peers and sc != "gpu":
                jobs.append(("onnxruntime", "host", {}, sc))
        rounds = max(1, cfg.rounds)
        result["results"].extend(run_jobs(cfg, jobs, items, work, out / "logs", result["peers"]))
        if rounds > 1:
            result["timing"]["rounds"] = (f"{rounds} rounds of every peer's job, alternating order; each "
                                          f"(peer, device, workload) keeps its round with the lowest device_ms median "
                                          f"(round_device_ms lists them); a failing round is kept instead")
    for log in (out / "logs").glob("*.log"):
        if log.stat().st_size == 0:
            log.unlink()
    if not any((out / "logs").iterdir()):
        (out / "logs").rmdir()
    result["finished"] = _dt.datetime.now().isoformat(timespec="seconds")
    try:
        result["host"]["loadavg_at_end"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        pass
    result["wall_s"] = round(time.time() - started, 1)
    write_outputs(result, out, chart=cfg.chart, log=lambda m: say(cfg, m))
    return result


def _export_model(cfg: BenchConfig, wid: str, sc: str, d: Path, failures: list[str]) -> W.Workload | None:
    """A model workload with its ONNX file (and the weights for PyTorch) exported into `d`, or None (noted in
    `failures`) where it cannot be built here (no torch, no models/ folder)."""
    from dataclasses import replace

    from .model_workloads import ModelUnavailable, export, onnx_cost

    w = W.build(wid, sc)
    t0 = time.perf_counter()
    try:
        d.mkdir(parents=True, exist_ok=True)
        onnx_path, _ = export(w.params, d)
    except ModelUnavailable as e:
        failures.append(f"{wid}: skipped: {e}")
        say(cfg, f"  {wid}: skipped: {e}")
        return None
    flops, weight_bytes = onnx_cost(onnx_path)
    say(cfg, f"  {wid}: {w.label} exported to ONNX in {time.perf_counter() - t0:.1f} s "
              f"({flops / 1e9:.2f} GFLOP, {weight_bytes / 2**20:.1f} MiB of weights)")
    return replace(w, onnx_path=str(onnx_path), flops=flops, bytes=w.bytes + weight_bytes)


def write_outputs(result: dict, out: Path, chart: bool = True, log=print) -> None:
    from .report import annotate, markdown

    annotate(result)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "results.md").write_text(markdown(result))
    log(f"wrote {out / 'results.json'} and {out / 'results.md'}")
    if chart:
        try:
            from .chart import plot

            plot(result, out / "results.png")
            log(f"wrote {out / 'results.png'}")
        except ImportError as e:
            log(f"no chart: {e} (pip install matplotlib, or re-plot elsewhere: portable bench --from-json FILE)")


__all__ = ["BenchConfig", "Unavailable", "best_of_rounds", "run_bench", "write_outputs"]
