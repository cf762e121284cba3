"""Do uploads, dispatches and downloads of successive submissions overlap? Wall time per submission of a
memory-bound graph (y = relu(x), 64 MiB in, 64 MiB out on GPUs) through CompiledGraph.submit, with the
dedicated transfer queue on ("auto") and off, one and two frames in flight.

    # here (needs the MLIR compiler): compile for the NVIDIA and lavapipe profiles, save the Executables
    python benchmarks/transfer_overlap.py export build/transfer_overlap
    # on the GPU host (numpy + vulkan only), from the repository root:
    python benchmarks/transfer_overlap.py run build/transfer_overlap --device vulkan:0 \\
        --out benchmarks/results/transfer_overlap.json [--submissions 24] [--validate]

With one frame, each submission's upload, kernel and download run back to back. With two frames and the
transfer queue, frame B's upload runs on the copy engine while frame A computes, and A's download while B
computes, so the time per submission drops towards the slowest of the three (plus the host's memcpy into and
out of staging, which the caller's thread and the completion thread also do in parallel). Without the transfer
queue, two frames still overlap host copies with device work, but the device's copies and kernels share one
queue. `--validate` also runs a few submissions per mode with the Khronos validation layer (synchronization
validation on) and reports every message.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

MANIFEST = "transfer_overlap.json"
SHAPES = {"nvidia": (4096, 4096), "lavapipe": (1024, 1024)}  # 64 MiB of float32 on the GPU; 4 MiB on the CPU
MODES = ("auto", "off")


def graph(shape: tuple[int, int]):
    import portable

    g = portable.Graph("transfer_overlap")
    g.output(g.relu(g.input(shape)))
    return g


def export(out: Path) -> None:
    """Compile y = relu(x) for each profile in SHAPES and save the Executables plus a manifest."""
    from portable.api import graph_text
    from portable.compiler.pipeline import compile_module
    from portable.profiles import all_profiles, codegen_options

    out.mkdir(parents=True, exist_ok=True)
    profiles = all_profiles()
    manifest = {"format": 1, "graph": "y = relu(x), float32", "executables": {}}
    for name, shape in SHAPES.items():
        t0 = time.perf_counter()
        exe = compile_module(graph_text(graph(shape)), codegen_options(profiles[name]), ("vulkan",))
        exe.save(out / f"{name}.ptx")
        manifest["executables"][name] = {"file": f"{name}.ptx", "shape": list(shape), "kernels": len(exe.kernels)}
        print(f"{name:9s} {shape} -> {out / (name + '.ptx')} ({len(exe.kernels)} kernel(s), "
              f"{time.perf_counter() - t0:.1f} s)")
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _open(index: int, transfer: str, validation: bool):
    from portable.devices import LiveDevice
    from portable.runtime_vk import VulkanBackend

    return LiveDevice(VulkanBackend(index, validation=validation, transfer_queue=transfer))


def measure(exe, index: int, transfer: str, in_flight: int, inputs: list[np.ndarray], submissions: int,
            validation: bool = False) -> dict:
    """Time `submissions` back-to-back submits after a warm-up; completion time of each, results checked."""
    from portable.api import CompiledGraph

    live = _open(index, transfer, validation)
    backend = live.backend
    try:
        cg = CompiledGraph(exe, live, max_in_flight=in_flight)
        for f in [cg.submit(inputs[i % len(inputs)]) for i in range(2 * in_flight + 2)]:  # frames made, warm
            f.result()
        done: list[float] = [0.0] * submissions
        futures = []
        t0 = time.perf_counter()
        for i in range(submissions):
            f = cg.submit(inputs[i % len(inputs)])
            f.add_done_callback(lambda _f, i=i: done.__setitem__(i, time.perf_counter()))
            futures.append(f)
        results = [f.result() for f in futures]
        wall = max(done) - t0
        for i in (0, submissions - 1):
            np.testing.assert_array_equal(results[i][0], np.maximum(inputs[i % len(inputs)], 0))
        steps = np.diff([0.0] + sorted(d - t0 for d in done))
        rec = cg._cell[0].recordings[0]
        row = {"transfer": transfer, "in_flight": in_flight, "transfer_family": backend.transfer_queue_family[0],
               "compute_family": backend.queue_family[0], "lanes": rec.lanes, "submissions": submissions,
               "wall_s": wall, "per_submission_ms": 1e3 * wall / submissions,
               "steady_interval_ms": 1e3 * statistics.median(steps[1:]) if submissions > 2 else None,
               "completion_s": [d - t0 for d in done]}
        cg.close()
    finally:
        backend.close()
    if validation:
        row["validation_messages"] = list(backend.validation_messages)
    return row


def run(folder: Path, device: str, submissions: int, modes: tuple[str, ...], validate: bool, out: Path | None,
        profile: str | None) -> dict:
    from portable.devices import parse_uri
    from portable.executable import Executable
    from portable.runtime_vk import enumerate_devices

    api, index = parse_uri(device)
    if api != "vulkan":
        raise SystemExit("this benchmark is about Vulkan queues: use --device vulkan:N")
    infos, errs = enumerate_devices()
    if index >= len(infos):
        raise SystemExit(f"{device}: not found ({'; '.join(errs) or 'no Vulkan devices'})")
    info = infos[index]
    manifest = json.loads((folder / MANIFEST).read_text())
    profile = profile or ("nvidia" if info.vendor_id == 0x10DE else "lavapipe")
    entry = manifest["executables"][profile]
    exe = Executable.load(folder / entry["file"])
    shape = tuple(entry["shape"])
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(shape, dtype=np.float32) for _ in range(2)]
    mib = inputs[0].nbytes / 2**20
    print(f"{info.name} ({info.driver} {info.driver_version}); queue families {info.limits.get('queue_families')}")
    print(f"profile {profile}: y = relu(x) over {shape} float32, {mib:.0f} MiB in + {mib:.0f} MiB out per submission, "
          f"{submissions} submissions\n")
    measure(exe, index, modes[0], 1, inputs, 2)  # untimed: first-touch page faults, driver start-up
    rows = []
    for transfer in modes:
        for k in (1, 2):
            row = measure(exe, index, transfer, k, inputs, submissions)
            rows.append(row)
    base = rows[0]["per_submission_ms"]
    print(f"{'transfer':9s} {'family':>6s} {'frames':>6s} {'ms/submission':>14s} {'steady ms':>10s} "
          f"{'GB/s (in+out)':>14s} {'vs first':>9s}")
    for r in rows:
        gbs = 2 * inputs[0].nbytes / (r["per_submission_ms"] / 1e3) / 1e9
        fam = "-" if r["transfer_family"] is None else str(r["transfer_family"])
        steady = f"{r['steady_interval_ms']:.2f}" if r["steady_interval_ms"] is not None else "-"
        print(f"{r['transfer']:9s} {fam:>6s} {r['in_flight']:>6d} {r['per_submission_ms']:>14.2f} {steady:>10s} "
              f"{gbs:>14.2f} {base / r['per_submission_ms']:>8.2f}x")
    report = {"device": {"uri": device, "name": info.name, "driver": info.driver,
                         "driver_version": info.driver_version, "queue_families": info.limits.get("queue_families")},
              "host": platform.node(), "python": platform.python_version(), "profile": profile,
              "shape": list(shape), "bytes_in": inputs[0].nbytes, "bytes_out": inputs[0].nbytes, "rows": rows}
    if validate:
        print("\nvalidation layer (synchronization validation on), 6 submissions, 2 frames:")
        report["validation"] = {}
        for transfer in modes:
            v = measure(exe, index, transfer, 2, inputs, 6, validation=True)
            msgs = v["validation_messages"]
            report["validation"][transfer] = {"lanes": v["lanes"], "messages": msgs}
            print(f"  transfer={transfer:5s} lanes={'/'.join(v['lanes'])}: {len(msgs)} message(s)")
            for m in msgs[:10]:
                print(f"    {m[:400]}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))
        print(f"\nwrote {out}")
    return report


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="compile and save the Executables (needs MLIR)")
    e.add_argument("folder", type=Path)
    r = sub.add_parser("run", help="run the saved Executables (numpy + vulkan only)")
    r.add_argument("folder", type=Path)
    r.add_argument("--device", default="vulkan:0")
    r.add_argument("--submissions", type=int, default=24)
    r.add_argument("--modes", default=",".join(MODES),
                   help="transfer_queue modes to compare: auto (dedicated family if any), off, shared")
    r.add_argument("--profile", choices=sorted(SHAPES), help="which saved Executable (default: by vendor)")
    r.add_argument("--validate", action="store_true", help="also run each mode under the validation layer")
    r.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "export":
        export(a.folder)
    else:
        run(a.folder, a.device, a.submissions, tuple(m for m in a.modes.split(",") if m), a.validate, a.out,
            a.profile)


if __name__ == "__main__":
    main()
