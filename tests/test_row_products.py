"""Products summed along rows (Mul then ReduceSum over the last axis: cosine similarities, MobileViTv2's attention
context) with and without keepdims, the second operand broadcast or not. Each thread's dot product is no matrix:
its K step must stay a vector SPIR-V can hold, and an output written at a constant index (keepdims) gets no
register rows."""

from __future__ import annotations

import numpy as np
import pytest

import portable

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")


def _model(ashape, bshape, keepdims: int):
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    out = list(np.broadcast_shapes(ashape, bshape))
    out = out[:-1] + [1] if keepdims else out[:-1]
    g = h.make_graph([h.make_node("Mul", ["a", "b"], ["m"]), h.make_node("ReduceSum", ["m", "ax"], ["y"],
                                                                         keepdims=keepdims)], "rows",
                     [h.make_tensor_value_info("a", T.FLOAT, ashape), h.make_tensor_value_info("b", T.FLOAT, bshape)],
                     [h.make_tensor_value_info("y", T.FLOAT, out)], [nh.from_array(np.array([-1], np.int64), "ax")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("ashape, bshape", [((8, 16), (8, 16)), ((8, 64), (8, 64)), ((64, 256), (64, 256)),
                                            ((3, 40), (3, 40)), ((1, 64, 4, 256), (1, 1, 4, 256))])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_row_products(device, ashape, bshape, keepdims):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    (got,) = portable.run(_model(list(ashape), list(bshape), keepdims), a, b, device=device)
    want = (a * b).sum(-1, keepdims=bool(keepdims))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(ashape[-1]))


def test_a_product_written_at_a_constant_index_is_no_matmul():
    from portable.ir.linalg_info import classify
    from portable.ir.mlir import ir

    text = """
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @f(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>, %o: OUT) -> OUT {
  %r = linalg.generic {indexing_maps = [#id, #id, affine_map<(d0, d1) -> MAP>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%a, %b : tensor<8x16xf32>, tensor<8x16xf32>) outs(%o : OUT) {
    ^bb0(%x: f32, %y: f32, %acc: f32):
      %m = arith.mulf %x, %y : f32
      %s = arith.addf %m, %acc : f32
      linalg.yield %s : f32
  } -> OUT
  return %r : OUT
}"""
    with ir.Context(), ir.Location.unknown():
        for out, amap, kind in (("tensor<8x1xf32>", "(d0, 0)", "reduction"), ("tensor<8xf32>", "(d0)", "matmul")):
            module = ir.Module.parse(text.replace("OUT", out).replace("MAP", amap))
            op = next(o for o in module.body.operations[0].regions[0].blocks[0].operations
                      if o.operation.name == "linalg.generic")
            assert classify(op.operation).kind == kind, (out, amap)
