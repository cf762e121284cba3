"""Runs the zoo: per model one `prepare` process (export + onnxruntime reference), then one process per device.

A timeout or a crash ends only that process; its cell becomes an `error` record quoting the last lines the
process printed, and the matrix goes on. Results are saved after every cell.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..conformance.runner import json_safe
from .registry import Entry

DEFAULT_TIMEOUT_S = 600.0
EXPORT_TIMEOUT_S = 900.0


def _tail(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(lines[-n:])


def run_worker(args: list[str], timeout_s: float, env: dict[str, str]) -> dict:
    """Run one worker; its record, or an error record when it timed out, crashed or wrote none."""
    with tempfile.TemporaryDirectory(prefix="portable-zoo-") as tmp:
        result = Path(tmp) / "result.json"
        log = Path(tmp) / "log.txt"
        cmd = [sys.executable, "-m", "portable.zoo.worker", *args[:3], str(result), *args[3:]]
        t = time.perf_counter()
        with open(log, "w") as f:
            # A session of its own, so a timeout kills the worker's children (compilers, drivers' threads) too.
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, **env}, start_new_session=True)
            try:
                code = p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                code = None
        wall = round(time.perf_counter() - t, 2)
        out = log.read_text(errors="replace")
        if result.exists():
            rec = json.loads(result.read_text())
        elif code is None:
            rec = {"status": "error", "error_type": "Timeout", "error": f"timeout: no result after {timeout_s:.0f} s"}
        else:
            why = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
            rec = {"status": "error", "error_type": "Crash", "error": f"worker crashed ({why})",
                   "message": _tail(out, 20)}
        if rec.get("status") == "error" and "message" not in rec:
            rec["message"] = _tail(out, 20)
        rec["wall_s"] = wall
        return rec


class Results:
    """The results JSON: meta, models (what each entry is) and cells[model][device] = record."""

    def __init__(self, path: Path, meta: dict):
        self.path = path
        self.data: dict[str, Any] = {"format": 1, "meta": meta, "devices": [], "models": {}, "cells": {}}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(json_safe(self.data), indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def describe(e: Entry) -> dict:
    return {"family": e.family, "source": e.source, "exporter": e.exporter, "opset": e.opset,
            "inputs": {i.name: [list(i.shape), i.dtype] for i in e.inputs}, "tags": list(e.tags), "note": e.note,
            "licence": e.licence}


def run(entries: list[Entry], devices: list[str], results: Results, cache: Path, *, timeout_s: float,
        jobs: int = 1, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> Results:
    """Every entry on every device; `cache` keeps the exported models between runs. `jobs` models at a time
    (each on its devices in turn): faster on a many-core host, but the timings then share the cores."""
    results.data["devices"] = list(devices)
    results.data["meta"]["jobs"] = jobs
    for e in entries:  # the matrix keeps the registry's order whatever finishes first
        results.data["models"][e.name] = describe(e)
        results.data["cells"][e.name] = {}
    total = len(entries) * len(devices)
    done = [0]
    lock = threading.Lock()
    t_all = time.perf_counter()

    def record(e: Entry, d: str, rec: dict) -> None:
        with lock:
            results.data["cells"][e.name][d] = rec
            done[0] += 1
            results.save()
            log(f"[{done[0]}/{total}] {e.name} on {d}: {_line(rec)}  ({time.perf_counter() - t_all:.0f} s so far)")

    def one(e: Entry) -> None:
        prep = run_worker(["prepare", e.name, str(cache)], max(timeout_s, EXPORT_TIMEOUT_S), {})
        with lock:
            results.data["models"][e.name]["prepare"] = prep
        failed = prep.get("status") in ("error", "unsupported")
        for d in devices:
            if failed:
                record(e, d, {"status": "error", "stage": "export", "error_type": prep.get("error_type", ""),
                              "error": f"export/reference failed: {prep.get('error', '')}"})
                continue
            # A fresh compile cache per cell: compile seconds are a real compile, not a cache hit.
            cache_dir = tempfile.mkdtemp(prefix="portable-zoo-cache-")
            try:
                rec = run_worker(["run", e.name, str(cache), d], timeout_s, {"PORTABLE_CACHE_DIR": cache_dir})
            finally:
                shutil.rmtree(cache_dir, ignore_errors=True)
            rec["ort_ms"] = prep.get("ort_ms")
            record(e, d, rec)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for f in [pool.submit(one, e) for e in entries]:
            f.result()
    results.data["meta"]["wall_s"] = round(time.perf_counter() - t_all, 1)
    results.save()
    return results


def _line(rec: dict) -> str:
    s = rec.get("status", "?")
    if s in ("pass", "fail"):
        line = f"{s} rel {rec.get('max_rel', float('nan')):.1e}, compile {rec.get('compile_s', 0):.1f} s"
        if "steady_ms" in rec:
            line += f", {rec['steady_ms']:.1f} ms (onnxruntime {rec.get('ort_ms') or 0:.1f} ms)"
        return line
    op = f" [{rec['op']} '{rec.get('node', '')}']" if rec.get("op") else ""
    return f"{s}{op}: {rec.get('error_type', '')}: {rec.get('error', '')[:200]}"
