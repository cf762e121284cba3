"""Fuzzing portable's inputs (issue 34): ONNX models, MLIR text and packages, mutated by hypothesis strategies; each
input runs in a worker process (tests/fuzz/worker.py) under a timeout, and its outcome is one of

    ok       compiled/loaded and ran (ONNX: and matched onnxruntime where onnxruntime takes the model)
             (packages load with trust="any", so the plan checks are what is fuzzed; packages with edited kernels,
             kind package-kernel, load with the default trust and must be refused)
    clean    refused with a PortableError
    foreign  any other exception (a bug: every error a user can hit is a PortableError)
    crash    the worker died (segfault, abort)
    hang     no answer within the timeout
    wrong    ran, but differs from onnxruntime

The bounded run is tests/test_fuzz.py; the long run (figures under benchmarks/results/fuzz/<date>/):

    .venv/bin/python -m tests.fuzz.harness --examples 150 --device opencl:0 --device vulkan:0 \
        --out benchmarks/results/fuzz/$(date -u +%F)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
BAD = ("foreign", "crash", "hang", "wrong")


class Worker:
    """One worker process; restarted after a crash or a hang."""

    def __init__(self, device: str, timeout: float):
        self.device, self.timeout, self.proc = device, timeout, None

    def _start(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fuzz.worker", self.device], cwd=ROOT, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def run(self, kind: str, data: bytes) -> dict:
        import selectors

        if self.proc is None or self.proc.poll() is not None:
            self._start()
        blob = pickle.dumps((kind, data))
        try:
            self.proc.stdin.write(struct.pack("<I", len(blob)) + blob)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._dead()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(self.timeout):
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"outcome": "hang", "detail": f"no answer in {self.timeout} s"}
        line = self.proc.stdout.readline()
        if not line:
            return self._dead()
        return json.loads(line)

    def _dead(self) -> dict:
        code = self.proc.wait()
        self.proc = None
        return {"outcome": "crash", "detail": f"worker exit status {code}"}

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
            self.proc = None


# ---- seeds -----------------------------------------------------------------------------------------------------
def onnx_seeds() -> list[bytes]:
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inputs, inits=(), outputs=("y",)):
        g = helper.make_graph(nodes, "fuzz",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "w")
    idx = numpy_helper.from_array(np.array([0, 2, 1], np.int64), "i")
    return [
        model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", [2, 5])]),
        model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
              [("x", [2, 4])], [w]),
        model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], [("x", [4, 3])], [idx]),
        model([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)], [("x", [3, 4])]),
        model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]), helper.make_node("Sigmoid", ["t"], ["y"])],
              [("x", [3, 5])]),
    ]


MLIR_SEEDS = [
    """func.func @main(%a: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %r = linalg.add ins(%a, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}""",
    """func.func @main(%a: tensor<4x6xf32>, %b: tensor<6x5xf32>) -> tensor<4x5xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x5xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x5xf32>) -> tensor<4x5xf32>
  %r = linalg.matmul ins(%a, %b : tensor<4x6xf32>, tensor<6x5xf32>) outs(%f : tensor<4x5xf32>) -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}""",
]


def package_seed(tmp: Path) -> bytes:
    import portable
    from portable.package import build

    g = portable.Graph("fuzz")
    x = g.input((6, 10))
    w = g.constant(np.linspace(-2, 2, 10, dtype=np.float32))
    g.output(g.relu(g.add(g.mul(x, x), w)))
    path = tmp / "seed.ptpk"
    build(g, ["vulkan:generic", "opencl:generic"], path)
    return path.read_bytes()


# ---- mutations ---------------------------------------------------------------------------------------------------
def flip_bits(data: bytes, flips: list[tuple[float, int]]) -> bytes:
    b = bytearray(data)
    for where, bit in flips:
        b[int(where * (len(b) - 1))] ^= 1 << bit
    return bytes(b)


FLIPS = st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), min_size=1, max_size=4)
WILD_INT = st.one_of(st.integers(-3, 6), st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**31 - 1, -(2**31), 0]))


@st.composite
def onnx_inputs(draw, seeds):
    import onnx

    data = draw(st.sampled_from(seeds))
    how = draw(st.sampled_from(["bits", "attribute", "shape"]))
    if how == "bits":
        return flip_bits(data, draw(FLIPS))
    m = onnx.load_from_string(data)
    if how == "attribute":
        attrs = [a for n in m.graph.node for a in n.attribute if a.type == onnx.AttributeProto.INT]
        ints = [a for n in m.graph.node for a in n.attribute if a.type == onnx.AttributeProto.INTS]
        if attrs and draw(st.booleans()):
            draw(st.sampled_from(attrs)).i = draw(WILD_INT)
        elif ints:
            a = draw(st.sampled_from(ints))
            a.ints[draw(st.integers(0, len(a.ints) - 1))] = draw(WILD_INT)
        else:
            return flip_bits(data, draw(FLIPS))
    else:
        dims = [d for v in m.graph.input for d in v.type.tensor_type.shape.dim]
        dims += [d for t in m.graph.initializer for d in [t]]
        d = draw(st.sampled_from(dims))
        if isinstance(d, onnx.TensorProto):
            d.dims[0] = draw(st.one_of(st.integers(0, 9), WILD_INT))
        else:
            d.dim_value = draw(st.one_of(st.integers(0, 9), st.integers(-5, 2**40)))
    return m.SerializeToString()


@st.composite
def mlir_inputs(draw):
    import re

    text = draw(st.sampled_from(MLIR_SEEDS))
    how = draw(st.sampled_from(["number", "line", "char", "dtype"]))
    if how == "number":
        nums = list(re.finditer(r"\d+", text))
        m = draw(st.sampled_from(nums))
        text = text[:m.start()] + str(draw(st.one_of(st.integers(0, 9), st.integers(0, 2**64)))) + text[m.end():]
    elif how == "line":
        lines = text.split("\n")
        i = draw(st.integers(0, len(lines) - 1))
        lines[i:i + 1] = [] if draw(st.booleans()) else [lines[i], lines[i]]
        text = "\n".join(lines)
    elif how == "char":
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + draw(st.sampled_from(["\udcff", "\0", "}", "%", "\u00e9", "<", "x"])) + text[i + 1:]
    else:
        text = text.replace("f32", draw(st.sampled_from(["f16", "i1", "i8", "i64", "bf16", "f64", "index", "zz"])))
    return text.encode("utf-8", "surrogateescape")


def _rehash(entries: dict[str, bytes]) -> dict[str, bytes]:
    from portable.package import _content_hash

    m = json.loads(entries["manifest.json"])
    digests = {n: hashlib.sha256(d).digest() for n, d in entries.items() if n != "manifest.json"}
    try:
        m["content_hash"] = _content_hash(digests, m)
    except (TypeError, ValueError):
        return entries
    return dict(entries, **{"manifest.json": json.dumps(m).encode("utf-8", "surrogatepass")})


def _zip(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in entries.items():
            z.writestr(n, d)
    return buf.getvalue()


def _leaves(obj, path=()):
    yield path
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        yield from _leaves(v, (*path, k))


JSON_VALUES = st.one_of(WILD_INT, st.sampled_from([None, True, "x", "\ud800", [], {}, [0, 0, 0], [2**40, 1, 1], 0.5]))


@st.composite
def package_inputs(draw, seed: bytes):
    how = draw(st.sampled_from(["truncate", "bits", "plan", "plan", "entry"]))
    if how == "truncate":
        return seed[: draw(st.integers(0, len(seed) - 1))]
    if how == "bits":
        return flip_bits(seed, draw(FLIPS))
    with zipfile.ZipFile(io.BytesIO(seed)) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    if how == "entry":  # weights only: edited kernels are package_kernel_inputs
        name = draw(st.sampled_from(sorted(n for n in entries if n.startswith("weights/"))))
        entries[name] = flip_bits(entries[name], draw(FLIPS)) if draw(st.booleans()) else \
            entries[name][: draw(st.integers(0, len(entries[name])))]
        return _zip(_rehash(entries))
    m = json.loads(entries["manifest.json"])
    paths = [p for p in _leaves(m) if p and p[0] == "targets" and len(p) > 2]
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths))
        obj = m
        try:
            for p in where[:-1]:
                obj = obj[p]
            old = obj[where[-1]]
            near = isinstance(old, int) and not isinstance(old, bool)
            obj[where[-1]] = (old + draw(st.integers(-2, 2))) if near and draw(st.booleans()) else draw(JSON_VALUES)
        except (KeyError, IndexError, TypeError):
            pass
    entries["manifest.json"] = json.dumps(m).encode("utf-8", "surrogatepass")
    return _zip(_rehash(entries))


@st.composite
def package_kernel_inputs(draw, seed: bytes):
    """A kernel entry (SPIR-V or OpenCL C) damaged or edited and the hash made valid again: what an attacker ships.
    Loaded as a caller does by default, it must be refused (UntrustedPackage); under trust="any" the caller has
    accepted running the file's code, and a malformed SPIR-V module can crash a driver (lavapipe does)."""
    with zipfile.ZipFile(io.BytesIO(seed)) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    name = draw(st.sampled_from(sorted(n for n in entries if n.startswith("targets/"))))
    old = entries[name]
    entries[name] = flip_bits(old, draw(FLIPS)) if draw(st.booleans()) else old[: draw(st.integers(0, len(old) - 1))]
    if entries[name] == old:  # flips that cancel: the package is the one built here, which loads
        entries[name] = old + b" "
    return _zip(_rehash(entries))


