"""numpy: the numeric reference of every workload, and the CPU peer (OpenBLAS for the contractions)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..workloads import LAYERNORM_EPS, SCALE, SOFTMAX_SCALE, Workload
from .base import Prepared, Unsupported


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x * x * x)))


def function(w: Workload) -> Callable[..., np.ndarray]:
    """A numpy function of the workload's inputs. f16 operands are widened to f32 first (numpy has no fast
    f16 matmul; the workload accumulates in f32 anyway)."""
    p = w.params
    if w.family == "matmul":
        if w.dtype == "float16":
            return lambda a, b: a.astype(np.float32) @ b.astype(np.float32)
        return lambda a, b: a @ b
    if w.family == "batch_matmul":
        return np.matmul
    if w.family == "conv2d":
        k, pad = p["k"], p["pad"]

        def conv(x, wt):
            if k == 1 and pad == 0:
                n, h, ww, c = x.shape
                return (x.reshape(-1, c) @ wt.reshape(c, -1)).reshape(n, h, ww, -1)
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            win = sliding_window_view(xp, (k, k), axis=(1, 2))  # n, oh, ow, c, kh, kw
            return np.tensordot(win, wt, axes=([4, 5, 3], [0, 1, 2]))
        return conv
    if w.family == "depthwise_conv2d":
        k, pad = p["k"], p["pad"]

        def dwconv(x, wt):
            xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
            oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
            out = np.zeros((x.shape[0], oh, ow, x.shape[3]), x.dtype)
            for i in range(k):
                for j in range(k):
                    out += xp[:, i:i + oh, j:j + ow, :] * wt[i, j]
            return out
        return dwconv
    if w.family == "softmax":
        def softmax(x):
            s = x * np.float32(SOFTMAX_SCALE)
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)
        return softmax
    if w.family == "layernorm":
        def layernorm(x, g, b):
            xc = x - x.mean(axis=-1, keepdims=True)
            var = (xc * xc).mean(axis=-1, keepdims=True)
            return xc / np.sqrt(var + np.float32(LAYERNORM_EPS)) * g + b
        return layernorm
    if w.family == "matmul_gelu":
        if w.dtype == "float16":  # f16 x and W widened; f32 bias, product and epilogue
            return lambda x, wt, bias: _gelu_tanh(x.astype(np.float32) @ wt.astype(np.float32) + bias)
        return lambda x, wt, bias: _gelu_tanh(x @ wt + bias)
    if w.family == "linear":  # f16 only: x and W widened, the f32 product rounded to f16, the f16 bias added in f16
        return lambda x, wt, bias: (x.astype(np.float32) @ wt.astype(np.float32)).astype(np.float16) + bias
    if w.family == "ew_chain":
        return lambda x, bias, res: _gelu_tanh(x + bias) + res
    if w.family == "add":
        return np.add
    if w.family == "scale":
        return lambda x: x * np.float32(SCALE)
    raise KeyError(w.family)


def reference(w: Workload, inputs: list[np.ndarray]) -> np.ndarray:
    """The result every peer is checked against, in the workload's output dtype."""
    out = np.asarray(function(w)(*inputs))
    return out.astype(w.output[1], copy=False)


class _Prepared(Prepared):
    def __init__(self, fn, inputs):
        self.fn, self.inputs = fn, inputs

    def run_device(self) -> None:
        self.fn(*self.inputs)

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        return np.asarray(self.fn(*inputs))


class NumpyPeer:
    """numpy on the host CPU; its device time and end-to-end time are the same thing."""

    name = "numpy"
    warmup = 1
    host = True

    def describe(self) -> dict:
        d = {"name": "host CPU", "numpy": np.__version__}
        with contextlib.suppress(Exception):  # informational only; older numpy has no mode="dicts"
            cfg = np.show_config(mode="dicts")
            blas = cfg.get("Build Dependencies", {}).get("blas", {})
            d["blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
        return d

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> _Prepared:
        if w.family == "model":
            raise Unsupported("numpy has no form of a whole network (onnxruntime is the reference of models)")
        return _Prepared(function(w), inputs)
