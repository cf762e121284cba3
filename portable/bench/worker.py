"""A worker process: runs one peer over a list of workloads and reports events as JSON lines on a pipe.

The runner starts one worker per (peer, device), so a peer that hangs or crashes costs one workload (the
runner kills the worker at the timeout and starts another for the rest), never the whole run.

    python -m portable.bench.worker JOB.json --events-fd N
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np


def load_data(data_dir: Path, n_inputs: int) -> tuple[list[np.ndarray], np.ndarray]:
    inputs = [np.load(data_dir / f"in{i}.npy") for i in range(n_inputs)]
    return inputs, np.load(data_dir / "ref.npy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("job")
    ap.add_argument("--events-fd", type=int, required=True)
    a = ap.parse_args(argv)
    events = os.fdopen(a.events_fd, "w", buffering=1)

    def emit(**kw) -> None:
        events.write(json.dumps(kw, default=str) + "\n")
        events.flush()

    job = json.loads(Path(a.job).read_text())
    from .harness import bench_one
    from .peers import Unavailable, make_peer
    from .workloads import build

    peer = make_peer(job["peer"], job["args"])
    try:
        desc = peer.describe()
    except Unavailable as e:
        emit(event="unavailable", reason=str(e))
        return 0
    emit(event="describe", info=desc)
    for item in job["items"]:
        emit(event="start", workload=item["id"])
        w = build(item["id"], item["size_class"], onnx_path=item.get("onnx"))
        inputs, ref = load_data(Path(item["data_dir"]), len(w.inputs))
        rec = bench_one(peer, w, inputs, ref, iters=job.get("iters"))
        emit(event="result", record=rec)
    peer.close()
    emit(event="done")
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
