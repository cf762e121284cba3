"""Who may hand this process kernels to run.

A package's content hash detects damage, not tampering: anyone who edits a package can compute its hash again. So
`portable.load` runs the kernels of a file only when the caller vouches for it in one of these ways:
- pinned: `expect_hash` is the hash `portable compile` printed (or `portable verify` prints for a file you trust);
- signed: the package carries an ed25519 signature over its content hash by a key the caller trusts (`trusted_keys`
  of load, or key files named by PORTABLE_TRUSTED_KEYS); `portable keygen` / `portable sign` / `compile --sign-key`;
- built here: this user's portable wrote the file (its hash is recorded under the cache directory, which already
  holds compiled kernels this process runs unchecked, so it is the same trust domain);
- or explicitly any: `trust="any"`, for files whose origin the caller has checked some other way.

Signing needs the `cryptography` package (extra `sign`); verifying pinned or locally built files does not.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import config
from .errors import InvalidArgument, PackageError, UntrustedPackage

SIGNATURES = "signatures.json"  # the zip entry: outside the content hash, which it signs
MAX_SIGNATURES_BYTES = 64 << 10
_DOMAIN = b"portable package signature v1\0"  # signed bytes = domain + content hash: a signature means nothing else
TRUST_MODES = ("verified", "any")
MAX_RECORDED = 20000  # digests of files built here, oldest dropped beyond this


# ---- keys ----------------------------------------------------------------------------------------------------
def _crypto():
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise PackageError("signing and checking signatures needs the `cryptography` package: "
                           "pip install 'portable[sign]' (or pip install cryptography)") from None
    return ed25519, serialization


def key_id(public: bytes) -> str:
    """A short name for a public key: the first 16 hex digits of its sha256."""
    return hashlib.sha256(public).hexdigest()[:16]


def generate_key(path: str | Path) -> tuple[Path, Path]:
    """A new ed25519 key pair: the private key at `path` (PEM, readable by its owner only), the public key at
    `path`.pub (one line, `ed25519 <hex>`: what callers pass as a trusted key). Refuses to overwrite."""
    ed25519, serialization = _crypto()
    path = Path(path)
    pub_path = path.with_name(path.name + ".pub")
    for p in (path, pub_path):
        if p.exists():
            raise InvalidArgument(f"{p} exists: choose another name (a key is never overwritten)")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pub_path.write_text(f"ed25519 {raw.hex()}\n")
    return path, pub_path


def _private_key(path: str | Path):
    ed25519, serialization = _crypto()
    try:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise PackageError(f"{path}: not a readable private key ({type(e).__name__}: {str(e)[:120]}); make one "
                           f"with `portable keygen KEYFILE`") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise PackageError(f"{path}: a {type(key).__name__}, not an ed25519 key; make one with `portable keygen`")
    return key


def public_key(spec: Any) -> bytes:
    """The 32 raw bytes of an ed25519 public key given as raw bytes, `ed25519 <hex>` / bare hex text, a PEM public
    key, or the path of a file holding one of those."""
    if isinstance(spec, (bytes, bytearray)) and len(spec) == 32:
        return bytes(spec)
    text = spec.decode("ascii", "replace") if isinstance(spec, (bytes, bytearray)) else spec
    if isinstance(text, os.PathLike) or (isinstance(text, str) and "\n" not in text.strip() and
                                         Path(text).is_file() and not _hex_key(text)):
        try:
            text = Path(text).read_text(errors="replace")
        except OSError as e:
            raise InvalidArgument(f"trusted key {str(spec)[:80]}: {e}") from None
    if isinstance(text, str):
        raw = _hex_key(text)
        if raw is not None:
            return raw
        if "BEGIN PUBLIC KEY" in text:
            ed25519, serialization = _crypto()
            try:
                key = serialization.load_pem_public_key(text.encode())
            except ValueError as e:
                raise InvalidArgument(f"trusted key: not a readable PEM public key ({e})") from None
            if isinstance(key, ed25519.Ed25519PublicKey):
                return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    raise InvalidArgument(f"trusted key {str(spec)[:80]!r} is not an ed25519 public key: pass the `ed25519 <hex>` "
                          f"line of a .pub file `portable keygen` wrote, or that file's path")


def _hex_key(text: str) -> bytes | None:
    words = text.strip().split()
    word = words[1] if len(words) == 2 and words[0] == "ed25519" else words[0] if len(words) == 1 else ""
    try:
        raw = bytes.fromhex(word)
    except ValueError:
        return None
    return raw if len(raw) == 32 else None


def trusted_keys(extra: Iterable[Any] | None = None) -> list[bytes]:
    """Keys the caller passed plus those of PORTABLE_TRUSTED_KEYS (files, or folders of *.pub files)."""
    keys = [public_key(k) for k in (extra or ())]
    for p in config.trusted_key_paths():
        files = sorted(p.glob("*.pub")) if p.is_dir() else [p]
        keys += [public_key(f) for f in files]
    return keys


# ---- signatures ------------------------------------------------------------------------------------------------
def sign(content_hash: str, key_path: str | Path) -> dict:
    """A signature record over `content_hash` with the private key at `key_path`."""
    _, serialization = _crypto()
    key = _private_key(key_path)
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return {"key": raw.hex(), "signature": key.sign(_DOMAIN + content_hash.encode()).hex()}


def parse_signatures(data: bytes, what: str) -> list[dict]:
    """The records of a package's signatures entry; PackageError unless it is what `sign` writes."""
    try:
        records = json.loads(data)["signatures"]
        if not isinstance(records, list) or len(records) > 64:
            raise TypeError(records)
        out = []
        for r in records:
            key, sig = bytes.fromhex(r["key"]), bytes.fromhex(r["signature"])
            if len(key) != 32 or len(sig) != 64:
                raise ValueError(r)
            out.append({"key": key.hex(), "signature": sig.hex()})
        return out
    except (ValueError, TypeError, KeyError, RecursionError, AttributeError):  # UnicodeDecodeError is a ValueError
        raise PackageError(f"{what}: its {SIGNATURES} is malformed; sign the package again with `portable sign`") \
            from None


