"""com.microsoft:MatMulNBits (4-bit weights in blocks, with and without zero points) decomposed into ONNX ops and
run on every device against onnxruntime's own MatMulNBits kernel."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the models are built with onnx.helper")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime's MatMulNBits kernel is the reference")

from portable.errors import UnsupportedOp
from portable.frontend.onnx_decomp_quant import dequantize_matmul_nbits


def matmul_nbits(k: int, n: int, block: int, zero_points: bool, m: int = 3, bits: int = 4, seed: int = 0):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nb = -(-k // block)
    q = rng.integers(0, 16, (n, nb, block)).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)  # the low nibble first
    scales = (rng.random((n, nb)) * 0.1 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(packed, "B"), numpy_helper.from_array(scales.reshape(-1), "scales")]
    inputs = ["A", "B", "scales"]
    if zero_points:
        z = rng.integers(0, 16, (n, nb + nb % 2)).astype(np.uint8)
        inits.append(numpy_helper.from_array((z[:, 0::2] | (z[:, 1::2] << 4)).reshape(-1).astype(np.uint8), "zp"))
        inputs.append("zp")
    node = helper.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", K=k, N=n, bits=bits,
                            block_size=block)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, [m, k])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("k,block,zero_points", [(64, 32, True), (64, 32, False), (256, 128, True),
                                                 (256, 128, False), (80, 32, True)])
def test_matmul_nbits_matches_onnxruntime(device, k, block, zero_points):
    import portable

    model = matmul_nbits(k, 48, block, zero_points)
    a = np.random.default_rng(1).standard_normal((3, k)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    plain = dequantize_matmul_nbits(model)
    assert all(n.domain in ("", "ai.onnx") for n in plain.graph.node)
    assert any(t.name.endswith("/codes") and t.data_type == onnx.TensorProto.INT8 for t in plain.graph.initializer)
    out = portable.run(plain, a, device=device)[0]
    assert np.abs(ref).max() > 0.1
    np.testing.assert_allclose(out, ref, atol=1e-4, rtol=1e-4)


def test_matmul_nbits_decode_step_is_one_kernel_over_int8_codes(device):
    """A decode step's matvec (one row of A) reads the int8 codes and the block scales in one kernel: the cast and
    scale fuse into it, nothing float32 of the weight's size is materialized (a weight above onnx_fold's limit, which
    small ones are folded under)."""
    import portable

    model = matmul_nbits(512, 256, 32, True, m=1)
    a = np.random.default_rng(2).standard_normal((1, 512)).astype(np.float32)
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    g = portable.compile(dequantize_matmul_nbits(model), device=device)
    assert len(g.executable.dispatches) == 1
    assert [c.dtype for c in g.executable.constants.values() if c.size >= 512 * 256] == [np.int8]
    np.testing.assert_allclose(g(a)[0], ref, atol=1e-4, rtol=1e-4)


def test_matmul_nbits_file_through_plain_run(device, tmp_path):
    """An ONNX file with MatMulNBits nodes goes straight to portable.run / portable.compile: the decomposition runs
    when the model is loaded, before the op checks that refuse other com.microsoft ops."""
    import portable

    path = tmp_path / "q4.onnx"
    onnx.save(matmul_nbits(64, 40, 32, True, m=5), str(path))
    a = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"A": a})[0]
    np.testing.assert_allclose(portable.run(str(path), a, device=device)[0], ref, atol=1e-4, rtol=1e-4)
    exe = portable.compile(str(path), device=device, input_shapes=[(5, 64)])
    np.testing.assert_allclose(exe(a)[0], ref, atol=1e-4, rtol=1e-4)


def test_matmul_nbits_refuses_other_widths():
    with pytest.raises(UnsupportedOp, match="4-bit"):
        dequantize_matmul_nbits(matmul_nbits(64, 8, 32, False, bits=8))


def test_quantized_decoder_greedy_matches_onnxruntime(device, tmp_path):
    """A Llama export quantized by onnxruntime's MatMulNBitsQuantizer (4 bits, block 32, zero points): the bucketed
    session's greedy tokens equal onnxruntime's on the same quantized file."""
    pytest.importorskip("transformers", reason="the decoder is built with transformers")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    from portable.llm import DecoderSession, Sampler
    from portable.llm.hf_export import build, export
    from portable.llm.reference import OrtDecoder, run_loop

    q = MatMulNBitsQuantizer(onnx.load(str(export(build("llama"), tmp_path / "f32.onnx"))), block_size=32,
                             is_symmetric=False)
    q.process()
    path = tmp_path / "q4.onnx"
    onnx.save(q.model.model, str(path))
    assert sum(n.op_type == "MatMulNBits" for n in q.model.model.graph.node) >= 8
    prompt = [5, 17, 300, 42, 7, 99, 123, 8, 1, 2, 3]
    ref, ref_logits, _, _ = run_loop(OrtDecoder(path).feed, prompt, 16, Sampler().picker())
    with DecoderSession(path, device, buckets=(32,), prefill_chunks=(8,)) as s:
        tokens, logits, _, _ = run_loop(s.feed, prompt, 16, Sampler().picker())
    assert tokens == ref
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < 1e-3


class _Prefills:
    """Calibration feeds for quantize_static: prompts of 6 random ids with an empty cache."""

    def __init__(self, layers: int, kv: int, hd: int):
        rng = np.random.default_rng(0)
        empty = {f"past_key_values.{i}.{k}": np.zeros((1, kv, 0, hd), np.float32)
                 for i in range(layers) for k in ("key", "value")}
        self.feeds = iter([{"input_ids": rng.integers(0, 1000, (1, 6)), "attention_mask": np.ones((1, 6), np.int64),
                            "position_ids": np.arange(6)[None], **empty} for _ in range(4)])

    def get_next(self):
        return next(self.feeds, None)


@pytest.mark.parametrize("mode", ["static_qdq", "dynamic"])
def test_int8_decoder_greedy_matches_onnxruntime(device, tmp_path, mode):
    """A Llama export quantized to int8 by onnxruntime: quantize_static in QDQ format (QuantizeLinear /
    DequantizeLinear around every MatMul) or quantize_dynamic (DynamicQuantizeLinear + MatMulInteger). The bucketed
    session's greedy tokens equal onnxruntime's on the same file; logits within int8 rounding drift."""
    pytest.importorskip("transformers", reason="the decoder is built with transformers")
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    from portable.llm import DecoderSession, Sampler
    from portable.llm.hf_export import build, export, kv_shape
    from portable.llm.reference import OrtDecoder, run_loop

    model = build("llama")
    f32 = export(model, tmp_path / "f32.onnx")
    path = tmp_path / f"{mode}.onnx"
    if mode == "dynamic":
        quantize_dynamic(str(f32), str(path), weight_type=QuantType.QInt8)
        # Activations quantized per call: a rounding tie may fall either way. onnxruntime's own int8 products
        # differ by CPU: against them the logits drifted up to 0.047 on an AMD EPYC host (tokens equal), under 0.02
        # on an Intel Xeon.
        op, tol = "MatMulInteger", 6e-2
    else:
        reader = type("Reader", (_Prefills, CalibrationDataReader), {})(*kv_shape(model))
        quantize_static(str(f32), str(path), reader, quant_format=QuantFormat.QDQ, weight_type=QuantType.QInt8,
                        activation_type=QuantType.QInt8, op_types_to_quantize=["MatMul"])
        op, tol = "DequantizeLinear", 1e-3
    assert sum(n.op_type == op for n in onnx.load(str(path)).graph.node) >= 8
    prompt = [5, 17, 300, 42, 7, 99, 123, 8, 1, 2, 3]
    ref, ref_logits, _, _ = run_loop(OrtDecoder(path).feed, prompt, 12, Sampler().picker())
    with DecoderSession(path, device, buckets=(32,), prefill_chunks=(8,)) as s:
        tokens, logits, _, _ = run_loop(s.feed, prompt, 12, Sampler().picker())
    assert np.abs(ref_logits[0]).max() > 0.1
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < tol
    assert tokens == ref
