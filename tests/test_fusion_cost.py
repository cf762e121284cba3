"""The fusion cost model (compiler/strategy/fusion_cost.py): an elementwise producer that upstream fusion moved into a
matmul's body leaves it when recomputing it once per output column costs more than storing it; decided on IR,
each decision tested, and the values the same on every device."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compile_and_load

import portable
from portable.compiler.graph import split_k
from portable.compiler.pipeline import PREPROCESS, public_func
from portable.compiler.strategy import fusion_cost
from portable.ir import weights
from portable.ir.mlir import ir, passmanager


def _graph(m: int, k: int, n: int, producer: str) -> portable.Graph:
    g = portable.Graph(f"{producer}_{m}x{k}x{n}")
    x, w = g.input((m, k)), g.input((k, n))
    h = {"gelu": lambda: g.gelu(x, approximate="none"), "scale": lambda: g.mul(x, 2.0),
         "none": lambda: x}[producer]()
    g.output(g.matmul(h, w))
    return g


def _generics_after(g: portable.Graph, profile: dict) -> tuple[int, list[str]]:
    """(how many products unfuse_producers rewrote, the body of each linalg.generic after it)."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(g.to_mlir())
        passmanager.PassManager.parse(PREPROCESS).run(module.operation)
        done = split_k.unfuse_producers(public_func(module), portable.profiles.Options.of(profile))
        bodies = [str(op) for op in public_func(module).regions[0].blocks[0].operations
                  if op.name == "linalg.generic"]
    return done, bodies


def test_expensive_producer_leaves_the_product():
    """GELU (erf) before a product with 256 columns: computed once, in an elementwise kernel of its own."""
    done, bodies = _generics_after(_graph(64, 128, 256, "gelu"), {})
    assert done == 1
    erf = [b for b in bodies if "math.erf" in b]
    assert len(erf) == 1 and "reduction" not in erf[0]  # the producer alone, all loops parallel
    assert any("reduction" in b and "math.erf" not in b for b in bodies)  # the product reads its result


def test_cheap_producer_with_few_columns_stays_fused():
    done, bodies = _generics_after(_graph(64, 128, 4, "scale"), {})
    assert done == 0
    products = [b for b in bodies if "reduction" in b]
    assert len(products) == 1 and products[0].count("arith.mulf") == 2  # the scale, then the product


def test_cheap_producer_reused_many_times_leaves():
    done, _ = _generics_after(_graph(64, 128, 256, "scale"), {})
    assert done == 1


def test_gpu_profiles_leave_matrix_vector_products_to_split_k():
    done, _ = _generics_after(_graph(1, 128, 256, "gelu"), {"reduction_threads": 64})
    assert done == 0
    done, _ = _generics_after(_graph(64, 128, 256, "gelu"), {"reduction_threads": 64})
    assert done == 1


def test_plain_product_untouched():
    assert _generics_after(_graph(64, 128, 256, "none"), {})[0] == 0


def test_the_model():
    erf_gelu = fusion_cost.WEIGHTS["math.erf"] + 5
    big, room = 1 << 20, 2 * 4 * fusion_cost.FLOPS_PER_BYTE
    assert fusion_cost.keep_fused(erf_gelu, 2, 4, big)  # one recomputation costs less than a store and a load
    assert not fusion_cost.keep_fused(erf_gelu, 3, 4, big)
    assert fusion_cost.keep_fused(1, 1 + room, 4, big)
    assert not fusion_cost.keep_fused(1, 3 + room, 4, big)
    assert fusion_cost.keep_fused(1, 1000, 4, 16)  # a few cheap values: not worth a kernel of their own


@pytest.mark.parametrize("producer", ["gelu", "scale"])
def test_values_unchanged(device, tmp_path, producer):
    g = _graph(64, 128, 80, producer)
    exe, loaded = compile_and_load(g, device, tmp_path)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((64, 128)).astype(np.float32), rng.standard_normal((128, 80)).astype(np.float32)
    if producer == "gelu":
        from math import erf

        h = x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2))).astype(np.float32)
    else:
        h = x * 2
    assert len(exe.dispatches) == 2
    np.testing.assert_allclose(loaded(x, w)[0], h @ w, rtol=1e-4, atol=1e-4)


