"""PyTorch: cuBLAS/cuDNN on CUDA where available (the vendor-library ceiling), TF32 off; on a host without
CUDA it runs on the CPU as one more CPU peer. Skips cleanly where torch is not installed.

Device-only time = one call on resident tensors + `torch.cuda.synchronize()`; end-to-end time adds
`torch.from_numpy(...).to(device)` and `.cpu().numpy()`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..workloads import LAYERNORM_EPS, SCALE, SOFTMAX_SCALE, Workload
from .base import BATCH, Peer, Prepared, Unavailable, Unsupported


def _function(w: Workload, torch, f16_out_dtype: bool, addmm_out_dtype: bool = False):
    F = torch.nn.functional
    p = w.params
    if w.family == "matmul":
        if w.dtype == "float16" and f16_out_dtype:
            return lambda a, b: torch.mm(a, b, out_dtype=torch.float32)
        return lambda a, b: a @ b  # f16: f16 result, f32 accumulation inside cuBLAS
    if w.family == "batch_matmul":
        return torch.bmm
    if w.family == "conv2d":  # NHWC data as channels_last NCHW views: cuDNN's NHWC kernels, no copies
        return lambda x, k: F.conv2d(x, k, padding=p["pad"])
    if w.family == "depthwise_conv2d":
        return lambda x, k: F.conv2d(x, k, padding=p["pad"], groups=p["c"])
    if w.family == "softmax":
        return lambda x: torch.softmax(x * SOFTMAX_SCALE, dim=-1)
    if w.family == "layernorm":
        return lambda x, g, b: F.layer_norm(x, (p["c"],), g, b, LAYERNORM_EPS)
    if w.family == "matmul_gelu":
        if w.dtype == "float16":  # f16 x and W, f32 bias; f32 product, bias add and gelu
            if addmm_out_dtype:  # bias in cuBLAS's epilogue, as the f32 layer's addmm
                return lambda x, wt, bias: F.gelu(torch.addmm(bias, x, wt, out_dtype=torch.float32), approximate="tanh")
            if f16_out_dtype:
                return lambda x, wt, bias: F.gelu(torch.mm(x, wt, out_dtype=torch.float32) + bias, approximate="tanh")
            return lambda x, wt, bias: F.gelu(torch.mm(x, wt).float() + bias, approximate="tanh")
        return lambda x, wt, bias: F.gelu(torch.addmm(bias, x, wt), approximate="tanh")
    if w.family == "linear":  # f16 only: f16 x, W and bias, f16 out; f32 accumulation inside cuBLAS (and on CPU)
        return lambda x, wt, bias: torch.addmm(bias, x, wt)
    if w.family == "ew_chain":
        return lambda x, bias, res: F.gelu(x + bias, approximate="tanh") + res
    if w.family == "add":
        return torch.add
    if w.family == "scale":
        return lambda x: x * SCALE
    raise Unsupported(f"no torch form of {w.family}")


def _to_torch(w: Workload, inputs: list, torch, device) -> list:
    """numpy -> device tensors in torch's layout for the op (NHWC as channels_last, HWCF weights as FCHW)."""
    ts = [torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in inputs]
    if w.family == "conv2d":
        x, k = ts
        return [x.permute(0, 3, 1, 2), k.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)]
    if w.family == "depthwise_conv2d":
        x, k = ts
        c, kk = w.params["c"], w.params["k"]
        return [x.permute(0, 3, 1, 2), k.permute(2, 0, 1).reshape(c, 1, kk, kk).contiguous()]
    return ts


def _from_torch(w: Workload, t) -> np.ndarray:
    if w.family in ("conv2d", "depthwise_conv2d"):
        t = t.permute(0, 2, 3, 1)
    return t.cpu().numpy()



def _runs(call) -> bool:
    """Whether this torch build and device take `call`: an older torch refuses the keyword (TypeError), CPU torch
    the kernel (NotImplementedError, a RuntimeError)."""
    try:
        call()
        return True
    except (TypeError, RuntimeError):
        return False

