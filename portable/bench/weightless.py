"""Packages that travel without their weights: the weights are drawn from a recorded seed and rebuilt where they
run, byte for byte, so the restored package passes its own content hash.

    model = seed_initializers(onnx_model, seed=0)       # here: every float initializer drawn from the seed
    portable.package.build(model, targets, "m.ptpk")    # compile as usual
    strip("m.ptpk", "m.ptpk.skel", model, seed=0)       # kernels + plan + the weights the seed cannot give
    restore("m.ptpk.skel", "m.ptpk")                    # on the GPU host (numpy only): the same file again

A speed measurement needs the network's shapes, not trained values, and ResNet-50's or BERT-base's f32 weights
(98 MiB, 418 MiB) are noise that does not compress. The draw is a counter hash (splitmix64) of the seed and the
element index, computed with numpy integer arithmetic: the same bits on every machine and numpy version, where
numpy's generators promise no stable stream. A package weight is stripped when its bytes equal an initializer's
draw or its transpose (in any shape: the compiler may reshape a weight); weights the compiler transformed
otherwise (folded, padded) stay in the skeleton. Needs no MLIR and no onnx: only the seeding of a model imports onnx.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

from .. import archive
from ..errors import PackageError
from ..executable import npy_load

RECIPE = "seeded_weights.json"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def draw(seed: int, index: int, n: int, scale: float, offset: float = 0.0) -> np.ndarray:
    """n float32 values uniform in offset +- scale: splitmix64 of (seed, index, element)."""
    with np.errstate(over="ignore"):
        base = np.uint64((seed * 0x100000001B3 + index * 0x9E37 + 1) & 0xFFFFFFFFFFFFFFFF)
        x = np.arange(n, dtype=np.uint64) * _GOLDEN + base * _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    u = (x >> np.uint64(40)).astype(np.float64) / float(1 << 24)  # [0, 1), 24 bits: exact in float32
    return (np.float32(offset) + np.float32(scale) * (2 * u - 1).astype(np.float32)).astype(np.float32)


MIN_DRAWN = 64  # smaller initializers (scalars of GELU, masks, epsilons) keep their values: they mean something


def _scales(graph) -> dict[str, tuple]:
    """(scale, offset) per initializer by the node that reads it: 1 +- 0.1 for what a Mul or a normalization scales
    by, +- 0.1 for a normalization's shift, +- 1 for a Gather's table (embeddings), ("fan", axis) for a weight
    drawn He-uniform over the fan-in on that axis (Gemm by transB, MatMul's right operand: its rows)."""
    out: dict[str, tuple] = {}
    for n in graph.node:
        for pos, name in enumerate(n.input):
            if name in out or not name:
                continue
            if n.op_type == "Gather" and pos == 0:
                out[name] = (1.0, 0.0)
            elif n.op_type in ("LayerNormalization", "BatchNormalization", "InstanceNormalization") and pos:
                out[name] = (0.1, 1.0) if pos == 1 else (0.1, 0.0)
            elif n.op_type == "Mul":
                out[name] = (0.1, 1.0)
            elif n.op_type == "Gemm" and pos == 1:
                out[name] = ("fan", 1 if next((a.i for a in n.attribute if a.name == "transB"), 0) else 0)
            elif n.op_type == "MatMul" and pos == 1:
                out[name] = ("fan", -2)
    return out


DRAWS = "portable.weight_draws"  # model metadata: {"seed": s, "draws": {initializer: [index, scale, offset]}}


def seed_initializers(model, seed: int):
    """`model` (an onnx ModelProto) with every float32 initializer replaced by its draw, the draws recorded in its
    metadata; in place, returned."""
    from onnx import numpy_helper

    rules = _scales(model.graph)
    draws = {}
    for i, init in enumerate(model.graph.initializer):
        shape = tuple(init.dims)
        n = int(np.prod(shape, dtype=np.int64))
        if init.data_type != 1 or n < MIN_DRAWN:  # FLOAT only; shapes, indices and small constants stay
            continue
        rule = rules.get(init.name)
        if rule and rule[0] == "fan":
            fan = shape[rule[1]] if len(shape) >= abs(rule[1]) + (rule[1] >= 0) else 1
            scale, offset = float(np.sqrt(6.0 / max(fan, 1))), 0.0
        elif rule is not None:
            scale, offset = rule
        elif len(shape) >= 2:
            scale, offset = float(np.sqrt(6.0 / max(int(np.prod(shape[1:])), 1))), 0.0
        else:
            scale, offset = 0.1, 0.0
        init.CopyFrom(numpy_helper.from_array(draw(seed, i, n, scale, offset).reshape(shape), init.name))
        draws[init.name] = [i, scale, offset]
    for p in list(model.metadata_props):
        if p.key == DRAWS:
            model.metadata_props.remove(p)
    model.metadata_props.add(key=DRAWS, value=json.dumps({"seed": seed, "draws": draws}))
    return model


def _draws(model) -> tuple[int, dict]:
    for p in model.metadata_props:
        if p.key == DRAWS:
            d = json.loads(p.value)
            return int(d["seed"]), d["draws"]
    raise PackageError("the model's weights were not drawn by seed_initializers (no portable.weight_draws "
                       "metadata): seed it before compiling, then strip")


def strip(package_path: str | Path, out: str | Path, model) -> dict:
    """Write the package (compiled from the seeded `model`) less every weight that is a draw, plus the recipe that
    draws them again; returns {"stripped": n, "kept": n, "kept_bytes": n}."""
    from onnx import numpy_helper

    seed, draws = _draws(model)
    # A draw's bytes, and those of its transpose as a (first dim, rest) matrix: a Gemm's weight, or a convolution's
    # filters as the transposed im2col form reads them, stored as the kernel reads them.
    by_hash = {}
    for init in model.graph.initializer:
        if init.name in draws:
            arr = numpy_helper.to_array(init).astype(np.float32)
            by_hash[hashlib.sha256(arr.tobytes()).hexdigest()] = [*draws[init.name]]
            if arr.ndim >= 2:
                mat = arr.reshape(arr.shape[0], -1)
                by_hash[hashlib.sha256(np.ascontiguousarray(mat.T).tobytes()).hexdigest()] = \
                    [*draws[init.name], list(mat.shape)]
    entries: dict[str, list] = {}
    scaled: dict[str, list] = {}
    joined: dict[str, list] = {}
    dims = {init.name: [int(d) for d in init.dims] for init in model.graph.initializer if init.name in draws}
    kept = kept_bytes = 0
    with zipfile.ZipFile(package_path) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.startswith("weights/"):
                arr = npy_load(data)
                hit = by_hash.get(hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()) \
                    if arr.dtype == np.float32 else None
                if hit is not None:
                    entries[info.filename] = [list(arr.shape), *hit]
                    continue
                how = _row_scaled(arr, seed, draws, dims) if arr.dtype == np.float32 else None
                if how is not None:
                    scaled[info.filename] = [list(arr.shape), *how]
                    continue
                parts = _column_blocks(arr, seed, draws, dims) if arr.dtype == np.float32 else None
                if parts is not None:
                    joined[info.filename] = [list(arr.shape), parts]
                    continue
                kept += 1
                kept_bytes += len(data)
            w.writestr(info.filename, data)
        w.writestr(RECIPE, json.dumps({"seed": seed, "entries": entries, "row_scaled": scaled, "joined": joined}))
    return {"stripped": len(entries) + len(scaled) + len(joined), "kept": kept, "kept_bytes": kept_bytes}


def _row_scaled(arr: np.ndarray, seed: int, draws: dict, dims: dict) -> list | None:
    """A weight the compiler folded a per-row scale into (a normalization's scale times the matrix that follows
    it): [matrix draw, its (rows, cols), scale draw] when `arr` holds draw(matrix) * draw(scale)[:, None] bit for
    bit in some shape, else None. Each candidate is tried on its first row before the whole matrix is drawn."""
    if arr.ndim < 2:
        return None
    flat = arr.reshape(-1)
    vectors = {n: d for n, d in draws.items() if len(dims[n]) == 1}
    for name, d in draws.items():
        shape = dims[name]
        if len(shape) != 2 or shape[0] * shape[1] != flat.size:
            continue
        rows, cols = shape
        first = draw(seed, int(d[0]), cols, float(d[1]), float(d[2]))
        for vname, v in vectors.items():
            if dims[vname][0] != rows:
                continue
            scale0 = draw(seed, int(v[0]), 1, float(v[1]), float(v[2]))[0]
            if not np.array_equal(first * scale0, flat[:cols]):
                continue
            full = draw(seed, int(d[0]), rows * cols, float(d[1]), float(d[2])).reshape(rows, cols)
            vec = draw(seed, int(v[0]), rows, float(v[1]), float(v[2]))
            if np.array_equal(full * vec[:, None], flat.reshape(rows, cols)):
                return [list(d[:3]), [rows, cols], list(v[:3])]
    return None


def _column_blocks(arr: np.ndarray, seed: int, draws: dict, dims: dict) -> list | None:
    """A weight the compiler concatenated along its columns (projections of one input merged into one product,
    compiler/graph/horizontal.py): per block of columns, left to right, [matrix draw, its (rows, cols), scale draw
    or None] when each block holds a matrix's draw, or its draw times a per-row scale's, bit for bit; else None.
    Each candidate is tried on the block's first row before the whole block is drawn."""
    if arr.ndim < 2:
        return None
    arr = arr.reshape(-1, arr.shape[-1])  # split along K, it is stored as [slices, rows per slice, columns]
    rows, width = arr.shape
    matrices = [(n, d) for n, d in draws.items() if len(dims[n]) == 2 and dims[n][0] == rows]
    scales = [None] + [d for n, d in draws.items() if dims[n] == [rows]]
    parts, at = [], 0
    while at < width:
        found = None
        for name, d in matrices:
            cols = dims[name][1]
            if at + cols > width:
                continue
            first = draw(seed, int(d[0]), cols, float(d[1]), float(d[2]))
            for v in scales:
                s0 = 1.0 if v is None else draw(seed, int(v[0]), 1, float(v[1]), float(v[2]))[0]
                if not np.array_equal(first * np.float32(s0) if v is not None else first, arr[0, at:at + cols]):
                    continue
                full = draw(seed, int(d[0]), rows * cols, float(d[1]), float(d[2])).reshape(rows, cols)
                if v is not None:
                    full = full * draw(seed, int(v[0]), rows, float(v[1]), float(v[2]))[:, None]
                if np.array_equal(full, arr[:, at:at + cols]):
                    found = [list(d[:3]), [rows, cols], None if v is None else list(v[:3])]
                    break
            if found is not None:
                break
        if found is None:
            return None
        parts.append(found)
        at += found[1][1]
    return parts if len(parts) > 1 else None


def restore(skeleton: str | Path, out: str | Path) -> str:
    """The package again from its skeleton (numpy only); returns its content hash, checked by reading it."""
    from ..package import Package

    with zipfile.ZipFile(skeleton) as z:
        if RECIPE not in z.namelist():
            raise PackageError(f"{skeleton}: not a package skeleton (no {RECIPE}); it is written by "
                               f"portable.bench.weightless.strip")
        recipe = json.loads(z.read(RECIPE))
        entries = {i.filename: z.read(i) for i in z.infolist() if i.filename != RECIPE}
    seed = int(recipe["seed"])
    for name, (shape, index, scale, offset, *transposed) in recipe["entries"].items():
        n = int(np.prod(shape, dtype=np.int64))
        arr = draw(seed, int(index), n, float(scale), float(offset))
        if transposed:  # drawn as the model's (rows, cols), stored transposed
            arr = np.ascontiguousarray(arr.reshape(transposed[0]).T)
        entries[name] = arr.reshape(shape)
    for name, (shape, (index, scale, offset), (rows, cols), (vindex, vscale, voffset)) in \
            recipe.get("row_scaled", {}).items():
        mat = draw(seed, int(index), rows * cols, float(scale), float(offset)).reshape(rows, cols)
        vec = draw(seed, int(vindex), rows, float(vscale), float(voffset))
        entries[name] = (mat * vec[:, None]).reshape(shape)
    for name, (shape, parts) in recipe.get("joined", {}).items():
        blocks = []
        for (index, scale, offset), (rows, cols), vec in parts:
            block = draw(seed, int(index), rows * cols, float(scale), float(offset)).reshape(rows, cols)
            if vec is not None:
                block = block * draw(seed, int(vec[0]), rows, float(vec[1]), float(vec[2]))[:, None]
            blocks.append(block)
        entries[name] = np.concatenate(blocks, axis=1).reshape(shape)
    manifest = entries.pop("manifest.json")  # the order package.write gives
    archive.write_zip(out, [("manifest.json", manifest), *((name, entries[name]) for name in sorted(entries))])
    return Package(out).content_hash  # PackageError if a byte differs from what was compiled


def restore_onnx(graph):
    """A seeded onnx model whose drawn initializers were emptied (`without_weights`) with its draws filled in."""
    from onnx import numpy_helper

    seed, draws = _draws(graph)
    for init in graph.graph.initializer:
        if init.name in draws:
            i, scale, offset = draws[init.name]
            shape = tuple(init.dims)
            n = int(np.prod(shape, dtype=np.int64))
            init.CopyFrom(numpy_helper.from_array(draw(seed, int(i), n, scale, offset).reshape(shape), init.name))
    return graph


def without_weights(model):
    """A copy of a seeded model whose drawn initializers hold no data (name, type and dims kept)."""
    from ..frontend.onnx_weights import without_initializers

    _, draws = _draws(model)
    m = without_initializers(model)
    for init in model.graph.initializer:
        kept = m.graph.initializer.add()
        if init.name in draws:
            kept.name, kept.data_type = init.name, 1
            kept.dims.extend(init.dims)
        else:
            kept.CopyFrom(init)
    return m
