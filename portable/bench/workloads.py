"""The benchmark workload table: what each workload computes, at which size per size class, and its cost.

Every workload is built once, as the Linalg MLIR text that portable compiles and IREE compiles too (from a
`portable.Graph`, or from MLIR text where the Graph API has no such op). Sizes come in three classes:
"gpu" (the nominal sizes), "cpu" (scaled down so a full run on lavapipe + PoCL takes minutes) and "tiny"
(smoke runs and tests). No MLIR bindings are needed here: the Graph builder emits text.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, field

import numpy as np

SIZE_CLASSES = ("gpu", "cpu", "tiny")


def _mm(m: int, n: int, k: int) -> dict:
    return {"m": m, "n": n, "k": k}


def _bmm(b: int, m: int, k: int, n: int) -> dict:
    return {"b": b, "m": m, "k": k, "n": n}


def _conv(n: int, hw: int, c: int, f: int | None, k: int) -> dict:
    d = {"n": n, "h": hw, "w": hw, "c": c, "k": k, "pad": k // 2}
    return d if f is None else {**d, "f": f}


def _rc(r: int, c: int) -> dict:
    return {"r": r, "c": c}


# id -> (family, params per size class, dtype). The id names the nominal (gpu) size and stays the same in
# every class, so results of different devices line up; `Workload.label` shows the real shape.
TABLE: dict[str, tuple[str, dict[str, dict], str]] = {
    "matmul_1024_f32": ("matmul", {"gpu": _mm(1024, 1024, 1024), "cpu": _mm(512, 512, 512),
                                   "tiny": _mm(64, 64, 64)}, "float32"),
    "matmul_4096_f32": ("matmul", {"gpu": _mm(4096, 4096, 4096), "cpu": _mm(1024, 1024, 1024),
                                   "tiny": _mm(128, 128, 128)}, "float32"),
    "matmul_1024_f16": ("matmul", {"gpu": _mm(1024, 1024, 1024), "cpu": _mm(512, 512, 512),
                                   "tiny": _mm(64, 64, 64)}, "float16"),
    "matmul_4096_f16": ("matmul", {"gpu": _mm(4096, 4096, 4096), "cpu": _mm(1024, 1024, 1024),
                                   "tiny": _mm(128, 128, 128)}, "float16"),
    "gemv_4096": ("matmul", {"gpu": _mm(1, 4096, 4096), "cpu": _mm(1, 2048, 2048), "tiny": _mm(1, 256, 256)},
                  "float32"),
    # A transformer MLP's first layer: the matmul with its epilogue (bias, tanh-GELU) fused into the kernel.
    "mlp_gelu_4096": ("matmul_gelu", {"gpu": _mm(4096, 4096, 4096), "cpu": _mm(512, 512, 512),
                                      "tiny": _mm(64, 64, 64)}, "float32"),
    # The same layer with f16 activations and weights, the product accumulated in f32 and the epilogue (f32 bias,
    # tanh-GELU) in f32 on the f32 accumulator: the result stays f32 (MLIR text, as for the f16 matmul).
    "mlp_gelu_4096_f16": ("matmul_gelu", {"gpu": _mm(4096, 4096, 4096), "cpu": _mm(512, 512, 512),
                                          "tiny": _mm(64, 64, 64)}, "float16"),
    # An f16 model's linear layer as the ONNX importer gives it (Gemm in f16): the product accumulated in f32 and
    # rounded to f16, the f16 bias added in f16; f16 out (MLIR text).
    "linear_4096_f16": ("linear", {"gpu": _mm(4096, 4096, 4096), "cpu": _mm(512, 512, 512),
                                   "tiny": _mm(64, 64, 64)}, "float16"),
    "bmm_attention": ("batch_matmul", {"gpu": _bmm(16, 512, 64, 512), "cpu": _bmm(8, 256, 64, 256),
                                       "tiny": _bmm(2, 32, 16, 32)}, "float32"),
    "conv3x3_resnet": ("conv2d", {"gpu": _conv(8, 56, 64, 64, 3), "cpu": _conv(1, 56, 64, 64, 3),
                                  "tiny": _conv(1, 8, 8, 8, 3)}, "float32"),
    "conv1x1_resnet": ("conv2d", {"gpu": _conv(8, 56, 64, 256, 1), "cpu": _conv(1, 56, 64, 256, 1),
                                  "tiny": _conv(1, 8, 8, 16, 1)}, "float32"),
    "conv1x1_mobilenet": ("conv2d", {"gpu": _conv(8, 28, 256, 256, 1), "cpu": _conv(1, 28, 256, 256, 1),
                                     "tiny": _conv(1, 4, 16, 16, 1)}, "float32"),
    "dwconv3x3_mobilenet": ("depthwise_conv2d", {"gpu": _conv(8, 112, 32, None, 3), "cpu": _conv(1, 112, 32, None, 3),
                                                 "tiny": _conv(1, 8, 8, None, 3)}, "float32"),
    "softmax_4096": ("softmax", {"gpu": _rc(4096, 4096), "cpu": _rc(1024, 1024), "tiny": _rc(64, 64)}, "float32"),
    "layernorm_4096": ("layernorm", {"gpu": _rc(4096, 4096), "cpu": _rc(1024, 1024), "tiny": _rc(64, 64)},
                       "float32"),
    # Short rows (attention probabilities over 256 keys; a 384-wide model's norm): fewer threads per row.
    "softmax_rows256": ("softmax", {"gpu": _rc(65536, 256), "cpu": _rc(4096, 256), "tiny": _rc(16, 256)}, "float32"),
    "layernorm_rows384": ("layernorm", {"gpu": _rc(32768, 384), "cpu": _rc(2048, 384), "tiny": _rc(16, 384)},
                          "float32"),
    # A scaled copy of softmax_4096's bytes: what streaming alone reaches on the device, for the row workloads.
    "scale_4096": ("scale", {"gpu": _rc(4096, 4096), "cpu": _rc(1024, 1024), "tiny": _rc(64, 64)}, "float32"),
    # The same copy at 4x the bytes: with add_64Mi, three sizes for the streaming floor (bench/targets.py).
    "scale_8192": ("scale", {"gpu": _rc(8192, 8192), "cpu": _rc(2048, 2048), "tiny": _rc(64, 128)}, "float32"),
    "ew_chain_16Mi": ("ew_chain", {"gpu": _rc(4096, 4096), "cpu": _rc(1024, 1024), "tiny": _rc(64, 64)}, "float32"),
    "add_64Mi": ("add", {"gpu": {"n": 64 << 20}, "cpu": {"n": 4 << 20}, "tiny": {"n": 4096}}, "float32"),
}


def _resnet(hw: int, width: int = 64, depths: tuple[int, ...] = (3, 4, 6, 3), block: str = "bottleneck") -> dict:
    return {"arch": "resnet", "block": block, "depths": list(depths), "width": width, "classes": 1000, "n": 1,
            "hw": hw}


# Whole models (`portable bench --models`), exported from models/cv.py to ONNX at bench time (needs torch).
# On CPU drivers the full ResNet-50 at 224x224 takes ~25 s a call on lavapipe (~3 s on PoCL), so the cpu class
# keeps the network and its weights but feeds it 112x112 (a quarter of the work); tiny is a thin, shallow ResNet.
MODEL_TABLE: dict[str, tuple[str, dict[str, dict], str]] = {
    "resnet50": ("model", {"gpu": _resnet(224), "cpu": _resnet(112), "tiny": _resnet(64, 8, (1, 1, 1, 1))},
                 "float32"),
}

SOFTMAX_SCALE = 0.125  # 1/sqrt(64): the scaled softmax of attention with head dim 64
LAYERNORM_EPS = 1e-5
SCALE = 2.0  # scale_4096: y = 2x


@dataclass(frozen=True)
class Workload:
    """One workload at one size: the MLIR both compilers get, the input signature, and the work it does."""

    id: str
    family: str
    size_class: str
    params: dict
    dtype: str
    inputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) per input
    output: tuple[tuple[int, ...], str]
    flops: float
    bytes: float  # minimum traffic: every input read once, the output written once
    bound: str  # "compute" | "memory": which device peak the fraction-of-peak uses
    mlir: str = field(repr=False)
    built_with: str = "portable.Graph"
    onnx_path: str | None = None  # model workloads: the ONNX file every peer runs (made by the runner)

    @property
    def label(self) -> str:
        p = self.params
        dt = {"float32": "f32", "float16": "f16"}[self.dtype]
        if self.family == "matmul":
            return f"matmul {p['m']}x{p['k']}x{p['n']} {dt}" + (" (f32 acc+out)" if dt == "f16" else "")
        if self.family == "linear":
            return f"matmul {p['m']}x{p['k']}x{p['n']} + bias {dt} (f32 acc, {dt} out)"
        if self.family == "matmul_gelu":
            return f"gelu(matmul {p['m']}x{p['k']}x{p['n']} + bias) {dt}" + (" (f32 acc+out)" if dt == "f16" else "")
        if self.family == "batch_matmul":
            return f"bmm {p['b']}x{p['m']}x{p['k']} @ {p['b']}x{p['k']}x{p['n']} {dt}"
        if self.family in ("conv2d", "depthwise_conv2d"):
            dw = self.family == "depthwise_conv2d"
            return (f"{'dw' if dw else ''}conv {p['k']}x{p['k']} NHWC {p['n']}x{p['h']}x{p['w']}x{p['c']}"
                    + ("" if dw else f"->{p['f']}") + f" {dt}")
        if self.family in ("softmax", "layernorm", "ew_chain", "scale"):
            return f"{self.family} {p['r']}x{p['c']} {dt}"
        if self.family == "model":
            name = "ResNet-50" if (p["depths"], p["width"]) == ([3, 4, 6, 3], 64) else \
                f"ResNet {p['block']} {'-'.join(map(str, p['depths']))} width {p['width']}"
            return f"{name} {p['n']}x3x{p['hw']}x{p['hw']} {dt}"
        n = p["n"]
        return f"add {n >> 20} Mi {dt}" if n >= 1 << 20 else f"add {n / 1024:g} Ki {dt}"

    @property
    def mlir_sha(self) -> str:
        return hashlib.sha256(self.mlir.encode()).hexdigest()[:16]

    def make_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Deterministic inputs: standard normal (layernorm gamma around 1), cast to each input's dtype."""
        rng = np.random.default_rng(seed)
        out = []
        for shape, dtype in self.inputs:
            a = rng.standard_normal(shape, dtype=np.float32)
            out.append(a.astype(dtype))
        if self.family == "layernorm":
            out[1] = (1.0 + 0.1 * out[1]).astype(self.dtype)
        return out

    def tolerance(self) -> float:
        """Allowed max |out - ref| / max |ref|: f16 inputs round, long f32 sums reorder."""
        return 2e-2 if self.dtype == "float16" else 2e-3


