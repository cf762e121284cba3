"""ONNX control flow unrolled before import (portable/frontend/onnx_control.py): If, Scan and Loop models built
with onnx.helper run on every device against onnxruntime or onnx's reference evaluator; control flow that cannot be
made static raises UnsupportedOp. Also the folding fixes the unrolling relies on (onnx_fold.py)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import portable  # noqa: E402
from portable.errors import UnsupportedOp  # noqa: E402
from portable.frontend.onnx_control import MAX_ITERATIONS  # noqa: E402
from portable.frontend.onnx_import import onnx_to_mlir  # noqa: E402

RNG = np.random.default_rng(11)


def model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=T.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reference(m, feeds, runtime: str):
    if runtime == "onnxruntime":
        ort = pytest.importorskip("onnxruntime", reason="the Scan oracle is onnxruntime (onnx's reference Scan "
                                                        "implements axis 0 and forward directions only)")
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    return ReferenceEvaluator(m).run(None, feeds)


def check(m, feeds, device, runtime="reference", rtol=1e-4, atol=1e-5):
    refs = reference(m, feeds, runtime)
    outs = portable.run(m, *feeds.values(), device=device)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


# ---------------------------------------------------------------------------------------------------------- If
def _if_on_rank(x_shape):
    """If branching on the rank of x (a constant once shapes are pinned): the branches use outer-scope values."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e0"]), helper.make_node("Relu", ["e0"], ["e"])],
                              "else", [], [vi("e", None)])
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["s"], ["rank"]),
             const("three", np.int64(3)), helper.make_node("Equal", ["rank", "three"], ["is3"]),
             helper.make_node("If", ["is3"], ["y"], then_branch=then, else_branch=other)]
    return model(nodes, [vi("x", list(x_shape))], [vi("y", list(x_shape))], [("two", np.float32(2))])


@pytest.mark.parametrize("x_shape", [(2, 3, 4), (5, 6)])
def test_if_constant_condition_inlines_the_taken_branch(device, x_shape):
    check(_if_on_rank(x_shape), {"x": rand(*x_shape)}, device)


def test_if_constant_condition_leaves_no_if():
    text = onnx_to_mlir(_if_on_rank((2, 3, 4)))
    assert "scf.if" not in text and "arith.select" not in text


def test_if_runtime_condition_selects(device):
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e"])], "else", [], [vi("e", None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("c", [], T.BOOL), vi("x", [3, 4])], [vi("y", [3, 4])])
    x = rand(3, 4)
    for c in (True, False):
        check(m, {"c": np.array(c), "x": x}, device)


def test_if_runtime_condition_with_branches_of_other_shapes_is_data_dependent():
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [],
                              [vi("e", None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("c", [], T.BOOL), vi("x", [3, 4])], [vi("y", None)])
    with pytest.raises(UnsupportedOp, match=r"If_0.*data-dependent shape"):
        onnx_to_mlir(m)


def test_if_runtime_condition_with_a_branch_invalid_for_these_shapes():
    """Both branches are computed when the condition is not known: one that cannot run on these shapes is refused."""
    then = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["t"])], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["e"])], "else", [], [vi("e", None)])
    m = model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
              [vi("c", [], T.BOOL), vi("x", [3, 4])], [vi("y", None)], [("shape", np.array([5, 5], np.int64))])
    with pytest.raises(UnsupportedOp, match=r"If_0.*both branches.*data-dependent shape"):
        onnx_to_mlir(m)


