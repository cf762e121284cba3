"""Digest of every kernel the compiler makes for the bench workloads on every device profile.

Compiles each workload of portable/bench/workloads.py for each profile in device_profiles/*.toml and each API the
profile's [match] allows (both where it names none), and hashes what the compile produced: every kernel's
SPIR-V words and OpenCL C with its metadata, the plan (slots, dispatches, signatures) and the constants. No
driver is needed. A refactor that must not change code generation writes the digests before and checks them
after:

    .venv/bin/python scripts/kernel_digest.py --write /tmp/digest-before.json
    ... change the compiler ...
    .venv/bin/python scripts/kernel_digest.py --check /tmp/digest-before.json

`--subset` takes a few workloads that cover every strategy family (matmul f32/f16, gemv, convolutions, rows,
elementwise) for quick iterations; the full set takes tens of minutes on a small host. `--models a.onnx,b.onnx`
digests whole ONNX models instead (at the sizes they declare, symbolic dims 1): repeated layers and stages across
kernels show there, not in single-op workloads. The cache key (Executable.source_hash) is left out: it hashes the
options' text, not what runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Workloads that reach every strategy family at least once (register-blocked and promoted matmuls, cooperative
# matrices, split-K matrix-vector products, im2col and direct convolutions, depthwise windows, row chains long
# and short, elementwise chains).
SUBSET = ("matmul_1024_f32", "matmul_1024_f16", "linear_4096_f16", "gemv_4096", "conv3x3_resnet",
          "dwconv3x3_mobilenet", "softmax_4096", "layernorm_rows384", "ew_chain_16Mi")
# Profiles of CPU drivers compile the workloads' CPU sizes (as `portable bench --export` does), the rest GPU sizes.
CPU_PROFILES = ("lavapipe", "pocl")


def executable_digest(exe) -> str:
    """sha256 of what an Executable runs: kernels (binaries, sources, launch metadata), plan and constants."""
    h = hashlib.sha256()
    for k in exe.kernels:
        meta = (k.name, tuple(k.workgroup_size), k.num_buffers, tuple(k.push_constants), tuple(k.access),
                tuple(k.texel_buffers), k.subgroup_size)
        h.update(repr(meta).encode())
        h.update(b"\0spirv\0" + (k.spirv or b""))
        h.update(b"\0opencl\0" + (k.opencl or "").encode())
    h.update(json.dumps(exe.plan_dict(), sort_keys=True).encode())
    for slot in sorted(exe.constants):
        arr = exe.constants[slot]
        h.update(f"\0const {slot} {arr.dtype} {arr.shape}\0".encode())
        h.update(arr.tobytes())
    h.update(f"\0{exe.target}\0{exe.profile}".encode())
    return h.hexdigest()


def profile_apis(prof) -> tuple[str, ...]:
    """The APIs a profile's [match] names; both where it names none (generic)."""
    return tuple(prof.match.api or ("vulkan", "opencl"))


def _model_text(path: str) -> str:
    from portable.frontend.onnx_source import OnnxSource

    src = OnnxSource(path, None)
    given = src.normalize(None)
    return src.mlir(src.resolve(given), given)


def compute(workloads: list[str], profile_names: list[str], sizes: str | None, log,
            models: list[str] = ()) -> dict[str, str]:
    from portable import profiles
    from portable.bench import workloads as W
    from portable.compiler.pipeline import compile_module

    known = profiles.all_profiles()
    out: dict[str, str] = {}
    texts = {Path(m).stem if Path(m).stem != "model" else Path(m).parent.name: _model_text(m) for m in models}
    for pname in profile_names:
        prof = known[pname]
        options = profiles.codegen_options(prof)
        size_class = sizes or ("cpu" if pname in CPU_PROFILES else "gpu")
        jobs = [(name, text) for name, text in texts.items()] if models else \
            [(wid, None) for wid in workloads]
        for wid, text in jobs:
            w = W.build(wid, size_class) if text is None else None
            mlir = text if text is not None else w.mlir
            for api in profile_apis(prof):
                key = f"{wid}/{pname}/{api}"
                t0 = time.perf_counter()
                try:
                    out[key] = executable_digest(compile_module(mlir, options, (api,)))
                except Exception as e:  # noqa: BLE001 - a failing compile is part of the record, and must stay one
                    out[key] = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                log(f"{key:48s} {out[key][:16]}  {time.perf_counter() - t0:5.1f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="write the digests to this JSON file (refuses to overwrite)")
    mode.add_argument("--check", type=Path, help="compare with digests written before; exit 1 on any difference")
    ap.add_argument("--subset", action="store_true", help=f"only {', '.join(SUBSET)}")
    ap.add_argument("--models", help="comma-separated ONNX files to digest instead of the bench workloads")
    ap.add_argument("--workloads", help="comma-separated globs or substrings of workload ids (default: all)")
    ap.add_argument("--profiles", help="comma-separated profile names (default: every device_profiles/*.toml)")
    ap.add_argument("--sizes", choices=("gpu", "cpu", "tiny"), help="one size class for every profile")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if os.environ.get("PORTABLE_DUMP"):
        print("note: PORTABLE_DUMP is set; every stage of every compile is written there", file=sys.stderr)

    from portable import profiles
    from portable.bench import workloads as W

    wids = list(SUBSET) if args.subset else W.select(args.workloads)
    if args.subset and args.workloads:
        wids = [w for w in wids if w in W.select(args.workloads)]
    names = [p.strip() for p in args.profiles.split(",")] if args.profiles else sorted(profiles.all_profiles())
    unknown = sorted(set(names) - set(profiles.all_profiles()))
    if unknown:
        known = ", ".join(sorted(profiles.all_profiles()))
        ap.error(f"unknown profile(s) {', '.join(unknown)}; device_profiles/ has {known}")
    if args.write and args.write.exists():
        ap.error(f"{args.write} exists; name a new file")
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    t0 = time.perf_counter()
    models = [m.strip() for m in args.models.split(",")] if args.models else []
    got = compute(wids, names, args.sizes, log, models)
    took = time.perf_counter() - t0
    if args.write:
        args.write.write_text(json.dumps({"sizes": args.sizes, "digests": got}, indent=1, sort_keys=True) + "\n")
        errors = sum(v.startswith("error") for v in got.values())
        print(f"wrote {len(got)} digests ({errors} compile errors recorded) to {args.write} in {took:.0f} s")
        return 0
    before = json.loads(args.check.read_text())
    if before.get("sizes") != args.sizes:
        ap.error(f"{args.check} was written with --sizes {before.get('sizes')}, this run has {args.sizes}")
    ref = before["digests"]
    missing = [k for k in got if k not in ref]
    changed = [k for k in got if k in ref and ref[k] != got[k]]
    for k in changed:
        print(f"DIFFERS {k}: {ref[k][:60]} -> {got[k][:60]}")
    for k in missing:
        print(f"NOT IN {args.check}: {k}")
    same = len(got) - len(changed) - len(missing)
    print(f"{same}/{len(got)} identical, {len(changed)} differ, {len(missing)} not recorded before ({took:.0f} s)")
    return 1 if changed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
