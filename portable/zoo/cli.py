"""`portable zoo`: run the model zoo on devices against onnxruntime; write results.json and zoo.md."""

from __future__ import annotations

import argparse
import json
import platform
import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

DEFAULT_ROOT = "benchmarks/results/zoo"
PACKAGES = ("torch", "torchvision", "transformers", "onnxscript", "onnx", "onnxruntime", "numpy", "torch-mlir",
            "vulkan", "pyopencl", "rapidocr-onnxruntime", "silero-vad")


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "zoo", help="run the model zoo (real architectures + ONNX files from PyPI packages) on each device",
        description="Each model is exported (or found in its PyPI package) once, run by onnxruntime CPU for the "
                    "reference, then compiled and run on each device in a process of its own. Every cell ends as "
                    "pass, fail (max relative error), unsupported (the op named) or error. Writes results.json "
                    f"and zoo.md to a new directory under {DEFAULT_ROOT}/ unless --out names one. Needs the "
                    "models extra: pip install -e '.[compiler,test,models]'")
    p.add_argument("--device", default="all", help="'all' (default), or comma-separated URIs: vulkan:0,opencl:0")
    p.add_argument("--filter", default=None, metavar="REGEX", help="regex searched in model names")
    p.add_argument("--fast", action="store_true", help="only the models tagged fast (the CI subset)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"output directory (default: a new {DEFAULT_ROOT}/<date>-<host>[-N])")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="seconds per model and device: compile, run and timing (default 600)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="models run at a time (default 1; more shares the cores between the timings)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="where exported models and references are kept between runs (default: the portable "
                        "cache directory's zoo/)")
    p.add_argument("--list", action="store_true", help="list the selected models and exit")
    p.add_argument("--report-only", action="store_true", help="run nothing: rewrite zoo.md from --out's results.json")
    p.set_defaults(fn=main)
    return p


def _new_dir(root: Path, stem: str) -> Path:
    """root/stem, or root/stem-2, -3...: never a directory that exists (results are not overwritten)."""
    p, n = root / stem, 2
    while p.exists():
        p, n = root / f"{stem}-{n}", n + 1
    return p


def _devices(spec: str) -> tuple[list[str], dict]:
    from ..devices import devices
    from ..errors import DeviceNotFound

    found, failures = devices()
    info = {d.uri: {"name": d.info.name, "driver": d.info.driver, "driver_version": d.info.driver_version,
                    "profile": d.profile.get("name", "") if isinstance(d.profile, dict) else str(d.profile)}
            for d in found}
    if spec.strip() == "all":
        return list(info), info
    uris = [u.strip() for u in spec.split(",") if u.strip()]
    missing = [u for u in uris if u not in info]
    if missing:
        why = f" ({'; '.join(failures)})" if failures else ""
        raise DeviceNotFound(f"no device {', '.join(missing)}; found: {', '.join(info) or 'none'}{why}")
    return uris, info


def main(args: argparse.Namespace) -> int:
    from .. import __version__, config
    from . import report, runner
    from .registry import entries
    from .worker import TOLERANCE, version

    if args.report_only:
        if not args.out or not (Path(args.out) / "results.json").exists():
            print("error: --report-only needs --out DIR holding a results.json", file=sys.stderr)
            return 2
        print(f"wrote {report.write(json.loads((Path(args.out) / 'results.json').read_text()), Path(args.out))}")
        return 0
    selected = entries(args.filter, args.fast)
    if args.list:
        for e in selected:
            shapes = ", ".join(f"{i.name} {'x'.join(map(str, i.shape)) or 'scalar'}" for i in e.inputs)
            print(f"{e.name:40s} {e.family:15s} {e.exporter:7s} {e.opset or '':3} {shapes}"
                  f"{'  [' + ','.join(e.tags) + ']' if e.tags else ''}")
        return 0
    if not selected:
        print(f"no zoo model matches --filter {args.filter!r}{' among the fast ones' if args.fast else ''}",
              file=sys.stderr)
        return 1
    uris, info = _devices(args.device)
    if not uris:
        print("no device to run on (see `portable devices`)", file=sys.stderr)
        return 1
    now = datetime.now(UTC)
    host = socket.gethostname().split(".")[0] or "host"
    out = Path(args.out) if args.out else _new_dir(Path(DEFAULT_ROOT), f"{now:%Y-%m-%d}-{host}")
    cache = Path(args.cache) if args.cache else config.cache_dir() / "zoo"
    meta = {"date": now.isoformat(timespec="seconds"), "host": host, "platform": platform.platform(),
            "python": platform.python_version(),
            "command": " ".join(["portable", *getattr(args, "argv", sys.argv[1:])]),
            "device_info": info, "tolerance": TOLERANCE, "timeout_s": args.timeout,
            "packages": {"portable": __version__, **{p: version(p) for p in PACKAGES}}}
    print(f"{len(selected)} models x {len(uris)} devices ({', '.join(uris)}) -> {out}", file=sys.stderr)
    res = runner.Results(out / "results.json", meta)
    runner.run(selected, uris, res, cache, timeout_s=args.timeout, jobs=args.jobs)
    md = report.write(res.data, out)
    for d, c in report.summary(res.data).items():
        print(f"{d:12s} {c['pass']}/{c['total']} pass, {c['fail']} fail, {c['unsupported']} unsupported, "
              f"{c['error']} error")
    print(f"wrote {res.path}, {md}")
    return 0