# -------------------------------------------------------------------------------------------------------- Scan
def _scan_model(opset=18):
    """Two states, two scan inputs (one reversed, on axis 1 and -1) and two scan outputs (axis 1 reversed, axis 0)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "a_t"], ["acc_out"]),
         helper.make_node("Mul", ["prod_in", "b_t"], ["prod_out"]),
         helper.make_node("Sub", ["acc_out", "b_t"], ["diff"]),
         helper.make_node("Identity", ["prod_out"], ["prod_copy"])],
        "body", [vi("acc_in", [4]), vi("prod_in", [4]), vi("a_t", [4]), vi("b_t", [4])],
        [vi("acc_out", [4]), vi("prod_out", [4]), vi("diff", [4]), vi("prod_copy", [4])])
    node = helper.make_node("Scan", ["acc0", "prod0", "a", "b"], ["acc", "prod", "diffs", "prods"], body=body,
                            num_scan_inputs=2, scan_input_axes=[1, -1], scan_input_directions=[0, 1],
                            scan_output_axes=[1, 0], scan_output_directions=[1, 0])
    return model([node], [vi("acc0", [4]), vi("prod0", [4]), vi("a", [4, 5]), vi("b", [4, 5])],
                 [vi("acc", [4]), vi("prod", [4]), vi("diffs", [4, 5]), vi("prods", [5, 4])], opset=opset)


def test_scan_axes_and_reverse_directions(device):
    feeds = {"acc0": rand(4), "prod0": rand(4), "a": rand(4, 5), "b": rand(4, 5)}
    check(_scan_model(), feeds, device, runtime="onnxruntime")


def test_scan_negative_output_axis(device):
    body = helper.make_graph([helper.make_node("Mul", ["x_t", "x_t"], ["sq"])], "body", [vi("x_t", [2, 3])],
                             [vi("sq", [2, 3])])
    node = helper.make_node("Scan", ["x"], ["y"], body=body, num_scan_inputs=1, scan_input_axes=[-2],
                            scan_output_axes=[-1], scan_output_directions=[1])
    m = model([node], [vi("x", [2, 4, 3])], [vi("y", [2, 3, 4])])
    check(m, {"x": rand(2, 4, 3)}, device, runtime="onnxruntime")


def test_scan_opset8_batch_axis(device):
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
                              helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])],
                             "body", [vi("s_in", [3]), vi("x_t", [3])], [vi("s_out", [3]), vi("y_t", [3])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "y"], body=body, num_scan_inputs=1, directions=[1])
    m = model([node], [vi("s0", [2, 3]), vi("x", [2, 4, 3])], [vi("s", [2, 3]), vi("y", [2, 4, 3])], opset=8)
    check(m, {"s0": rand(2, 3), "x": rand(2, 4, 3)}, device, runtime="onnxruntime")


def test_scan_beyond_the_cap_is_refused():
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x_t"], ["s_out"])], "body",
                             [vi("s_in", [1]), vi("x_t", [1])], [vi("s_out", [1])])
    n = MAX_ITERATIONS + 1
    m = model([helper.make_node("Scan", ["s0", "x"], ["s"], body=body, num_scan_inputs=1)],
              [vi("s0", [1]), vi("x", [n, 1])], [vi("s", [1])])
    with pytest.raises(UnsupportedOp, match=rf"Scan_0.*{n} iterations.*{MAX_ITERATIONS}"):
        onnx_to_mlir(m)


# -------------------------------------------------------------------------------------------------------- Loop
def _counting_loop(trip_count: str, cond: str):
    """y += x[i] each iteration; the iteration's partial sums are a scan output."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Unsqueeze", ["i", "zero"], ["i1"]),
         helper.make_node("Gather", ["x", "i1"], ["row"], axis=0),
         helper.make_node("Add", ["y_in", "row"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["partial"])],
        "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("y_in", [1, 3])],
        [vi("cond_out", [], T.BOOL), vi("y_out", [1, 3]), vi("partial", [1, 3])])
    return helper.make_node("Loop", [trip_count, cond, "y0"], ["y", "partials"], body=body)


