"""Ahead-of-time export for hosts without MLIR (the NVIDIA H200 host): compile every workload here for a
device profile, save portable Executables (SPIR-V and OpenCL C) and IREE .vmfb modules, plus a manifest.

    portable bench --export DIR [--profile nvidia] [--iree-targets ampere,default]
    (copy DIR to the GPU host)
    portable bench --import DIR --device vulkan:0

Inputs are not copied: the manifest records each workload's size class and the sha of its MLIR, and the
importing host rebuilds the same workloads (and the same seeded inputs) from its own workload table.
"""

from __future__ import annotations

import datetime as _dt
import json
import shlex
import sys
import time
from pathlib import Path

from ..trust import file_digest
from . import workloads as W

MANIFEST = "manifest.json"
# The NVIDIA profile compiles for GPU sizes; CPU-driver profiles for CPU sizes (to try the flow locally).
PROFILE_SIZES = {"lavapipe": "cpu", "pocl": "cpu"}
# Model workloads (`portable bench --models`) stay out of exports: what travels to the GPU host is limited to
# 64 MiB, and an Executable carries the weights as constants.
MODELS_NOT_EXPORTED = ("model workloads are not exported: ResNet-50's f32 weights (98 MiB) do not fit the 64 MiB "
                       "that travels to the GPU host (an executable carries its weights); run `portable bench "
                       "--models` on a host with torch and the compiler")
# IREE 3.13 knows no Hopper Vulkan target ("sm_90"/"hopper" are rejected); "ampere" (= sm_80: subgroup 32,
# NV cooperative matrix) is the nearest NVIDIA one. "default" = no --iree-vulkan-target flag.
DEFAULT_IREE_TARGETS = {"nvidia": ("ampere",)}


def export(out: Path, profile_name: str = "nvidia", pattern: str | None = None, sizes: str | None = None,
           iree_targets: tuple[str, ...] | None = None, log=print) -> dict:
    from .. import __version__, cache
    from ..compiler.pipeline import compile_module
    from ..profiles import all_profiles, codegen_options

    profiles = all_profiles()
    if profile_name not in profiles:
        raise ValueError(f"no device profile {profile_name!r}; profiles are {', '.join(profiles)}")
    options = codegen_options(profiles[profile_name])
    size_class = sizes if sizes and sizes != "auto" else PROFILE_SIZES.get(profile_name, "gpu")
    targets = iree_targets if iree_targets is not None else DEFAULT_IREE_TARGETS.get(profile_name, ("default",))
    out = Path(out)
    (out / "portable").mkdir(parents=True, exist_ok=True)
    try:
        from importlib.metadata import version

        from .peers.iree_peer import compile_vmfb

        iree_version = version("iree-base-compiler")
        (out / "iree").mkdir(exist_ok=True)
    except ImportError as e:
        iree_version, targets = None, ()
        log(f"IREE compiler not installed ({e}): no .vmfb export")
    manifest = {"format": 1, "created": _dt.datetime.now().isoformat(timespec="seconds"),
                "command": " ".join(shlex.quote(a) for a in sys.argv), "profile": profile_name,
                "codegen_options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
                "size_class": size_class, "portable_version": __version__,
                "compiler_fingerprint": cache.compiler_fingerprint()[:16], "iree_compiler": iree_version,
                "iree_targets": list(targets), "workloads": {}}
    for wid in W.select(pattern):
        w = W.build(wid, size_class)
        entry: dict = {"label": w.label, "size_class": size_class, "mlir_sha": w.mlir_sha, "portable": None,
                       "iree": {}}
        t0 = time.perf_counter()
        try:
            # One executable per API: strategies may differ (cooperative matrices exist on Vulkan only).
            entry["portable_by_api"], entry["portable_sha256"] = {}, {}
            for api in ("vulkan", "opencl"):
                exe = compile_module(w.mlir, options, (api,))
                rel = f"portable/{wid}.{api}.ptx"
                exe.save(out / rel)
                entry["portable_by_api"][api] = rel
                entry["portable_sha256"][rel] = file_digest(out / rel)  # the importer pins it (portable.trust)
            entry["portable"] = rel
            entry["portable_kernels"] = len(exe.kernels)
            log(f"  portable {wid:22s} {len(exe.kernels)} kernel(s) in {time.perf_counter() - t0:.1f} s")
        except Exception as e:  # noqa: BLE001 - a workload that does not compile is recorded, not fatal
            entry["portable_error"] = f"{type(e).__name__}: {e}"[:3000]
            log(f"  portable {wid:22s} FAILED: {str(e).splitlines()[0][:160]}")
        for t in targets:
            t1 = time.perf_counter()
            try:
                vmfb = compile_vmfb(w.mlir, None if t == "default" else t)
                rel = f"iree/{wid}.{t}.vmfb"
                (out / rel).write_bytes(vmfb)
                entry["iree"][t] = rel
                log(f"  iree[{t}] {wid:22s} {len(vmfb)} bytes in {time.perf_counter() - t1:.1f} s")
            except Exception as e:  # noqa: BLE001
                entry["iree"][t] = f"error: {str(e)[:2000]}"
                log(f"  iree[{t}] {wid:22s} FAILED: {str(e).splitlines()[0][:160]}")
        manifest["workloads"][wid] = entry
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))
    log(f"wrote {out / MANIFEST}: {len(manifest['workloads'])} workloads, profile {profile_name}, "
        f"{size_class} sizes")
    return manifest


def read_manifest(d: Path) -> dict:
    p = Path(d) / MANIFEST
    if not p.exists():
        raise FileNotFoundError(f"{p}: no manifest; create the directory with `portable bench --export {d}`")
    m = json.loads(p.read_text())
    if m.get("format") != 1:
        raise ValueError(f"{p}: manifest format {m.get('format')!r}, this harness reads 1; export again")
    return m
