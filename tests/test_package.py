"""Deployable packages: build for several targets, load the best one per device, refuse damaged or foreign
files with a clear error, `portable compile`, and a run with no compiler (and no device_profiles/) on the host."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import portable
from portable import config
from portable.backend import DeviceInfo
from portable.cli import main as cli
from portable.package import FORMAT_VERSION, Package, build

ROOT = Path(__file__).resolve().parent.parent


def _graph():
    g = portable.Graph("pkg")
    x = g.input((6, 10))
    w = g.constant(np.linspace(-2, 2, 10, dtype=np.float32))
    g.output(g.relu(g.add(g.mul(x, x), w)))
    return g


G = _graph()
X = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
TARGETS = ["vulkan:lavapipe", "opencl:pocl", "vulkan:generic"]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pkg") / "model.ptpk"
    build(G, TARGETS, path)
    return path


def test_load_picks_the_best_target(device, package):
    exe = portable.load(package, device=device)
    np.testing.assert_allclose(exe(X)[0], G.reference(X)[0], rtol=1e-6)
    profile = exe.device.profile["name"]
    expected = f"{exe.device.info.api}:{profile}"
    assert exe.package_target == (expected if expected in TARGETS else "vulkan:generic")
    exe.close()


def test_generic_target_is_the_fallback_and_wrong_target_is_refused(device, tmp_path):
    path = tmp_path / "generic.ptpk"
    build(G, ["vulkan:generic"], path)
    if device.startswith("vulkan"):
        exe = portable.load(path, device=device)
        assert exe.package_target == "vulkan:generic"
        np.testing.assert_allclose(exe(X)[0], G.reference(X)[0], rtol=1e-6)
        exe.close()
    else:
        with pytest.raises(portable.PackageError, match=r"no target for opencl.*vulkan:generic.*--target opencl"):
            portable.load(path, device=device)


def _rewrite(src: Path, dst: Path, edit) -> None:
    with zipfile.ZipFile(src) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    edit(entries)
    with zipfile.ZipFile(dst, "w") as z:
        for n, data in entries.items():
            z.writestr(n, data)


def test_damaged_packages_give_clear_errors(package, tmp_path):
    raw = package.read_bytes()
    truncated = tmp_path / "truncated.ptpk"
    truncated.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(portable.PackageError, match="truncated or corrupt"):
        Package(truncated)
    flipped = bytearray(raw)
    flipped[len(raw) // 3] ^= 0xFF
    corrupt = tmp_path / "corrupt.ptpk"
    corrupt.write_bytes(bytes(flipped))
    with pytest.raises(portable.PackageError, match="corrupt"):
        Package(corrupt)

    def bump(e):
        m = json.loads(e["manifest.json"])
        m["version"] = FORMAT_VERSION + 1
        e["manifest.json"] = json.dumps(m).encode()

    newer = tmp_path / "newer.ptpk"
    _rewrite(package, newer, bump)
    with pytest.raises(portable.PackageError, match=f"format version {FORMAT_VERSION + 1}.*rebuild"):
        Package(newer)

    def swap_weights(e):
        name = next(n for n in e if n.startswith("weights/"))
        e[name] = e[name][:-4] + b"\0\0\0\0"  # a valid zip entry with other bytes: only the hash can tell

    tampered = tmp_path / "tampered.ptpk"
    _rewrite(package, tampered, swap_weights)
    with pytest.raises(portable.PackageError, match="content hash mismatch"):
        Package(tampered)
    with pytest.raises(portable.PackageError, match="no such file"):
        Package(tmp_path / "missing.ptpk")
    with pytest.raises(portable.PackageError, match="target 'cuda:x'"):
        build(G, ["cuda:x"], tmp_path / "bad.ptpk")


def test_cli_compile(tmp_path, capsys):
    src = tmp_path / "g.mlir"
    src.write_text(G.to_mlir())
    out = tmp_path / "g.ptpk"
    assert cli(["compile", str(src), "--target", "vulkan:lavapipe", "--target", "opencl:pocl", "-o", str(out)]) == 0
    assert "2 target(s)" in capsys.readouterr().out
    assert [str(t) for t in Package(out).targets] == ["vulkan:lavapipe", "opencl:pocl"]
    assert cli(["compile", str(src), "--target", "vulkan:nosuch", "-o", str(out)]) == 2
    assert "no device profile named 'nosuch'" in capsys.readouterr().err


RUN_PACKAGE = """
import sys, numpy as np
sys.modules["torch_mlir"] = None  # as on a host without the compiler wheel
import portable
x = np.random.default_rng(0).standard_normal((6, 10)).astype(np.float32)
w = np.linspace(-2, 2, 10, dtype=np.float32)
for device in sys.argv[3:]:  # another host: the package pinned by the hash its builder printed
    exe = portable.load(sys.argv[1], device=device, expect_hash=sys.argv[2])
    out, = exe(x)
    assert np.allclose(out, np.maximum(x * x + w, 0), rtol=1e-6), device
    print(device, exe.package_target, "OK")