def test_loop_constant_trip_count(device):
    m = model([const("n", np.int64(4)), const("go", np.array(True)), _counting_loop("n", "go")],
              [vi("x", [6, 3]), vi("y0", [1, 3])], [vi("y", [1, 3]), vi("partials", [4, 1, 3])],
              [("zero", np.array([0], np.int64))])
    # onnxruntime: onnx's reference Loop concatenates (np.vstack) scan outputs of rank > 1 instead of stacking them
    check(m, {"x": rand(6, 3), "y0": rand(1, 3)}, device, runtime="onnxruntime")


def test_loop_condition_computed_from_state(device):
    """while k < 3 (k carried, starting at 0; 3 is the body's own initializer), no trip count: the condition is
    evaluated before import."""
    body = helper.make_graph(
        [helper.make_node("Add", ["k_in", "one"], ["k_out"]),
         helper.make_node("Less", ["k_out", "three"], ["cond_out"]),
         helper.make_node("Cast", ["k_in"], ["kf"], to=T.FLOAT),
         helper.make_node("Mul", ["v_in", "kf"], ["v_mul"]),
         helper.make_node("Add", ["v_mul", "x"], ["v_out"])],
        "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("k_in", [], T.INT64), vi("v_in", [2])],
        [vi("cond_out", [], T.BOOL), vi("k_out", [], T.INT64), vi("v_out", [2])],
        [numpy_helper.from_array(np.int64(3), "three")])
    m = model([helper.make_node("Loop", ["", "go", "k0", "v0"], ["k", "v"], body=body)],
              [vi("x", [2]), vi("v0", [2])], [vi("k", [], T.INT64), vi("v", [2])],
              [("one", np.int64(1)), ("k0", np.int64(0)), ("go", np.array(True))])
    check(m, {"x": rand(2), "v0": rand(2)}, device, runtime="onnxruntime")


def test_loop_with_if_on_the_iteration_number(device):
    """An If nested in the body, on i % 2: its condition folds once the loop is unrolled."""
    then = helper.make_graph([helper.make_node("Add", ["acc_in", "x"], ["t"])], "then", [], [vi("t", None)])
    other = helper.make_graph([helper.make_node("Mul", ["acc_in", "x"], ["e"])], "else", [], [vi("e", None)])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]), helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [vi("i", [], T.INT64), vi("cond_in", [], T.BOOL), vi("acc_in", [3])],
        [vi("cond_out", [], T.BOOL), vi("acc_out", [3])])
    m = model([helper.make_node("Loop", ["n", "", "acc0"], ["acc"], body=body)],
              [vi("x", [3]), vi("acc0", [3])], [vi("acc", [3])],
              [("n", np.int64(5)), ("two", np.int64(2)), ("zero", np.int64(0))])
    # onnxruntime: onnx's reference Loop runs no iteration when the condition input is left out
    check(m, {"x": rand(3), "acc0": rand(3)}, device, runtime="onnxruntime")


def test_loop_runtime_trip_count_is_data_dependent_until_folded(device):
    m = model([_counting_loop("n", "")], [vi("n", [], T.INT64), vi("x", [6, 3]), vi("y0", [1, 3])],
              [vi("y", [1, 3]), vi("partials", [None, 1, 3])], [("zero", np.array([0], np.int64))])
    with pytest.raises(UnsupportedOp, match=r"Loop_0.*trip count 'n'.*data-dependent shape"):
        onnx_to_mlir(m)
    feeds = {"n": np.array(5, np.int64), "x": rand(6, 3), "y0": rand(1, 3)}
    refs = reference(m, feeds, "onnxruntime")
    outs = portable.run(onnx_to_mlir(m, input_values={"n": feeds["n"]}), feeds["x"], feeds["y0"], device=device)
    assert [o.shape for o in outs] == [r.shape for r in refs]
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)


def test_loop_beyond_the_cap_is_refused():
    m = model([_counting_loop("n", "")], [vi("x", [6, 3]), vi("y0", [1, 3])], [vi("y", [1, 3])],
              [("zero", np.array([0], np.int64)), ("n", np.int64(MAX_ITERATIONS * 10))])
    with pytest.raises(UnsupportedOp, match=rf"Loop_0.*{MAX_ITERATIONS * 10} iterations"):
        onnx_to_mlir(m)