def _nbytes(shapes: list[tuple[tuple[int, ...], str]]) -> float:
    return float(sum(int(np.prod(s)) * np.dtype(d).itemsize for s, d in shapes))


def _conv_out(p: dict) -> tuple[int, int]:
    return p["h"] + 2 * p["pad"] - p["k"] + 1, p["w"] + 2 * p["pad"] - p["k"] + 1


def _graph(family: str, p: dict, dtype: str):
    """The portable.Graph of a family (the families the Graph API has)."""
    from ..frontend.graph import Graph

    g = Graph(family)
    if family == "matmul":
        g.output(g.matmul(g.input((p["m"], p["k"]), dtype), g.input((p["k"], p["n"]), dtype)))
    elif family == "matmul_gelu":
        x, w, bias = g.input((p["m"], p["k"]), dtype), g.input((p["k"], p["n"]), dtype), g.input((p["n"],), dtype)
        g.output(g.gelu(g.add(g.matmul(x, w), bias)))
    elif family == "batch_matmul":
        g.output(g.matmul(g.input((p["b"], p["m"], p["k"]), dtype), g.input((p["b"], p["k"], p["n"]), dtype)))
    elif family == "conv2d":
        x = g.input((p["n"], p["h"], p["w"], p["c"]), dtype)
        w = g.input((p["k"], p["k"], p["c"], p["f"]), dtype)
        g.output(g.conv2d(x, w, padding=p["pad"], layout="NHWC"))
    elif family == "softmax":
        g.output(g.softmax(g.mul(g.input((p["r"], p["c"]), dtype), SOFTMAX_SCALE), axis=-1))
    elif family == "layernorm":
        # Not in the Graph API: built from mean, sub, mul, add, rsqrt (two row reductions + elementwise).
        x, gamma, beta = g.input((p["r"], p["c"]), dtype), g.input((p["c"],), dtype), g.input((p["c"],), dtype)
        xc = g.sub(x, g.mean(x, axis=-1, keepdims=True))
        var = g.mean(g.mul(xc, xc), axis=-1, keepdims=True)
        g.output(g.add(g.mul(g.mul(xc, g.rsqrt(g.add(var, LAYERNORM_EPS))), gamma), beta))
    elif family == "ew_chain":
        # The epilogue of a transformer MLP: bias add, tanh-GELU, residual add (one fused kernel expected).
        x, bias, res = g.input((p["r"], p["c"]), dtype), g.input((p["c"],), dtype), g.input((p["r"], p["c"]), dtype)
        g.output(g.add(g.gelu(g.add(x, bias)), res))
    elif family == "add":
        g.output(g.add(g.input((p["n"],), dtype), g.input((p["n"],), dtype)))
    elif family == "scale":
        g.output(g.mul(g.input((p["r"], p["c"]), dtype), SCALE))
    else:
        raise KeyError(family)
    return g


