"""Trust (issue 34): the content hash is no signature, so a package runs only pinned (expect_hash), signed by a
trusted key, built here by this user, or with trust="any"; and the CLI's keygen, sign and verify."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
from package_edits import WANT, G, X, package_fixture  # noqa: F401 - package_fixture: the `package` fixture
from package_edits import edit_plans as _edit_plans
from package_edits import package_entries as _entries
from package_edits import write_package as _write

import portable
from portable import errors
from portable.package import Package, build


def test_expect_hash_pins_a_package(package, tmp_path):
    good = Package(package).content_hash
    assert Package(package, expect_hash=good).content_hash == good
    with pytest.raises(errors.UnpinnedPackage, match="is not the pinned"):
        Package(package, expect_hash="0" * 64)
    other = tmp_path / "other.ptpk"
    build(G, ["vulkan:generic"], other)
    with pytest.raises(errors.UnpinnedPackage):
        Package(other, expect_hash=good)


def test_load_with_expect_hash(device, package, tmp_path):
    good = Package(package).content_hash
    g = portable.load(package, device=device, expect_hash=good)
    np.testing.assert_allclose(g(X)[0], WANT, rtol=1e-6)
    assert g.trusted_as == "pinned"
    g.close()
    with pytest.raises(errors.UnpinnedPackage, match="is not the pinned"):
        portable.load(package, device=device, expect_hash="f" * 64)
    ptx = tmp_path / "g.ptx"
    Package(package).executable(Package(package).targets[0]).save(ptx)
    with pytest.raises(errors.UnpinnedPackage, match="sha256 .* is not the pinned"):  # a saved Executable: its file
        portable.load(ptx, device=device, expect_hash=good)


@pytest.fixture
def elsewhere(monkeypatch, tmp_path):
    """As on another host: a cache directory of its own, so nothing counts as built by this user."""
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("PORTABLE_TRUSTED_KEYS", raising=False)


def _runs(g) -> bool:
    try:
        return bool(np.allclose(g(X)[0], WANT, rtol=1e-6))
    finally:
        g.close()


def test_unvouched_packages_are_refused(device, package, tmp_path, elsewhere):
    """The content hash is no signature: a package built elsewhere runs only pinned, signed by a trusted key or with
    trust="any"; the error names every way."""
    with pytest.raises(errors.UntrustedPackage, match="not pinned, carries no signature") as refused:
        portable.load(package, device=device)
    assert all(way in str(refused.value) for way in ("`portable sign`", "`expect_hash=`", '`trust="any"`'))
    assert _runs(portable.load(package, device=device, trust="any"))
    with pytest.raises(errors.InvalidArgument, match="trust='anything'"):
        portable.load(package, device=device, trust="anything")


def test_files_built_here_load_as_before(device, package, tmp_path):
    """What this user's portable wrote (packages, saved Executables) loads with no flag, as the README shows; the
    same file edited (and rehashed, as an attacker can) does not."""
    g = portable.load(package, device=device)
    assert g.trusted_as == "built here"
    ptx = tmp_path / "g.ptx"
    g.executable.save(ptx)
    assert _runs(g)
    g = portable.load(ptx, device=device, trust="verified")
    assert g.trusted_as == "built here"
    g.close()
    edited = _edit_plans(package, tmp_path / "edited.ptpk", lambda t: t.__setitem__("profile", t["profile"]))
    assert Package(edited).content_hash == Package(package).content_hash  # same content, another file
    bumped = _edit_plans(package, tmp_path / "bumped.ptpk", lambda t: t["profile_match"].update(x=1))
    with pytest.raises(errors.UntrustedPackage):
        portable.load(bumped, device=device)
    with zipfile.ZipFile(tmp_path / "h.ptx", "w", zipfile.ZIP_STORED) as z:  # the same entries, other bytes
        for n, d in _entries(ptx).items():
            z.writestr(n, d)
    with pytest.raises(errors.UntrustedPackage, match="h.ptx: refusing to run its kernels"):
        portable.load(tmp_path / "h.ptx", device=device)
    assert _runs(portable.load(tmp_path / "h.ptx", device=device, trust="any"))


def test_signed_packages(device, package, tmp_path, elsewhere, monkeypatch):
    """ed25519 over the content hash: a package signed by a trusted key runs, from the key given to load or from
    PORTABLE_TRUSTED_KEYS; another key's signature or a signature over edited contents does not count."""
    pytest.importorskip("cryptography")
    from portable import trust
    from portable.package import sign

    key, pub = trust.generate_key(tmp_path / "k")
    _, other_pub = trust.generate_key(tmp_path / "o")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    signed = tmp_path / "signed.ptpk"
    signed.write_bytes(package.read_bytes())
    kid = sign(signed, key)
    assert Package(signed).content_hash == Package(package).content_hash
    for keys in ([pub], [pub.read_text()], [trust.public_key(pub)]):
        g = portable.load(signed, device=device, trusted_keys=keys)
        assert g.trusted_as == f"signed by {kid}" and _runs(g)
    with pytest.raises(errors.UntrustedPackage, match=f"signed by key\\(s\\) {kid}, none of which you trust"):
        portable.load(signed, device=device, trusted_keys=[other_pub])
    monkeypatch.setenv("PORTABLE_TRUSTED_KEYS", str(tmp_path / "nothing.pub") + ":" + str(pub))
    with pytest.raises(errors.InvalidArgument):  # a key file that is not there is an error, not silently skipped
        portable.load(signed, device=device)
    monkeypatch.setenv("PORTABLE_TRUSTED_KEYS", str(pub))
    assert _runs(portable.load(signed, device=device))
    # The signature of one package moved onto another (edited, rehashed) package signs nothing there.
    edited = _edit_plans(signed, tmp_path / "moved.ptpk", lambda t: t["profile_match"].update(x=1))
    entries = _entries(edited)
    assert "signatures.json" in entries
    with pytest.raises(errors.UntrustedPackage, match="none of which you trust"):
        portable.load(edited, device=device)
    # A forged record (right key, wrong bytes) is refused too, and malformed ones are a PackageError.
    rec = json.loads(entries["signatures.json"])
    rec["signatures"][0]["signature"] = "00" * 64
    forged = _write(tmp_path / "forged.ptpk", dict(_entries(signed), **{"signatures.json": json.dumps(rec).encode()}),
                    rehash=False)
    with pytest.raises(errors.UntrustedPackage):
        portable.load(forged, device=device)
    bad = _write(tmp_path / "bad.ptpk", dict(_entries(signed), **{"signatures.json": b"{}"}), rehash=False)
    with pytest.raises(errors.PackageError, match="signatures.json is malformed"):
        portable.load(bad, device=device)


