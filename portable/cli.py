"""`portable devices`, `demo`, `compile`, `keygen`, `sign`, `verify`, `bench`, `conformance` and `zoo`."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _devices(_args) -> int:
    from .devices import devices

    found, failures = devices()
    if not found:
        print("no Vulkan or OpenCL device found")
    for d in found:
        print(d)
    for f in failures:
        print(f"driver not loaded: {f}")
    return 0 if found else 1


def _demo(args) -> int:
    """Compile and run a small fused graph (matmul + bias + relu, then a row softmax) and check it."""
    import portable

    g = portable.Graph("demo")
    a = g.input((256, 512), "float32")
    b = g.input((512, 256), "float32")
    bias = g.input((256,), "float32")
    h = g.relu(g.add(g.matmul(a, b), bias))
    g.output(g.softmax(h, axis=-1))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s.shape).astype(np.float32) * 0.1 for s in (a, b, bias)]
    t0 = time.perf_counter()
    exe = portable.compile(g, device=args.device)
    t1 = time.perf_counter()
    (out,) = exe(*xs)
    t2 = time.perf_counter()
    runs = 5
    for _ in range(runs):
        exe(*xs)
    t3 = time.perf_counter()
    (ref,) = g.reference(*xs)
    err = float(np.max(np.abs(out - ref)))
    info = exe.device.info
    print(f"device:  {info.uri} {info.name} ({info.driver}), profile {exe.device.profile['name']}")
    print(f"kernels: {len(exe.executable.kernels)} for {len(exe.executable.dispatches)} dispatches")
    print(f"compile: {(t1 - t0) * 1e3:.1f} ms (cached after the first run)")
    print(f"first run: {(t2 - t1) * 1e3:.1f} ms, then {(t3 - t2) / runs * 1e3:.2f} ms per run")
    ok = err < 1e-4
    print(f"check:   max abs error vs numpy {err:.2e} -> {'OK' if ok else 'WRONG'}")
    return 0 if ok else 1


def _compile(args) -> int:
    """Compile a model or MLIR file once per --target into one deployable package (.ptpk)."""
    from pathlib import Path

    from .package import Package, build

    src = Path(args.model)
    if not src.exists():
        print(f"error: {src}: no such file", file=sys.stderr)
        return 2
    graph = src.read_text() if src.suffix == ".mlir" else str(src)
    try:
        shapes = parse_input_shapes(args.input_shape or [])
    except ValueError as e:
        print(f"error: --input-shape: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    digest = build(graph, args.target, args.output, input_shapes=shapes or None, sign_key=args.sign_key)
    pkg = Package(args.output)
    size = Path(args.output).stat().st_size
    signed = f", signed by {_key_ids(pkg)}" if pkg.signatures else ""
    print(f"wrote {args.output}: {len(pkg.targets)} target(s) ({', '.join(map(str, pkg.targets))}), "
          f"{size / 1024:.1f} KiB{signed}, in {time.perf_counter() - t0:.1f} s\ncontent hash {digest} "
          f"(pin it: portable.load(path, expect_hash=...))")
    return 0


def _key_ids(pkg) -> str:
    from .trust import key_id

    return ", ".join(key_id(bytes.fromhex(r["key"])) for r in pkg.signatures)


def _keygen(args) -> int:
    from .trust import generate_key, key_id, public_key

    key, pub = generate_key(args.key)
    print(f"wrote private key {key} (keep it secret) and public key {pub} (key id {key_id(public_key(pub))}): "
          f"callers pass the .pub file as portable.load(..., trusted_keys=[...]) or in PORTABLE_TRUSTED_KEYS")
    return 0


def _sign(args) -> int:
    from .package import sign

    print(f"signed {args.package} with key {sign(args.package, args.key)}")
    return 0


def _verify(args) -> int:
    """Print a package's content hash and signers, and whether portable.load would run it for these keys."""
    from . import trust
    from .package import Package

    pkg = Package(args.package, expect_hash=args.expect_hash)
    print(f"{args.package}: content hash {pkg.content_hash}")
    print(f"signed by: {_key_ids(pkg) or 'nobody'}")
    why = trust.require(args.package, pkg.content_hash, pinned=args.expect_hash is not None,
                        signatures=pkg.signatures, keys=args.trusted_key, trust="verified")
    print(f"trusted: {why}")
    return 0


def parse_input_shapes(specs: list[str]) -> dict:
    """--input-shape NAME=1,3,224,224 (or POSITION=...) as {name or position: shape}."""
    out: dict = {}
    for spec in specs:
        name, sep, dims = spec.rpartition("=")
        if not sep or not name:
            raise ValueError(f"{spec!r} is not NAME=D0,D1,... (e.g. input=1,3,224,224, or 0=1,3,224,224)")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            raise ValueError(f"{spec!r}: sizes must be integers, e.g. input=1,3,224,224") from None
        out[int(name) if name.isdigit() else name] = shape
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="portable")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("devices", help="list every Vulkan and OpenCL device and its profile").set_defaults(fn=_devices)
    d = sub.add_parser("demo", help="run a small graph on a device and check it against numpy")
    d.add_argument("--device", default="vulkan:0")
    d.set_defaults(fn=_demo)
    c = sub.add_parser("compile", help="compile model.onnx or graph.mlir into a package for one or more targets")
    c.add_argument("model", help="an ONNX model (.onnx) or MLIR text of linalg on tensors (.mlir)")
    c.add_argument("--target", action="append", required=True,
                   help="API:PROFILE, e.g. vulkan:lavapipe, opencl:pocl, vulkan:generic (repeatable)")
    c.add_argument("-o", "--output", required=True, help="the package file to write (.ptpk)")
    c.add_argument("--input-shape", action="append", metavar="NAME=D0,D1,...",
                   help="an ONNX model's input shape (by input name or position), pinning its dynamic dims; "
                        "dims not given take the model's sizes, else 1 (repeatable)")
    c.add_argument("--sign-key", metavar="KEYFILE", help="sign the package with this private key (portable keygen)")
    c.set_defaults(fn=_compile)
    k = sub.add_parser("keygen", help="make an ed25519 key pair for signing packages (KEYFILE and KEYFILE.pub)")
    k.add_argument("key", metavar="KEYFILE")
    k.set_defaults(fn=_keygen)
    s = sub.add_parser("sign", help="add a signature to a package with a private key from `portable keygen`")
    s.add_argument("package")
    s.add_argument("--key", required=True, metavar="KEYFILE")
    s.set_defaults(fn=_sign)
    v = sub.add_parser("verify", help="check a package, print its content hash and signers, and whether "
                                      "portable.load would run it (exit 2 if not)")
    v.add_argument("package")
    v.add_argument("--trusted-key", action="append", metavar="PUBFILE", help="a public key you trust (repeatable)")
    v.add_argument("--expect-hash", help="the content hash you expect")
    v.set_defaults(fn=_verify)
    from .bench.cli import add_parser as add_bench_parser

    add_bench_parser(sub)
    from .conformance.cli import add_parser as add_conformance_parser

    add_conformance_parser(sub)
    from .zoo.cli import add_parser as add_zoo_parser

    add_zoo_parser(sub)
    from .profiling import add_parser as add_profile_parser

    add_profile_parser(sub)
    from .llm.generate import add_parser as add_generate_parser

    add_generate_parser(sub)
    args = p.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded by commands that write results
    from .errors import PortableError

    try:
        return args.fn(args)
    except PortableError as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
