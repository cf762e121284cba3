"""reshape_refine.py: a dim merged as 24 x 32 and split again as 12 x 64 goes through 12 x 2 x 32, so upstream's
reshape propagation folds both reshapes into the ops around them (a 4-bit weight's blocks read by an attention
output's heads: the dequantized weight is no longer materialized)."""

from __future__ import annotations

import numpy as np
import pytest

import portable
from portable.compiler.graph.reshape_refine import _refine, _through, _units_away


def test_common_refinement():
    assert _refine([24, 32], [12, 64]) == [12, 2, 32]
    assert _refine([12, 64], [24, 32]) == [12, 2, 32]
    assert _refine([4, 6], [6, 4]) is None  # 4 | 6 fails
    assert _refine([24, 32], [16, 48]) is None
    assert _refine([2, 3, 4], [6, 4]) == [2, 3, 4]


def test_groups_through_the_refinement():
    # (24, 32, 8) merged to (768, 8), split as (12, 64, 8): through (12, 2, 32, 8).
    assert _through([24, 32, 8], [12, 64, 8], [[0, 1], [2]], [[0, 1], [2]]) == (
        [12, 2, 32, 8], [[0, 1], [2], [3]], [[0], [1, 2], [3]])
    assert _through([24, 32, 8], [16, 48, 8], [[0, 1], [2]], [[0, 1], [2]]) is None  # no refinement
    assert _through([24, 32], [24, 32], [[0, 1]], [[0, 1]]) is None  # nothing to do
    # Size-1 dims leave first: (1, 12, 64, 256) grouped [[0, 1, 2], [3]] is (12, 64, 256) grouped [[0, 1], [2]].
    assert _units_away([1, 12, 64, 256], [[0, 1, 2], [3]]) == ([12, 64, 256], [[0, 1], [2]], [[0, 1], [2], [3]])
    assert _units_away([1, 1, 5], [[0, 1], [2]]) == ([1, 5], [[0], [1]], [[0, 1], [2]])


def _heads_into_nbits(heads: int = 12, dim: int = 64, n: int = 256):
    """An attention output (1, heads, 1, dim) transposed and flattened into a 4-bit projection of K = heads x dim in
    blocks of 32, decomposed."""
    from onnx import TensorProto, helper, numpy_helper
    from test_llm_quant import matmul_nbits

    from portable.frontend.onnx_decomp_quant import dequantize_matmul_nbits

    k = heads * dim
    base = matmul_nbits(k, n, 32, False, m=1)
    nodes = [helper.make_node("Transpose", ["h"], ["t"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "flat"], ["A"]), *base.graph.node]
    inits = [*base.graph.initializer, numpy_helper.from_array(np.array([1, k], np.int64), "flat")]
    g = helper.make_graph(nodes, "heads", [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, heads, 1, dim])],
                          list(base.graph.output), inits)
    return dequantize_matmul_nbits(helper.make_model(g, opset_imports=list(base.opset_import)))


def test_blocked_weight_read_by_heads_is_not_materialized(device):
    """No buffer of the float weight's size: the int8 codes are read by the product itself; values as
    onnxruntime's."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    m = _heads_into_nbits()
    h = np.random.default_rng(1).standard_normal((1, 12, 1, 64)).astype(np.float32)
    (ref,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"h": h})
    g = portable.compile(m, device=device)
    assert max(s.nbytes for s in g.executable.slots if s.kind != "constant") < 768 * 256 * 4
    np.testing.assert_allclose(g(h)[0], ref, rtol=1e-4, atol=1e-4)