def test_cli_keygen_sign_verify_and_signed_compile(tmp_path, elsewhere, capsys):
    pytest.importorskip("cryptography")
    from portable.cli import main as cli

    key = tmp_path / "k"
    assert cli(["keygen", str(key)]) == 0
    assert cli(["keygen", str(key)]) == 2  # never overwritten
    src = tmp_path / "g.mlir"
    src.write_text(G.to_mlir())
    out = tmp_path / "g.ptpk"
    assert cli(["compile", str(src), "--target", "opencl:pocl", "-o", str(out), "--sign-key", str(key)]) == 0
    printed = capsys.readouterr().out
    assert f"content hash {Package(out).content_hash}" in printed and "signed by" in printed
    assert cli(["verify", str(out), "--trusted-key", f"{key}.pub"]) == 0
    assert "trusted: signed by" in capsys.readouterr().out
    (tmp_path / "elsewhere").mkdir(exist_ok=True)
    import shutil

    shutil.rmtree(tmp_path / "elsewhere")  # as on another host: not built there
    assert cli(["verify", str(out)]) == 2
    assert "UntrustedPackage" in capsys.readouterr().err
    plain = tmp_path / "p.ptpk"
    plain.write_bytes(Package(out).path.read_bytes())
    assert cli(["sign", str(plain), "--key", str(key)]) == 0
    assert cli(["verify", str(plain), "--expect-hash", Package(out).content_hash]) == 0
