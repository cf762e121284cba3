"""Models onnxruntime runs but portable cannot: each fails with UnsupportedOp whose first line names the ONNX node,
its op and attributes (torch-mlir's diagnostics after it), never with a traceback from the importer or a lowering.
Failures later in the compiler name the node an op's location carries."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="the models are checked to run on onnxruntime")
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from portable.compiler import pipeline
from portable.compiler.schedule import mapping
from portable.errors import CompileError, UnsupportedOp
from portable.frontend import onnx_decompose
from portable.frontend.onnx_describe import node_detail
from portable.frontend.onnx_import import onnx_to_mlir
from portable.ir import locations, weights
from portable.ir.mlir import ir
from portable.profiles import Options


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          [numpy_helper.from_array(v, k) for k, v in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])  # a valid, runnable model
    return m


def first_line(e: Exception) -> str:
    return str(e).splitlines()[0]


def test_node_detail():
    n = helper.make_node("MaxPool", ["x"], ["y"], name="pool1", kernel_shape=[3, 3], ceil_mode=1, pads=[0, 0, 1, 1],
                         auto_pad="NOTSET")
    assert node_detail(n) == ("node 'pool1' (op MaxPool, auto_pad='NOTSET', ceil_mode=1, kernel_shape=[3, 3], "
                              "pads=[0, 0, 1, 1])")
    assert node_detail(helper.make_node("Relu", ["x"], ["y"], name="r")) == "node 'r' (op Relu)"


def test_importer_failure_names_the_node():
    """torch-mlir's importer has no form for a sparse Constant: the node it was importing is named."""
    sparse = helper.make_sparse_tensor(helper.make_tensor("v", T.FLOAT, [2], [1.0, 2.0]),
                                       helper.make_tensor("i", T.INT64, [2], [0, 3]), [4])
    m = model([helper.make_node("Constant", [], ["c"], name="sparse_const", sparse_value=sparse),
               helper.make_node("Add", ["x", "c"], ["y"], name="add")], [("x", T.FLOAT, [4])], [("y", T.FLOAT)])
    with pytest.raises(UnsupportedOp) as e:
        onnx_to_mlir(m)
    assert first_line(e.value).startswith("node 'sparse_const' (op Constant, sparse_value=<sparse tensor [4]>): "
                                          "torch-mlir's ONNX importer cannot import it")


def test_lowering_failure_names_node_and_attributes():
    m = model([helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])],
              [("x", T.FLOAT, [1, 1, 2, 2]), ("i", T.INT64, [1, 1, 2, 2])], [("y", T.FLOAT)])
    with pytest.raises(UnsupportedOp) as e:
        onnx_to_mlir(m)
    first, *diagnostics = str(e.value).splitlines()
    assert first.startswith("node 'unpool' (op MaxUnpool, kernel_shape=[2, 2], strides=[2, 2]): torch-mlir has no "
                            "lowering for 'torch.aten.max_unpool")
    assert diagnostics and len(first) < 300


def test_leftover_op_names_the_node_not_the_module():
    """A random op leaves ml_program globals (at the module, no location) and loads at the node: the node is named."""
    m = model([helper.make_node("RandomNormalLike", ["x"], ["y"], name="noise")], [("x", T.FLOAT, [3])],
              [("y", T.FLOAT)])
    with pytest.raises(UnsupportedOp, match=r"^node 'noise' \(op RandomNormalLike\): 'ml_program\.global_load'"):
        onnx_to_mlir(m)


def test_failing_rewrite_names_the_node(monkeypatch):
    def broken(node, b):
        raise IndexError("list index out of range")

    monkeypatch.setitem(onnx_decompose.REWRITES, "MaxPool", broken)
    m = model([helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2])], [("x", T.FLOAT, [1, 1, 4])],
              [("y", T.FLOAT)])
    with pytest.raises(UnsupportedOp, match=r"^node 'p' \(op MaxPool, kernel_shape=\[2\]\): its decomposition failed: "
                                            r"IndexError"):
        onnx_to_mlir(m)


def test_imported_ops_carry_their_node():
    m = model([helper.make_node("MaxPool", ["x"], ["p"], name="stem/pool", kernel_shape=[2, 2]),
               helper.make_node("Relu", ["p"], ["y"], name="stem/relu")], [("x", T.FLOAT, [1, 1, 4, 4])],
              [("y", T.FLOAT)])
    found = {}

    def visit(op):
        found.setdefault(op.name, locations.names(op.location))
        return ir.WalkResult.ADVANCE

    with ir.Context():
        weights.parse(onnx_to_mlir(m)).operation.walk(visit)
    assert found["linalg.pooling_nchw_max"] == ["stem/pool"]
    assert found["linalg.generic"] == ["stem/relu"]


def test_compile_stage_failure_names_the_node():
    """A transform that fails on an op (as tile-and-map can) names the node from the op's location."""
    t = "tensor<4xf32>"
    text = (f"func.func @main(%a: {t}) -> {t} {{\n%e = tensor.empty() : {t}\n"
            '%r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], '
            f'iterator_types = ["parallel"]}} ins(%a : {t}) outs(%e : {t}) {{\n'
            f'^bb0(%x: f32, %o: f32):\n%y = math.exp %x : f32\nlinalg.yield %y : f32\n}} -> {t} loc("blk/exp_1")\n'
            f"return %r : {t}\n}}")
    script = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %g = transform.structured.match ops{["linalg.generic"]} in %root : (!transform.any_op) -> !transform.any_op
    %s = transform.structured.split %g after 8 {dimension = 3} : !transform.any_op
    transform.yield
  }
}"""
    with ir.Context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        with pytest.raises(CompileError, match=r"^stage 'tile-and-map' failed at node 'blk/exp_1': "):
            c = pipeline.Compilation(module, Options(), ("vulkan",), pipeline.Dumper("0" * 16), stage="tile-and-map")
            mapping.run_script(c, script)


def test_locations_skip_files_and_importer_names():
    assert locations.names('loc(fused["conv1", "graph:main", "f.mlir":3:4, "onnx_importer.none"])') == ["conv1"]
    assert locations.names("loc(unknown)") == []


def test_run_of_valid_model_is_unaffected():
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", T.FLOAT, [3])], [("y", T.FLOAT)])
    assert "linalg" in onnx_to_mlir(m)
