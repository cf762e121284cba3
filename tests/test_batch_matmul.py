"""Batches of matmuls that share one operand, as exporters write them: ONNX MatMul of a 3-d activation by a 2-d weight
(transformer projections) and a batched 1x1 convolution, each with its epilogue, on every device with the device's
own profile and with the nvidia profile's kernels (operand tiles staged in workgroup memory, the shared operand's as a
2-d tile)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import foreign_profile

import portable

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")

BATCH = 2


def _projection(rng) -> tuple[bytes, list[np.ndarray], np.ndarray]:
    """y = x @ W + b + r, x (2, 64, 128), W (128, 64)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    g = h.make_graph([h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Add", ["m", "B"], ["a"]),
                      h.make_node("Add", ["a", "r"], ["y"])], "projection",
                     [h.make_tensor_value_info("x", T.FLOAT, (BATCH, 64, 128)),
                      h.make_tensor_value_info("r", T.FLOAT, (BATCH, 64, 64))],
                     [h.make_tensor_value_info("y", T.FLOAT, (BATCH, 64, 64))],
                     [nh.from_array(w, "W"), nh.from_array(b, "B")])
    x = rng.standard_normal((BATCH, 64, 128)).astype(np.float32)
    r = rng.standard_normal((BATCH, 64, 64)).astype(np.float32)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    return model, [x, r], x @ w + b + r