_MLIR_TYPES = {"float32": "f32", "float16": "f16"}


def _tt(shape, dtype: str) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + "x" + _MLIR_TYPES[dtype] + ">"


def _matmul_f16_mlir(p: dict) -> str:
    """f16 operands, f32 accumulator and result: the Graph API's matmul keeps the operand dtype, so this is
    written as MLIR (linalg.matmul with mixed element types extends the operands)."""
    a, b, c = _tt((p["m"], p["k"]), "float16"), _tt((p["k"], p["n"]), "float16"), _tt((p["m"], p["n"]), "float32")
    return f"""module attributes {{portable.graph = "matmul_f16_f32acc"}} {{
  func.func @main(%a: {a}, %b: {b}) -> {c} {{
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : {c}
    %acc = linalg.fill ins(%zero : f32) outs(%empty : {c}) -> {c}
    %r = linalg.matmul ins(%a, %b : {a}, {b}) outs(%acc : {c}) -> {c}
    return %r : {c}
  }}
}}
"""


def _matmul_bias_f16_mlir(p: dict, graph: str, bias: str, out: str, body: str, result: str) -> str:
    """x @ W with x, W f16, the product accumulated in f32 (linalg.matmul with mixed element types), then one
    linalg.generic over the product (%v, f32) and a per-column bias (%bv, dtype `bias`) writing `out`: `body`, the
    block's ops, yields `result`."""
    x, w, c = _tt((p["m"], p["k"]), "float16"), _tt((p["k"], p["n"]), "float16"), _tt((p["m"], p["n"]), "float32")
    b, y = _tt((p["n"],), bias), _tt((p["m"], p["n"]), out)
    return f"""module attributes {{portable.graph = "{graph}"}} {{
  func.func @main(%x: {x}, %w: {w}, %bias: {b}) -> {y} {{
    %zero = arith.constant 0.0 : f32
    %empty = tensor.empty() : {c}
    %acc = linalg.fill ins(%zero : f32) outs(%empty : {c}) -> {c}
    %mm = linalg.matmul ins(%x, %w : {x}, {w}) outs(%acc : {c}) -> {c}
    %empty2 = tensor.empty() : {y}
    %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                                           affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]}}
      ins(%mm, %bias : {c}, {b}) outs(%empty2 : {y}) {{
    ^bb0(%v: f32, %bv: {_MLIR_TYPES[bias]}, %o: {_MLIR_TYPES[out]}):
{body}      linalg.yield {result} : {_MLIR_TYPES[out]}
    }} -> {y}
    return %r : {y}
  }}
}}
"""


