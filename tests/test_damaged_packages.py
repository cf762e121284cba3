"""Bad packages and bad plans give a PortableError that says what to do, never a crash, a hang, another exception
or wrong numbers (issue 34): plans checked against the kernels and the device before anything runs, package
entries bounded before they are read, damaged files and inputs raising only PortableError.
(Bad inputs and models: test_bad_inputs_and_models.py; trust: test_package_trust.py.)"""

from __future__ import annotations

import dataclasses
import json
import random
import time
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pytest
from package_edits import WANT, X, package_fixture  # noqa: F401 - package_fixture: the `package` fixture
from package_edits import edit_plans as _edit_plans
from package_edits import package_entries as _entries
from package_edits import write_package as _write

import portable
from portable import errors
from portable.devices import open_device
from portable.package import Package


# ---- plans checked before anything runs ----------------------------------------------------------------
def test_grid_past_the_device_limits_is_refused(device, package, tmp_path):
    """A grid of (2^31-1, 1, 1) segfaulted PoCL; now InvalidPlan before a kernel is built."""
    def huge(t):
        t["plan"]["dispatches"][0]["grid"] = [2**31 - 1, 1, 1]

    path = _edit_plans(package, tmp_path / "grid.ptpk", huge)
    with pytest.raises(errors.InvalidPlan, match=r"grid of \(2147483647, 1, 1\) workgroups"):
        portable.load(path, device=device, trust="any")(X)


def test_grids_are_checked_against_the_device(device, package):
    """Within the plan's own bounds, a grid must still fit the device's maxComputeWorkGroupCount and keep its
    work-item ids within 32 bits."""
    from portable.plan_check import check_device

    live = open_device(device)
    exe = Package(package).executable(Package(package).select(live.info, live.profile["name"]))
    check_device(exe, live.info.limits, device)
    d = exe.dispatches[0]
    wide = dataclasses.replace(exe, dispatches=[dataclasses.replace(d, grid=(70000, 1, 1))])
    with pytest.raises(errors.InvalidPlan, match=r"past this device's limit of \(65535, 65535, 65535\)"):
        check_device(wide, {"max_workgroup_count": (65535, 65535, 65535)}, device)
    huge = dataclasses.replace(exe, dispatches=[dataclasses.replace(d, grid=(2**31 - 1, 1, 1))])
    if exe.kernels[d.kernel].workgroup_size[0] > 1:
        with pytest.raises(errors.InvalidPlan, match=r"work-items per dimension"):
            check_device(huge, {"max_workgroup_count": (2**31 - 1,) * 3}, device)


def _add_slot(t, kind):
    slots = t["plan"]["slots"]
    slots.append({"id": len(slots), "nbytes": slots[t["plan"]["outputs"][0][0]]["nbytes"], "kind": kind, "index": -1})
    return len(slots) - 1


def _const_slot(t) -> int:
    return int(next(iter(t["weights"])))


def _write_weights(t):
    d = t["plan"]["dispatches"][0]
    d["slots"][t["kernels"][d["kernel"]]["access"].index("w")] = _const_slot(t)


