"""Deployable packages (.ptpk): one file with kernels per target profile, the plan per target, the weights,
input/output signatures, a format version and a content hash.

    portable compile model.onnx --target vulkan:lavapipe --target opencl:pocl --target vulkan:generic -o m.ptpk
    exe = portable.load("m.ptpk", device="vulkan:0")      # needs only numpy + vulkan or pyopencl

Reading a package never imports MLIR; `build` (the compile side) does. A zip: manifest.json, kernels under
targets/<i>/, weights under weights/<sha256>.npy (shared by targets). The content hash covers every entry,
so a damaged file is refused before any byte reaches a driver. Signatures (signatures.json, portable.trust) sign the
content hash and are not covered by it.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__, archive, trust
from .backend import DeviceInfo
from .errors import InvalidPlan, PackageError, UnpinnedPackage
from .executable import PLAN_ERRORS, Executable, kernel_entry, kernel_from_entry, npy_load
from .plan_check import check_plan

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


def _content_hash(digests: dict[str, bytes], manifest: dict) -> str:
    """sha256 over the manifest (less the hash itself) and every entry's sha256 digest, by name."""
    h = hashlib.sha256()
    body = {k: v for k, v in manifest.items() if k != "content_hash"}
    h.update(json.dumps(body, sort_keys=True).encode())
    for name in sorted(digests):
        h.update(name.encode() + b"\0" + digests[name])
    return h.hexdigest()


# ---- writing ---------------------------------------------------------------------------------------------
def _caller_view(exe: Executable) -> list:
    """What the caller passes and gets back; a target may hold int64 as int32 (TensorSig.device), another not."""
    return [(s.shape, s.dtype) for s in exe.inputs] + [(sig.shape, sig.dtype) for _, sig in exe.outputs]


def write(path: str | Path, executables: Sequence[tuple], sign_key: str | Path | None = None) -> str:
    """Write one package from (Executable, profile dict[, required live limits]) per target, signed with the private
    key file `sign_key` if given; returns its content hash (recorded as built here: portable.trust)."""
    if not executables:
        raise PackageError("a package needs at least one target")
    entries: dict[str, bytes | np.ndarray] = {}  # weights stay arrays until written (streamed, no bytes copy)
    digests: dict[str, bytes] = {}
    named: dict[int, tuple[str, np.ndarray]] = {}  # id(array) -> entry: an array targets share is hashed once
    targets = []
    first = executables[0][0]
    for i, (exe, profile, *rest) in enumerate(executables):
        if _caller_view(exe) != _caller_view(first):
            raise PackageError(f"target {i} ({exe.target}:{profile['name']}) has another signature than target 0")
        weights = {}
        for sid, arr in exe.constants.items():
            if id(arr) not in named:
                hexdigest = archive.npy_sha256(arr)
                named[id(arr)] = (f"weights/{hexdigest}.npy", arr)
                entries[named[id(arr)][0]] = np.asarray(arr)
                digests[named[id(arr)][0]] = bytes.fromhex(hexdigest)
            weights[str(sid)] = named[id(arr)][0]
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
    manifest["content_hash"] = _content_hash({n: digests.get(n) or hashlib.sha256(d).digest()
                                              for n, d in entries.items()}, manifest)
    if sign_key is not None:
        entries[trust.SIGNATURES] = _signatures_entry([trust.sign(manifest["content_hash"], sign_key)])
    _write_zip(Path(path), json.dumps(manifest, indent=1).encode(), entries)
    trust.remember(manifest["content_hash"])
    return manifest["content_hash"]


def _signatures_entry(records: list[dict]) -> bytes:
    return json.dumps({"signatures": records}, indent=1).encode()


def _write_zip(path: Path, manifest: bytes, entries: Mapping[str, bytes | np.ndarray]) -> None:
    archive.write_zip(path, [(MANIFEST, manifest), *((name, entries[name]) for name in sorted(entries))])


def sign(path: str | Path, key: str | Path) -> str:
    """Add a signature by the private key file `key` to the package at `path` (verified first; other signatures
    kept, one of the same key replaced); returns the signing key's id."""
    pkg = Package(path, expect_hash=None)
    record = trust.sign(pkg.content_hash, key)
    records = [r for r in pkg.signatures if r["key"] != record["key"]] + [record]
    entries = {n: d for n, d in pkg._entries.items() if n != MANIFEST}
    entries[trust.SIGNATURES] = _signatures_entry(records)
    with zipfile.ZipFile(pkg.path) as z:
        manifest = z.read(MANIFEST)
    _write_zip(pkg.path, manifest, entries)
    return trust.key_id(bytes.fromhex(record["key"]))


