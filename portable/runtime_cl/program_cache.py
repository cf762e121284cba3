"""On-disk cache of OpenCL program binaries, keyed by source, options and driver identity.

Driver compiles of OpenCL C take from tens of milliseconds to seconds per kernel; a binary reloads in about
a millisecond. Writes are atomic (temp file + os.replace) under a file lock, so concurrent processes never
see half a file; an unreadable entry warns and is rebuilt, it never breaks a run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; os.replace alone still keeps readers safe
    fcntl = None  # type: ignore[assignment]

# Bump when the entry layout or what goes into the key changes, so old entries are simply missed.
CACHE_FORMAT = 1

_MAGIC = b"PCLBIN%02d" % CACHE_FORMAT
_DIGEST_BYTES = 32


class ProgramCacheWarning(UserWarning):
    """A cache entry could not be read or written; the program is built from source instead."""


def cache_key(source: str, options: str, device_name: str, driver_version: str, platform_version: str) -> str:
    """Names a binary: any change of source, options, device or driver version misses the cache."""
    h = hashlib.sha256()
    for part in (str(CACHE_FORMAT), source, options, device_name, driver_version, platform_version):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))  # length-prefixed so fields cannot run into each other
        h.update(data)
    return h.hexdigest()


class ProgramCache:
    """Binaries under `root` (cache_dir()/opencl), one file per key; failing sources under root/failed."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        """Where the binary for `key` lives."""
        return self.root / f"{key}.bin"

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        if fcntl is None:
            yield
            return
        with open(self.root / ".lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def load(self, key: str) -> bytes | None:
        """The stored binary, or None if absent; a truncated or corrupt entry warns and returns None."""
        path = self.path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            self.warn(path, f"cannot be read ({e})")
            return None
        header = len(_MAGIC) + _DIGEST_BYTES
        payload = blob[header:]
        # The checksum keeps garbage away from drivers: some crash instead of answering CL_INVALID_BINARY.
        if len(blob) <= header or blob[: len(_MAGIC)] != _MAGIC or blob[len(_MAGIC) : header] != hashlib.sha256(
            payload
        ).digest():
            self.warn(path, "is corrupt or truncated")
            return None
        return payload

    def store(self, key: str, binary: bytes) -> None:
        """Write the binary atomically; a failure (read-only or full disk) only warns."""
        path = self.path(key)
        try:
            with self._lock():
                fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{key[:16]}-", suffix=".tmp")
                try:
                    with os.fdopen(fd, "wb") as f:
                        f.write(_MAGIC + hashlib.sha256(binary).digest() + binary)
                    os.replace(tmp, path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
        except OSError as e:
            warnings.warn(f"portable: cannot write OpenCL program cache entry {path} ({e}); the kernel will be "
                          f"compiled again next time", ProgramCacheWarning, stacklevel=3)

    def save_failed(self, kernel_name: str, key: str, source: str, log: str) -> Path:
        """Keep a source the driver refused (and its build log next to it) so it can be read and rebuilt."""
        folder = self.root / "failed"
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{re.sub(r'[^A-Za-z0-9_]', '_', kernel_name)[:64]}-{key[:16]}"
        source_path = folder / f"{stem}.cl"
        source_path.write_text(source)
        (folder / f"{stem}.log").write_text(log)
        return source_path

    def warn(self, path: Path, problem: str) -> None:
        """Report an unusable entry; the caller then builds from source and overwrites it."""
        warnings.warn(f"portable: OpenCL program cache entry {path} {problem}; rebuilding it from source",
                      ProgramCacheWarning, stacklevel=4)
