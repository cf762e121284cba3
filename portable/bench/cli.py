"""`portable bench`: the benchmark harness on the command line (wired into portable/cli.py by add_parser)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `bench` on the `portable` CLI's subparsers."""
    from .peers import PEERS

    b = subparsers.add_parser("bench", help="benchmark portable against IREE, tinygrad, PyTorch, numpy, onnxruntime",
                              description="Run the workload table on each device with the peers side by side; "
                                          "write results.json, results.md and results.png. See "
                                          "portable/bench/README.md.")
    b.add_argument("--device", default="all", help="all (default) or comma-separated URIs: vulkan:0,opencl:0")
    b.add_argument("--models", action="store_true",
                   help="run the model workloads (ResNet-50 exported from models/cv.py to ONNX; needs torch) against "
                        "onnxruntime and PyTorch, instead of the op workloads; default output <results dir>/models")
    b.add_argument("--zoo", nargs="?", const="", default=None, metavar="PATTERN",
                   help="with --models: zoo networks (a regex of `portable zoo --list` names; default MobileNetV2/V3, "
                        "EfficientNet-B0, ResNet-18, BERT-mini) against onnxruntime, PyTorch eager and ncnn (Vulkan "
                        "and CPU, converted with pnnx), into a dated report under benchmarks/results/")
    b.add_argument("--filter", default=None, metavar="PATTERN",
                   help="comma-separated globs or substrings of workload ids (e.g. 'matmul*,softmax')")
    b.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="output directory (default benchmarks/results/<cpu or GPU name>)")
    b.add_argument("--quick", action="store_true", help="tiny sizes and 3 timed calls: a smoke run of everything")
    b.add_argument("--sizes", default="auto", choices=["auto", "gpu", "cpu", "tiny"],
                   help="size class (auto: cpu for CPU drivers, gpu otherwise; an import uses its export's)")
    b.add_argument("--peers", default=",".join(PEERS), help=f"comma-separated subset of {','.join(PEERS)}")
    b.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds one workload may take on one peer before it is killed (default 300 on CPU "
                        "sizes, 120 on GPU sizes)")
    b.add_argument("--max-rss-gb", type=float, default=None, metavar="GB",
                   help="kill a peer's worker whose memory passes this (default 40%% of host memory)")
    b.add_argument("--iters", type=int, default=None, help="force the number of timed calls")
    b.add_argument("--rounds", type=int, default=1, metavar="N",
                   help="run every peer N times in alternating order and keep each workload's best round (a "
                        "shared, noisy host; the committed CPU and H200 tables use 2)")
    b.add_argument("--iree-target", default=None,
                   help="--iree-vulkan-target for IREE compiled here (default: IREE's default target); with "
                        "--import: which exported target to run (default: the first exported)")
    b.add_argument("--export", type=Path, default=None, metavar="DIR",
                   help="compile every workload ahead of time for --profile and save executables + .vmfb + "
                        "manifest to DIR (no devices needed), then stop")
    b.add_argument("--profile", default="nvidia",
                   help="device profile for --export (a name from device_profiles/; default nvidia)")
    b.add_argument("--iree-targets", default=None,
                   help="IREE Vulkan targets for --export, comma-separated ('default' = no flag); "
                        "default 'ampere' for the nvidia profile")
    b.add_argument("--import", dest="import_dir", type=Path, default=None, metavar="DIR",
                   help="run executables exported with --export (no MLIR needed on this host)")
    b.add_argument("--from-json", type=Path, default=None, metavar="FILE",
                   help="only rewrite results.md and results.png from an existing results.json")
    b.add_argument("--no-chart", action="store_true", help="skip the PNG")
    b.set_defaults(fn=run)
    return b


def run(args) -> int:
    """The `bench` command; usage mistakes (bad --filter, no manifest, unknown profile) print one line."""
    try:
        return _run(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _run(args) -> int:
    import json

    from .runner import BenchConfig, run_bench, write_outputs

    rest = sys.argv[1:]
    command = "portable " + shlex.join(rest if rest[:1] == ["bench"] else ["bench", *rest])
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        write_outputs(result, args.out or Path(args.from_json).parent, chart=not args.no_chart)
        return 0
    if args.models and args.zoo is not None:
        from .. import config
        from ..devices import devices
        from .zoo_models import run as run_zoo

        uris = [d.uri for d in devices()[0]] if args.device == "all" else args.device.split(",")
        res = run_zoo(args.zoo or None, uris, args.out, config.cache_dir() / "zoo", args.timeout or 900.0, command)
        print(f"geomean: {json.dumps(res.get('geomean'))}")
        return 0
    if args.export and args.models:
        from .aot import MODELS_NOT_EXPORTED

        print(f"--models: nothing exported to {args.export}: {MODELS_NOT_EXPORTED}", file=sys.stderr)
        return 2
    if args.export:
        from .aot import export

        targets = tuple(t.strip() for t in args.iree_targets.split(",") if t.strip()) if args.iree_targets else None
        m = export(args.export, profile_name=args.profile, pattern=args.filter,
                   sizes="tiny" if args.quick else args.sizes, iree_targets=targets)
        failed = [k for k, v in m["workloads"].items() if not v["portable"]]
        if failed:
            print(f"portable could not compile: {', '.join(failed)} (see {args.export / 'manifest.json'})")
        return 0
    extra = {}
    if args.import_dir:
        from .aot import read_manifest

        extra["manifest"] = read_manifest(args.import_dir)
    peers = tuple(p.strip() for p in args.peers.split(",") if p.strip())
    if args.rounds < 1:
        raise ValueError(f"--rounds must be at least 1, not {args.rounds}")
    cfg = BenchConfig(devices=args.device, filter=args.filter, out=args.out,
                      sizes="tiny" if args.quick and args.sizes == "auto" and not args.import_dir else args.sizes,
                      peers=peers, timeout_s=args.timeout, iters=args.iters or (3 if args.quick else None),
                      import_dir=args.import_dir, iree_target=args.iree_target, max_rss_gb=args.max_rss_gb,
                      chart=not args.no_chart, models=args.models, rounds=args.rounds,
                      command=command, extra=extra)
    result = run_bench(cfg)
    bad = [r for r in result["results"] if r["peer"] == "portable" and r["status"] not in ("ok",)]
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry: python -m portable.bench.cli [bench options]."""
    p = argparse.ArgumentParser(prog="portable")
    sub = p.add_subparsers(dest="cmd", required=True)
    add_parser(sub)
    args = p.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
