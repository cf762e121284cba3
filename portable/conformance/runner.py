"""Runs conformance cases on columns (devices, or profile@device) in worker processes, into a resumable JSON.

Isolation: every case runs in a worker process; a per-stage timeout or a crash (segfault in a driver or
in MLIR) kills only that worker: the stage's column gets an `error` record quoting the crash, the case's
remaining columns are retried in a fresh worker, and the run goes on.
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing.connection
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter, deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import config
from .cases import Case

Connection = multiprocessing.connection.Connection

FORMAT = 1
DEFAULT_TIMEOUT_S = 180.0
CASES_PER_WORKER = 150  # then a fresh worker: bounds what MLIR contexts and drivers leak over a long run


def json_safe(v: Any) -> Any:
    """JSON-safe: non-finite floats as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    return v


class Results:
    """The results JSON: meta, columns, cases (suite, op) and results[case][column] = record."""

    def __init__(self, path: Path):
        self.path = path
        self.data: dict[str, Any] = {"format": FORMAT, "meta": {}, "columns": {}, "cases": {}, "results": {}}
        self._dirty = 0
        self._saved = time.monotonic()

    @classmethod
    def load(cls, path: Path) -> Results:
        r = cls(path)
        if path.exists():
            data = json.loads(path.read_text())
            if data.get("format") == FORMAT:
                r.data = data
        return r

    def has(self, case: str, column: str) -> bool:
        return column in self.data["results"].get(case, {})

    def add(self, case: Case, column: str, rec: dict) -> None:
        self.data["cases"].setdefault(case.name, {"suite": case.suite, "op": case.op})
        self.data["results"].setdefault(case.name, {})[column] = json_safe(rec)
        self._dirty += 1
        if self._dirty >= 50 or time.monotonic() - self._saved > 5:
            self.save()

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.path)
        self._dirty = 0
        self._saved = time.monotonic()