def test_loop_that_never_ends_is_refused():
    m = model([_counting_loop("", "")], [vi("x", [6, 3]), vi("y0", [1, 3])], [vi("y", [1, 3])],
              [("zero", np.array([0], np.int64))])
    with pytest.raises(UnsupportedOp, match=r"Loop_0.*does not terminate"):
        onnx_to_mlir(m)


def test_range_function_body_unrolls(device):
    """Range's ONNX function body is a Loop: with constant inputs it unrolls and folds to a constant."""
    from portable.frontend.onnx_functions import expand_nodes

    m = model([helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
               helper.make_node("Add", ["r", "x"], ["y"])],
              [vi("start", []), vi("limit", []), vi("delta", []), vi("x", [4])], [vi("y", [4])])
    expanded = onnx.shape_inference.infer_shapes(m)
    expand_nodes(expanded, lambda n: n.op_type == "Range")
    assert [n.op_type for n in expanded.graph.node].count("Loop") == 1
    values = {"start": np.float32(1), "limit": np.float32(5), "delta": np.float32(1.25)}
    x = rand(4)
    ref = ReferenceEvaluator(m).run(None, {**values, "x": x})[0]
    out = portable.run(onnx_to_mlir(expanded, input_values=values), x, device=device)[0]
    np.testing.assert_allclose(out, ref, rtol=1e-6)


# ------------------------------------------------------------------------------------------- folding fixes
@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([20, 10, 4], [0, 0, 1], [0, 1, 2], [-1, -3, -2]),  # starts past the end with negative steps
    ([-1], [-1000], [-2], [-2]),
    ([-100], [3], [1], [1]),
    ([5], [100], [-1], [2]),
])
def test_slice_constant_arguments_out_of_range(device, starts, ends, axes, steps):
    args = [("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)]
    m = model([helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])], [vi("x", [20, 10, 5])],
              [vi("y", None)], [(k, np.array(v, np.int64)) for k, v in args])
    check(m, {"x": rand(20, 10, 5)}, device)


def test_empty_result_folds(device):
    """A Slice with an empty result next to a computed output: the empty one is a constant."""
    m = model([helper.make_node("Slice", ["x", "s", "e", "a"], ["empty"]), helper.make_node("Relu", ["x"], ["y"])],
              [vi("x", [4, 6])], [vi("empty", [4, 0]), vi("y", [4, 6])],
              [("s", np.array([9], np.int64)), ("e", np.array([10], np.int64)), ("a", np.array([1], np.int64))])
    check(m, {"x": rand(4, 6)}, device)


def test_dynamic_shape_argument_names_the_inputs():
    m = model([helper.make_node("Add", ["p", "p"], ["pads"]), helper.make_node("Pad", ["x", "pads"], ["y"])],
              [vi("x", [3, 4]), vi("p", [4], T.INT64)], [vi("y", None)])
    with pytest.raises(UnsupportedOp, match=r"Pad_1.*'pads'.*input\(s\) 'p' \(a data-dependent shape"):
        onnx_to_mlir(m)


def test_function_body_reads_schema_default_attributes():
    """Swish's body reads alpha by reference: a node without alpha gets the schema default written out."""
    from portable.frontend.onnx_functions import expand_nodes

    m = model([helper.make_node("Swish", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])], opset=24)
    m = onnx.shape_inference.infer_shapes(m)
    expand_nodes(m, lambda n: n.op_type == "Swish")
    assert "Swish" not in {n.op_type for n in m.graph.node}
    onnx.shape_inference.infer_shapes(m, strict_mode=True)
    x = rand(2, 3)
    np.testing.assert_allclose(ReferenceEvaluator(m).run(None, {"x": x})[0], x / (1 + np.exp(-x)), rtol=1e-6)