def _matmul_gelu_f16_mlir(p: dict) -> str:
    """gelu(x @ W + bias) with x, W f16, the product accumulated in f32, then in f32: + bias (f32, per column),
    tanh-GELU with the constants and order of operations of `Graph.gelu` (0.5x * (1 + tanh(sqrt(2/pi) * (x +
    0.044715 x^3)))). Result f32."""
    s2pi, c3 = (float(np.float32(v)) for v in (np.sqrt(2 / np.pi), 0.044715))  # as the Graph prints them
    return _matmul_bias_f16_mlir(p, "matmul_gelu_f16_f32acc", "float32", "float32", f"""\
      %h = arith.addf %v, %bv : f32
      %half = arith.constant 0.5 : f32
      %one = arith.constant 1.0 : f32
      %s2pi = arith.constant {s2pi!r} : f32
      %c3 = arith.constant {c3!r} : f32
      %hh = arith.mulf %half, %h : f32
      %h2 = arith.mulf %h, %h : f32
      %h3 = arith.mulf %h, %h2 : f32
      %t0 = arith.mulf %c3, %h3 : f32
      %t1 = arith.addf %h, %t0 : f32
      %t2 = arith.mulf %s2pi, %t1 : f32
      %t3 = math.tanh %t2 : f32
      %t4 = arith.addf %one, %t3 : f32
      %g = arith.mulf %hh, %t4 : f32
""", "%g")


