"""onnxruntime on the CPU: each workload as a small ONNX model (opset 20) over the same numpy inputs.

NHWC convolutions go through Transpose -> Conv (NCHW) -> Transpose inside the model (ONNX Conv is NCHW);
the transposes are part of the measured time. f16 matmul (and the f16 MLP layer's x and W) is widened to f32 by
Cast nodes (ORT's CPU provider has no f16 MatMul on x86). The f16 linear layer is the f16 Gemm node itself, as
an f16 model has it: ORT inserts the casts to its f32 Gemm on its own.
"""

from __future__ import annotations

import numpy as np

from ..workloads import LAYERNORM_EPS, SCALE, SOFTMAX_SCALE, Workload
from .base import Peer, Prepared, Unavailable, Unsupported

OPSET = 20


def _model(w: Workload):
    from onnx import TensorProto, helper

    et = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}
    names = [f"in{i}" for i in range(len(w.inputs))]
    ins = [helper.make_tensor_value_info(n, et[d], list(s)) for n, (s, d) in zip(names, w.inputs)]
    out = helper.make_tensor_value_info("out", et[w.output[1]], list(w.output[0]))
    N = helper.make_node
    p = w.params
    inits = []
    if w.family in ("matmul", "batch_matmul"):
        if w.dtype == "float16":
            nodes = [N("Cast", ["in0"], ["a"], to=TensorProto.FLOAT), N("Cast", ["in1"], ["b"], to=TensorProto.FLOAT),
                     N("MatMul", ["a", "b"], ["out"])]
        else:
            nodes = [N("MatMul", names, ["out"])]
    elif w.family in ("conv2d", "depthwise_conv2d"):
        pads = [p["pad"]] * 4
        nodes = [N("Transpose", ["in0"], ["x"], perm=[0, 3, 1, 2])]
        if w.family == "conv2d":
            nodes += [N("Transpose", ["in1"], ["k"], perm=[3, 2, 0, 1]), N("Conv", ["x", "k"], ["y"], pads=pads)]
        else:
            inits.append(helper.make_tensor("shape", TensorProto.INT64, [4], [p["c"], 1, p["k"], p["k"]]))
            nodes += [N("Transpose", ["in1"], ["kt"], perm=[2, 0, 1]), N("Reshape", ["kt", "shape"], ["k"]),
                      N("Conv", ["x", "k"], ["y"], pads=pads, group=p["c"])]
        nodes.append(N("Transpose", ["y"], ["out"], perm=[0, 2, 3, 1]))
    elif w.family == "softmax":
        inits.append(helper.make_tensor("scale", TensorProto.FLOAT, [], [SOFTMAX_SCALE]))
        nodes = [N("Mul", ["in0", "scale"], ["s"]), N("Softmax", ["s"], ["out"], axis=-1)]
    elif w.family == "layernorm":
        nodes = [N("LayerNormalization", names, ["out"], axis=-1, epsilon=LAYERNORM_EPS)]
    elif w.family == "matmul_gelu":
        mm_in = ["in0", "in1"]
        nodes = []
        if w.dtype == "float16":  # f16 x and W widened; the bias (in2) is f32 already
            nodes = [N("Cast", ["in0"], ["a"], to=TensorProto.FLOAT), N("Cast", ["in1"], ["b"], to=TensorProto.FLOAT)]
            mm_in = ["a", "b"]
        nodes += [N("MatMul", mm_in, ["mm"]), N("Add", ["mm", "in2"], ["h"]),
                  N("Gelu", ["h"], ["out"], approximate="tanh")]
    elif w.family == "linear":  # f16 only: the f16 model's Gemm as it is (x, W, bias and out all f16)
        nodes = [N("Gemm", names, ["out"])]
    elif w.family == "ew_chain":
        nodes = [N("Add", ["in0", "in1"], ["h"]), N("Gelu", ["h"], ["g"], approximate="tanh"),
                 N("Add", ["g", "in2"], ["out"])]
    elif w.family == "add":
        nodes = [N("Add", names, ["out"])]
    elif w.family == "scale":
        inits.append(helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE]))
        nodes = [N("Mul", ["in0", "scale"], ["out"])]
    else:
        raise Unsupported(f"no ONNX form of {w.family}")
    graph = helper.make_graph(nodes, w.id, ins, [out], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


class _Prepared(Prepared):
    def __init__(self, peer: OrtPeer, w: Workload, inputs: list[np.ndarray]):
        import onnxruntime as ort

        if w.family == "model":  # the exported file itself, its one input renamed to the harness's name
            self.sess = ort.InferenceSession(w.onnx_path, providers=["CPUExecutionProvider"])
            self.names = [i.name for i in self.sess.get_inputs()]
            self.notes = "the exported ONNX file as is"
        else:
            self.sess = ort.InferenceSession(_model(w).SerializeToString(), providers=["CPUExecutionProvider"])
            self.names = [f"in{i}" for i in range(len(inputs))]
        self.feed = dict(zip(self.names, inputs))
        if w.family in ("conv2d", "depthwise_conv2d"):
            self.notes = "NHWC via Transpose nodes around an NCHW Conv"
        elif w.family == "linear":
            self.notes = ("the f16 Gemm as is: ORT's CPU provider (no x86 f16 Gemm) casts x, W and bias to f32 "
                          "itself, one f32 Gemm with the bias, one rounding to f16")
        elif w.dtype == "float16":
            self.notes = "f16 inputs widened by Cast nodes (no x86 f16 MatMul)"

    def run_device(self) -> None:
        self.sess.run(None, self.feed)

    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        return self.sess.run(None, dict(zip(self.names, inputs)))[0]


class OrtPeer(Peer):
    name = "onnxruntime"
    host = True  # runs where the data is: device time and end-to-end time are one figure

    def describe(self) -> dict:
        try:
            import onnx  # noqa: F401
            import onnxruntime as ort
        except ImportError as e:
            raise Unavailable(f"onnxruntime/onnx not installed ({e}); pip install onnxruntime onnx") from e
        return {"name": "host CPU", "onnxruntime": ort.__version__, "provider": "CPUExecutionProvider"}

    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        return _Prepared(self, w, inputs)