# ---- runs --------------------------------------------------------------------------------------------------------
def corpus() -> list[tuple[str, str, bytes]]:
    """(name, kind, bytes) of every input that once crashed, hung or raised outside PortableError."""
    out = []
    for p in sorted(CORPUS.iterdir()):
        kind = {".onnx": "onnx", ".mlir": "mlir", ".ptpk": "package"}.get(p.suffix)
        if kind:
            out.append((p.name, kind, p.read_bytes()))
    return out


def fuzz(device: str, examples: int, tmp: Path, timeout: float = 60.0, seed: int = 0, log=None) -> dict:
    """Run `examples` generated inputs of each kind on `device`; returns counts per kind and outcome, and the bad
    inputs (bytes) by kind."""
    worker = Worker(device, timeout)
    counts: dict[str, Counter] = {k: Counter() for k in ("onnx", "mlir", "package", "package-kernel")}
    errors: dict[str, Counter] = {k: Counter() for k in counts}  # clean refusals by PortableError class
    bad: list[tuple[str, bytes, dict]] = []
    pkg = package_seed(tmp)
    seeds = onnx_seeds()
    opts = settings(max_examples=examples, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), phases=[__import__("hypothesis").Phase.generate])

    distinct: dict[str, set] = {k: set() for k in counts}

    def record(kind: str, data: bytes) -> None:
        distinct[kind].add(hashlib.sha256(data).digest())
        counts[kind]["distinct"] = len(distinct[kind])  # hypothesis may draw an input twice
        res = worker.run(kind, data)
        counts[kind][res["outcome"]] += 1
        if res.get("compared"):
            counts[kind]["compared"] += 1
        if res["outcome"] == "clean":
            errors[kind][res.get("error", "?")] += 1
        if res["outcome"] in BAD:
            bad.append((kind, data, res))
        if log:
            log(kind, res)

    for kind, strategy in (("onnx", onnx_inputs(seeds)), ("mlir", mlir_inputs()), ("package", package_inputs(pkg)),
                           ("package-kernel", package_kernel_inputs(pkg))):
        opts(given(strategy.map(lambda data, kind=kind: (kind, data)))(lambda pair: record(*pair)))()
    worker.close()
    return {"counts": {k: dict(v) for k, v in counts.items()}, "bad": bad,
            "clean_errors": {k: dict(v.most_common()) for k, v in errors.items()}}


