"""A model's large initializers held as numpy arrays beside the graph while the frontend works on it.

Shape inference, folding and the decompositions copy the ModelProto many times over (each `infer` returns a new
one); with the weights inside, a 140M-parameter decoder's import peaked at twelve times its weights. `detach` moves
every large float / small-int initializer's bytes out: what stays in the graph is a stub (dims and type, its data
marked external), so those copies are small; readers ask `value(t, weights)`; torch-mlir's importer is handed the
arrays themselves (onnx_import.py).

No MLIR is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

DETACH_BYTES = 1 << 14  # initializers of at least this many bytes leave the graph
_LOCATION = "portable:detached"
NONE: Mapping[str, np.ndarray] = MappingProxyType({})  # no detached weights
# TensorProto element types detached (by their numpy dtype): not int32/int64 (shapes and indices that inference
# and folding read often, small) nor bool, bfloat16 and strings (no exact numpy form through raw bytes).
_DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 10: np.float16, 11: np.float64,
           12: np.uint32, 13: np.uint64}


def detach(m, min_bytes: int = DETACH_BYTES) -> dict[str, np.ndarray]:
    """Move the bytes of `m`'s large top-level initializers into arrays (in place): {name: array}."""
    weights: dict[str, np.ndarray] = {}
    for t in m.graph.initializer:
        dtype = _DTYPES.get(t.data_type)
        if dtype is None or not t.HasField("raw_data"):
            continue
        nbytes = int(np.prod(t.dims, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes < min_bytes or len(t.raw_data) != nbytes:  # a damaged tensor stays for check_dtypes to report
            continue
        weights[t.name] = np.frombuffer(t.raw_data, dtype=dtype).reshape(tuple(t.dims))
        t.ClearField("raw_data")
        t.data_location = t.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", _LOCATION
    return weights


def is_stub(t) -> bool:
    """Whether initializer `t` is a stub left by `detach`."""
    return t.data_location == t.EXTERNAL and any(e.key == "location" and e.value == _LOCATION for e in t.external_data)


def value(t, weights: Mapping[str, np.ndarray]) -> np.ndarray:
    """The values of initializer / Constant tensor `t`: its detached array, else onnx's reading of it."""
    if is_stub(t):
        return weights[t.name]
    from onnx import numpy_helper

    return numpy_helper.to_array(t)


__all__ = ["DETACH_BYTES", "NONE", "detach", "is_stub", "value"]