EDITS = {
    "zero grid": (lambda t: t["plan"]["dispatches"][0].__setitem__("grid", [0, 1, 1]), "grid"),
    "output larger than its slot": (lambda t: t["plan"]["outputs"][0][1].__setitem__("shape", [6, 1000]),
                                    "needs 24000 bytes"),
    "wrong number of bindings": (lambda t: t["plan"]["dispatches"][0]["slots"].pop(), "binds"),
    "input aliased to the weights": (lambda t: t["plan"]["input_slots"].__setitem__(0, _const_slot(t)),
                                     "inputs need slots of their own"),
    "weights of another size": (lambda t: t["plan"]["slots"][_const_slot(t)].__setitem__("nbytes", 80),
                                "weights of slot"),
    "output no kernel writes": (lambda t: t["plan"]["outputs"][0].__setitem__(0, _add_slot(t, "output")),
                                "written by no dispatch"),
    "binding past its slot": (lambda t: t["plan"]["dispatches"][0].update(
        offsets=[0] * len(t["plan"]["dispatches"][0]["slots"]),
        sizes=[1 << 20] * len(t["plan"]["dispatches"][0]["slots"])), "binds bytes"),
    "input slot smaller than the input": (lambda t: t["plan"]["inputs"][0].__setitem__("shape", [60, 10]),
                                          "input 0"),
    "bad dtype": (lambda t: t["plan"]["outputs"][0][1].__setitem__("dtype", "object"), "dtype"),
    "a target's signature unlike the package's": (
        lambda t: t["plan"]["outputs"][0][1].__setitem__("shape", [5, 10]), "the package declares"),
    "a kernel writing the weights": (_write_weights, "holds weights"),
    "kernel index out of range": (lambda t: t["plan"]["dispatches"][0].__setitem__("kernel", 99), "kernel 99"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_edited_plans_are_refused_at_load(device, package, tmp_path, edit):
    """Plans that ran and returned wrong numbers (or read past a buffer) are refused when the package is loaded."""
    fn, message = EDITS[edit]
    path = _edit_plans(package, tmp_path / "edited.ptpk", fn)
    with pytest.raises(errors.InvalidPlan, match=message):
        portable.load(path, device=device, trust="any")


def test_weights_of_another_shape_are_refused(package, tmp_path):
    entries = _entries(package)
    name = next(n for n in entries if n.startswith("weights/"))
    from portable.executable import npy_bytes

    entries[name] = npy_bytes(np.zeros(11, np.float32))
    with pytest.raises(errors.InvalidPlan, match=r"weights of slot \d+ are \(11,\) float32"):
        p = Package(_write(tmp_path / "w.ptpk", entries))
        p.executable(p.targets[0])


# ---- resource exhaustion --------------------------------------------------------------------------------
def _write_bomb(src: Path, dst: Path, nbytes: int) -> None:
    """`src` with its weights entry replaced by `nbytes` zero bytes, deflated as a stream (never held whole)."""
    entries = _entries(src)
    name = next(n for n in entries if n.startswith("weights/"))
    chunk = bytes(1 << 24)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for n, d in entries.items():
            if n != name:
                z.writestr(n, d)
        with z.open(name, "w", force_zip64=True) as f:
            for start in range(0, nbytes, len(chunk)):
                f.write(chunk[: nbytes - start])


def test_a_huge_zero_entry_is_refused_before_it_is_read(package, tmp_path):
    """A weights entry of 256 MiB of zeros (under 1 MiB on disk) for a 40-byte slot: refused from the zip's directory
    in well under a second, without decompressing it."""
    path = tmp_path / "bomb.ptpk"
    _write_bomb(package, path, 256 << 20)
    assert path.stat().st_size < 2 << 20
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(errors.PackageError, match=r"declares 268435456 bytes, above the \d+ bytes"):
        Package(path)
    took = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert took < 2 and peak < 16 << 20, (took, peak)


def test_entries_not_named_by_the_manifest_are_refused(package, tmp_path):
    entries = dict(_entries(package), **{"weights/extra.npy": b"\0" * 100})
    with pytest.raises(errors.PackageError, match=r"not named by its manifest"):
        Package(_write(tmp_path / "extra.ptpk", entries))


# ---- only PortableError out of damaged files and inputs -------------------------------------------------
_VALUES = [-1, 0, 1, 2**31 - 1, 2**63, -(2**70), 1e308, 0.5, "x", "\ud800", "", None, True, [], {}, [[1]], {"a": 1},
           [0, 0, 0], [2**40, 1, 1]]


def _leaves(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))


def _get(obj, path):
    for p in path:
        obj = obj[p]
    return obj


def _set(obj, path, value):
    for p in path[:-1]:
        obj = obj[p]
    obj[path[-1]] = value


def _corrupted(package: Path, tmp: Path, n_edits: int = 120, seed: int = 34):
    """(name, path) of damaged packages and executables: JSON fields set to other values and types (content hash
    made valid again, as an attacker would), bytes flipped, files truncated, deep JSON, bombs."""
    rng = random.Random(seed)
    raw = package.read_bytes()
    entries = _entries(package)
    manifest = json.loads(entries["manifest.json"])
    paths = [p for p in _leaves(manifest) if p and p[0] not in ("content_hash",)]
    for i in range(n_edits):
        m = json.loads(entries["manifest.json"])
        where = rng.choice(paths)
        old = _get(m, where)
        near = isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.5
        _set(m, where, rng.choice([old + 1, old - 1, old * 2, old // 2]) if near else rng.choice(_VALUES))
        text = json.dumps(m)
        yield f"edit {where}", _write(tmp / f"e{i}.ptpk", dict(entries, **{"manifest.json": text.encode()}),
                                      rehash=rng.random() < 0.8)
    for i in range(30):
        bad = bytearray(raw)
        for _ in range(rng.randint(1, 4)):
            bad[rng.randrange(len(bad))] ^= rng.randint(1, 255)
        (tmp / f"f{i}.ptpk").write_bytes(bytes(bad))
        yield f"flip {i}", tmp / f"f{i}.ptpk"
    for i, cut in enumerate((0, 10, 22, len(raw) // 2, len(raw) - 1)):
        (tmp / f"t{i}.ptpk").write_bytes(raw[:cut])
        yield f"truncated at {cut}", tmp / f"t{i}.ptpk"
    yield "deep JSON", _write(tmp / "deep.ptpk", dict(entries, **{"manifest.json": b"[" * 100000}), rehash=False)
    yield "manifest not an object", _write(tmp / "list.ptpk", dict(entries, **{"manifest.json": b"[1, 2]"}),
                                           rehash=False)
    yield "manifest not text", _write(tmp / "bin.ptpk", dict(entries, **{"manifest.json": b"\xff\xfe{"}),
                                      rehash=False)
    _write_bomb(package, tmp / "bomb.ptpk", 64 << 20)
    yield "zero bomb", tmp / "bomb.ptpk"
    # A saved Executable (.ptx) goes through the same checks.
    exe = Package(package).executable(Package(package).targets[0])
    exe.save(tmp / "g.ptx")
    ptx = _entries(tmp / "g.ptx")
    pm = json.loads(ptx["manifest.json"])
    ppaths = [p for p in _leaves(pm) if p]
    for i in range(30):
        m = json.loads(ptx["manifest.json"])
        _set(m, rng.choice(ppaths), rng.choice(_VALUES))
        out = tmp / f"x{i}.ptx"
        with zipfile.ZipFile(out, "w") as z:
            for n, d in dict(ptx, **{"manifest.json": json.dumps(m).encode()}).items():
                z.writestr(n, d)
        yield f"ptx edit {i}", out


def test_damaged_packages_raise_only_portable_errors(device, package, tmp_path):
    """Every damaged file either loads and runs or raises a PortableError; the process stays usable after."""
    t0 = time.perf_counter()
    refused = ran = 0
    for name, path in _corrupted(package, tmp_path):
        try:
            g = portable.load(path, device=device, trust="any")
            try:
                g(X)
                ran += 1
            finally:
                g.close()
        except portable.PortableError:
            refused += 1
        except Exception as e:
            raise AssertionError(f"{name}: {type(e).__name__}: {e}") from e
    assert refused > 100 and ran > 5, (refused, ran)
    good = portable.load(package, device=device)
    np.testing.assert_allclose(good(X)[0], WANT, rtol=1e-6)
    good.close()
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("bad", [[[1, 2], [3]], object(), "text", np.array(["a"] * 60).reshape(6, 10)])
def test_bad_inputs_raise_shape_mismatch(device, package, bad):
    g = portable.load(package, device=device)
    with pytest.raises(errors.ShapeMismatch, match="input 0"):
        g(bad)
    g.close()


def test_cache_key_takes_lone_surrogates():
    from portable import cache

    assert cache.key("a\ud800b", {}, ("vulkan",)) != cache.key("a\ud801b", {}, ("vulkan",))
    assert cache.key("plain", {}, ("vulkan",)) == cache.key("plain", {}, ("vulkan",))
