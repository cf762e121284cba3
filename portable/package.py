"""Deployable packages (.ptpk): one file with kernels per target profile, the plan per target, the weights,
input/output signatures, a format version and a content hash.

    portable compile model.onnx --target vulkan:lavapipe --target opencl:pocl --target vulkan:generic -o m.ptpk
    exe = portable.load("m.ptpk", device="vulkan:0")      # needs only numpy + vulkan or pyopencl

Reading a package never imports MLIR; `build` (the compile side) does. A zip: manifest.json, kernels under
targets/<i>/, weights under weights/<sha256>.npy (shared by targets). The content hash covers every entry,
so a damaged file is refused before any byte reaches a driver.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import __version__
from .backend import DeviceInfo
from .errors import PackageError
from .executable import Executable, kernel_entry, kernel_from_entry, npy_bytes, npy_load

FORMAT = "ptpk"
FORMAT_VERSION = 6  # 2: a target's plan may bind byte ranges of slots (Executable format 2); 3: int64 held as int32;
# 4: float16 held as float32; 5: uniform texel buffers; 6: a required subgroup width per kernel
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
MANIFEST = "manifest.json"
APIS = ("vulkan", "opencl")


@dataclass(frozen=True)
class Target:
    """One compiled form inside a package: an API, the device profile its kernels were tuned for, and the live
    limits it was compiled for where the profile's [package] variants name some (a device must report them)."""

    api: str
    profile: str
    index: int  # position in the manifest's target list
    requires: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in self.requires)
        return f"{self.api}:{self.profile}" + (f"[{extra}]" if extra else "")


def parse_target(text: str) -> tuple[str, str]:
    """'vulkan:lavapipe' -> ('vulkan', 'lavapipe'); a bare API means its generic profile."""
    api, _, profile = text.strip().partition(":")
    if api not in APIS:
        raise PackageError(f"target {text!r}: the API must be one of {', '.join(APIS)} (e.g. vulkan:generic)")
    return api, profile or "generic"


def _content_hash(entries: dict[str, bytes], manifest: dict) -> str:
    h = hashlib.sha256()
    body = {k: v for k, v in manifest.items() if k != "content_hash"}
    h.update(json.dumps(body, sort_keys=True).encode())
    for name in sorted(entries):
        h.update(name.encode() + b"\0" + hashlib.sha256(entries[name]).digest())
    return h.hexdigest()


# ---- writing ---------------------------------------------------------------------------------------------
def _caller_view(exe: Executable) -> list:
    """What the caller passes and gets back; a target may hold int64 as int32 (TensorSig.device), another not."""
    return [(s.shape, s.dtype) for s in exe.inputs] + [(sig.shape, sig.dtype) for _, sig in exe.outputs]


def write(path: str | Path, executables: Sequence[tuple]) -> str:
    """Write one package from (Executable, profile dict[, required live limits]) per target; returns its content
    hash."""
    if not executables:
        raise PackageError("a package needs at least one target")
    entries: dict[str, bytes] = {}
    targets = []
    first = executables[0][0]
    for i, (exe, profile, *rest) in enumerate(executables):
        if _caller_view(exe) != _caller_view(first):
            raise PackageError(f"target {i} ({exe.target}:{profile['name']}) has another signature than target 0")
        weights = {}
        for sid, arr in exe.constants.items():
            data = npy_bytes(arr)
            name = f"weights/{hashlib.sha256(data).hexdigest()}.npy"
            entries[name] = data
            weights[str(sid)] = name
        kernels = [kernel_entry(k, f"targets/{i}/{j}", entries.__setitem__) for j, k in enumerate(exe.kernels)]
        targets.append({"api": exe.target, "profile": profile["name"],
                        "profile_match": dict(profile.get("match", {})),
                        **({"requires": dict(rest[0])} if rest and rest[0] else {}),
                        "kernels": kernels, "plan": exe.plan_dict(), "weights": weights})
    manifest = {
        "format": FORMAT, "version": max(e[0].format_version for e in executables),  # 1 unless ranges are bound
        "portable": __version__, "graph_hash": first.source_hash,
        "inputs": [{"shape": list(s.shape), "dtype": s.dtype} for s in first.inputs],
        "outputs": [{"shape": list(sig.shape), "dtype": sig.dtype} for _, sig in first.outputs],
        "targets": targets,
    }
    manifest["content_hash"] = _content_hash(entries, manifest)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, json.dumps(manifest, indent=1))
        for name in sorted(entries):
            z.writestr(name, entries[name])
    tmp.replace(path)
    return manifest["content_hash"]