def _linear_f16_mlir(p: dict) -> str:
    """round_f16(x @ W) + bias, all f16 at the edges: the product accumulated in f32, rounded to f16, then the
    bias added in f16 (what torch-mlir's ONNX importer makes of an f16 Gemm)."""
    return _matmul_bias_f16_mlir(p, "linear_f16_f32acc", "float16", "float16", """\
      %h = arith.truncf %v : f32 to f16
      %s = arith.addf %h, %bv : f16
""", "%s")


def _depthwise_mlir(p: dict, dtype: str) -> str:
    """Depthwise 3x3 NHWC (weights HWC): no Graph op, so tensor.pad + linalg.depthwise_conv_2d_nhwc_hwc."""
    n, h, w, c, k, pad = p["n"], p["h"], p["w"], p["c"], p["k"], p["pad"]
    oh, ow = _conv_out(p)
    et = _MLIR_TYPES[dtype]
    x, wt = _tt((n, h, w, c), dtype), _tt((k, k, c), dtype)
    xp, out = _tt((n, h + 2 * pad, w + 2 * pad, c), dtype), _tt((n, oh, ow, c), dtype)
    return f"""module attributes {{portable.graph = "depthwise_conv2d"}} {{
  func.func @main(%x: {x}, %w: {wt}) -> {out} {{
    %zero = arith.constant 0.0 : {et}
    %xp = tensor.pad %x low[0, {pad}, {pad}, 0] high[0, {pad}, {pad}, 0] {{
    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):
      tensor.yield %zero : {et}
    }} : {x} to {xp}
    %empty = tensor.empty() : {out}
    %acc = linalg.fill ins(%zero : {et}) outs(%empty : {out}) -> {out}
    %r = linalg.depthwise_conv_2d_nhwc_hwc {{dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}}
      ins(%xp, %w : {xp}, {wt}) outs(%acc : {out}) -> {out}
    return %r : {out}
  }}
}}
"""


