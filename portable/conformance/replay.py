"""Run conformance cases compiled elsewhere on a host that has no MLIR (a GPU host), and record the results.

    portable conformance --profile nvidia --export .conf-nvidia ...     # here: compile, validate, save
    python -m portable.conformance.replay .conf-nvidia --device vulkan:0,opencl:0 --out results/profile-nvidia.json
    portable conformance --profile nvidia --report-only --out results    # here: the Markdown and HTML matrices

Each exported case holds its kernels per API (the profile's), its inputs and expected outputs, and its
tolerances; the comparison is the same as a local run's. Cases whose kernels did not compile were not exported,
so they are absent here (the local profile run shows why).

`--jobs N` runs N processes on interleaved shares of the cases (a GPU host has cores to spare, and each case
is mostly host work) and merges their records into OUT; `--resume` skips the (case, device) pairs OUT holds, so
a run cut short by a time limit goes on where it stopped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from .cases import Case
from .execute import classify_failure, run_and_compare
from .runner import Results


def _sets(d: Path, shape: list) -> list:
    z = np.load(d / "data.npz")
    return [([z[f"in{i}_{j}"] for j in range(n_in)], [z[f"out{i}_{j}"] for j in range(n_out)])
            for i, (n_in, n_out) in enumerate(shape)]


def case_dirs(src: Path, shard: tuple[int, int] = (0, 1)) -> list[Path]:
    """The exported cases, sorted; with shard (i, n) every n-th from the i-th."""
    dirs = sorted(p for p in src.iterdir() if (p / "case.json").exists())
    return dirs[shard[0]::shard[1]]


def replay(src: Path, devices: list[str], out: Path, profile: str, shard: tuple[int, int] = (0, 1),
           resume: bool = False) -> Results:
    from ..api import CompiledGraph
    from ..devices import open_device
    from ..executable import Executable

    res = Results.load(out) if resume else Results(out)
    live = {dev: open_device(dev) for dev in devices}
    res.data["columns"] = [f"{profile}@{dev}" for dev in devices]
    res.data["meta"] = {"profile": profile, "replayed_from": str(src),
                        "devices": {f"{profile}@{d}": {"name": v.info.name, "driver": v.info.driver}
                                    for d, v in live.items()}}
    dirs = case_dirs(src, shard)
    for n, d in enumerate(dirs):
        meta = json.loads((d / "case.json").read_text())
        case = Case(meta["name"], "node", "", (), meta["op"], meta["rtol"], meta["atol"])
        todo = [dev for dev, device in live.items() if (d / f"{device.info.api}.ptx").exists()
                and not (resume and res.has(case.name, f"{profile}@{dev}"))]
        if not todo:
            continue
        sets = _sets(d, meta["sets"])
        for dev in todo:
            device = live[dev]
            path = d / f"{device.info.api}.ptx"
            t0 = time.perf_counter()
            graph = None
            # Under the Vulkan validation layer (PORTABLE_VK_VALIDATION / PORTABLE_VK_GPU_AV) a case it reports on
            # is an error whatever its numbers.
            messages = getattr(device.backend, "validation_messages", None)
            if messages:
                messages.clear()
            try:
                graph = CompiledGraph(Executable.load(path), device)
                rec = run_and_compare(case, graph, sets)
            except Exception as e:  # noqa: BLE001 - one case failing is a record, not the end of the run
                rec = classify_failure(e, "run", "run")
            finally:
                if graph is not None:
                    graph.close()
            if messages:
                rec.update(status="error", stage="run", validation=messages[:5],
                           error=f"validation layer: {len(messages)} report(s), first: {messages[0][:400]}")
                messages.clear()
            rec["run_s"] = round(time.perf_counter() - t0, 3)
            res.add(case, f"{profile}@{dev}", rec)
        if n % 200 == 0:
            print(f"{n}/{len(dirs)} cases", file=sys.stderr, flush=True)
    res.save()
    return res


def replay_parallel(src: Path, devices: str, out: Path, profile: str, jobs: int, resume: bool) -> Results:
    """`jobs` replay processes on interleaved shares of the cases, each writing its own JSON next to `out`; their
    records are merged into `out` (with what `out` held, under --resume). A share's JSON stays until the merge, so
    a resumed run picks up every share where it stopped."""
    parts = [out.with_name(f"{out.stem}.part{i}of{jobs}.json") for i in range(jobs)]
    cmd = [sys.executable, "-m", "portable.conformance.replay", str(src), "--device", devices, "--profile", profile]
    procs = [subprocess.Popen(cmd + ["--out", str(part), "--shard", f"{i}/{jobs}"] + (["--resume"] if resume else []))
             for i, part in enumerate(parts)]
    codes = [p.wait() for p in procs]
    res = Results.load(out) if resume else Results(out)
    for part in parts:
        if not part.exists():
            continue
        data = json.loads(part.read_text())
        res.data["meta"], res.data["columns"] = data["meta"], data["columns"]
        res.data["cases"].update(data["cases"])
        for name, cols in data["results"].items():
            res.data["results"].setdefault(name, {}).update(cols)
    res.save()
    if any(codes):
        raise SystemExit(f"replay: a share's process exited with {codes}; its records so far are merged into {out}, "
                         "and --resume goes on from them")
    for part in parts:
        part.unlink(missing_ok=True)
    return res


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(v) for v in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/N (e.g. 0/4), not {text!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {text}: I must be in 0..N-1")
    return i, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m portable.conformance.replay", description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="what `portable conformance --profile P --export DIR` wrote")
    ap.add_argument("--device", default="vulkan:0,opencl:0")
    ap.add_argument("--profile", required=True, help="the profile the cases were compiled for")
    ap.add_argument("--out", type=Path, required=True, help="results JSON to write")
    ap.add_argument("--jobs", type=int, default=1, metavar="N", help="replay processes, each on every N-th case")
    ap.add_argument("--resume", action="store_true", help="skip the (case, device) pairs OUT already holds")
    ap.add_argument("--shard", type=_shard, default=(0, 1), metavar="I/N", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    from .report import summary

    if a.jobs < 1:
        ap.error("--jobs must be 1 or more")
    if not a.dir.is_dir():
        ap.error(f"{a.dir} is not a directory: give what `portable conformance --profile P --export DIR` wrote")
    if a.jobs > 1:
        res = replay_parallel(a.dir, a.device, a.out, a.profile, a.jobs, a.resume)
    else:
        res = replay(a.dir, [d for d in a.device.split(",") if d], a.out, a.profile, a.shard, a.resume)
    if a.shard[1] > 1:
        return 0  # one share of a --jobs run: the parent prints the merged summary
    for col, s in summary(res.data).items():
        print(f"{col:24s} {s['pass']:5d}/{s['total']:<5d} pass, {s['fail']} fail, {s['error']} error")
    return 0


if __name__ == "__main__":
    sys.exit(main())