class _Prepared(Prepared):
    def __init__(self, peer: TorchPeer, w: Workload, inputs: list[np.ndarray]):
        self.peer, self.w = peer, w
        if w.family == "model":  # the module the ONNX file was exported from, with the same state dict
            from ..model_workloads import WEIGHTS_FILE, load_module

            self.fn = load_module(w.params, Path(w.onnx_path).parent / WEIGHTS_FILE).to(peer.device)
            self.notes = "eager nn.Module (the one exported to ONNX), same weights"
        else:
            self.fn = _function(w, peer.torch, peer.f16_out_dtype, peer.addmm_out_dtype)
        if w.family == "matmul" and w.dtype == "float16" and not peer.f16_out_dtype:
            self.notes = "f16 result (this torch has no torch.mm(out_dtype=)); f32 accumulation in cuBLAS"
        if w.family == "matmul_gelu" and w.dtype == "float16":
            if peer.addmm_out_dtype:
                self.notes = "addmm(f32 bias, f16, f16, out_dtype=f32) then gelu(tanh): 2 ops"
            elif peer.f16_out_dtype:
                self.notes = ("mm(out_dtype=f32) + f32 bias, gelu(tanh): 3 ops (this torch on this device has no "
                              "addmm(out_dtype=) with an f32 bias)")
            else:
                self.notes = ("f16 matmul result widened to f32 (this torch on this device has no "
                              "mm(out_dtype=)), then f32 bias and gelu(tanh): the product is rounded to f16 once")
        if w.family == "linear":
            self.notes = ("addmm(f16 bias, f16 x, f16 W): 1 op, f16 out, f32 accumulation; the bias is added to the "
                          "f32 sum before its one rounding to f16 (the workload rounds the product, then adds in f16)")
        self.resident = _to_torch(w, inputs, peer.torch, peer.device)

    def run_device(self) -> None:
        with self.peer.torch.no_grad():
            self.fn(*self.resident)
        self.peer.sync()

    def run_device_batch(self) -> int:
        with self.peer.torch.no_grad():
            for _ in range(BATCH):
                self.fn(*self.resident)
        self.peer.sync()
        return BATCH

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        with self.peer.torch.no_grad():
            out = self.fn(*_to_torch(self.w, inputs, self.peer.torch, self.peer.device))
        return _from_torch(self.w, out)

    def device_result(self) -> np.ndarray:
        with self.peer.torch.no_grad():
            return _from_torch(self.w, self.fn(*self.resident))


class TorchPeer(Peer):
    name = "torch"

    def __init__(self, want: str = "auto"):
        self.want = want  # "auto": cuda if available, else cpu

    def describe(self) -> dict:
        try:
            import torch
        except ImportError as e:
            raise Unavailable(f"torch is not installed ({e})") from e
        self.torch = torch
        cuda = torch.cuda.is_available() and self.want in ("auto", "cuda")
        if self.want == "cuda" and not cuda:
            raise Unavailable("torch has no CUDA device here")
        self.device = torch.device("cuda" if cuda else "cpu")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 (BENCHMARKS.md: TF32 off)
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        self.sync = torch.cuda.synchronize if cuda else (lambda: None)
        a = torch.ones((2, 2), dtype=torch.float16, device=self.device)
        self.f16_out_dtype = _runs(lambda: torch.mm(a, a, out_dtype=torch.float32))
        # An f32 bias in the f16 GEMM's epilogue (mlp_gelu_4096_f16).
        self.addmm_out_dtype = _runs(lambda: torch.addmm(torch.ones(2, device=self.device), a, a,
                                                         out_dtype=torch.float32))
        d = {"torch": torch.__version__, "device": str(self.device), "tf32": False}
        if cuda:
            d.update(name=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                     cudnn=torch.backends.cudnn.version())
        else:
            d.update(name="host CPU", threads=torch.get_num_threads())
        return d

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        return _Prepared(self, w, inputs)