def _conv1x1(rng) -> tuple[bytes, list[np.ndarray], np.ndarray]:
    """y = relu(conv1x1(x, W) + b + r), x (2, 32, 8, 8), W (64, 32, 1, 1)."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    w = rng.standard_normal((64, 32, 1, 1)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    g = h.make_graph([h.make_node("Conv", ["x", "W", "B"], ["m"]), h.make_node("Add", ["m", "r"], ["a"]),
                      h.make_node("Relu", ["a"], ["y"])], "conv",
                     [h.make_tensor_value_info("x", T.FLOAT, (BATCH, 32, 8, 8)),
                      h.make_tensor_value_info("r", T.FLOAT, (BATCH, 64, 8, 8))],
                     [h.make_tensor_value_info("y", T.FLOAT, (BATCH, 64, 8, 8))],
                     [nh.from_array(w, "W"), nh.from_array(b, "B")])
    x = rng.standard_normal((BATCH, 32, 8, 8)).astype(np.float32)
    r = rng.standard_normal((BATCH, 64, 8, 8)).astype(np.float32)
    want = np.maximum(np.einsum("oc,nchw->nohw", w[:, :, 0, 0], x) + b[:, None, None] + r, 0)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    return model, [x, r], want


@pytest.mark.parametrize("profile", ["", "nvidia"])
@pytest.mark.parametrize("make", [_projection, _conv1x1], ids=["matmul-3d-2d", "conv1x1"])
def test_batch_of_matmuls_sharing_an_operand(device, make, profile):
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    model, inputs, want = make(np.random.default_rng(3))
    if profile:
        live = open_device(device)
        exe = CompiledGraph(compile_module(graph_text(model), foreign_profile(profile, live), (live.info.api,)), live)
    else:
        exe = portable.compile(model, device=device)
    y, = exe(*inputs)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    exe.close()


def _export_bert(path, hidden: int, intermediate: int, ids_shape: tuple[int, int], dynamic: bool = False) -> None:
    """A one-layer Hugging Face BERT (2 heads, random weights from a seed) exported by torch.onnx as users do,
    its sequence length dynamic where asked."""
    torch = pytest.importorskip("torch", reason="exporting the model needs torch (models extra)")
    pytest.importorskip("transformers", reason="the model comes from transformers (models extra)")
    from portable.zoo.builders import _transformers

    tf = _transformers()
    torch.manual_seed(0)
    bert = tf.BertModel(tf.BertConfig(hidden_size=hidden, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=intermediate, vocab_size=1000)).eval()

    class Hidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask, types):
            return self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    ids = torch.randint(0, 1000, ids_shape)
    torch.onnx.export(Hidden(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(path), opset_version=17,
                      dynamo=False, input_names=names, output_names=["last_hidden_state"],
                      dynamic_axes={n: {1: "seq"} for n in names} if dynamic else None)


@pytest.fixture(scope="module", params=[1, BATCH], ids=lambda b: f"batch{b}")
def tiny_bert(request, tmp_path_factory) -> tuple[str, int]:
    """A one-layer Hugging Face BERT (hidden 128, random weights from a seed) exported by torch.onnx as users do, at
    batch 1 and 2: (path, batch)."""
    batch = request.param
    path = tmp_path_factory.mktemp("bert") / "bert.onnx"
    _export_bert(path, 128, 512, (batch, 128))
    return str(path), batch


def _bert_inputs(batch: int) -> list[np.ndarray]:
    ids = np.random.default_rng(5).integers(0, 1000, (batch, 128)).astype(np.int64)
    return [ids, np.ones_like(ids), np.zeros_like(ids)]


def test_bert_ffn_epilogue_reads_the_norm_rows_without_a_fallback(tiny_bert):
    """The FFN down-projection's residual Add reads the previous LayerNorm's rows, which its row-chain kernel leaves
    with a unit dim (read at a constant index). With the nvidia profile every group keeps its strategy: the epilogue
    reads that operand at a lower rank, so vectorizing it no longer fails and nothing falls back to the plain
    strategy."""
    from portable import profiles
    from portable.api import graph_text
    from portable.compiler.pipeline import STAGES, Compilation, Dumper, run_stages
    from portable.ir import weights
    from portable.ir.mlir import ir

    path, batch = tiny_bert
    text = graph_text(path, input_shapes={n: (batch, 128) for n in ("input_ids", "attention_mask", "token_type_ids")})
    options = profiles.codegen_options(profiles.all_profiles()["nvidia"])
    with ir.Context(), ir.Location.unknown():
        c = Compilation(weights.parse(text), options, ("vulkan",), Dumper("0" * 16))
        run_stages(c, STAGES[:[s.name for s in STAGES].index("tile-and-map") + 1])
        assert not c.plain and not c.plain_groups
        assert any(s.promote_k for s in c.strategies)


@pytest.mark.parametrize("profile", ["", "nvidia"])
def test_tiny_bert_runs_like_onnxruntime(device, tiny_bert, profile):
    ort = pytest.importorskip("onnxruntime", reason="the reference is onnxruntime (test extra)")
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    path, batch = tiny_bert
    inputs = _bert_inputs(batch)
    names = ("input_ids", "attention_mask", "token_type_ids")
    want = ort.InferenceSession(path).run(None, dict(zip(names, inputs)))[0]
    if profile:
        live = open_device(device)
        text = graph_text(path, input_shapes={n: (batch, 128) for n in names})
        exe = CompiledGraph(compile_module(text, foreign_profile(profile, live), (live.info.api,)), live)
    else:
        exe = portable.compile(path, device=device)
    y, = exe(*inputs)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    exe.close()


@pytest.mark.parametrize("profile", ["", "nvidia"])
def test_projection_into_heads_runs_like_numpy(device, profile):
    """A matmul whose output an exporter split into heads (loops (b, s, h, d, k): graph/collapse_dims.py joins them
    into a plain matmul) with its bias epilogue."""
    from test_graph_rewrite_stages import HEADS_PROJECTION

    from portable.api import CompiledGraph
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    live = open_device(device)
    opts = foreign_profile(profile, live) if profile else live.options
    exe = CompiledGraph(compile_module(HEADS_PROJECTION, opts, (live.info.api,)), live)
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((2, 16, 32), (32, 4, 8)))
    y, = exe(x, w)
    np.testing.assert_allclose(y, np.einsum("bsk,khd->bshd", x, w) + 0.25, rtol=1e-4, atol=1e-4)
    exe.close()


@pytest.mark.parametrize("shared_bias", [False, True], ids=["scaled", "shared-bias"])
@pytest.mark.parametrize("profile", ["", "nvidia"])
def test_attention_scores_in_the_projections_layout_run_like_numpy(device, profile, shared_bias):
    """Q.K^T over (b, h) read from (b, s, h, d) tensors with a scale on each side, and a bias both add (equal biases
    become one constant): graph/contraction_layout.py copies both sides into batch-matmul order, that side's
    elementwise work applied there."""
    from test_graph_rewrite_stages import ATTENTION_SCORES, SHARED_BIAS_SCORES

    from portable.api import CompiledGraph
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    live = open_device(device)
    opts = foreign_profile(profile, live) if profile else live.options
    exe = CompiledGraph(compile_module(SHARED_BIAS_SCORES if shared_bias else ATTENTION_SCORES, opts,
                                       (live.info.api,)), live)
    rng = np.random.default_rng(1)
    q, k = (rng.standard_normal((2, 32, 2, 16)).astype(np.float32) for _ in range(2))
    bias = rng.standard_normal((2, 16)).astype(np.float32)
    y, = exe(q, k, bias) if shared_bias else exe(q, k)
    if shared_bias:
        q, k = q + bias, k + bias
    np.testing.assert_allclose(y, np.einsum("bihd,bjhd->bhij", q * 0.5, k * 0.5), rtol=1e-4, atol=1e-4)
    exe.close()


def test_ragged_sequence_runs_like_onnxruntime(device, tmp_path):
    """A Hugging Face BERT exported with a dynamic sequence length, run at 37 tokens (a prime: no tile divides the
    rows, the keys or the softmax rows) through portable.run: the projections run their rows in two parts, the
    scores read both sides along the head dimension, and the answer matches onnxruntime."""
    ort = pytest.importorskip("onnxruntime", reason="the reference is onnxruntime (test extra)")
    names = ("input_ids", "attention_mask", "token_type_ids")
    path = str(tmp_path / "bert.onnx")
    _export_bert(path, 64, 256, (1, 16), dynamic=True)
    ids = np.random.default_rng(6).integers(0, 1000, (1, 37)).astype(np.int64)
    inputs = [ids, np.ones_like(ids), np.zeros_like(ids)]
    want = ort.InferenceSession(path).run(None, dict(zip(names, inputs)))[0]
    with portable.compile(path, device=device, input_shapes={n: (1, 37) for n in names}) as exe:
        y, = exe(*inputs)
        parts = [d for d in exe.executable.dispatches if d.offsets and any(d.offsets)]
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    assert parts, "no projection ran its rows in two parts"
