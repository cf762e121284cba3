"""Peers' jobs in worker processes: one process per peer and device (restarted past a workload that kills it),
per-workload timeouts, a memory limit, and rounds of the whole job list kept as each workload's best round."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import BenchConfig

DEFAULT_TIMEOUT_S = {"gpu": 120.0, "cpu": 300.0, "tiny": 60.0}
STARTUP_TIMEOUT_S = 180.0


def say(cfg: BenchConfig, msg: str) -> None:
    if cfg.log:
        print(msg, file=sys.stderr, flush=True)


def slug(text: str) -> str:
    keep = "".join(c.lower() if c.isalnum() else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)[:48] or "host"


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
                with contextlib.suppress(json.JSONDecodeError):  # a line cut short by a killed worker
                    self.events.put(json.loads(line))
        self.events.put(None)  # the worker closed the pipe (finished or died)

    def next(self, timeout: float, max_rss: int):
        """The next event; "timeout" after `timeout` s, ("rss", bytes) when the worker outgrows `max_rss`."""
        end = time.monotonic() + timeout
        while True:
            with contextlib.suppress(queue.Empty):  # no event this second: look at the memory and the clock
                return self.events.get(timeout=min(1.0, max(0.0, end - time.monotonic())))
            rss = _rss(self.proc.pid)
            if rss > max_rss:
                return ("rss", rss)
            if time.monotonic() >= end:
                return "timeout"

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
                os.killpg(self.proc.pid, signal.SIGKILL)  # the worker's own session: only what we started
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            code = None
        self.log.close()
        return code


def _rss(pid: int) -> int:
    """Resident bytes of a process (0 when unknown or gone)."""
    with contextlib.suppress(OSError, ValueError):  # gone, or no /proc
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def default_max_rss_gb() -> float:
    """40% of the host's memory: a worker past that is a runaway, and the host is shared."""
    with contextlib.suppress(OSError, ValueError):  # no /proc: the fallback below
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return 0.4 * int(line.split()[1]) / 2**20
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
                    say(cfg, f"  {peer:12s} {current:22s} {status}: {what}")
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
                    say(cfg, "  " + record_line(rec))
                    current, deadline_s = None, timeout
                elif kind == "done":
                    pending = []
                    break
        finally:
            wk.stop()
        restarts += 1
    return desc, why, records


def record_line(rec: dict) -> str:
    s = f"{rec['peer']:12s} {rec['workload']:22s} {rec['status']:11s}"
    if rec.get("device_ms"):
        s += f" device {rec['device_ms']['median_ms']:10.3f} ms"
    if rec.get("e2e_ms") and rec["e2e_ms"] is not rec.get("device_ms"):
        s += f"  e2e {rec['e2e_ms']['median_ms']:10.3f} ms"
    if rec.get("error") and rec["status"] != "ok":
        s += "  " + rec["error"].splitlines()[0][:140]
    return s


def run_jobs(cfg: BenchConfig, jobs: list[tuple], items: dict[str, list[dict]], work: Path, logs: Path,
             peers: dict) -> list[dict]:
    """Every (peer, where, args, size class) job over its size class's items, cfg.rounds times in alternating
    order (a slow spell of a shared host then hits different peers); each peer's description or why it is
    unavailable goes into `peers`. Returns the records, one per workload (best_of_rounds when several rounds)."""
    rounds = max(1, cfg.rounds)
    runs: list[list[dict]] = []
    for rnd in range(rounds):
        order = list(enumerate(jobs)) if rnd % 2 == 0 else list(enumerate(jobs))[::-1]
        suffix = "" if rounds == 1 else f"-r{rnd + 1}"
        for step, (n, (peer, where, args, sc)) in enumerate(order):
            key = f"{peer}@{where}"
            say(cfg, f"[{step + 1}/{len(jobs)}{'' if rounds == 1 else f' round {rnd + 1}/{rounds}'}] {key} "
                     f"({sc} sizes)")
            desc, why, recs = run_job(cfg, peer, args, items[sc], sc, work, logs / f"{slug(key)}{suffix}.log",
                                      tag=f"{n}{suffix}")
            if why:
                say(cfg, f"  {key}: skipped: {why.splitlines()[0]}")
                peers[key] = {"unavailable": why}
                recs = [{"workload": it["id"], "size_class": sc, "peer": peer, "status": "skipped", "error": why}
                        for it in items[sc]]
            else:
                peers[key] = desc
            for r in recs:
                r["device"] = where
            runs.append(recs)
    return best_of_rounds(runs) if rounds > 1 else [r for recs in runs for r in recs]


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