print("MLIR", sorted(m for m, v in sys.modules.items() if "mlir" in m and v is not None))
"""


def test_package_runs_without_compiler_or_profiles(package, tmp_path):
    """In a fresh interpreter with torch_mlir blocked and device_profiles/ hidden: the package's own rules pick
    targets."""
    from conftest import AVAILABLE

    script = "import portable.profiles as p, pathlib; p.PROFILE_DIR = pathlib.Path('/nonexistent')\n" + RUN_PACKAGE
    done = subprocess.run([sys.executable, "-c", script, str(package), Package(package).content_hash, *AVAILABLE],
                          check=False, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PORTABLE_CACHE_DIR=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("OK") == len(AVAILABLE) and "MLIR []" in done.stdout


RUNTIME_WHEELS = ["numpy", "vulkan", "cffi", "pycparser", "pyopencl", "pytools", "platformdirs", "siphash24",
                  "typing_extensions"]


@pytest.mark.skipif(not config.test_fresh_venv(), reason="slow (a new venv + pip); set PORTABLE_TEST_FRESH_VENV=1")
def test_package_in_a_fresh_venv_without_mlir(package, tmp_path):
    """A clean virtual environment with only the runtime's wheels and this package (no torch-mlir) runs it."""
    from importlib.metadata import version

    from conftest import AVAILABLE

    venv, wheels = tmp_path / "venv", tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    pins = [f"{name}=={version(name)}" for name in RUNTIME_WHEELS]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d",
                    str(wheels), *pins], check=True, timeout=300)
    src = tmp_path / "src"  # a copy, so the wheel build leaves nothing in the checkout
    shutil.copytree(ROOT / "portable", src / "portable", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(src)],
                   check=True, timeout=300)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", *map(str, wheels.glob("*.whl"))],
                   check=True, timeout=300)
    listed = subprocess.run([str(py), "-m", "pip", "list"], capture_output=True, text=True, check=True).stdout
    assert "torch" not in listed.lower() and "mlir" not in listed.lower(), listed
    done = subprocess.run([str(py), "-c", RUN_PACKAGE, str(package), Package(package).content_hash, *AVAILABLE],
                          check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PORTABLE_CACHE_DIR=str(tmp_path / "c")))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("OK") == len(AVAILABLE) and "MLIR []" in done.stdout, done.stdout


