"""The `strategies` suite: generated cases at the shapes where the code generator changes its strategy.

onnx's node cases are a few elements each, below every size at which a profile's strategy switches: split-K,
workgroup-memory and register tiles, cooperative matrices, a workgroup per row, subgroup reductions, the
depthwise window kernels, tails. These cases sit on both sides of those switches (odd and power-of-two sizes,
single rows and columns, K past a split, rows past the loop limit of lavapipe, depthwise and grouped
convolutions, f16), so that a profile's kernels can be checked where they differ from another's, on its own
hardware: `portable conformance --suite strategies --profile nvidia --export DIR --compile-only` here, the
replay there.

The reference of every float case is onnx's own evaluator (onnx.reference) on a float64 twin of the model,
rounded to the case's dtype. Tolerances scale with the length of a reduction: a correct kernel sums in another
order; a wrong tile or tail is off by whole terms. Inputs come from a fixed seed and stay under 4 MiB each,
so the exported suite travels to a GPU host.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import config

VERSION = 2  # bump when the cases change: the cached copy is written again
SEED = 2026
OPSET = 20

F = "F"  # the case's float type in a spec (float32 or float16; float64 for the reference twin)


@dataclass
class Spec:
    name: str
    nodes: Callable[[], list]  # onnx NodeProtos
    inputs: dict[str, tuple]  # name -> (shape, F | np.dtype, kind): kind "normal", "positive", "index:N"
    outputs: list[str]
    dtype: str = "float32"
    rtol: float = 1e-4
    atol: float = 1e-5
    initializers: dict[str, np.ndarray] = field(default_factory=dict)  # int64 constants (axes, shapes)


def _node(op: str, ins: list[str], outs: list[str], **attrs):
    from onnx import helper

    return helper.make_node(op, ins, outs, **attrs)


def _k_tol(k: int, dtype: str) -> tuple[float, float]:
    """(rtol, atol) for sums of k products of unit normals: a correct kernel errs by ~sqrt(k) rounding steps of
    values around sqrt(k); a missed or doubled term is off by ~1."""
    if dtype == "float16":
        return 1e-2, 1e-2 * math.sqrt(k)
    return 1e-4, 2e-6 * k


def _matmuls(out: list[Spec]) -> None:
    shapes = [(1, 1024, 500), (1, 4100, 100), (3, 513, 31), (17, 64, 130), (64, 256, 256), (129, 1000, 65),
              (300, 128, 520), (32, 4096, 128), (256, 256, 256), (1, 7, 1), (5, 1, 9), (2, 2048, 3)]
    for m, k, n in shapes:
        rt, at = _k_tol(k, "float32")
        out.append(Spec(f"matmul_{m}x{k}x{n}", lambda: [_node("MatMul", ["a", "b"], ["y"])],
                        {"a": ((m, k), F, "normal"), "b": ((k, n), F, "normal")}, ["y"], rtol=rt, atol=at))
    for m, k, n in [(1, 1024, 1000), (64, 256, 256), (512, 512, 512), (33, 100, 70), (256, 1024, 256)]:
        rt, at = _k_tol(k, "float16")
        out.append(Spec(f"matmul_f16_{m}x{k}x{n}", lambda: [_node("MatMul", ["a", "b"], ["y"])],
                        {"a": ((m, k), F, "normal"), "b": ((k, n), F, "normal")}, ["y"], "float16", rt, at))
    # Gemm with B transposed, bias and an activation: the matmul epilogues.
    for m, k, n in [(32, 384, 768), (1, 512, 500), (37, 129, 257)]:
        rt, at = _k_tol(k, "float32")
        out.append(Spec(f"gemm_bias_relu_{m}x{k}x{n}",
                        lambda: [_node("Gemm", ["a", "b", "c"], ["g"], transB=1), _node("Relu", ["g"], ["y"])],
                        {"a": ((m, k), F, "normal"), "b": ((n, k), F, "normal"), "c": ((n,), F, "normal")}, ["y"],
                        rtol=rt, atol=at))
    # Batched products: attention's scores and values, a decode step's single query, broadcast weights.
    for a, b in [((4, 256, 64), (4, 64, 256)), ((12, 1, 64), (12, 64, 300)), ((12, 1, 300), (12, 300, 64)),
                 ((2, 3, 17, 40), (2, 3, 40, 9)), ((4, 33, 64), (64, 80))]:
        rt, at = _k_tol(a[-1], "float32")
        tag = "x".join(map(str, a)) + "_" + "x".join(map(str, b))
        out.append(Spec(f"batch_matmul_{tag}", lambda: [_node("MatMul", ["a", "b"], ["y"])],
                        {"a": (a, F, "normal"), "b": (b, F, "normal")}, ["y"], rtol=rt, atol=at))
    # q . K^T with K read transposed.
    out.append(Spec("attention_scores_transposed_k",
                    lambda: [_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]), _node("MatMul", ["q", "kt"], ["y"])],
                    {"q": ((6, 1, 64), F, "normal"), "k": ((6, 256, 64), F, "normal")}, ["y"],
                    rtol=1e-4, atol=2e-6 * 64))


def _convs(out: list[Spec]) -> None:
    # (name, x shape, out channels, kernel, stride, pad, group, dilation)
    convs = [("stem_7x7s2", (1, 3, 64, 64), 16, 7, 2, 3, 1, 1),
             ("resnet_3x3", (1, 64, 56, 56), 64, 3, 1, 1, 1, 1),
             ("resnet_1x1", (1, 64, 28, 28), 256, 1, 1, 0, 1, 1),
             ("3x3s2", (1, 128, 28, 28), 256, 3, 2, 1, 1, 1),
             ("late_3x3", (1, 256, 7, 7), 256, 3, 1, 1, 1, 1),
             ("odd_5x5s2", (2, 5, 33, 47), 7, 5, 2, 2, 1, 1),
             ("dilated_3x3", (1, 8, 20, 20), 8, 3, 1, 2, 1, 2),
             ("grouped_g4", (1, 32, 28, 28), 64, 3, 1, 1, 4, 1),
             ("depthwise_3x3", (1, 32, 56, 56), 32, 3, 1, 1, 32, 1),
             ("depthwise_3x3s2", (1, 96, 56, 56), 96, 3, 2, 1, 96, 1),
             ("depthwise_7x7_c960", (1, 960, 7, 7), 960, 3, 1, 1, 960, 1),
             ("depthwise_5x5_odd", (2, 24, 19, 23), 24, 5, 1, 2, 24, 1)]
    for name, xs, co, k, s, p, g, d in convs:
        ci = xs[1] // g
        kk = ci * k * k
        rt, at = _k_tol(kk, "float32")
        out.append(Spec(f"conv_{name}",
                        lambda k=k, s=s, p=p, g=g, d=d: [
                            _node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], strides=[s, s],
                                  pads=[p, p, p, p], group=g, dilations=[d, d]),
                            _node("Relu", ["c"], ["y"])],
                        {"x": (xs, F, "normal"), "w": ((co, ci, k, k), F, "normal"), "b": ((co,), F, "normal")},
                        ["y"], rtol=rt, atol=at))
    rt, at = _k_tol(64 * 9, "float16")
    out.append(Spec("conv_f16_3x3", lambda: [_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                    {"x": ((1, 64, 28, 28), F, "normal"), "w": ((64, 64, 3, 3), F, "normal")}, ["y"], "float16",
                    rt, at))
    out.append(Spec("maxpool_3x3s2", lambda: [_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                                    pads=[1, 1, 1, 1])],
                    {"x": ((1, 32, 56, 56), F, "normal")}, ["y"], rtol=0, atol=0))
    out.append(Spec("averagepool_3x3_odd", lambda: [_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3])],
                    {"x": ((2, 33, 15, 17), F, "normal")}, ["y"]))
    out.append(Spec("global_averagepool", lambda: [_node("GlobalAveragePool", ["x"], ["y"])],
                    {"x": ((1, 2048, 7, 7), F, "normal")}, ["y"]))


def _rows(out: list[Spec]) -> None:
    row_shapes = [(256, 1000), (32, 4097), (1000, 7), (256, 64), (3, 70000), (128, 384), (1024, 256), (2, 63),
                  (8, 65)]
    for r, c in row_shapes:
        out.append(Spec(f"softmax_{r}x{c}", lambda: [_node("Softmax", ["x"], ["y"], axis=-1)],
                        {"x": ((r, c), F, "normal")}, ["y"], rtol=1e-4, atol=1e-6))
    out.append(Spec("softmax_decode_8x12x1x300", lambda: [_node("Softmax", ["x"], ["y"], axis=-1)],
                    {"x": ((8, 12, 1, 300), F, "normal")}, ["y"], rtol=1e-4, atol=1e-6))
    out.append(Spec("softmax_axis1_2x30x7x9", lambda: [_node("Softmax", ["x"], ["y"], axis=1)],
                    {"x": ((2, 30, 7, 9), F, "normal")}, ["y"], rtol=1e-4, atol=1e-6))
    out.append(Spec("softmax_f16_256x1000", lambda: [_node("Softmax", ["x"], ["y"], axis=-1)],
                    {"x": ((256, 1000), F, "normal")}, ["y"], "float16", 1e-2, 1e-4))
    for r, c in [(256, 768), (500, 384), (16, 4097), (300, 63), (8, 65), (2, 70000)]:
        out.append(Spec(f"layernorm_{r}x{c}",
                        lambda: [_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                        {"x": ((r, c), F, "normal"), "g": ((c,), F, "normal"), "b": ((c,), F, "normal")}, ["y"],
                        rtol=1e-4, atol=1e-4))
    out.append(Spec("layernorm_f16_256x768",
                    lambda: [_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                    {"x": ((256, 768), F, "normal"), "g": ((768,), F, "normal"), "b": ((768,), F, "normal")}, ["y"],
                    "float16", 1e-2, 1e-2))
    # RMSNorm as a decoder writes it: x * rsqrt(mean(x^2) + eps) * w.
    out.append(Spec("rmsnorm_33x384",
                    lambda: [_node("Mul", ["x", "x"], ["sq"]), _node("ReduceMean", ["sq", "ax"], ["ms"], keepdims=1),
                             _node("Add", ["ms", "eps"], ["mse"]), _node("Sqrt", ["mse"], ["rms"]),
                             _node("Div", ["x", "rms"], ["n"]), _node("Mul", ["n", "w"], ["y"])],
                    {"x": ((33, 384), F, "normal"), "eps": ((1,), F, "epsilon"), "w": ((384,), F, "normal")}, ["y"],
                    rtol=1e-4, atol=1e-5, initializers={"ax": np.array([-1], np.int64)}))


def _reductions(out: list[Spec]) -> None:
    red = [("sum", (64, 130, 33), [2], 1), ("sum", (64, 130, 33), [1], 0), ("sum", (64, 130, 33), [0, 2], 1),
           ("mean", (1000, 257), [1], 0), ("max", (7, 70000), [1], 1), ("sum", (1, 262147), [1], 0),
           ("l2", (300, 513), [1], 1), ("sum", (1024, 384), [0], 0), ("max", (3, 5, 4097), [0, 2], 0)]
    for kind, shape, axes, keep in red:
        op = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "l2": "ReduceL2"}[kind]
        n = int(np.prod([shape[a] for a in axes]))
        atol = 0 if kind == "max" else 2e-6 * math.sqrt(n) * 10
        tag = "x".join(map(str, shape)) + "_axes" + "".join(map(str, axes)) + f"_keep{keep}"
        out.append(Spec(f"reduce_{kind}_{tag}", lambda op=op, keep=keep: [_node(op, ["x", "ax"], ["y"], keepdims=keep)],
                        {"x": (shape, F, "normal")}, ["y"], rtol=1e-4 if kind != "max" else 0, atol=atol,
                        initializers={"ax": np.array(axes, np.int64)}))
    for shape, axis, last in [((512, 1000), 1, 0), ((33, 70), 0, 0), ((4, 2048), 1, 1), ((6, 3, 300), 2, 0)]:
        tag = "x".join(map(str, shape))
        out.append(Spec(f"argmax_{tag}_axis{axis}{'_last' if last else ''}",
                        lambda axis=axis, last=last: [_node("ArgMax", ["x"], ["y"], axis=axis, keepdims=0,
                                                            select_last_index=last)],
                        {"x": (shape, F, "normal")}, ["y"]))


def _elementwise(out: list[Spec]) -> None:
    out.append(Spec("add_scalar_262147", lambda: [_node("Add", ["x", "s"], ["y"])],
                    {"x": ((262147,), F, "normal"), "s": ((1,), F, "normal")}, ["y"], rtol=1e-6, atol=1e-6))
    out.append(Spec("mul_broadcast_64x1x130_1x33x130", lambda: [_node("Mul", ["a", "b"], ["y"])],
                    {"a": ((64, 1, 130), F, "normal"), "b": ((1, 33, 130), F, "normal")}, ["y"], rtol=1e-6,
                    atol=1e-6))
    out.append(Spec("chain_257x1031",
                    lambda: [_node("Sigmoid", ["x"], ["s"]), _node("Mul", ["s", "b"], ["m"]),
                             _node("Add", ["m", "c"], ["a"]), _node("Tanh", ["a"], ["y"])],
                    {"x": ((257, 1031), F, "normal"), "b": ((1031,), F, "normal"), "c": ((257, 1), F, "normal")},
                    ["y"], rtol=1e-5, atol=1e-6))
    out.append(Spec("gelu_tanh_150x1000", lambda: [_node("Gelu", ["x"], ["y"], approximate="tanh")],
                    {"x": ((150, 1000), F, "normal")}, ["y"], rtol=1e-5, atol=1e-6))
    out.append(Spec("swiglu_37x1024",
                    lambda: [_node("Sigmoid", ["g"], ["s"]), _node("Mul", ["g", "s"], ["si"]),
                             _node("Mul", ["si", "u"], ["y"])],
                    {"g": ((37, 1024), F, "normal"), "u": ((37, 1024), F, "normal")}, ["y"], rtol=1e-5, atol=1e-6))
    out.append(Spec("div_pow_clip_4097x3",
                    lambda: [_node("Div", ["a", "b"], ["d"]), _node("Pow", ["d", "e"], ["p"]),
                             _node("Clip", ["p", "lo", "hi"], ["y"])],
                    {"a": ((4097, 3), F, "positive"), "b": ((4097, 3), F, "positive"), "e": ((3,), F, "normal"),
                     "lo": ((), F, "zero"), "hi": ((), F, "ten")}, ["y"], rtol=1e-5, atol=1e-6))
    out.append(Spec("chain_f16_500x1031",
                    lambda: [_node("Mul", ["x", "b"], ["m"]), _node("Add", ["m", "c"], ["a"]),
                             _node("Relu", ["a"], ["y"])],
                    {"x": ((500, 1031), F, "normal"), "b": ((1031,), F, "normal"), "c": ((500, 1), F, "normal")},
                    ["y"], "float16", 1e-2, 1e-3))


def _data_movement(out: list[Spec]) -> None:
    out.append(Spec("gather_embedding_1000x384", lambda: [_node("Gather", ["t", "i"], ["y"], axis=0)],
                    {"t": ((1000, 384), F, "normal"), "i": ((37,), np.int64, "index:1000")}, ["y"], rtol=0, atol=0))
    out.append(Spec("slice_steps_64x300",
                    lambda: [_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
                    {"x": ((64, 300), F, "normal")}, ["y"], rtol=0, atol=0,
                    initializers={"st": np.array([1, 7], np.int64), "en": np.array([63, 290], np.int64),
                                  "ax": np.array([0, 1], np.int64), "sp": np.array([2, 3], np.int64)}))
    out.append(Spec("concat_axis1_3",
                    lambda: [_node("Concat", ["a", "b", "c"], ["y"], axis=1)],
                    {"a": ((17, 7, 65), F, "normal"), "b": ((17, 1, 65), F, "normal"),
                     "c": ((17, 130, 65), F, "normal")}, ["y"], rtol=0, atol=0))
    out.append(Spec("transpose_0213_8x33x12x64", lambda: [_node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])],
                    {"x": ((8, 33, 12, 64), F, "normal")}, ["y"], rtol=0, atol=0))
    # Rotary embedding as a decoder writes it: halves swapped and negated, then mixed by cos and sin.
    out.append(Spec("rotary_halves_6x64",
                    lambda: [_node("Slice", ["x", "s0", "e0", "ax"], ["x1"]),
                             _node("Slice", ["x", "s1", "e1", "ax"], ["x2"]), _node("Neg", ["x2"], ["nx2"]),
                             _node("Concat", ["nx2", "x1"], ["rot"], axis=-1), _node("Mul", ["x", "cos"], ["a"]),
                             _node("Mul", ["rot", "sin"], ["b"]), _node("Add", ["a", "b"], ["y"])],
                    {"x": ((6, 1, 64), F, "normal"), "cos": ((1, 64), F, "normal"), "sin": ((1, 64), F, "normal")},
                    ["y"], rtol=1e-6, atol=1e-6,
                    initializers={"s0": np.array([0], np.int64), "e0": np.array([32], np.int64),
                                  "s1": np.array([32], np.int64), "e1": np.array([64], np.int64),
                                  "ax": np.array([-1], np.int64)}))


def _matmul_epilogues(out: list[Spec]) -> None:
    """f16 matmuls with an epilogue at sizes the cooperative-matrix tiles divide (nvidia 128x128 and K steps of
    64, amd-rdna3 64x64): the fragments stored, then the epilogue over the workgroup tile read back by other
    threads (compiler/schedule/coop_matrix.py). The importer accumulates an f16 MatMul in f32 and rounds to f16: cast
    back to f32, its epilogue (the rounding, a row-broadcast bias and Gelu, or a residual) updates the f32
    product in place, one kernel; all in f16 (Gemm + Relu), the rounding changes the type and the epilogue is a
    kernel of its own. (Last in the suite: the inputs of the cases before stay what they were.)"""
    for m, k, n in [(256, 512, 256), (128, 256, 384)]:
        rt, at = _k_tol(k, "float16")
        ab = {"a": ((m, k), np.float16, "normal"), "b": ((k, n), np.float16, "normal")}
        out.append(Spec(f"matmul_f16_bias_gelu_f32_{m}x{k}x{n}",
                        lambda: [_node("MatMul", ["a", "b"], ["p"]), _node("CastLike", ["p", "c"], ["q"]),
                                 _node("Add", ["q", "c"], ["g"]), _node("Gelu", ["g"], ["y"], approximate="tanh")],
                        dict(ab, c=((n,), F, "normal")), ["y"], rtol=rt, atol=at))
        out.append(Spec(f"matmul_f16_residual_f32_{m}x{k}x{n}",
                        lambda: [_node("MatMul", ["a", "b"], ["p"]), _node("CastLike", ["p", "r"], ["q"]),
                                 _node("Add", ["q", "r"], ["y"])],
                        dict(ab, r=((m, n), F, "normal")), ["y"], rtol=rt, atol=at))
        out.append(Spec(f"gemm_f16_bias_relu_{m}x{k}x{n}",
                        lambda: [_node("Gemm", ["a", "b", "c"], ["g"]), _node("Relu", ["g"], ["y"])],
                        {"a": ((m, k), F, "normal"), "b": ((k, n), F, "normal"), "c": ((n,), F, "normal")}, ["y"],
                        "float16", rt, at))


def specs() -> list[Spec]:
    out: list[Spec] = []
    for add in (_matmuls, _convs, _rows, _reductions, _elementwise, _data_movement, _matmul_epilogues):
        add(out)
    return out


def _model(spec: Spec, float_type: int, refs: list[np.ndarray] | None = None):
    """The case's model with its floats as `float_type`; outputs typed from the reference values `refs`
    (the importer needs them), untyped for the reference evaluator itself."""
    from onnx import TensorProto, helper, numpy_helper

    def elem(d):
        return float_type if d == F else helper.np_dtype_to_tensor_dtype(np.dtype(d))

    inputs = [helper.make_tensor_value_info(n, elem(d), list(shape)) for n, (shape, d, _) in spec.inputs.items()]
    if refs is None:
        outputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in spec.outputs]
    else:
        outputs = [helper.make_tensor_value_info(n, float_type if r.dtype.kind == "f" else elem(r.dtype), list(r.shape))
                   for n, r in zip(spec.outputs, refs)]
    inits = [numpy_helper.from_array(v, n) for n, v in spec.initializers.items()]
    graph = helper.make_graph(spec.nodes(), spec.name, inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _value(rng: np.random.Generator, shape: tuple, dtype, kind: str) -> np.ndarray:
    if kind.startswith("index:"):
        return rng.integers(0, int(kind.split(":")[1]), size=shape).astype(dtype)
    if kind == "positive":
        return rng.uniform(0.5, 2.0, size=shape)
    if kind in ("zero", "ten", "epsilon"):
        return np.full(shape, {"zero": 0.0, "ten": 10.0, "epsilon": 1e-5}[kind])
    return rng.standard_normal(shape)


def write_case(spec: Spec, root: Path, rng: np.random.Generator) -> None:
    """One case in the backend-test layout: the model in the case's dtype, one data set, the reference from
    onnx.reference on the float64 twin, and a case.json with the tolerances."""
    import onnx
    from onnx import TensorProto, numpy_helper
    from onnx.reference import ReferenceEvaluator

    dt = np.dtype(spec.dtype)
    feeds64, feeds = {}, {}
    for n, (shape, d, kind) in spec.inputs.items():
        v = _value(rng, tuple(shape), np.int64 if d != F else np.float64, kind)
        if d == F:
            v = v.astype(dt).astype(np.float64)  # the reference sees exactly the values the kernel reads
            feeds[n], feeds64[n] = v.astype(dt), v
        else:
            feeds[n] = feeds64[n] = v.astype(d)
    refs = ReferenceEvaluator(_model(spec, TensorProto.DOUBLE)).run(None, feeds64)
    refs = [r.astype(dt) if r.dtype == np.float64 else r for r in refs]
    d = root / f"test_{spec.name}"
    ds = d / "test_data_set_0"
    ds.mkdir(parents=True, exist_ok=True)
    ftype = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[spec.dtype]
    onnx.save(_model(spec, ftype, refs), str(d / "model.onnx"))
    for i, (n, v) in enumerate(feeds.items()):
        (ds / f"input_{i}.pb").write_bytes(numpy_helper.from_array(v, n).SerializeToString())
    for i, (n, v) in enumerate(zip(spec.outputs, refs)):
        (ds / f"output_{i}.pb").write_bytes(numpy_helper.from_array(np.asarray(v), n).SerializeToString())
    op = "+".join(dict.fromkeys(node.op_type for node in spec.nodes()))
    (d / "case.json").write_text(json.dumps({"op": op, "rtol": spec.rtol, "atol": spec.atol}))


def strategies_dir() -> Path:
    """Where the generated cases live (written on first use, again when VERSION changes)."""
    root = config.cache_dir() / "conformance" / f"strategies-v{VERSION}"
    if (root / "DONE").exists():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".strategies-", dir=root.parent))
    rng = np.random.default_rng(SEED)
    for spec in specs():
        write_case(spec, tmp, rng)
    (tmp / "DONE").write_text(str(VERSION))
    if (root / "DONE").exists():  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    return root
