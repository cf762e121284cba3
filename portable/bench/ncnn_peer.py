"""ncnn, the Vulkan peer users pick for mobile CV, on a zoo model: the model's ONNX file converted with pnnx
(the converter ncnn ships), then timed on ncnn's Vulkan backend and on its CPU backend with the library's
default options (fp16 storage and arithmetic where the device has them, as users run it), each output checked
against the onnxruntime reference the zoo recorded.

    python -m portable.bench.ncnn_peer NAME CACHE RESULT.json
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import peer_process

RUNS, BUDGET_S = 10, 20.0
CONVERT_TIMEOUT_S = 600


class PeerUnavailable(Exception):
    """The peer cannot run this model here: the message says why (not installed, input it cannot take)."""


def convert(model: Path, shapes: list[tuple[int, ...]], out: Path) -> tuple[Path, Path]:
    """pnnx's conversion of `model` at the given input shapes into `out`; returns (param, bin)."""
    try:
        import pnnx
    except ImportError:
        raise PeerUnavailable("pnnx is not installed: pip install -e '.[models]'") from None
    param, binf = out / "model.ncnn.param", out / "model.ncnn.bin"
    src = out / "model.onnx"  # pnnx writes its side files beside its input: keep them out of site-packages
    if src.exists() and filecmp.cmp(model, src, shallow=False) and param.exists() and binf.exists():
        return param, binf  # converted before from this very file
    shutil.rmtree(out, ignore_errors=True)  # a conversion of an older export
    out.mkdir(parents=True)
    shutil.copyfile(model, src)
    arg = ",".join("[" + ",".join(str(d) for d in s) + "]" for s in shapes)
    p = subprocess.run([pnnx.EXEC_PATH, src.name, f"inputshape={arg}", f"ncnnparam={param.name}",
                        f"ncnnbin={binf.name}"], cwd=out, capture_output=True, text=True,
                       timeout=CONVERT_TIMEOUT_S, check=False)
    if not (param.exists() and binf.exists()):
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        raise PeerUnavailable(f"pnnx could not convert the model (exit {p.returncode}): {' | '.join(tail)}")
    return param, binf


def _mats(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """ncnn's Mat has no batch axis: batch-1 inputs lose their leading 1."""
    out = []
    for a in inputs:
        if a.dtype.kind != "f":
            raise PeerUnavailable(f"ncnn takes float inputs; this model has a {a.dtype} input")
        if a.ndim < 2 or a.shape[0] != 1:
            raise PeerUnavailable(f"ncnn runs batch 1 without a batch axis; input shape {a.shape}")
        out.append(np.ascontiguousarray(a[0], dtype=np.float32))
    return out


def time_net(param: Path, binf: Path, inputs: list[np.ndarray], refs: list[np.ndarray], vulkan: bool) -> dict:
    """Median ms of one extractor run (inputs in, every output out) and the max relative error vs `refs`."""
    import ncnn

    if vulkan and ncnn.get_gpu_count() == 0:
        raise PeerUnavailable("ncnn sees no Vulkan device")
    net = ncnn.Net()
    net.opt.use_vulkan_compute = vulkan
    net.opt.num_threads = os.cpu_count() or 1
    if vulkan:
        net.set_vulkan_device(ncnn.get_default_gpu_index())
    if net.load_param(str(param)) != 0 or net.load_model(str(binf)) != 0:
        raise PeerUnavailable(f"ncnn could not load {param.name}")
    mats = _mats(inputs)

    def once() -> list[np.ndarray]:
        ex = net.create_extractor()
        for j, m in enumerate(mats):
            ex.input(f"in{j}", ncnn.Mat(m).clone())
        outs = []
        for j in range(len(refs)):
            rc, o = ex.extract(f"out{j}")
            if rc != 0:
                raise PeerUnavailable(f"ncnn could not produce out{j} (code {rc})")
            outs.append(np.array(o))
        return outs

    outs = once()
    rel = 0.0
    for o, r in zip(outs, refs, strict=True):
        if o.size != r.size:
            raise PeerUnavailable(f"ncnn output of {o.size} values where onnxruntime gives {r.shape}")
        rel = max(rel, float(np.abs(o.reshape(r.shape) - r).max() / max(float(np.abs(r).max()), 1e-30)))
    times: list[float] = []
    t_end = time.perf_counter() + BUDGET_S
    while len(times) < RUNS and (not times or time.perf_counter() < t_end):
        t = time.perf_counter()
        once()
        times.append((time.perf_counter() - t) * 1e3)
    dev = ncnn.get_gpu_info(ncnn.get_default_gpu_index()).device_name() if vulkan else f"cpu x{net.opt.num_threads}"
    return {"ms": round(statistics.median(times), 3), "runs": len(times), "max_rel": rel, "device": dev}


def worker(name: str, cache: Path) -> dict:
    from ..zoo.registry import get

    entry = get(name)
    meta = json.loads((cache / entry.name / "meta.json").read_text())
    with np.load(cache / entry.name / "io.npz") as z:
        inputs = [z[f"in_{i.name}"] for i in entry.inputs]
        refs = [z[k] for k in sorted((k for k in z.files if k.startswith("out_")), key=lambda k: int(k[4:]))]
    try:
        import ncnn
    except ImportError:
        return {"error": "ncnn is not installed: pip install -e '.[models]'"}
    rec: dict = {"ncnn": getattr(ncnn, "__version__", "?")}
    try:
        _mats(inputs)
        t = time.perf_counter()
        param, binf = convert(Path(meta["model"]), [a.shape for a in inputs], cache / entry.name / "ncnn")
        rec["convert_s"] = round(time.perf_counter() - t, 2)
    except PeerUnavailable as e:
        return {**rec, "error": str(e)}
    for key, vulkan in (("vulkan", True), ("cpu", False)):
        try:
            rec[key] = time_net(param, binf, inputs, refs, vulkan)
        except PeerUnavailable as e:
            rec[key] = {"error": str(e)}
    return rec


def job(name: str, cache: Path, timeout_s: float, env: dict) -> dict:
    """The worker in a process of its own (bench/peer_process.py)."""
    return peer_process.run("portable.bench.ncnn_peer", [name, str(cache)], timeout_s, env)


if __name__ == "__main__":
    sys.exit(peer_process.serve(worker, sys.argv[1:]))