def test_every_single_byte_flip_is_refused_or_harmless(package, tmp_path):
    """Damage anywhere (headers, compressed data, manifest) gives PackageError, never another exception."""
    raw = package.read_bytes()
    for at in range(0, len(raw), max(1, len(raw) // 60)):
        bad = bytearray(raw)
        bad[at] ^= 0x5A
        path = tmp_path / f"flip{at}.ptpk"
        path.write_bytes(bytes(bad))
        try:
            Package(path)
        except portable.PackageError:
            pass


def _mm_graph():
    g = portable.Graph("mm")
    a, b = g.input((128, 96)), g.input((96, 160))
    g.output(g.matmul(a, b))
    return g


def _pocl_info(**limits) -> DeviceInfo:
    return DeviceInfo(api="opencl", index=0, name="pthread-x86-64", driver="Portable Computing Language",
                      driver_version="", vendor_id=0x10006, device_id=0, device_type="cpu", limits=limits)


def test_pocl_packages_carry_the_avx512_tile(tmp_path):
    """A PoCL target comes with a second one compiled for 16-lane hosts (device_profiles/pocl.toml [package] variants:
    the 8x32 tile); a device gets it only where it reports those 16 lanes. An elementwise graph, whose kernels
    are the same either way, gets no second target."""
    path = tmp_path / "mm.ptpk"
    build(_mm_graph(), ["opencl:pocl"], path)
    pkg = Package(path)
    assert [str(t) for t in pkg.targets] == ["opencl:pocl", "opencl:pocl[native_float_vector_width=16]"]
    assert pkg.select(_pocl_info(native_float_vector_width=16), "pocl") == pkg.targets[1]
    assert pkg.select(_pocl_info(native_float_vector_width=8), "pocl") == pkg.targets[0]
    assert pkg.select(_pocl_info(), None) == pkg.targets[0]
    plain = tmp_path / "ew.ptpk"
    build(G, ["opencl:pocl"], plain)
    assert [str(t) for t in Package(plain).targets] == ["opencl:pocl"]


def test_every_pocl_target_runs(device, tmp_path):
    """Both PoCL targets of a package give numpy's product on a live OpenCL device, whatever its lanes."""
    from portable.api import CompiledGraph
    from portable.devices import open_device

    if not device.startswith("opencl"):
        pytest.skip("PoCL targets are OpenCL C")
    path = tmp_path / "mm.ptpk"
    build(_mm_graph(), ["opencl:pocl"], path)
    pkg = Package(path)
    live = open_device(device)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((128, 96)).astype(np.float32), rng.standard_normal((96, 160)).astype(np.float32)
    for t in pkg.targets:
        exe = CompiledGraph(pkg.executable(t), live)
        np.testing.assert_allclose(exe(a, b)[0], a @ b, rtol=1e-4, atol=1e-4, err_msg=str(t))
        exe.close()


def test_targets_share_their_weights_and_large_floats_are_stored(device, tmp_path, monkeypatch):
    """A weight every target holds in the same layout is one array while the package is built (a later target's
    compile takes the earlier one's instead of copying it out of its module) and one entry in the file, stored
    uncompressed as a large float array; the package reads back to the values compiled."""
    import portable.package as package_mod

    g = portable.Graph("shared")
    x = g.input((4, 256))
    w = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)  # 128 KiB
    g.output(g.matmul(x, g.constant(w)))
    path = tmp_path / "shared.ptpk"
    seen = []
    write = package_mod.write
    monkeypatch.setattr(package_mod, "write", lambda p, built, key=None: seen.append(built) or write(p, built, key))
    build(g, ["vulkan:generic", "opencl:generic"], path)
    (first, _), (second, _) = seen[0]
    big = [a for a in first.constants.values() if a.nbytes > 1 << 16]
    assert big and all(any(np.shares_memory(a, b) for b in second.constants.values()) for a in big)
    manifest = json.loads(zipfile.ZipFile(path).read("manifest.json"))
    names = [set(t["weights"].values()) for t in manifest["targets"]]
    assert names[0] & names[1], names
    with zipfile.ZipFile(path) as z:
        stored = [i for i in z.infolist() if i.filename.startswith("weights/") and i.file_size > 1 << 16]
        assert stored and all(i.compress_type == zipfile.ZIP_STORED for i in stored)
    xv = np.random.default_rng(2).standard_normal((4, 256)).astype(np.float32)
    exe = portable.load(path, device=device)
    np.testing.assert_allclose(exe(xv)[0], xv @ w, rtol=1e-4, atol=1e-4)
    exe.close()