def build(wid: str, size_class: str, onnx_path: str | None = None) -> Workload:
    """The workload `wid` at `size_class` ("gpu" | "cpu" | "tiny"). A model workload names the ONNX file its
    peers run (`onnx_path`, made by model_workloads.export)."""
    family, sizes, dtype = TABLE[wid] if wid in TABLE else MODEL_TABLE[wid]
    p = dict(sizes[size_class])
    built_with = "portable.Graph"
    if family == "model":
        shape = (p["n"], 3, p["hw"], p["hw"])
        ins, out = [(shape, dtype)], ((p["n"], p["classes"]), dtype)
        # flops and weight bytes come from the exported file (model_workloads.onnx_cost), filled in by the runner
        return Workload(id=wid, family=family, size_class=size_class, params=p, dtype=dtype, inputs=tuple(ins),
                        output=out, flops=0.0, bytes=_nbytes(list(ins) + [out]), bound="compute",
                        mlir="", built_with="models/cv.py -> torch.onnx.export (ONNX, BatchNorm folded)",
                        onnx_path=onnx_path)
    if family == "matmul":
        ins = [((p["m"], p["k"]), dtype), ((p["k"], p["n"]), dtype)]
        out = ((p["m"], p["n"]), "float32")
        flops, bound = 2.0 * p["m"] * p["n"] * p["k"], "memory" if p["m"] == 1 else "compute"
        if dtype == "float16":
            text, built_with = _matmul_f16_mlir(p), "MLIR text (f16 in, f32 accumulate and out)"
        else:
            text = _graph(family, p, dtype).to_mlir()
    elif family == "matmul_gelu":
        flops, bound = 2.0 * p["m"] * p["n"] * p["k"], "compute"  # the epilogue (~15 flops an element) not counted
        if dtype == "float16":  # f16 activations and weights; f32 bias, accumulator and result
            ins = [((p["m"], p["k"]), dtype), ((p["k"], p["n"]), dtype), ((p["n"],), "float32")]
            out = ((p["m"], p["n"]), "float32")
            text, built_with = _matmul_gelu_f16_mlir(p), "MLIR text (f16 in, f32 accumulate, f32 bias + GELU and out)"
        else:
            ins = [((p["m"], p["k"]), dtype), ((p["k"], p["n"]), dtype), ((p["n"],), dtype)]
            out = ((p["m"], p["n"]), dtype)
            text = _graph(family, p, dtype).to_mlir()
    elif family == "linear":  # f16 only: an f16 model's Gemm
        ins = [((p["m"], p["k"]), dtype), ((p["k"], p["n"]), dtype), ((p["n"],), dtype)]
        out = ((p["m"], p["n"]), dtype)
        flops, bound = 2.0 * p["m"] * p["n"] * p["k"], "compute"
        text, built_with = _linear_f16_mlir(p), "MLIR text (f16 in, f32 accumulate rounded to f16, f16 bias and out)"
    elif family == "batch_matmul":
        ins = [((p["b"], p["m"], p["k"]), dtype), ((p["b"], p["k"], p["n"]), dtype)]
        out = ((p["b"], p["m"], p["n"]), dtype)
        flops, bound, text = 2.0 * p["b"] * p["m"] * p["n"] * p["k"], "compute", _graph(family, p, dtype).to_mlir()
    elif family in ("conv2d", "depthwise_conv2d"):
        oh, ow = _conv_out(p)
        x = ((p["n"], p["h"], p["w"], p["c"]), dtype)
        if family == "conv2d":
            ins, out = [x, ((p["k"], p["k"], p["c"], p["f"]), dtype)], ((p["n"], oh, ow, p["f"]), dtype)
            flops, bound = 2.0 * p["n"] * oh * ow * p["f"] * p["k"] * p["k"] * p["c"], "compute"
            text = _graph(family, p, dtype).to_mlir()
        else:
            ins, out = [x, ((p["k"], p["k"], p["c"]), dtype)], ((p["n"], oh, ow, p["c"]), dtype)
            flops, bound = 2.0 * p["n"] * oh * ow * p["c"] * p["k"] * p["k"], "memory"
            text, built_with = _depthwise_mlir(p, dtype), "MLIR text (linalg.depthwise_conv_2d_nhwc_hwc)"
    elif family in ("softmax", "layernorm", "ew_chain"):
        rc = (p["r"], p["c"])
        ins = {"softmax": [(rc, dtype)], "layernorm": [(rc, dtype), ((p["c"],), dtype), ((p["c"],), dtype)],
               "ew_chain": [(rc, dtype), ((p["c"],), dtype), (rc, dtype)]}[family]
        out, bound = (rc, dtype), "memory"
        flops = float(p["r"] * p["c"]) * {"softmax": 5, "layernorm": 8, "ew_chain": 12}[family]
        text = _graph(family, p, dtype).to_mlir()
        if family == "layernorm":
            built_with = "portable.Graph (mean, sub, mul, add, rsqrt: no layernorm op)"
    elif family == "scale":
        ins, out = [((p["r"], p["c"]), dtype)], ((p["r"], p["c"]), dtype)
        flops, bound, text = float(p["r"] * p["c"]), "memory", _graph(family, p, dtype).to_mlir()
    elif family == "add":
        ins, out = [((p["n"],), dtype)] * 2, ((p["n"],), dtype)
        flops, bound, text = float(p["n"]), "memory", _graph(family, p, dtype).to_mlir()
    else:
        raise KeyError(family)
    return Workload(id=wid, family=family, size_class=size_class, params=p, dtype=dtype, inputs=tuple(ins),
                    output=out, flops=flops, bytes=_nbytes(list(ins) + [out]), bound=bound, mlir=text,
                    built_with=built_with)


def select(pattern: str | None, models: bool = False) -> list[str]:
    """Workload ids matching a comma-separated list of globs or substrings (None: all), in table order; from
    the model table with `models`."""
    table = MODEL_TABLE if models else TABLE
    if not pattern:
        return list(table)
    pats = [p.strip() for p in pattern.split(",") if p.strip()]

    def hit(wid: str) -> bool:
        return any(fnmatch.fnmatch(wid, p) if any(ch in p for ch in "*?[") else p in wid for p in pats)

    return [w for w in table if hit(w)]
