"""On-disk cache of compiled Executables, keyed by everything that changes the kernels. No MLIR here."""

from __future__ import annotations

import hashlib
import os
import warnings
from functools import lru_cache
from pathlib import Path

from . import config
from .config import VERSION
from .errors import PackageError
from .executable import Executable


@lru_cache(maxsize=1)
def compiler_fingerprint() -> str:
    """Hash of the compiler's own source, so a changed compiler never reuses kernels of an older one."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for room in ("ir", "compiler", "codegen_spirv", "codegen_opencl", "frontend"):
        for p in sorted((root / room).rglob("*.py")):
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def key(text: str, options: dict, targets: tuple[str, ...]) -> str:
    """hash(package version, compiler source, graph text, codegen options (profile + device limits), targets)."""
    h = hashlib.sha256()
    for part in (VERSION, compiler_fingerprint(), text, repr(sorted(options.items())), repr(targets)):
        # surrogatepass: a str with lone surrogates (from a bad file name or bytes decoded with surrogateescape)
        # still gets a key; other text encodes as plain UTF-8, so keys stay as they were.
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def _path(k: str) -> Path:
    return config.cache_dir() / "executables" / f"{k[:40]}.ptx"


def lookup(k: str) -> Executable | None:
    if config.dump_dir() is not None:  # PORTABLE_DUMP asks for every stage: a cached executable has none to write
        return None
    p = _path(k)
    if not p.exists():
        return None
    try:
        return Executable.load(p)
    except PackageError as e:
        warnings.warn(f"ignoring unreadable cache entry {p}: {e}", stacklevel=2)
        return None


def store(k: str, exe: Executable) -> None:
    p = _path(k)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        exe.save(p)  # writes a temp file then os.replace: readers never see half a file
    except OSError as e:
        warnings.warn(f"could not write compile cache {p}: {e}", stacklevel=2)


def clear() -> None:
    d = config.cache_dir() / "executables"
    if d.exists():
        for p in d.glob("*.ptx"):
            os.unlink(p)