def signed_by(content_hash: str, records: list[dict], keys: list[bytes]) -> str | None:
    """The id of the first trusted key with a valid signature over `content_hash`, else None."""
    wanted = {k.hex() for k in keys}
    for r in records:
        if r["key"] not in wanted:
            continue
        ed25519, _ = _crypto()
        from cryptography.exceptions import InvalidSignature

        try:
            ed25519.Ed25519PublicKey.from_public_bytes(bytes.fromhex(r["key"])).verify(
                bytes.fromhex(r["signature"]), _DOMAIN + content_hash.encode())
        except InvalidSignature:
            continue  # a forged or damaged signature vouches for nothing; another may still verify
        return key_id(bytes.fromhex(r["key"]))
    return None


# ---- files built here ------------------------------------------------------------------------------------------
def _record_dir() -> Path:
    return config.cache_dir() / "built"


def remember(digest: str) -> None:
    """Record that this user's portable wrote the file of this digest (a fault only warns: the file is then
    loaded with expect_hash like any other)."""
    import warnings

    d = _record_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        (d / digest).touch()
        names = os.listdir(d)
        if len(names) > MAX_RECORDED:
            old = sorted(names, key=lambda n: (d / n).stat().st_mtime)[: len(names) - MAX_RECORDED]
            for n in old:
                (d / n).unlink(missing_ok=True)
    except OSError as e:
        warnings.warn(f"could not record {digest[:16]} as built here ({e}); load it with expect_hash", stacklevel=3)


def built_here(digest: str) -> bool:
    return len(digest) == 64 and all(c in "0123456789abcdef" for c in digest) and (_record_dir() / digest).is_file()


def file_digest(path: str | Path) -> str:
    """sha256 of a file, read in chunks (a saved Executable is pinned by it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


# ---- the decision ----------------------------------------------------------------------------------------------
def require(what: str, digest: str, *, pinned: bool, signatures: list[dict] | None, keys: Iterable[Any] | None,
            trust: str) -> str:
    """Why `what` may run ('pinned', 'signed by <key id>', 'built here', 'trust=any'); UntrustedPackage if the
    caller vouched for it in no way. `signatures` is None for a saved Executable, which cannot be signed."""
    if trust not in TRUST_MODES:
        raise InvalidArgument(f"trust={trust!r}: one of {TRUST_MODES} ('any' loads files whose origin you checked "
                              f"yourself)")
    if pinned:
        return "pinned"
    if signatures:
        by = signed_by(digest, signatures, trusted_keys(keys))
        if by:
            return f"signed by {by}"
    if built_here(digest):
        return "built here"
    if trust == "any":
        return "trust=any"
    signers = ", ".join(key_id(bytes.fromhex(r["key"])) for r in signatures or [])
    if signers:
        why, how = (f"it is signed by key(s) {signers}, none of which you trust",
                    "pass the signer's public key (its .pub file) as `trusted_keys=[...]` or in "
                    "PORTABLE_TRUSTED_KEYS, ")
    else:
        why = "it is not pinned, carries no signature and was not built by this user"
        how = "" if signatures is None else "have its builder sign it (`portable sign`) and trust their key, "
    raise UntrustedPackage(
        f"{what}: refusing to run its kernels: {why}. They would run in this process, so vouch for the file: "
        f"{how}pin it with `expect_hash=` (the hash `portable compile` printed where it was built; `portable verify "
        f"{what}` prints this file's), or pass `trust=\"any\"` if you checked its origin another way")
