"""Run conformance cases compiled elsewhere on a host that has no MLIR (a GPU host), and record the results.

    portable conformance --profile nvidia --export .conf-nvidia ...     # here: compile, validate, save
    python -m portable.conformance.replay .conf-nvidia --device vulkan:0,opencl:0 --out results/profile-nvidia.json
    portable conformance --profile nvidia --report-only --out results    # here: the Markdown and HTML matrices

Each exported case holds its kernels per API (the profile's), its inputs and expected outputs, and its
tolerances; the comparison is the same as a local run's. Cases whose kernels did not compile were not exported,
so they are absent here (the local profile run shows why).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from .cases import Case
from .execute import _classify, _execute
from .runner import Results


def _sets(d: Path, shape: list) -> list:
    z = np.load(d / "data.npz")
    return [([z[f"in{i}_{j}"] for j in range(n_in)], [z[f"out{i}_{j}"] for j in range(n_out)])
            for i, (n_in, n_out) in enumerate(shape)]


def replay(src: Path, devices: list[str], out: Path, profile: str) -> Results:
    from ..api import CompiledGraph
    from ..devices import open_device
    from ..executable import Executable

    res = Results(out)
    live = {dev: open_device(dev) for dev in devices}
    res.data["columns"] = [f"{profile}@{dev}" for dev in devices]
    res.data["meta"] = {"profile": profile, "replayed_from": str(src),
                        "devices": {f"{profile}@{d}": {"name": v.info.name, "driver": v.info.driver}
                                    for d, v in live.items()}}
    dirs = sorted(p for p in src.iterdir() if (p / "case.json").exists())
    for n, d in enumerate(dirs):
        meta = json.loads((d / "case.json").read_text())
        case = Case(meta["name"], "node", "", (), meta["op"], meta["rtol"], meta["atol"])
        sets = _sets(d, meta["sets"])
        for dev, device in live.items():
            path = d / f"{device.info.api}.ptx"
            if not path.exists():
                continue
            t0 = time.perf_counter()
            graph = None
            try:
                graph = CompiledGraph(Executable.load(path), device)
                rec = _execute(case, graph, sets)
            except Exception as e:  # noqa: BLE001 - one case failing is a record, not the end of the run
                rec = _classify(e, "run", "run")
            finally:
                if graph is not None:
                    graph.close()
            rec["run_s"] = round(time.perf_counter() - t0, 3)
            res.add(case, f"{profile}@{dev}", rec)
        if n % 200 == 0:
            print(f"{n}/{len(dirs)} cases", file=sys.stderr, flush=True)
    res.save()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m portable.conformance.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="what `portable conformance --profile P --export DIR` wrote")
    ap.add_argument("--device", default="vulkan:0,opencl:0")
    ap.add_argument("--profile", required=True, help="the profile the cases were compiled for")
    ap.add_argument("--out", type=Path, required=True, help="results JSON to write")
    a = ap.parse_args(argv)
    from .report import summary

    res = replay(a.dir, [d for d in a.device.split(",") if d], a.out, a.profile)
    for col, s in summary(res.data).items():
        print(f"{col:24s} {s['pass']:5d}/{s['total']:<5d} pass, {s['fail']} fail, {s['error']} error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
