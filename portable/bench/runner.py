"""The benchmark run: pick devices and sizes, make the inputs and the numpy reference once, run every peer in
its own worker process (with a per-workload timeout), and write JSON, Markdown and a chart.

Peers run one after another, never side by side, so none of them steals the CPU from another.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import queue
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import workloads as W
from .harness import bench_one
from .peers import PEERS, Unavailable, make_peer
from .peers.numpy_peer import reference

DEFAULT_TIMEOUT_S = {"gpu": 120.0, "cpu": 300.0, "tiny": 60.0}
STARTUP_TIMEOUT_S = 180.0


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


def _say(cfg: BenchConfig, msg: str) -> None:
    if cfg.log:
        print(msg, file=sys.stderr, flush=True)


def _slug(text: str) -> str:
    keep = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)[:48] or "host"


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
    name = "cpu" if not gpus else _slug(gpus[0]["name"])
    return Path("benchmarks") / "results" / name


# ---- worker processes --------------------------------------------------------------------------------------
class _Worker:
    """One worker process and the thread that reads its events."""

    def __init__(self, job_path: Path, log_path: Path):
        r, w = os.pipe()
        self.log = open(log_path, "a")  # noqa: SIM115 - the child writes to it until stop() closes it
        self.proc = subprocess.Popen([sys.executable, "-m", "portable.bench.worker", str(job_path),
                                      "--events-fd", str(w)], pass_fds=(w,), stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        os.close(w)
        self.events: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, args=(r,), daemon=True)
        self.reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd) as f:
            for line in f:
                try:
                    self.events.put(json.loads(line))
                except json.JSONDecodeError:
                    pass
        self.events.put(None)  # the worker closed the pipe (finished or died)

    def next(self, timeout: float, max_rss: int):
        """The next event; "timeout" after `timeout` s, ("rss", bytes) when the worker outgrows `max_rss`."""
        end = time.monotonic() + timeout
        while True:
            try:
                return self.events.get(timeout=min(1.0, max(0.0, end - time.monotonic())))
            except queue.Empty:
                pass
            rss = _rss(self.proc.pid)
            if rss > max_rss:
                return ("rss", rss)
            if time.monotonic() >= end:
                return "timeout"

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: only what we started
            except ProcessLookupError:
                pass
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        self.log.close()
        return code


def _rss(pid: int) -> int:
    """Resident bytes of a process (0 when unknown or gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def default_max_rss_gb() -> float:
    """40% of the host's memory: a worker past that is a runaway, and the host is shared."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return 0.4 * int(line.split()[1]) / 2**20
    except (OSError, ValueError):
        pass
    return 16.0


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def run_job(cfg: BenchConfig, peer: str, args: dict, items: list[dict], size_class: str, work: Path,
            log_path: Path, tag: str) -> tuple[dict | None, str | None, list[dict]]:
    """Run one peer over `items` in worker processes. Returns (description, unavailable reason, records)."""
    timeout = cfg.timeout_s or DEFAULT_TIMEOUT_S[size_class]
    max_rss = int((cfg.max_rss_gb or default_max_rss_gb()) * 2**30)
    records: list[dict] = []
    desc, why = None, None
    pending = list(items)
    restarts = 0
    while pending:
        job = {"peer": peer, "args": args, "items": pending, "iters": cfg.iters}
        job_path = work / f"job-{tag}-{restarts}.json"
        job_path.write_text(json.dumps(job, default=str))
        wk = _Worker(job_path, log_path)
        current, deadline_s = None, STARTUP_TIMEOUT_S
        try:
            while True:
                ev = wk.next(deadline_s, max_rss)
                if isinstance(ev, tuple):  # a runaway compile or driver: stop it before the host runs out
                    what = (f"killed: worker memory {ev[1] / 2**30:.1f} GiB passed the limit "
                            f"{max_rss / 2**30:.1f} GiB (--max-rss-gb)")
                    wk.stop()
                    ev = "killed"
                if ev in ("timeout", "killed") or ev is None:
                    if ev is None:
                        what = f"worker exited (code {wk.proc.wait()})"
                    elif ev == "timeout":
                        what = f"timed out after {deadline_s:.0f} s"
                    if current is None:  # died before or between workloads
                        if desc is None and why is None:
                            why = f"worker failed to start: {what}\n{_tail(log_path)}"
                            pending = []
                        break
                    status = "timeout" if ev == "timeout" else "error"
                    records.append({"workload": current, "size_class": size_class, "peer": peer, "status": status,
                                    "error": f"{what}" + ("" if ev == "timeout" else f"\n{_tail(log_path)}")})
                    _say(cfg, f"  {peer:12s} {current:22s} {status}: {what}")
                    pending = [it for it in pending if it["id"] != current]
                    break
                kind = ev.get("event")
                if kind == "unavailable":
                    why, pending = ev["reason"], []
                    break
                if kind == "describe":
                    desc = ev["info"]
                elif kind == "start":
                    current, deadline_s = ev["workload"], timeout
                elif kind == "result":
                    rec = ev["record"]
                    records.append(rec)
                    pending = [it for it in pending if it["id"] != rec["workload"]]
                    _say(cfg, "  " + _line(rec))
                    current, deadline_s = None, timeout
                elif kind == "done":
                    pending = []
                    break
        finally:
            wk.stop()
        restarts += 1
    return desc, why, records


def _line(rec: dict) -> str:
    s = f"{rec['peer']:12s} {rec['workload']:22s} {rec['status']:11s}"
    if rec.get("device_ms"):
        s += f" device {rec['device_ms']['median_ms']:10.3f} ms"
    if rec.get("e2e_ms") and rec["e2e_ms"] is not rec.get("device_ms"):
        s += f"  e2e {rec['e2e_ms']['median_ms']:10.3f} ms"
    if rec.get("error") and rec["status"] != "ok":
        s += "  " + rec["error"].splitlines()[0][:140]
    return s


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
        _say(cfg, "no portable device selected: " + "; ".join(failures))
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
                    _say(cfg, "  " + _line(rec))
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
        runs: list[list[dict]] = []
        for rnd in range(rounds):  # alternate the order: a slow spell of a shared host then hits different peers
            order = list(enumerate(jobs)) if rnd % 2 == 0 else list(enumerate(jobs))[::-1]
            for step, (n, (peer, where, args, sc)) in enumerate(order):
                key = f"{peer}@{where}"
                tag = f"{n}" if rounds == 1 else f"{n}-r{rnd + 1}"
                _say(cfg, f"[{step + 1}/{len(jobs)}{'' if rounds == 1 else f' round {rnd + 1}/{rounds}'}] {key} "
                          f"({sc} sizes)")
                desc, why, recs = run_job(cfg, peer, args, items[sc], sc, work,
                                          out / "logs" / f"{_slug(key)}{'' if rounds == 1 else f'-r{rnd + 1}'}.log",
                                          tag=tag)
                if why:
                    _say(cfg, f"  {key}: skipped: {why.splitlines()[0]}")
                    result["peers"][key] = {"unavailable": why}
                    recs = [{"workload": it["id"], "size_class": sc, "peer": peer, "status": "skipped",
                             "error": why} for it in items[sc]]
                else:
                    result["peers"][key] = desc
                for r in recs:
                    r["device"] = where
                runs.append(recs)
        result["results"].extend(best_of_rounds(runs) if rounds > 1 else [r for recs in runs for r in recs])
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
    write_outputs(result, out, chart=cfg.chart, log=lambda m: _say(cfg, m))
    return result


def best_of_rounds(runs: list[list[dict]]) -> list[dict]:
    """One record per (peer, device, size class, workload) from several rounds: the one with the lowest device_ms
    median, with every round's median under round_device_ms; a round that failed (wrong output, error) wins, so a
    failure is never hidden behind a good round."""
    groups: dict[tuple, list[dict]] = {}
    for recs in runs:
        for r in recs:
            groups.setdefault((r["peer"], r.get("device"), r.get("size_class"), r["workload"]), []).append(r)
    out = []
    for recs in groups.values():
        bad = [r for r in recs if r["status"] != "ok"]
        if bad:
            out.append(bad[0])
            continue
        timed = [r for r in recs if r.get("device_ms")]
        best = min(timed, key=lambda r: r["device_ms"]["median_ms"]) if timed else recs[0]
        out.append(dict(best, round_device_ms=[round(r["device_ms"]["median_ms"], 6) for r in timed]))
    return out


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
        _say(cfg, f"  {wid}: skipped: {e}")
        return None
    flops, weight_bytes = onnx_cost(onnx_path)
    _say(cfg, f"  {wid}: {w.label} exported to ONNX in {time.perf_counter() - t0:.1f} s "
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
