"""Reductions broadcast back over their size-1 dims read as lower-rank operands (compiler/graph/unit_broadcasts.py),
so that a norm fused into a matvec leaves its maps projected permutations and the dequantization of block-quantized
weights fuses in by expansion: decided on IR, and the effect on a compiled RMSNorm + quantized head."""

from __future__ import annotations

import types

import numpy as np
import pytest

from portable.compiler.graph import unit_broadcasts
from portable.compiler.pipeline import public_func
from portable.ir.linalg_info import indexing_maps
from portable.ir.mlir import ir
from portable.ir.util import keep_groups

GENERIC_NORM = """
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#vec = affine_map<(d0, d1, d2) -> (d2)>
func.func @main(%x: tensor<1x1x8xf32>, %g: tensor<8xf32>) -> (tensor<1x1x8xf32>, tensor<1x1x8xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1x1xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<1x1x8xf32>) outs(%f : tensor<1x1x1xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %p = arith.mulf %a, %a : f32
      %q = arith.addf %acc, %p : f32
      linalg.yield %q : f32
  } -> tensor<1x1x1xf32>
  %one = arith.constant dense<1.0> : tensor<1x1x1xf32>
  %eo = tensor.empty() : tensor<1x1x8xf32>
  %n = linalg.generic {indexing_maps = [#id, #row, #vec, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %s, %g : tensor<1x1x8xf32>, tensor<1x1x1xf32>, tensor<8xf32>) outs(%eo : tensor<1x1x8xf32>) {
    ^bb0(%a: f32, %r: f32, %w: f32, %o: f32):
      %m = arith.mulf %a, %r : f32
      %t = arith.mulf %m, %w : f32
      linalg.yield %t : f32
  } -> tensor<1x1x8xf32>
  %c = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %one : tensor<1x1x8xf32>, tensor<1x1x1xf32>) outs(%eo : tensor<1x1x8xf32>) {
    ^bb0(%a: f32, %r: f32, %o: f32):
      %m = arith.mulf %a, %r : f32
      linalg.yield %m : f32
  } -> tensor<1x1x8xf32>
  return %n, %c : tensor<1x1x8xf32>, tensor<1x1x8xf32>
}
"""


def test_a_reduction_broadcast_back_becomes_a_lower_rank_operand():
    """The sum of squares (1x1x1, read at (d0, d1, 0)) is collapsed to 1x1 and read at (d0, d1); a constant
    broadcast the same way keeps its form (the graph rewrites match a bias's), and the module still verifies."""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(GENERIC_NORM)
        fn = public_func(module)
        assert unit_broadcasts.drop_unit_broadcasts(fn) == 1
        module.operation.verify()
        generics = [op for op in fn.regions[0].blocks[0].operations if op.name == "linalg.generic"]
        norm, const = generics[1], generics[2]
        assert str(indexing_maps(norm)[1]) == "(d0, d1, d2) -> (d0, d1)"
        assert str(ir.RankedTensorType(norm.operands[1].type)) == "tensor<1x1xf32>"
        assert str(indexing_maps(const)[1]) == "(d0, d1, d2) -> (d0, d1, 0)"
        assert unit_broadcasts.drop_unit_broadcasts(fn) == 0


def test_groups_join_dropped_dims_to_a_neighbour():
    assert keep_groups([True, True, False]) == [[0], [1, 2]]
    assert keep_groups([False, True, False, True]) == [[0, 1], [2, 3]]
    assert keep_groups([False, False]) == []


def _norm_and_quantized_head(path, n: int, k: int) -> np.ndarray:
    """An RMSNorm then a GGUF Q4_0 linear [n, k] (MatMulNBits, decomposed into int8 codes when loaded); returns
    the float32 weight it dequantizes to, [n, k]."""
    gguf = pytest.importorskip("gguf", reason="Q4_0 blocks are made with the gguf package")
    import onnx
    from onnx import TensorProto, helper

    from portable.llm.gguf_model import _Builder, _linear, _rms_norm

    data = gguf.quants.quantize(np.random.default_rng(0).standard_normal((n, k)).astype(np.float32),
                                gguf.GGMLQuantizationType.Q4_0)
    b = _Builder()
    y = _linear(b, _rms_norm(b, "x", np.linspace(0.5, 1.5, k, dtype=np.float32), 1e-5),
                types.SimpleNamespace(tensor_type=gguf.GGMLQuantizationType.Q4_0, data=data, name="w"))
    g = helper.make_graph(b.nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, k])],
                          [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], b.inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                  helper.make_opsetid("com.microsoft", 1)]), str(path))
    return np.asarray(gguf.quants.dequantize(data, gguf.GGMLQuantizationType.Q4_0), np.float32)


def test_norm_then_quantized_matvec_reads_the_codes(device, tmp_path):
    """RMSNorm then a Q4_0 head (above onnx_fold's limit): no float32 weight-sized buffer is written; the matvec
    reads the int8 codes, and the values match numpy."""
    import portable

    n, k = 512, 256
    w = _norm_and_quantized_head(tmp_path / "head.onnx", n, k)
    g = portable.compile(str(tmp_path / "head.onnx"), device=device)
    exe = g.executable
    assert [c.dtype for c in exe.constants.values() if c.size >= n * k] == [np.int8]
    assert not [s for s in exe.slots if s.kind == "temp" and s.nbytes >= 4 * n * k]
    x = np.random.default_rng(1).standard_normal((1, 1, k)).astype(np.float32)
    gamma = np.linspace(0.5, 1.5, k, dtype=np.float32)
    ref = (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * gamma) @ w.T
    np.testing.assert_allclose(g(x)[0], ref, rtol=1e-4, atol=1e-4)
