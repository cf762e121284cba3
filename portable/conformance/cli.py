"""`portable conformance`: run the ONNX backend test cases on devices (or profiles) and write the matrices."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..outdir import new_dir

DEFAULT_ROOT = "conformance/results"


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "conformance", help="run the ONNX backend node/model test cases on each device; write JSON, Markdown, HTML",
        description="Every case ends as pass, fail (max abs/rel error), unsupported (op or dtype, named), error "
                    "(message) or, with --profile, compiled-only. Results go to OUT/results.json (resumable), "
                    "results.md, results.html and FAILURES.md; with --profile NAME to OUT/profile-NAME.*")
    p.add_argument("--device", default="all", help="'all' (default), or comma-separated URIs: vulkan:0,opencl:0")
    p.add_argument("--filter", default=None, metavar="PATTERN",
                   help="regex searched in case names, e.g. 'test_relu|light'")
    p.add_argument("--profile", default=None, metavar="NAME",
                   help="compile every case for a profile from device_profiles/*.toml, spirv-val each kernel, run "
                        "on the devices only where the profile's assumptions hold (else compiled-only)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"output directory (default: a new {DEFAULT_ROOT}/<date>-<host>[-N]; --resume and "
                        "--report-only need it)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="worker processes (default 1)")
    p.add_argument("--resume", action="store_true", help="skip (case, device) pairs already in the JSON")
    p.add_argument("--suite", default="node,light",
                   help="comma-separated: node, light, strategies, simple, pytorch-converted, pytorch-operator, or a "
                        "directory of cases in the onnx backend-test layout (default node,light)")
    p.add_argument("--timeout", type=float, default=180.0, metavar="S",
                   help="seconds per stage of a case (default 180)")
    p.add_argument("--no-progress", action="store_true", help="no progress line")
    p.add_argument("--note", default="", help="a line stored in the JSON and printed atop the matrices")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="with --profile: also save each case's kernels, inputs and expected outputs under DIR (not "
                        "cases with over 1 MiB of weights), to run them on a host without MLIR: python -m "
                        "portable.conformance.replay DIR")
    p.add_argument("--compile-only", action="store_true",
                   help="with --profile: compile (and spirv-val) for the profile, run nothing here; with --export, "
                        "the cases are for a device elsewhere and running them on this host's drivers only costs time")
    p.add_argument("--list", action="store_true", help="list the selected cases and exit")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: rewrite the Markdown, HTML and FAILURES.md from the JSON in OUT")
    p.set_defaults(fn=main)
    return p


def _columns(device: str, profile: str | None, present: bool = True) -> tuple[list[str], dict]:
    """The result columns; `present=False` (--compile-only): the URIs only name APIs, the devices may be elsewhere."""
    from ..devices import devices

    found, failures = devices()
    info = {d.uri: {"name": d.info.name, "driver": d.info.driver, "driver_version": d.info.driver_version,
                    "profile": d.profile} for d in found}
    if device.strip() == "all":
        uris = [d.uri for d in found]
    else:
        uris = [u.strip() for u in device.split(",") if u.strip()]
        missing = [u for u in uris if u not in info]
        if missing and present:
            from ..errors import DeviceNotFound

            why = f" ({'; '.join(failures)})" if failures else ""
            raise DeviceNotFound(f"no device {', '.join(missing)}; found: {', '.join(info) or 'none'}{why}")
    if profile:
        return [f"{profile}@{u}" for u in uris], info
    return uris, info


def _ensure_repros(data: dict, cases: dict, repro: Path) -> None:
    """Every compiler-failure group gets a repro: the imported MLIR of one of its cases, if none was saved."""
    from . import report
    from .repro import write_repro

    for g in report.compiler_failures(data)[:30]:
        if any((repro / f"{name}.mlir").exists() for name in g["cases"]):
            continue
        for name in g["cases"][:2]:
            if name in cases and write_repro(cases[name], repro / f"{name}.mlir"):
                break


def main(args: argparse.Namespace) -> int:
    from .. import __version__, profiles
    from . import cases as cases_mod
    from . import runner
    from .execute import COMPILE_ONLY_ENV, EXPORT_ENV

    suites = tuple(s.strip() for s in args.suite.split(",") if s.strip())
    if args.profile and args.profile not in profiles.all_profiles():
        print(f"error: unknown profile {args.profile!r}; device_profiles/ has {', '.join(profiles.all_profiles())}",
              file=sys.stderr)
        return 2
    selected = cases_mod.discover(suites, args.filter)
    if args.list:
        for c in selected:
            print(f"{c.suite:18s} {c.op:28s} {c.name}")
        return 0
    if not selected:
        print(f"no case matches --filter {args.filter!r} in suites {', '.join(suites)}", file=sys.stderr)
        return 1
    stem = f"profile-{args.profile}" if args.profile else "results"
    if args.out is None and (args.resume or args.report_only):
        print(f"error: {'--resume' if args.resume else '--report-only'} reads an earlier run: name its directory "
              "with --out", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else new_dir(DEFAULT_ROOT)
    if not (args.resume or args.report_only) and (out / f"{stem}.json").exists():
        print(f"error: {out / f'{stem}.json'} exists: pass --resume to continue that run, or another --out",
              file=sys.stderr)
        return 2
    repro = out / ("repro" if stem == "results" else f"repro-{stem}")
    if args.report_only:
        res = runner.Results.load(out / f"{stem}.json")
        if not res.data["results"]:
            print(f"no results in {res.path}", file=sys.stderr)
            return 1
        return _write_reports(res, selected, out, stem, repro)
    worker_env: dict[str, str] = {}  # for the worker processes, not this one (a caller may run again)
    if args.export:
        if not args.profile:
            print("error: --export needs --profile (the kernels are compiled for a profile)", file=sys.stderr)
            return 2
        worker_env[EXPORT_ENV] = str(Path(args.export).resolve())
    if args.compile_only:
        if not args.profile:
            print("error: --compile-only needs --profile (without one, a case's kernels are only compiled to be run)",
                  file=sys.stderr)
            return 2
        worker_env[COMPILE_ONLY_ENV] = "1"
    cols, info = _columns(args.device, args.profile, present=not args.compile_only)
    if not cols:
        print("no device to run on (see `portable devices`)", file=sys.stderr)
        return 1
    res = runner.Results.load(out / f"{stem}.json") if args.resume else runner.Results(out / f"{stem}.json")
    res.data["columns"] = list(dict.fromkeys(list(res.data.get("columns") or []) + cols))
    meta = {"portable": __version__, "onnx": cases_mod.onnx_version(), "suites": ",".join(suites),
            "filter": args.filter or "", "profile": args.profile or "", "devices": info}
    if args.note:
        meta["note"] = args.note
    print(f"{len(selected)} cases x {len(cols)} columns ({', '.join(cols)}), {args.jobs} worker(s) -> {out}",
          file=sys.stderr)
    runner.run(selected, cols, res, jobs=args.jobs, profile=args.profile, resume=args.resume,
               timeout_s=args.timeout, progress=not args.no_progress, repro_dir=repro, meta=meta, env=worker_env)
    return _write_reports(res, selected, out, stem, repro)


def _write_reports(res, selected: list, out: Path, stem: str, repro: Path) -> int:
    from . import report

    models = {c.name: c.model for c in selected}
    _ensure_repros(res.data, {c.name: c for c in selected}, repro)
    if repro.is_dir():  # keep the repros FAILURES.md shows; the rest are regenerated on demand
        keep = report.referenced_repros(res.data, repro)
        for p in repro.glob("*.mlir"):
            if p not in keep:
                p.unlink()
    paths = report.write_all(res.data, out, stem, repro, models)
    for col, s in report.summary(res.data).items():
        print(f"{col:24s} {s['pass']:5d}/{s['total']:<5d} pass ({100 * s['pass_rate']:.1f}%; "
              f"{100 * s['pass_rate_supported_dtypes']:.1f}% of supported dtypes), {s['fail']} fail, "
              f"{s['unsupported']} unsupported, {s['error']} error" +
              (f", {s['compiled-only']} compiled-only" if s["compiled-only"] else ""))
    print("wrote " + ", ".join(str(p) for p in [res.path, *paths]))
    return 0