def build(graph: Any, targets: Sequence[str], path: str | Path, input_shapes: Any = None,
          sign_key: str | Path | None = None) -> str:
    """Compile `graph` once per 'api:profile' target (no live device needed) and write the package. A profile's
    [package] `variants` (live limits, e.g. PoCL's native_float_vector_width = 16 on AVX-512 hosts) add a target
    each, compiled as for a device that reports them, where its kernels differ from the plain target's. An ONNX
    model is compiled for `input_shapes` (api.compile's argument). `sign_key`: a private key file to sign it with."""
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
        text = _holding(text, base)
        compiled.append((base, prof))
        for limits in prof.get("package", {}).get("variants", []):
            assumed = DeviceInfo(api=api, index=0, name="(ahead of time)", driver="", driver_version="",
                                 vendor_id=0, device_id=0, device_type="other", limits=dict(limits))
            exe = _compiled(text, profiles.codegen_options(prof, assumed), api, name)
            if [(k.spirv, k.opencl) for k in exe.kernels] != [(k.spirv, k.opencl) for k in base.kernels]:
                text = _holding(text, exe)
                compiled.append((exe, prof, dict(limits)))
    return write(path, compiled, sign_key)


def _holding(text: str, exe: Executable) -> str:
    """The graph text for the next target of a build: its compile takes the weights `exe` holds (mostly in the same
    layouts) where they are equal instead of copying them out of its module, so a build holds each weight once;
    `exe`'s own constants equal to earlier ones become those (a target read from the compile cache). The heap
    the compile freed goes back to the system."""
    from .ir.weights import by_digest, holding, known

    find = known(by_digest(getattr(text, "weights", {})))
    for sid, arr in exe.constants.items():
        a = np.asarray(arr)
        same = find(a)
        if same is not None and same is not arr and same.dtype == a.dtype:  # the digest covers the shape
            exe.constants[sid] = same
    _trim_heap()
    return holding(text, exe.constants.values())