class _Worker:
    """A worker process (`python -m portable.conformance.worker FD`) and the case it is running."""

    def __init__(self, wid: int, log_dir: Path, env: dict[str, str]):
        self.id = wid
        self.log = log_dir / f"worker-{wid}.log"
        parent, child = socket.socketpair()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "portable.conformance.worker", str(child.fileno())],
                                         pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env={**os.environ, **env})
        child.close()
        self.conn = Connection(parent.detach())
        self.job: tuple[Case, list[str]] | None = None
        self.stage: str | None = None
        self.stage_started = 0.0
        self.done_columns: set[str] = set()
        self.cases_run = 0

    @property
    def exitcode(self) -> int | None:
        return self.proc.poll()

    def reap(self) -> int | None:
        """The exit status of a worker whose pipe closed (it may take a moment to be reported)."""
        try:
            return self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def send(self, case: Case, columns: list[str], profile: str | None, repro_dir: str | None) -> None:
        self.job = (case, columns)
        self.stage, self.stage_started = "import", time.monotonic()
        self.done_columns = set()
        self.cases_run += 1
        self.conn.send((dataclasses.asdict(case), columns, profile, repro_dir))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.conn.close()

    def crash_note(self) -> str:
        """The tail of the worker's log after the current case header (a faulthandler traceback, if any)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        tail = text[text.rfind("=== "):] if "=== " in text else text
        lines = [ln for ln in tail.splitlines()[1:] if ln.strip()]
        fatal = [i for i, ln in enumerate(lines) if "Fatal Python error" in ln]
        if fatal:
            lines = lines[fatal[-1]:]
        return "\n".join(lines[:25])[-2500:]


def _signal_name(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        import signal

        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled = total, enabled
        self.n = 0
        self.counts: Counter[str] = Counter()
        self.tty = enabled and sys.stderr.isatty()
        self.t0 = time.monotonic()
        self._last = 0.0

    def add(self, status: str, label: str) -> None:
        self.n += 1
        self.counts[status] += 1
        if not self.enabled:
            return
        el = time.monotonic() - self.t0
        eta = el / self.n * (self.total - self.n) if self.n else 0
        c = self.counts
        line = (f"[{self.n}/{self.total}] pass {c['pass']} fail {c['fail']} unsupported {c['unsupported']} "
                f"error {c['error']}" + (f" compiled-only {c['compiled-only']}" if c["compiled-only"] else "") +
                f" | {el:.0f}s, eta {eta:.0f}s | {label}")
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line[:160])
            sys.stderr.flush()
        elif time.monotonic() - self._last > 10 or self.n == self.total:
            print(line, file=sys.stderr, flush=True)
            self._last = time.monotonic()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def run(cases: list[Case], columns: list[str], results: Results, *, jobs: int = 1, profile: str | None = None,
        resume: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S, progress: bool = True,
        log_dir: Path | None = None, repro_dir: Path | None = None, meta: dict | None = None,
        env: dict[str, str] | None = None) -> Results:
    """Run every (case, column) not yet in `results` (with resume) and save the JSON as it goes; `env`: variables
    set for the worker processes only."""
    if not resume:
        results.data["results"] = {}
        results.data["cases"] = {}
    results.data["meta"].update(meta or {})
    results.data["meta"]["updated"] = datetime.now(UTC).isoformat(timespec="seconds")
    queue: deque[tuple[Case, list[str]]] = deque()
    for c in cases:
        todo = [col for col in columns if not (resume and results.has(c.name, col))]
        if todo:
            queue.append((c, todo))
    total = sum(len(t) for _, t in queue)
    prog = Progress(total, progress)
    log_dir = log_dir or config.cache_dir() / "conformance" / "logs" / datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(env or {})
    workers: list[_Worker] = []
    next_id = 0
    jobs = max(1, int(jobs))
    try:
        while queue or any(w.job for w in workers):
            # Fill idle workers.
            for i, w in enumerate(workers):
                if w.job is None and w.cases_run >= CASES_PER_WORKER:
                    w.stop()
                    workers[i] = _Worker(next_id, log_dir, env)
                    next_id += 1
            while len(workers) < min(jobs, len(queue) + sum(1 for w in workers if w.job)):
                workers.append(_Worker(next_id, log_dir, env))
                next_id += 1
            for w in workers:
                if w.job is None and queue:
                    case, cols = queue.popleft()
                    w.send(case, cols, profile, str(repro_dir) if repro_dir else None)
            busy = [w for w in workers if w.job]
            ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=1.0)
            now = time.monotonic()
            for w in list(busy):
                # The stage running when we woke up is over time unless the messages below show it ended.
                overdue = w.stage if now - w.stage_started > timeout_s else None
                dead = False
                if w.conn in ready or w.conn.poll():
                    try:
                        while w.conn.poll():
                            msg = w.conn.recv()
                            _handle(w, msg, results, prog)
                            if w.job is None:
                                break
                    except (EOFError, OSError):
                        dead = True
                if w.job is None:
                    continue
                if dead or w.exitcode is not None:
                    _fail_stage(w, results, prog, queue, f"worker crashed ({_signal_name(w.reap())})")
                    workers[workers.index(w)] = _Worker(next_id, log_dir, env)
                    next_id += 1
                elif overdue == w.stage or time.monotonic() - w.stage_started > timeout_s:
                    w.kill()
                    _fail_stage(w, results, prog, queue, f"timeout: no result after {timeout_s:.0f} s")
                    workers[workers.index(w)] = _Worker(next_id, log_dir, env)
                    next_id += 1
    finally:
        for w in workers:
            if w.job:
                w.kill()
            else:
                w.stop()
        results.save()
        prog.close()
    return results


def _handle(w: _Worker, msg: tuple, results: Results, prog: Progress) -> None:
    case, cols = w.job
    kind = msg[0]
    if kind == "begin":
        w.stage, w.stage_started = msg[1], time.monotonic()
    elif kind == "record":
        col, rec = msg[1], msg[2]
        results.add(case, col, rec)
        w.done_columns.add(col)
        prog.add(rec["status"], f"{case.name} on {col}: {rec['status']}")
    elif kind == "crash":
        for col in cols:
            if col not in w.done_columns:
                results.add(case, col, {"status": "error", "phase": "import" if w.stage == "import" else "device",
                                        "stage": w.stage or "?", "message": msg[1]})
                w.done_columns.add(col)
                prog.add("error", f"{case.name} on {col}: error")
    elif kind == "done":
        w.job, w.stage = None, None


def _fail_stage(w: _Worker, results: Results, prog: Progress, queue: deque, why: str) -> None:
    """The worker died or hung in stage `w.stage`: that column (all of them, in import) gets an error record;
    the case's other columns go back on the queue for a fresh worker."""
    case, cols = w.job
    note = w.crash_note()
    stage = w.stage or "import"
    message = f"{why} during {stage}" + (f"\n{note}" if note else "")
    hit = [c for c in cols if c not in w.done_columns] if stage == "import" else [stage]
    if stage != "import" and stage not in cols:  # profile mode: the stage is the first column of a profile run
        hit = [c for c in cols if c not in w.done_columns][:1]
    for col in hit:
        results.add(case, col, {"status": "error", "phase": "import" if stage == "import" else "device",
                                "stage": "crash" if "crash" in why else "timeout", "message": message[:4000]})
        w.done_columns.add(col)
        prog.add("error", f"{case.name} on {col}: {why}")
    rest = [c for c in cols if c not in w.done_columns]
    if rest:
        queue.appendleft((case, rest))
    w.job = None


def select(cases: list[Case], pattern: str | None) -> list[Case]:
    rx = re.compile(pattern) if pattern else None
    return [c for c in cases if rx is None or rx.search(c.name)]