def main(argv: list[str] | None = None) -> int:
    import platform
    import tempfile

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", action="append", required=True)
    ap.add_argument("--examples", type=int, default=150, help="inputs per kind and device")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds one input may take")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for fuzz.json, table.md and bad inputs")
    a = ap.parse_args(argv)
    if a.out.exists() and any(a.out.iterdir()):
        ap.error(f"{a.out} exists and is not empty (results are never overwritten)")
    a.out.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join([sys.executable, "-m", "tests.fuzz.harness", *(argv or sys.argv[1:])]),
              "host": platform.node(), "python": platform.python_version(), "devices": {}}
    rows = [("| device | kind | inputs | ok (compared with onnxruntime) | clean PortableError | foreign | crash "
             "| hang | wrong | seconds |"), "|---|---|---|---|---|---|---|---|---|---|"]
    for device in a.device:
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            res = fuzz(device, a.examples, Path(tmp), a.timeout)
        took = time.perf_counter() - t0
        for i, (kind, data, r) in enumerate(res["bad"]):
            name = f"{device.replace(':', '')}-{kind}-{i}"
            (a.out / f"{name}.bin").write_bytes(data)
            (a.out / f"{name}.json").write_text(json.dumps(r, indent=1))
        report["devices"][device] = {"counts": res["counts"], "clean_errors": res["clean_errors"],
                                     "seconds": round(took, 1), "bad": len(res["bad"])}
        for kind, c in res["counts"].items():
            n = sum(v for k, v in c.items() if k not in ("compared", "distinct"))
            rows.append(f"| {device} | {kind} | {n} ({c.get('distinct', 0)} distinct) "
                        f"| {c.get('ok', 0)} ({c.get('compared', 0)}) | {c.get('clean', 0)} "
                        f"| {c.get('foreign', 0)} | {c.get('crash', 0)} | {c.get('hang', 0)} | {c.get('wrong', 0)} | "
                        f"{took:.0f} (device total) |")
        print(json.dumps(report["devices"][device]), flush=True)
    (a.out / "fuzz.json").write_text(json.dumps(report, indent=1))
    (a.out / "table.md").write_text("\n".join(rows) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