def _trim_heap() -> None:
    """Give the heap a compile freed back to the system (glibc keeps freed blocks below its mmap threshold, so a
    build of several targets would hold each compile's peak): a 140M decoder's two-target build peaks at 3.8 GB
    instead of 4.5."""
    import contextlib
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


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
    """A package read and verified; `select(info)` picks the target for a device, `executable` builds it.

    Trust: the content hash covers every entry, so damage in transit is refused, but it is not a signature, anyone
    can write a package with a valid hash. Every plan is therefore checked against its kernels and the device's
    limits before anything runs (plan_check), and every entry's size is bounded by the plan before it is read.
    Whether its kernels may run at all is portable.trust's decision (pinned, signed, built here or trust="any"):
    `expect_hash` refuses any other package before its entries are read; `signatures` are the records of the
    signatures entry, checked by the loader against the keys it trusts."""

    def __init__(self, path: str | Path, expect_hash: str | None = None):
        self.path = archive.as_path(path)
        if not self.path.exists():
            raise PackageError(f"{self.path}: no such file")
        what = str(self.path)
        try:
            with zipfile.ZipFile(self.path) as z:
                infos = archive.entries(z, what)
                if MANIFEST not in infos:
                    raise PackageError(f"{what}: not a portable package (no '{FORMAT}' manifest)")
                self.manifest = archive.read_json(z, infos[MANIFEST], what)
                self._check_format()
                if expect_hash is not None and self.manifest.get("content_hash") != expect_hash:
                    raise UnpinnedPackage(self._pin_message(self.manifest.get("content_hash"), expect_hash))
                limits = self._entry_limits()
                unknown = sorted(set(infos) - set(limits) - {MANIFEST, trust.SIGNATURES})
                if unknown:
                    raise PackageError(f"{what}: entries {unknown[:3]} are not named by its manifest; the file was "
                                       f"edited, rebuild it with `portable compile`")
                self._entries: dict[str, bytes] = {}
                digests: dict[str, bytes] = {}
                for name in sorted(limits):
                    if name not in infos:
                        raise PackageError(f"{what}: entry {name!r} named by its manifest is missing; the package is "
                                           f"truncated or corrupt, copy it again or rebuild it with `portable compile`")
                    self._entries[name], digests[name] = archive.read(z, infos[name], limits[name], what)
                self.signatures: list[dict] = []
                if trust.SIGNATURES in infos:
                    data, _ = archive.read(z, infos[trust.SIGNATURES], trust.MAX_SIGNATURES_BYTES, what)
                    self.signatures = trust.parse_signatures(data, what)
        except PackageError:
            raise
        except archive.ZIP_ERRORS as e:
            raise PackageError(f"{what}: not a readable portable package, it is truncated or corrupt ({e}); "
                               f"copy it again or rebuild it with `portable compile`") from e
        try:
            computed = _content_hash(digests, self.manifest)
        except (ValueError, TypeError, RecursionError) as e:  # JSON text json cannot write back (lone surrogates...)
            raise PackageError(f"{what}: its manifest cannot be hashed ({type(e).__name__}); the file is damaged, "
                               f"rebuild it with `portable compile`") from None
        if computed != self.manifest.get("content_hash"):
            raise PackageError(f"{self.path}: content hash mismatch, the package is corrupt; copy it again or "
                               f"rebuild it with `portable compile`")
        if expect_hash is not None and computed != expect_hash:
            raise UnpinnedPackage(self._pin_message(computed, expect_hash))
        self.targets = [Target(t["api"], t["profile"], i, tuple(sorted(t.get("requires", {}).items())))
                        for i, t in enumerate(self.manifest["targets"])]

    def _pin_message(self, found: Any, expected: str) -> str:
        return (f"{self.path}: content hash {str(found)[:64]!r} is not the pinned {expected!r}; this is not the "
                f"package you pinned (rebuilt or replaced): check where it came from, then pin its new hash")

    def _entry_limits(self) -> dict[str, int]:
        """Entry name -> the most bytes it may hold: weights as large as their slot (plus an .npy header), kernels
        MAX_KERNEL_BYTES. Checks the manifest's target records are shaped as `write` writes them."""
        what = str(self.path)
        targets = self.manifest.get("targets")
        if not isinstance(targets, list) or not targets:
            raise PackageError(f"{what}: its manifest lists no targets; rebuild it with `portable compile`")
        limits: dict[str, int] = {}
        for i, t in enumerate(targets):
            bad = f"{what}: target {i} of its manifest is malformed"
            fields = {"api": str, "profile": str, "profile_match": dict, "kernels": list, "plan": dict,
                      "weights": dict, "requires": dict}
            if not isinstance(t, dict) or any(k in t and not isinstance(t[k], ty) for k, ty in fields.items()) or \
                    any(k not in t for k in fields if k != "requires"):
                raise PackageError(f"{bad} (fields {sorted(fields)}); rebuild it with `portable compile`")
            if not all(isinstance(v, (str, int, float, bool)) for v in t.get("requires", {}).values()):
                raise PackageError(f"{bad} (requires); rebuild it with `portable compile`")
            slots = t["plan"].get("slots")
            if not isinstance(slots, list) or not all(isinstance(s, dict) for s in slots):
                raise PackageError(f"{bad} (plan slots); rebuild it with `portable compile`")
            for e in t["kernels"]:
                if not isinstance(e, dict):
                    raise PackageError(f"{bad} (kernels); rebuild it with `portable compile`")
                for key in ("spirv", "opencl"):
                    if e.get(key) is not None:
                        if not isinstance(e[key], str):
                            raise PackageError(f"{bad} (kernel {key}); rebuild it with `portable compile`")
                        limits[e[key]] = archive.MAX_KERNEL_BYTES
            for sid, name in t["weights"].items():
                try:
                    nbytes = slots[int(sid)]["nbytes"]
                    if not isinstance(name, str) or not isinstance(nbytes, int) or int(sid) < 0 or nbytes < 0:
                        raise TypeError(name)
                except (ValueError, TypeError, IndexError, KeyError):
                    raise PackageError(f"{bad} (weights of slot {str(sid)[:40]!r}); rebuild it with `portable "
                                       f"compile`") from None
                limits[name] = max(limits.get(name, 0), nbytes + archive.NPY_HEADER_BYTES)
        return limits

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
        except PLAN_ERRORS as e:
            raise PackageError(f"{self.path}: target {target} is incomplete or malformed ({type(e).__name__}: "
                               f"{str(e)[:200]}); rebuild the package with `portable compile`") from e
        graph_hash = self.manifest.get("graph_hash", "")
        exe = Executable(kernels=kernels, **plan, constants=constants, target=target.api, profile=target.profile,
                         source_hash=graph_hash if isinstance(graph_hash, str) else "")
        check_plan(exe, f"{self.path}: target {target}")
        try:  # what the caller passes and gets back, as the package declares it (write() keeps targets equal)
            declared = [(tuple(s["shape"]), s["dtype"]) for s in [*self.manifest["inputs"], *self.manifest["outputs"]]]
        except (KeyError, TypeError, ValueError):
            declared = None
        if _caller_view(exe) != declared:
            raise InvalidPlan(f"{self.path}: target {target} takes and returns {_caller_view(exe)}, the package "
                              f"declares {str(declared)[:200]}; the package was edited, rebuild it with `portable "
                              f"compile`")
        return exe


def _matches(match: dict, info: DeviceInfo) -> bool:
    """The rule of portable.profiles.match for one profile, from the rules the package carries."""
    from .profiles import match_score

    try:
        return match_score(match, info) is not None
    except (TypeError, ValueError, AttributeError, KeyError) as e:  # rules edited into other types
        raise PackageError(f"a target's profile_match rules {str(match)[:100]} are malformed ({e}); rebuild the "
                           f"package with `portable compile`") from None


def is_package(path: str | Path) -> bool:
    """True for a file whose zip manifest says it is a .ptpk (whatever its name)."""
    try:
        with zipfile.ZipFile(path) as z:
            return archive.read_json(z, z.getinfo(MANIFEST), str(path)).get("format") == FORMAT
    except (PackageError, AttributeError, TypeError, *archive.ZIP_ERRORS):  # (TypeError: not a path at all)
        return str(path).endswith(".ptpk")
