"""A model's large initializers held as numpy arrays beside the graph while the frontend works on it.

Shape inference, folding and the decompositions copy the ModelProto many times over (each `infer` returns a new
one); with the weights inside, a 140M-parameter decoder's import peaked at twelve times its weights. `detach` moves
every large float / small-int initializer's bytes out: what stays in the graph is a stub (dims and type, its data
marked external), so those copies are small; readers ask `value(t, weights)`; torch-mlir's importer is handed the
arrays themselves (onnx_import.py). `split` does the same while loading, so no whole copy of a model with its
weights is ever made: a file's external data is mapped, not read (a decoder of 4 GB of weights costs page cache,
not resident memory).

No MLIR is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

DETACH_BYTES = 1 << 14  # initializers of at least this many bytes leave the graph
_LOCATION = "portable:detached"
NONE: Mapping[str, np.ndarray] = MappingProxyType({})  # no detached weights
# TensorProto element types detached (by their numpy dtype): not int32/int64 (shapes and indices that inference
# and folding read often, small) nor bool, bfloat16 and strings (no exact numpy form through raw bytes).
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 10: np.float16, 11: np.float64,
           12: np.uint32, 13: np.uint64}


@dataclass(frozen=True)
class SplitModel:
    """A model whose large initializers are stubs, with their arrays (what `split` returns): the frontend takes it
    in place of a ModelProto, so a caller that edits the graph (a decoder's step) never holds the weights twice."""

    model: Any
    weights: Mapping[str, np.ndarray]


def detach(m) -> dict[str, np.ndarray]:
    """Move the bytes of `m`'s large top-level initializers into arrays (in place): {name: array}."""
    weights: dict[str, np.ndarray] = {}
    for t in m.graph.initializer:
        values = _values(t, None)
        if values is not None:
            weights[t.name] = values
            t.ClearField("raw_data")
            _mark(t)
    return weights


def split(model, base_dir: str | Path | None = None):
    """(a copy of `model` whose large initializers are stubs, {name: array}); `model` is untouched and its weights
    are copied once (to their arrays), never with the rest of the model. Initializers kept in external files
    (`base_dir`: the model file's folder; a model loaded with load_external_data=False) are mapped read-only
    where `detach` would take them, and read into the copy otherwise."""
    m = without_initializers(model)
    weights: dict[str, np.ndarray] = {}
    for t in model.graph.initializer:
        values = _values(t, base_dir)
        if values is None:
            kept = m.graph.initializer.add()
            kept.CopyFrom(t)
            if kept.data_location == kept.EXTERNAL and base_dir is not None:
                _read_external(kept, base_dir)
            continue
        weights[t.name] = values
        s = m.graph.initializer.add()
        for fd, v in t.ListFields():
            if fd.name not in ("raw_data", "external_data", "data_location"):
                _copy_field(s, fd, v)
        _mark(s)
    return m, weights


def without_initializers(model):
    """A copy of onnx.ModelProto `model` less its top-level initializers (copying the whole model would copy its
    weights too)."""
    import onnx

    m = onnx.ModelProto()
    for fd, v in model.ListFields():
        if fd.name != "graph":
            _copy_field(m, fd, v)
    for fd, v in model.graph.ListFields():
        if fd.name != "initializer":
            _copy_field(m.graph, fd, v)
    return m


def _copy_field(dst, fd, value) -> None:
    if fd.message_type is None and isinstance(value, bytes) and fd.type == fd.TYPE_STRING:
        # protobuf hands back bytes for text that is not UTF-8 and refuses them as text: copied as they came
        dst.MergeFromString(_varint(fd.number << 3 | 2) + _varint(len(value)) + value)
        return
    field = getattr(dst, fd.name)
    if hasattr(field, "extend"):  # repeated
        field.extend(value)
    elif fd.message_type is not None:
        field.CopyFrom(value)
    else:
        setattr(dst, fd.name, value)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _mark(t) -> None:
    t.data_location = t.EXTERNAL
    del t.external_data[:]
    entry = t.external_data.add()
    entry.key, entry.value = "location", _LOCATION


def _values(t, base_dir) -> np.ndarray | None:
    """The array `detach` would take for `t` (None: it stays in the graph): its raw bytes copied, or its external
    file's bytes mapped."""
    dtype = _DTYPES.get(t.data_type)
    if dtype is None:
        return None
    shape = tuple(int(d) for d in t.dims)
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if nbytes < DETACH_BYTES or any(d < 0 for d in shape):
        return None
    if t.data_location == t.EXTERNAL and base_dir is not None and not is_stub(t):
        path, offset, length = _external(t, base_dir)
        if length not in (None, nbytes) or offset % np.dtype(dtype).itemsize or path.stat().st_size < offset + nbytes:
            return None  # read by onnx instead, which reports a damaged file
        return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
    if not t.HasField("raw_data") or len(t.raw_data) != nbytes:  # a damaged tensor stays for check_dtypes
        return None
    return np.frombuffer(t.raw_data, dtype=dtype).reshape(shape)


def _external(t, base_dir) -> tuple[Path, int, int | None]:
    """(file, offset, length) of an external initializer; CompileError for a location outside the model's folder
    or a missing file."""
    from ..errors import CompileError

    info = {e.key: e.value for e in t.external_data}
    where = info.get("location", "")
    base = Path(base_dir).resolve()
    path = (base / where).resolve()
    if not where or Path(where).is_absolute() or base not in path.parents:
        if where and not Path(where).is_absolute() and base in (base / where).absolute().parents:
            # Beside the model by name, elsewhere through a symbolic link (a Hugging Face hub cache's snapshot links
            # its files to blobs), which the onnx package refuses too.
            raise CompileError(f"initializer '{t.name}' keeps its values in {where!r}, a symbolic link to {path} "
                               f"outside the model's folder {base}: copy the model and its data files into one "
                               f"folder (huggingface_hub: snapshot_download(..., local_dir=DIR))", stage="onnx-load")
        raise CompileError(f"initializer '{t.name}' keeps its values at {where!r}, outside the model's folder {base}: "
                           f"external data must lie beside the model file", stage="onnx-load")
    if not path.is_file():
        raise CompileError(f"initializer '{t.name}' keeps its values in {path}, which does not exist: copy the "
                           f"model's external data file(s) beside it", stage="onnx-load")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        raise CompileError(f"initializer '{t.name}': its external data offset/length are not integers; the model is "
                           f"damaged, export it again", stage="onnx-load") from None
    return path, offset, length


def _read_external(t, base_dir) -> None:
    """Read a small (or non-float) external initializer into `t`."""
    from ..errors import CompileError

    path, offset, length = _external(t, base_dir)
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(-1 if length is None else length)
    if length is not None and len(data) != length:
        raise CompileError(f"initializer '{t.name}': {path} ends before the {length} bytes at offset {offset} it "
                           f"should hold; the model's external data is truncated", stage="onnx-load")
    t.raw_data = data
    t.data_location = t.DEFAULT
    del t.external_data[:]


def is_stub(t) -> bool:
    """Whether initializer `t` is a stub left by `detach`."""
    return t.data_location == t.EXTERNAL and any(e.key == "location" and e.value == _LOCATION for e in t.external_data)


def value(t, weights: Mapping[str, np.ndarray]) -> np.ndarray:
    """The values of initializer / Constant tensor `t`: its detached array, else onnx's reading of it."""
    if is_stub(t):
        return weights[t.name]
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


__all__ = ["DETACH_BYTES", "NONE", "detach", "is_stub", "split", "value", "without_initializers"]
