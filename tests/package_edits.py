"""What the package tests (test_damaged_packages.py, test_package_trust.py) share: a small graph, its inputs and
expected outputs, a package of it built for three targets (the `package` fixture), and ways to take a package's
entries apart and write them back, its content hash made valid again as anyone can (it is no signature)."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

import portable
from portable.package import _content_hash, build


def _graph():
    g = portable.Graph("rel")
    x = g.input((6, 10))
    w = g.constant(np.linspace(-2, 2, 10, dtype=np.float32))
    g.output(g.relu(g.add(g.mul(x, x), w)))
    return g


G = _graph()
X = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
WANT = np.maximum(X * X + np.linspace(-2, 2, 10, dtype=np.float32), 0)


@pytest.fixture(scope="module", name="package")
def package_fixture(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rel") / "model.ptpk"
    build(G, ["vulkan:lavapipe", "opencl:pocl", "vulkan:generic"], path)
    return path


def package_entries(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as z:
        return {n: z.read(n) for n in z.namelist()}


def write_package(path: Path, entries: dict[str, bytes], rehash: bool = True) -> Path:
    """A package of these entries; `rehash`: its content hash made valid again (anyone can: it is no signature)."""
    if rehash:
        m = json.loads(entries["manifest.json"])
        digests = {n: hashlib.sha256(d).digest() for n, d in entries.items()
                   if n not in ("manifest.json", "signatures.json")}
        m["content_hash"] = _content_hash(digests, m)
        entries = dict(entries, **{"manifest.json": json.dumps(m).encode()})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries.items():
            z.writestr(n, d)
    return path


def edit_plans(src: Path, dst: Path, edit) -> Path:
    """`edit(target dict)` applied to every target of the package's manifest, hash made valid again."""
    entries = package_entries(src)
    m = json.loads(entries["manifest.json"])
    for t in m["targets"]:
        edit(t)
    entries["manifest.json"] = json.dumps(m).encode()
    return write_package(dst, entries)