def build(graph: Any, targets: Sequence[str], path: str | Path, input_shapes: Any = None) -> str:
    """Compile `graph` once per 'api:profile' target (no live device needed) and write the package. A profile's
    [package] `variants` (live limits, e.g. PoCL's native_float_vector_width = 16 on AVX-512 hosts) add a target
    each, compiled as for a device that reports them, where its kernels differ from the plain target's. An ONNX
    model is compiled for `input_shapes` (api.compile's argument)."""
    from . import profiles
    from .api import graph_text

    text = graph_text(graph, input_shapes)
    known = profiles.all_profiles()
    compiled = []
    for spec in targets:
        api, name = parse_target(spec)
        if name not in known:
            raise PackageError(f"target {spec!r}: no device profile named {name!r}; profiles: {', '.join(known)}")
        prof = known[name]
        base = _compiled(text, profiles.codegen_options(prof), api, name)
        compiled.append((base, prof))
        for limits in prof.get("package", {}).get("variants", []):
            assumed = DeviceInfo(api=api, index=0, name="(ahead of time)", driver="", driver_version="",
                                 vendor_id=0, device_id=0, device_type="other", limits=dict(limits))
            exe = _compiled(text, profiles.codegen_options(prof, assumed), api, name)
            if [(k.spirv, k.opencl) for k in exe.kernels] != [(k.spirv, k.opencl) for k in base.kernels]:
                compiled.append((exe, prof, dict(limits)))
    return write(path, compiled)


def _compiled(text: str, opts: dict, api: str, profile: str) -> Executable:
    from . import cache

    key = cache.key(text, opts, (api,))
    exe = cache.lookup(key)
    if exe is None:
        from .compiler.pipeline import compile_module  # the compile side is the only one that needs MLIR

        exe = compile_module(text, opts, (api,))
        cache.store(key, exe)
    exe.profile = profile
    return exe


# ---- reading ---------------------------------------------------------------------------------------------
class Package:
    """A package read and verified; `select(info)` picks the target for a device, `executable` builds it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.exists():
            raise PackageError(f"{self.path}: no such file")
        try:
            with zipfile.ZipFile(self.path) as z:
                self.manifest = json.loads(z.read(MANIFEST))
                self._check_format()
                self._entries = {n: z.read(n) for n in z.namelist() if n != MANIFEST}
        except PackageError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, struct.error, KeyError, ValueError, EOFError,
                OSError, NotImplementedError) as e:  # NotImplementedError: a damaged compression method field
            raise PackageError(f"{self.path}: not a readable portable package, it is truncated or corrupt ({e}); "
                               f"copy it again or rebuild it with `portable compile`") from e
        if _content_hash(self._entries, self.manifest) != self.manifest.get("content_hash"):
            raise PackageError(f"{self.path}: content hash mismatch, the package is corrupt; copy it again or "
                               f"rebuild it with `portable compile`")
        self.targets = [Target(t["api"], t["profile"], i, tuple(sorted(t.get("requires", {}).items())))
                        for i, t in enumerate(self.manifest["targets"])]

    def _check_format(self) -> None:
        m = self.manifest
        if not isinstance(m, dict) or m.get("format") != FORMAT:
            raise PackageError(f"{self.path}: not a portable package (no '{FORMAT}' manifest)")
        if m.get("version") not in READABLE_VERSIONS:
            raise PackageError(f"{self.path}: package format version {m.get('version')!r}, this portable "
                               f"({__version__}) reads versions {READABLE_VERSIONS}; rebuild the package with "
                               f"`portable compile` of this version")

    @property
    def content_hash(self) -> str:
        return self.manifest["content_hash"]

    def select(self, info: DeviceInfo, device_profile: str | None = None) -> Target:
        """The target for a device: one whose profile matches it exactly (of those, the one compiled for the most
        of the live limits the device reports), else its API's generic profile."""
        same_api = [t for t in self.targets if t.api == info.api]
        fits = [t for t in same_api if all(info.limits.get(k) == v for k, v in t.requires)]
        mine = [t for t in fits if t.profile == device_profile or
                _matches(self.manifest["targets"][t.index]["profile_match"], info)]
        if mine:
            return max(mine, key=lambda t: len(t.requires))  # the first of the most specific
        for t in fits:
            if t.profile == "generic":
                return t
        have = ", ".join(str(t) for t in self.targets)
        mine = f"{info.api}:{device_profile}" if device_profile else f"{info.api}:generic"
        raise PackageError(f"{self.path} has no target for {info.uri} ({info.name}, driver {info.driver}): it holds "
                           f"{have}. Rebuild it with `portable compile ... --target {mine}` (or --target "
                           f"{info.api}:generic, which runs on any {info.api} device)")

    def executable(self, target: Target) -> Executable:
        """The Executable of one target, with the shared weights filled in."""
        t = self.manifest["targets"][target.index]
        try:
            kernels = [kernel_from_entry(e, self._entries.__getitem__) for e in t["kernels"]]
            constants = {int(sid): npy_load(self._entries[name]) for sid, name in t["weights"].items()}
            plan = Executable.plan_from_dict(t["plan"])
        except (KeyError, ValueError, TypeError) as e:
            raise PackageError(f"{self.path}: target {target} is incomplete ({e}); rebuild the package") from e
        return Executable(kernels=kernels, **plan, constants=constants, target=target.api, profile=target.profile,
                          source_hash=self.manifest.get("graph_hash", ""))


def _matches(match: dict, info: DeviceInfo) -> bool:
    """The rule of portable.profiles.match for one profile, from the rules the package carries."""
    from .profiles import match_score

    return match_score(match, info) is not None


def is_package(path: str | Path) -> bool:
    """True for a file whose zip manifest says it is a .ptpk (whatever its name)."""
    try:
        with zipfile.ZipFile(path) as z:
            return json.loads(z.read(MANIFEST)).get("format") == FORMAT
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, AttributeError):
        return str(path).endswith(".ptpk")
