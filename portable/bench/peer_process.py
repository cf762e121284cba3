"""A benchmark peer in a process of its own: a crash, a hang or a leak in a peer (PyTorch, ncnn) costs its record
only. The worker side writes one JSON record; the caller gets it, or an error record saying why there is none.

    record = peer_process.run("portable.bench.ncnn_peer", [name, cache], timeout_s, env)   # the caller
    sys.exit(peer_process.serve(worker, sys.argv[1:]))   # the worker: worker(name, Path(cache)) -> dict
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def run(module: str, args: list[str], timeout_s: float, env: dict) -> dict:
    """`python -m module *args RESULT.json`; its record, or {"error": ...} when it timed out or wrote none."""
    with tempfile.TemporaryDirectory(prefix="portable-bench-peer-") as tmp:
        result = Path(tmp) / "r.json"
        # A session of its own, so a timeout kills the worker's children (a driver's threads, a converter) too.
        p = subprocess.Popen([sys.executable, "-m", module, *args, str(result)], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, env=env,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            return {"error": f"timed out after {timeout_s:.0f} s"}
        if result.exists():
            return json.loads(result.read_text())
        return {"error": ((out or "").strip().splitlines() or [f"exit {p.returncode}"])[-1][:300]}


def serve(worker: Callable[[str, Path], dict], argv: list[str]) -> int:
    """The worker side of `run`: argv is (name, cache, RESULT.json); an exception is the record too."""
    name, cache, result = argv[:3]
    try:
        rec = worker(name, Path(cache))
    except Exception as e:  # noqa: BLE001 - a failed peer is a record
        rec = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    Path(result).write_text(json.dumps(rec))
    return 0
