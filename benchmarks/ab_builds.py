"""A/B of two builds of the compiler on this host's drivers: compile with each build into one folder (tag them),
then time both tags interleaved on one device. Workloads: bench ids at their cpu size (`mlp_gelu_4096`) or another
(`mlp_gelu_4096_f16@gpu`), row chains of any shape (`softmax:256:16384`, `layernorm:64:65536`), or f16 matmuls
and f16 linear layers of any shape (`matmul_f16:512:4096:4096`, `linear_f16:512:4096:4096`, M:N:K).

    git worktree add /tmp/old HEAD~1
    PYTHONPATH=/tmp/old python benchmarks/ab_builds.py make DIR old PROFILE API 'softmax:256:16384,mlp_gelu_4096'
    python benchmarks/ab_builds.py make DIR new PROFILE API 'softmax:256:16384,mlp_gelu_4096'
    python benchmarks/ab_builds.py run DIR DEVICE old,new OUT.json

Each executable is checked against numpy, then timed device-only (the plan recorded as a batch, median per batch
over 1 s), the tags interleaved, three rounds; each row records the kernels' count per tag. Used in session 22 for
row chains that compute rows past the device's memory again where they are read, and for matmul epilogues
vectorized a row at a time.
"""

import json
import statistics
import sys
from pathlib import Path

import numpy as np

import portable
from portable.bench import workloads as W


def _workloads(spec: str) -> list[tuple[str, str, object]]:
    """(name, MLIR, graph or bench workload) per item of the spec."""
    out = []
    for item in spec.split(","):
        if item.startswith(("matmul_f16:", "linear_f16:")):  # M:N:K of the bench's matmul_*_f16 / linear_*_f16
            m, n, k = (int(v) for v in item.split(":")[1:])
            W.TABLE[item] = (item.split("_")[0], {"ab": W._mm(m, n, k)}, "float16")
            w = W.build(item, "ab")
            out.append((item.replace(":", "-"), w.mlir, w))
        elif ":" in item:
            fam, r, c = item.split(":")
            g = W._graph(fam, {"r": int(r), "c": int(c)}, "float32")
            out.append((f"{fam}-{r}-{c}", g.to_mlir(), g))
        else:
            wid, _, size = item.partition("@")
            w = W.build(wid, size or "cpu")
            out.append((item, w.mlir, w))
    return out


def _inputs_and_reference(src) -> tuple[list[np.ndarray], np.ndarray]:
    from portable.bench.peers.numpy_peer import reference

    if isinstance(src, W.Workload):
        xs = src.make_inputs()
        return xs, reference(src, xs)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(t.shape).astype(np.float32) for t in src.inputs]
    return xs, src.reference(*xs)[0]


def make(d: Path, tag: str, profile: str, api: str, spec: str) -> None:
    from portable import profiles
    from portable.compiler.pipeline import compile_module

    opts = profiles.codegen_options(profiles.all_profiles()[profile])
    d.mkdir(parents=True, exist_ok=True)
    (d / "shapes.json").write_text(json.dumps(spec))
    from portable.trust import file_digest

    hashes = d / "sha256.json"
    sha256 = json.loads(hashes.read_text()) if hashes.exists() else {}
    for name, mlir, _ in _workloads(spec):
        exe = compile_module(mlir, opts, (api,))
        exe.save(d / f"{name}-{tag}.ptx")
        sha256[f"{name}-{tag}.ptx"] = file_digest(d / f"{name}-{tag}.ptx")  # run() pins each file by it
        print(tag, name, len(exe.kernels), "kernels", flush=True)
    hashes.write_text(json.dumps(sha256, indent=1))


def run(d: Path, device: str, tags: list[str]) -> list[dict]:
    from variants_gpu import batch_times  # (this folder: run as python benchmarks/ab_builds.py)

    from portable.devices import open_device

    live = open_device(device)
    rows = []
    sha256 = json.loads((d / "sha256.json").read_text())
    for name, _, src in _workloads(json.loads((d / "shapes.json").read_text())):
        xs, ref = _inputs_and_reference(src)
        times: dict[str, list[float]] = {t: [] for t in tags}
        row: dict = {"device": device, "workload": name, "kernels": {}, "max_err": {}}
        for _ in range(3):
            for t in tags:
                loaded = portable.load(d / f"{name}-{t}.ptx", device=device, expect_hash=sha256[f"{name}-{t}.ptx"])
                row["kernels"][t] = len(loaded.executable.kernels)
                row["max_err"][t] = float(np.max(np.abs(loaded(*xs)[0] - ref)))
                times[t] += batch_times(loaded.executable, live.backend, xs, warmup=1)
        row["median_ms"] = {t: round(statistics.median(v), 3) for t, v in times.items()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        out = run(Path(sys.argv[2]), sys.argv[3], sys.argv[4].split(","))
        Path(sys.argv[5]).write_text(json.dumps(out, indent=1))
