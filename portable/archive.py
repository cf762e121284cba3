"""Bounded reading of the zip files executables and packages are stored in, and their writing.

A zip's directory says how large each entry is once decompressed; a damaged or hostile file can claim (and
deliver) gigabytes from a few compressed megabytes. Every entry is checked against a limit the caller derives
from what the entry must hold before a byte of it is decompressed, and read in chunks with its hash computed on
the way, so the cost of refusing a file is bounded by the limits, not by the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .errors import PackageError

MAX_MANIFEST_BYTES = 64 << 20  # a plan's JSON: far above any real plan (about 1 KiB per dispatch)
MAX_KERNEL_BYTES = 64 << 20  # one SPIR-V module or OpenCL C source
MAX_ENTRIES = 1 << 16
NPY_HEADER_BYTES = 1 << 16  # the most an .npy header takes beyond the array's bytes (format 2.0 allows 4 GiB;
# numpy writes < 200 bytes)
_CHUNK = 1 << 20
STORE_BYTES = 1 << 16  # float arrays this large are stored uncompressed: they deflate by a few percent, and deflating
# them was most of a large model's write time

# What reading a damaged zip raises besides BadZipFile: a damaged compression method (NotImplementedError), bad
# deflate data (zlib.error), a short header (struct.error, EOFError), and an offset past the end (OSError,
# ValueError).
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, struct.error, EOFError, OSError, ValueError,
              NotImplementedError, KeyError, OverflowError, RuntimeError)  # RuntimeError: an "encrypted" flag


def as_path(path: object) -> Path:
    """`path` as a Path; PackageError for anything that is not a path."""
    if not isinstance(path, (str, os.PathLike)):
        raise PackageError(f"{type(path).__name__} {str(path)[:60]!r} is not a path: pass the file's path as a str or "
                           f"pathlib.Path")
    return Path(path)


def entries(z: zipfile.ZipFile, what: str) -> dict[str, zipfile.ZipInfo]:
    """Entries by name; PackageError for duplicated names (a reader could see either) or too many entries."""
    infos = z.infolist()
    if len(infos) > MAX_ENTRIES:
        raise PackageError(f"{what}: {len(infos)} entries, more than a portable file holds ({MAX_ENTRIES}); it is "
                           f"not a file portable wrote")
    out: dict[str, zipfile.ZipInfo] = {}
    for info in infos:
        if info.filename in out:
            raise PackageError(f"{what}: entry {info.filename!r} appears twice; the file was edited, rebuild it")
        out[info.filename] = info
    return out


def read(z: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, what: str) -> tuple[bytes, bytes]:
    """(bytes, sha256 digest) of an entry that may hold at most `limit` bytes once decompressed."""
    if info.file_size > limit:
        raise PackageError(f"{what}: entry {info.filename!r} declares {info.file_size} bytes, above the "
                           f"{limit} bytes its place in the plan allows; the file is damaged or was edited, rebuild it")
    h = hashlib.sha256()
    parts = []
    got = 0
    with z.open(info) as f:  # zipfile stops at file_size and checks the CRC there
        while chunk := f.read(_CHUNK):
            got += len(chunk)
            if got > limit:
                raise PackageError(f"{what}: entry {info.filename!r} holds more than {limit} bytes; the file is "
                                   f"damaged, rebuild it")
            h.update(chunk)
            parts.append(chunk)
    return b"".join(parts), h.digest()


def read_json(z: zipfile.ZipFile, info: zipfile.ZipInfo, what: str) -> dict:
    """The manifest: a JSON object of bounded size (deep nesting and bad text are PackageError)."""
    data, _ = read(z, info, MAX_MANIFEST_BYTES, what)
    try:
        out = json.loads(data)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError is a ValueError
        raise PackageError(f"{what}: its manifest is not readable JSON ({type(e).__name__}: {str(e)[:200]}); the "
                           f"file is damaged, copy it again or rebuild it") from None
    if not isinstance(out, dict):
        raise PackageError(f"{what}: its manifest is a JSON {type(out).__name__}, not an object; not a portable file")
    return out


# ---- writing ---------------------------------------------------------------------------------------------
class _Hasher:
    def __init__(self):
        self.h = hashlib.sha256()

    def write(self, data) -> int:
        self.h.update(data)
        return len(data)


def write_npy(f, arr: np.ndarray) -> None:
    """`arr` as .npy bytes (np.save's) into file object `f`, in chunks: no whole copy of the array."""
    np.lib.format.write_array(f, np.ascontiguousarray(arr), allow_pickle=False)


def npy_sha256(arr: np.ndarray) -> str:
    """sha256 (hex) of the .npy bytes `write_zip` stores for `arr`, computed without copying it."""
    sink = _Hasher()
    write_npy(sink, arr)
    return sink.h.hexdigest()


def write_zip(path: str | Path, items: Iterable[tuple[str, bytes | np.ndarray]]) -> None:
    """A zip of (name, bytes or array) in the given order, arrays as .npy (large floats stored, not deflated) and
    streamed into the file; written to a temporary file, then renamed: readers never see half a file."""
    import time

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    stamp = time.localtime(time.time())[:6]
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in items:
            if not isinstance(data, np.ndarray):
                z.writestr(name, data)
                continue
            info = zipfile.ZipInfo(name, stamp)
            floats = data.dtype.kind == "f" and data.nbytes >= STORE_BYTES
            info.compress_type = zipfile.ZIP_STORED if floats else zipfile.ZIP_DEFLATED
            with z.open(info, "w", force_zip64=data.nbytes >= (1 << 31) - _CHUNK) as f:
                write_npy(f, data)
    tmp.replace(path)