def _squeeze_excite(c: int = 32, f: int = 16, hw: int = 7):
    """EfficientNet's block end as PyTorch exports it: x * sigmoid(s) (s per channel) into a 1x1 projection."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((f, c, 1, 1)).astype(np.float32) * 0.1, "w")
    nodes = [helper.make_node("Sigmoid", ["s"], ["g"]), helper.make_node("Mul", ["x", "g"], ["h"]),
             helper.make_node("Conv", ["h", "w"], ["y"], kernel_shape=[1, 1])]
    g = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw]),
                                        helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, c, 1, 1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, f, hw, hw])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _reduces(op) -> bool:
    return '"reduction"' in str(op).split("\n")[0]


def test_squeeze_excite_scale_leaves_the_convolution():
    """The scale is computed once per input value, and the convolution, plain again, becomes a matmul."""
    pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package")
    from portable.compiler.graph import conv_gemm, unfuse
    from portable.frontend.onnx_import import onnx_to_mlir

    with ir.Context(), ir.Location.unknown():
        module = weights.parse(onnx_to_mlir(_squeeze_excite()))
        passmanager.PassManager.parse(PREPROCESS).run(module.operation)
        fn = public_func(module)
        convs = [op for op in fn.regions[0].blocks[0].operations if _reduces(op)]
        assert len(convs) == 1 and "math.exp" in str(convs[0])  # upstream fusion put the sigmoid in the conv
        assert unfuse.unfuse_reductions(fn) == 1
        ops = [op for op in fn.regions[0].blocks[0].operations if op.name == "linalg.generic"]
        assert [("math.exp" in str(o), _reduces(o)) for o in ops if "math.exp" in str(o) or _reduces(o)] == \
            [(True, False), (False, True)]
        conv_gemm.convs_to_matmul(fn, 1 << 30)
        passmanager.PassManager.parse("builtin.module(canonicalize)").run(module.operation)
        assert "linalg.matmul" in str(module)


def test_squeeze_excite_values(device):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    m = _squeeze_excite()
    rng = np.random.default_rng(4)
    x, s = rng.standard_normal((1, 32, 7, 7)).astype(np.float32), rng.standard_normal((1, 32, 1, 1)).astype(np.float32)
    (ref,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "s": s})
    np.testing.assert_allclose(portable.run(m, x, s, device=device)[0], ref, rtol=1e-4, atol=1e-5)


def _swiglu_nbits(k: int = 512, n: int = 256):
    """silu(g) * u into a 4-bit MatMulNBits projection (a Llama FFN's down projection at decode), decomposed."""
    from onnx import TensorProto, helper
    from test_llm_quant import matmul_nbits

    from portable.frontend.onnx_decomp_quant import dequantize_matmul_nbits

    base = matmul_nbits(k, n, 32, False, m=1)
    nodes = [helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["A"]), *base.graph.node]
    vi = [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, k]) for x in ("g", "u")]
    g = helper.make_graph(nodes, "swiglu", vi, list(base.graph.output), list(base.graph.initializer))
    return dequantize_matmul_nbits(helper.make_model(g, opset_imports=list(base.opset_import)))


def test_producer_leaves_a_quantized_matvec():
    """The weight side of the product is computed too (int8 codes times their block scales): the SwiGLU factor is
    still taken out, computed once per value instead of once per output column."""
    pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package")
    from portable.compiler.graph import unfuse
    from portable.frontend.onnx_import import onnx_to_mlir

    with ir.Context(), ir.Location.unknown():
        module = weights.parse(onnx_to_mlir(_swiglu_nbits()))
        passmanager.PassManager.parse(PREPROCESS).run(module.operation)
        fn = public_func(module)
        red = [op for op in fn.regions[0].blocks[0].operations if _reduces(op)]
        assert len(red) == 1 and "math.exp" in str(red[0]) and "arith.sitofp" in str(red[0])
        assert unfuse.unfuse_reductions(fn) == 1
        ops = [op for op in fn.regions[0].blocks[0].operations if op.name == "linalg.generic"]
        red = [op for op in ops if _reduces(op)]
        assert len(red) == 1 and "math.exp" not in str(red[0]) and "arith.sitofp" in str(red[0])
        assert any("math.exp" in str(o) and not _reduces(o) for o in ops)


def test_producer_leaves_a_quantized_matvec_values(device):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    m = _swiglu_nbits()
    rng = np.random.default_rng(5)
    g, u = (rng.standard_normal((1, 512)).astype(np.float32) for _ in range(2))
    (ref,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"g": g, "u": u})
    np.testing.assert_allclose(portable.run(m, g, u, device=device)[0], ref, rtol=1e-4, atol=1e-4)

