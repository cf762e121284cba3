"""Runs fuzz inputs one at a time for tests/fuzz/harness.py: reads a length-prefixed pickle per input from stdin,
writes one JSON line per outcome to stdout. A crash or hang kills only this process; the harness starts another."""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
import tempfile
import warnings

import numpy as np

MAX_INPUT_ELEMENTS = 1 << 22  # a mutated model may declare inputs of billions of elements: the caller's memory


class TooLarge(Exception):
    """An input past the worker's size bound (classified, not run)."""


def _inputs(g, rng):
    out = []
    if sum(int(np.prod(s.shape, dtype=object)) for s in g.inputs) > MAX_INPUT_ELEMENTS:
        raise TooLarge
    for sig in g.inputs:
        dt = np.dtype(sig.dtype)
        if dt.kind == "f":
            out.append(rng.standard_normal(sig.shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, sig.shape).astype(dt))
        else:
            out.append(rng.integers(-3, 4, sig.shape).astype(dt))
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or b.dtype.kind in "fc":
        return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-3, atol=1e-4, equal_nan=True))
    return bool(np.array_equal(a, b))


def one(kind: str, data: bytes, device: str, tmp: str) -> dict:
    import portable

    rng = np.random.default_rng(0)
    if kind == "onnx":
        g = portable.compile(data, device=device)
        xs = _inputs(g, rng)
        got = g(*xs)
        g.close()
        try:
            import onnxruntime as ort

            sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
            want = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
        except Exception:  # noqa: BLE001 - onnxruntime refuses the model or its inputs: no reference to compare
            return {"outcome": "ok", "compared": False}
        if len(want) != len(got) or not all(_same(w, o) for w, o in zip(want, got)):
            return {"outcome": "wrong", "detail": "differs from onnxruntime"}
        return {"outcome": "ok", "compared": True}
    if kind == "mlir":
        g = portable.compile(data.decode("utf-8", "surrogateescape"), device=device)
        g(*_inputs(g, rng))
        g.close()
        return {"outcome": "ok", "compared": False}
    if kind == "package":
        path = os.path.join(tmp, "fuzz.ptpk")
        with open(path, "wb") as f:
            f.write(data)
        g = portable.load(path, device=device, trust="any")  # the plan checks are what is fuzzed here
        g(*_inputs(g, rng))
        g.close()
        return {"outcome": "ok", "compared": False}
    if kind == "package-kernel":
        path = os.path.join(tmp, "fuzz.ptpk")
        with open(path, "wb") as f:
            f.write(data)
        g = portable.load(path, device=device)  # default trust: an edited package is not built here
        g.close()
        return {"outcome": "wrong", "detail": "a package with an edited kernel loaded with the default trust"}
    raise ValueError(kind)


def main() -> None:
    device = sys.argv[1]
    warnings.simplefilter("ignore")
    import portable

    tmp = tempfile.mkdtemp(prefix="portable-fuzz-")
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but outcomes on the pipe
    src = sys.stdin.buffer
    while True:
        head = src.read(4)
        if len(head) < 4:
            return
        kind, data = pickle.loads(src.read(struct.unpack("<I", head)[0]))
        try:
            res = one(kind, data, device, tmp)
        except TooLarge:
            res = {"outcome": "ok", "compared": False, "detail": "compiled; its inputs are too large to run here"}
        except portable.PortableError as e:
            res = {"outcome": "clean", "error": type(e).__name__, "detail": str(e)[:300]}
        except (Exception, RecursionError) as e:  # noqa: BLE001 - what the fuzz run looks for
            res = {"outcome": "foreign", "error": type(e).__name__, "detail": str(e)[:300]}
        out.write(json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
