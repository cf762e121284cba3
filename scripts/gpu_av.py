"""The strategies suite's Vulkan kernels under the validation layer's GPU-assisted validation, on a GPU host that has
no MLIR: compile and export here, replay there.

    .venv/bin/python scripts/gpu_av.py make DIR [--profile nvidia] [--max-mib 36]          # here
    PORTABLE_VK_GPU_AV=1 python3 scripts/gpu_av.py run DIR --device vulkan:0 --out r.json     # there

`make` exports every case of the strategies suite compiled for the profile (`portable conformance --export`), the
smallest first up to --max-mib (the rest are named in DIR/manifest.json), and a planted fault: a 64-element
executable whose kernel and grid are those of the 128-element one, so it stores 256 bytes past its output buffer.
`run` needs the Khronos layer installed there (Debian's vulkan-validationlayers .deb unpacked into /): it first runs
the planted fault, which must be reported (else the instrumentation is not live and the run says so and fails), then
replays every case with GPU-assisted validation on; a case the layer reports on is an error whatever its numbers.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

PLANTED = "planted-oob.ptx"


def _relu_text(n: int) -> str:
    return f"""
func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.generic {{indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}} ins(%x : tensor<{n}xf32>) outs(%e : tensor<{n}xf32>) {{
    ^bb0(%a: f32, %o: f32):
      %y = arith.maximumf %a, %z : f32
      linalg.yield %y : f32
  }} -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}
"""


def planted(profile: str):
    """The 64-element executable with the 128-element kernel and grid: 256 bytes written past its output."""
    import dataclasses

    from portable import profiles
    from portable.compiler.pipeline import compile_module

    o = profiles.codegen_options(profiles.all_profiles()[profile])
    small, big = (compile_module(_relu_text(n), o, ("vulkan",)) for n in (64, 128))
    assert len(small.kernels) == len(big.kernels) == 1 and len(small.dispatches) == len(big.dispatches) == 1
    small.kernels = list(big.kernels)
    small.dispatches = [dataclasses.replace(small.dispatches[0], grid=big.dispatches[0].grid)]
    return small


def make(out: Path, profile: str, max_mib: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        every = Path(tmp) / "cases"
        subprocess.run([sys.executable, "-m", "portable", "conformance", "--suite", "strategies", "--profile",
                        profile, "--device", "vulkan:0", "--compile-only", "--no-progress", "--export", str(every),
                        "--out", str(Path(tmp) / "local")], check=True)
        sized = sorted((sum(f.stat().st_size for f in d.iterdir()), d) for d in every.iterdir() if d.is_dir())
        kept, left, total = [], [], 0
        for size, d in sized:
            if total + size <= max_mib * 2**20:
                total += size
                kept.append(d.name)
                shutil.copytree(d, out / "cases" / d.name, dirs_exist_ok=True)
            else:
                left.append(d.name)
    planted(profile).save(out / PLANTED)
    (out / "manifest.json").write_text(json.dumps({"profile": profile, "cases": kept, "left_out_for_size": left},
                                                  indent=1))
    print(f"{len(kept)} cases ({total / 2**20:.1f} MiB) and {PLANTED} in {out}; {len(left)} left out for size")


def run(src: Path, device: str, out: Path) -> int:
    from portable import config
    from portable.api import CompiledGraph
    from portable.conformance.replay import replay
    from portable.devices import open_device
    from portable.executable import Executable
    from portable.runtime_vk import features

    if not config.vk_gpu_av():
        raise SystemExit("set PORTABLE_VK_GPU_AV=1")
    manifest = json.loads((src / "manifest.json").read_text())
    live = open_device(device)
    backend = live.backend
    report: dict = {"device": live.info.name, "driver": live.info.driver_version,
                    "gpu_assisted": bool(backend._own.instance.gpu_assisted),
                    "bounds_feature": bool(backend._own.device.pd.features.get(features.GPU_AV_FEATURE)),
                    "left_out_for_size": manifest["left_out_for_size"]}
    msgs = backend.validation_messages
    msgs.clear()
    g = CompiledGraph(Executable.load(src / PLANTED), live)
    try:
        g(np.ones(64, np.float32))
    finally:
        g.close()
    report["planted_reports"] = list(msgs[:3])
    report["planted_reported"] = bool(msgs)
    msgs.clear()
    res = replay(src / "cases", [device], out.with_suffix(".cases.json"), manifest["profile"])
    column = f"{manifest['profile']}@{device}"
    records = {name: cols[column] for name, cols in res.data["results"].items() if column in cols}
    statuses: dict[str, int] = {}
    for rec in records.values():
        statuses[rec.get("status", "?")] = statuses.get(rec.get("status", "?"), 0) + 1
    report["cases"] = len(records)
    report["statuses"] = statuses
    report["validation_reports"] = {name: rec["validation"] for name, rec in records.items() if rec.get("validation")}
    report["not_passing"] = {name: rec.get("error", rec.get("status")) for name, rec in records.items()
                             if rec.get("status") != "pass"}
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "planted_reports"}, indent=1)[:3000])
    if not report["planted_reported"]:
        print("the planted out-of-bounds store was not reported: GPU-assisted validation is not checking bounds here",
              file=sys.stderr)
        return 2
    return 0 if not report["not_passing"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir", type=Path)
    m.add_argument("--profile", default="nvidia")
    m.add_argument("--max-mib", type=float, default=36.0)
    r = sub.add_parser("run")
    r.add_argument("dir", type=Path)
    r.add_argument("--device", default="vulkan:0")
    r.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    if a.cmd == "make":
        make(a.dir, a.profile, a.max_mib)
        return 0
    return run(a.dir, a.device, a.out)


if __name__ == "__main__":
    sys.exit(main())
