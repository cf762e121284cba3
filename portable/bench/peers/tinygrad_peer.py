"""tinygrad on its OpenCL device (`DEV=CL`): the same computation written with tinygrad Tensors, run through
TinyJit (kernels captured once, replayed), so its per-call cost is comparable to portable's recorded plan.

Device-only time = one JIT call on realized inputs + `synchronize()`; end-to-end time adds `Tensor(numpy)`
uploads and `.numpy()`.
"""

from __future__ import annotations

import os

import numpy as np

from ..workloads import LAYERNORM_EPS, SCALE, SOFTMAX_SCALE, Workload
from .base import Peer, Prepared, Unavailable, Unsupported


def _function(w: Workload):
    from tinygrad import dtypes

    p = w.params
    if w.family == "matmul":
        if w.dtype == "float16":
            return lambda a, b: a.matmul(b, dtype=dtypes.float32)  # f32 accumulator and result
        return lambda a, b: a @ b
    if w.family == "batch_matmul":
        return lambda a, b: a @ b
    if w.family == "conv2d":  # tinygrad convolves NCHW/OIHW: permuted views, no copies
        return lambda x, k: x.permute(0, 3, 1, 2).conv2d(k.permute(3, 2, 0, 1), padding=p["pad"]).permute(0, 2, 3, 1)
    if w.family == "depthwise_conv2d":
        c, kk = p["c"], p["k"]
        return lambda x, k: x.permute(0, 3, 1, 2).conv2d(k.permute(2, 0, 1).reshape(c, 1, kk, kk), groups=c,
                                                         padding=p["pad"]).permute(0, 2, 3, 1)
    if w.family == "softmax":
        return lambda x: (x * SOFTMAX_SCALE).softmax(-1)
    if w.family == "layernorm":
        return lambda x, g, b: x.layernorm(axis=-1, eps=LAYERNORM_EPS) * g + b
    if w.family == "matmul_gelu":
        if w.dtype == "float16":  # f32 accumulator and result, then the f32 bias and gelu
            return lambda x, wt, bias: (x.matmul(wt, dtype=dtypes.float32) + bias).gelu()
        return lambda x, wt, bias: (x @ wt + bias).gelu()
    if w.family == "linear":  # f16 only: f32 accumulator, rounded to half, then the f16 bias added in half
        return lambda x, wt, bias: x.matmul(wt, dtype=dtypes.float32).cast(dtypes.half) + bias
    if w.family == "ew_chain":
        return lambda x, bias, res: (x + bias).gelu() + res  # tinygrad's gelu is the tanh form
    if w.family == "add":
        return lambda a, b: a + b
    if w.family == "scale":
        return lambda x: x * SCALE
    raise Unsupported(f"no tinygrad form of {w.family}")


class _Prepared(Prepared):
    def __init__(self, peer: TinygradPeer, w: Workload, inputs: list[np.ndarray]):
        from tinygrad import Tensor, TinyJit

        self.peer = peer
        fn = _function(w)
        self.jit = TinyJit(lambda *ts: fn(*ts).realize())
        self.resident = [Tensor(a, device=peer.dev).realize() for a in inputs]

    def run_device(self) -> None:
        self.jit(*self.resident)
        self.peer.sync()

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        from tinygrad import Tensor

        return self.jit(*[Tensor(a, device=self.peer.dev) for a in inputs]).numpy()

    def device_result(self) -> np.ndarray:
        return self.jit(*self.resident).numpy()

    def info(self) -> dict:
        return {"jit": "TinyJit"}


class TinygradPeer(Peer):
    name = "tinygrad"
    warmup = 3  # TinyJit: call 1 runs and compiles, call 2 captures, later calls replay

    def __init__(self, device_name: str = "", device_index: int = 0):
        self.device_name, self.index = device_name, device_index
        self.dev = "CL"

    def describe(self) -> dict:
        os.environ.setdefault("DEV", "CL")  # tinygrad reads its default device from the environment
        try:
            import tinygrad
            from tinygrad import Device
        except ImportError as e:
            raise Unavailable(f"tinygrad is not installed ({e}); pip install tinygrad") from e
        try:
            first = Device["CL"]
            names = [first.device_name] + [Device[f"CL:{i}"].device_name for i in range(1, first.count())]
        except Exception as e:
            raise Unavailable(f"tinygrad has no CL device: {e}") from e
        # tinygrad lists the devices of the first OpenCL platform only (GPUs first): match portable's by name.
        idx = names.index(self.device_name) if self.device_name in names else min(self.index, len(names) - 1)
        self.dev = "CL" if idx == 0 else f"CL:{idx}"
        d = Device[self.dev]
        self.sync = d.synchronize
        from importlib.metadata import version

        return {"device": self.dev, "name": d.device_name, "driver_version": getattr(d, "driver_version", ""),
                "tinygrad": version("tinygrad"), "path": os.path.dirname(tinygrad.__file__),
                "matched_by": "name" if self.device_name in names else "index"}

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        return _Prepared(self, w, inputs)


