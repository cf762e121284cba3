"""ONNX models as users export them: dynamic dims taken from the call or from `input_shapes` (each shape set its
own cached executable), sizes written as -1 / 0, stale declared output shapes, and graph, node and tensor names
that are not identifiers."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference (pip install 'portable[test]')")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import portable  # noqa: E402
from portable.compiler import pipeline  # noqa: E402
from portable.errors import PortableError, ShapeMismatch  # noqa: E402
from portable.frontend.onnx_import import onnx_to_mlir  # noqa: E402

RNG = np.random.default_rng(31)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def make(nodes, inputs, outputs, inits=(), name="g", opset=17):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def reference(m, *arrays):
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})


def check(outs, refs, rtol=1e-4, atol=1e-5):
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape, (o.shape, r.shape)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def _matmul_model(dims, out_dims, name="g"):
    w = rand(8, 4)
    return make([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                [helper.make_tensor_value_info("x", T.FLOAT, dims)],
                [helper.make_tensor_value_info("y", T.FLOAT, out_dims)], [("w", w)], name=name)


def test_run_takes_the_shapes_of_its_arrays(device):
    """A symbolic batch and sequence: run() compiles for the arrays it is given, not for 1."""
    m = _matmul_model(["batch", "seq", 8], ["batch", "seq", 4])
    for shape in [(3, 5, 8), (1, 9, 8)]:
        x = rand(*shape)
        check(portable.run(m, x, device=device), reference(m, x))


def test_each_shape_set_is_its_own_cached_executable(device):
    m = _matmul_model(["batch", "seq", 8], ["batch", "seq", 4])
    exe = portable.compile(m, device=device, input_shapes={"x": (2, 3, 8)})
    assert exe.inputs[0].shape == (2, 3, 8)
    before = pipeline.COMPILE_COUNT
    for shape in [(2, 3, 8), (4, 6, 8), (1, 2, 8), (4, 6, 8)]:
        x = rand(*shape)
        check(exe(x), reference(m, x))
    assert pipeline.COMPILE_COUNT - before == 2  # (4, 6, 8) and (1, 2, 8); the repeat runs the kept variant
    x = rand(4, 6, 8)
    check(exe.submit(x).result(), reference(m, x))  # futures take the same variants
    # A new compile of the same model and shapes (by position this time) is a disk-cache hit: no MLIR work.
    before = pipeline.COMPILE_COUNT
    again = portable.compile(m, device=device, input_shapes=[(1, 2, 8)])
    assert again.inputs[0].shape == (1, 2, 8) and pipeline.COMPILE_COUNT == before
    again = portable.compile(m, device=device, input_shapes={0: (2, 3, 8)})
    assert pipeline.COMPILE_COUNT == before
    exe.close()
    again.close()


def test_input_shapes_errors(device):
    m = _matmul_model(["batch", 8], ["batch", 4])
    with pytest.raises(ShapeMismatch, match="position 2 is out of range"):
        portable.compile(m, device=device, input_shapes={2: (1, 8)})
    with pytest.raises(ShapeMismatch, match="dimension 1 is 8"):
        portable.compile(m, device=device, input_shapes={"x": (1, 9)})
    with pytest.raises(ShapeMismatch, match="no input"):
        portable.compile(m, device=device, input_shapes={"nope": (1, 8)})
    with pytest.raises(ShapeMismatch, match="two shapes"):
        portable.compile(m, device=device, input_shapes={"x": (1, 8), 0: (2, 8)})
    with pytest.raises(ShapeMismatch, match="ONNX models only"):
        portable.compile("func.func @f() { return }", device=device, input_shapes={0: (1,)})
    with pytest.raises(ShapeMismatch, match="takes 1 input"):  # the call's own check names what the graph takes
        portable.compile(m, device=device)(rand(1, 8), rand(1, 8))


def test_non_positive_sizes_are_dynamic_and_output_shapes_are_hints(device):
    """Paddle2ONNX writes unknown sizes as -1 (others as 0) and exporters leave stale output shapes: neither may
    make shape inference reject the model."""
    m = _matmul_model([-1, 0, 8], [1, 1, 1], name="paddle-onnx")
    assert "tensor<1x1x8xf32>" in onnx_to_mlir(m)
    assert "tensor<3x5x8xf32>" in onnx_to_mlir(m, {"x": (3, 5, 8)})
    x = rand(3, 5, 8)  # onnxruntime reads a 0 as a fixed size of 0: numpy is the reference here
    check(portable.run(m, x, device=device), [x @ numpy_helper.to_array(m.graph.initializer[0])])


@pytest.mark.parametrize("graph_name", ["Model from PaddlePaddle.", "paddle-onnx", "encoder/layer::0", "模型 1",
                                        "0", "", "main", "kernel"])
def test_names_that_are_not_identifiers(device, graph_name, tmp_path, monkeypatch):
    """User-chosen names (graph, nodes, tensors) never reach a symbol, a kernel name or a file name as they are."""
    monkeypatch.setenv("PORTABLE_DUMP", str(tmp_path / "dump"))
    x = helper.make_tensor_value_info("x/in:0", T.FLOAT, ["batch", 8])
    y = helper.make_tensor_value_info("out.y::1", T.FLOAT, ["batch", 8])
    m = make([helper.make_node("Relu", ["x/in:0"], ["t::1 é"], name="relu/0 é"),
              helper.make_node("Sigmoid", ["t::1 é"], ["out.y::1"], name="sig 1")],
             [x], [y], name=graph_name)
    a = rand(3, 8)
    check(portable.run(m, a, device=device), reference(m, a))
    dumped = list((tmp_path / "dump").rglob("*"))
    assert any(p.suffix in (".cl", ".spvasm") for p in dumped)
    assert all(p.parent.parent == tmp_path / "dump" for p in dumped if p.is_file())


def test_mlir_function_names_that_are_not_identifiers(device):
    text = """
    func.func @"my graph.v2"(%a: tensor<4xf32>) -> tensor<4xf32> {
      %e = tensor.empty() : tensor<4xf32>
      %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                           iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
      ^bb0(%x: f32, %o: f32):
        %s = arith.mulf %x, %x : f32
        linalg.yield %s : f32
      } -> tensor<4xf32>
      return %r : tensor<4xf32>
    }
    """
    a = np.arange(4, dtype=np.float32)
    (out,) = portable.run(text, a, device=device)
    np.testing.assert_allclose(out, a * a)


def _upsample_concat_model():
    """The shape of a YOLO/FPN neck: a stride-2 branch upsampled and concatenated with the full-resolution one.
    At the 1x1 image a default pin gives, the branches disagree (1 vs 2): the size must come from the call."""
    w1, w2 = rand(4, 3, 3, 3), rand(4, 3, 3, 3)
    scales = np.array([1, 1, 2, 2], np.float32)
    return make([helper.make_node("Conv", ["img", "w1"], ["a"], pads=[1, 1, 1, 1], name="/model.0/conv/Conv"),
                 helper.make_node("Conv", ["img", "w2"], ["b"], pads=[1, 1, 1, 1], strides=[2, 2],
                                  name="/model.1/conv/Conv"),
                 helper.make_node("Resize", ["b", "", "scales"], ["up"], mode="nearest", name="/model.2/Resize"),
                 helper.make_node("Concat", ["a", "up"], ["out0"], axis=1, name="/model.3/Concat")],
                [helper.make_tensor_value_info("img", T.FLOAT, ["batch", 3, "height", "width"])],
                [helper.make_tensor_value_info("out0", T.FLOAT, ["batch", 8, "height", "width"])],
                [("w1", w1), ("w2", w2), ("scales", scales)], name="main_graph")


def test_spatial_dims_from_the_call(device):
    m = _upsample_concat_model()
    with pytest.raises(PortableError, match=r"img\[2\] \(height\).*input_shapes"):
        portable.compile(m, device=device)  # 1x1 by default: the Concat's inputs disagree
    x = rand(2, 3, 16, 24)
    check(portable.run(m, x, device=device), reference(m, x), rtol=1e-3, atol=1e-4)
    exe = portable.compile(m, device=device, input_shapes={"img": (1, 3, 8, 8)})
    x = rand(1, 3, 12, 8)
    check(exe(x), reference(m, x), rtol=1e-3, atol=1e-4)


def test_decoder_step_with_a_past_length(device):
    """A decoder step as Hugging Face exports it: the new token's key appended to a past of dynamic length, and
    an attention mask over past + new. The past length comes from the arrays, step after step."""
    d = 8
    wq, wk = rand(d, d), rand(d, d)
    nodes = [helper.make_node("MatMul", ["hidden", "wq"], ["q"]),
             helper.make_node("MatMul", ["hidden", "wk"], ["k"]),
             helper.make_node("Concat", ["past_key", "k"], ["present_key"], axis=1),
             helper.make_node("Transpose", ["present_key"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["scores"]),
             helper.make_node("Cast", ["attention_mask"], ["maskf"], to=T.FLOAT),
             helper.make_node("Sub", ["one", "maskf"], ["inv"]),
             helper.make_node("Mul", ["inv", "neg"], ["bias"]),
             helper.make_node("Unsqueeze", ["bias", "ax1"], ["bias3"]),
             helper.make_node("Add", ["scores", "bias3"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1)]
    m = make(nodes,
             [helper.make_tensor_value_info("hidden", T.FLOAT, ["batch", "seq", d]),
              helper.make_tensor_value_info("past_key", T.FLOAT, ["batch", "past_sequence_length", d]),
              helper.make_tensor_value_info("attention_mask", T.INT64, ["batch", "total_sequence_length"])],
             [helper.make_tensor_value_info("probs", T.FLOAT, ["batch", "seq", "total_sequence_length"]),
              helper.make_tensor_value_info("present_key", T.FLOAT, ["batch", "total_sequence_length", d])],
             [("wq", wq), ("wk", wk), ("one", np.float32(1)), ("neg", np.float32(-1e4)),
              ("ax1", np.array([1], np.int64))])
    exe = portable.compile(m, device=device)
    past = np.zeros((1, 0, d), np.float32)
    for _ in range(3):
        h = rand(1, 1, d)
        mask = np.ones((1, past.shape[1] + 1), np.int64)
        mask[0, 0] = 0 if past.shape[1] else 1
        outs = exe(h, past, mask)
        refs = reference(m, h, past, mask)
        check(outs, refs, rtol=1e-4, atol=1e-5)
        past = outs[1]
    assert past.shape == (1, 3, d)


def test_torch_export_with_dynamic_axes(device, tmp_path):
    """A model exported the way PyTorch users export one: dynamic batch, height and width."""
    torch = pytest.importorskip("torch", reason="exporting needs PyTorch (pip install 'portable[models]')")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.down = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.up = torch.nn.Upsample(scale_factor=2, mode="nearest")

        def forward(self, x):
            a = torch.relu(self.conv(x))
            return torch.cat([a, self.up(torch.sigmoid(self.down(a)))], dim=1).mean(dim=(2, 3))

    torch.manual_seed(0)
    path = tmp_path / "net.onnx"
    torch.onnx.export(Net().eval(), (torch.randn(1, 3, 16, 16),), str(path), input_names=["input"],
                      output_names=["logits"], opset_version=17, dynamo=False,
                      dynamic_axes={"input": {0: "batch", 2: "height", 3: "width"}, "logits": {0: "batch"}})
    m = onnx.load(str(path))
    for shape in [(2, 3, 32, 24), (1, 3, 20, 20)]:
        x = rand(*shape)
        check(portable.run(str(path), x, device=device), reference(m, x), rtol=1e-3, atol=1e-4)


def test_compile_cli_input_shape(tmp_path):
    from portable.cli import main

    m = _matmul_model(["batch", 8], ["batch", 4], name="Model from PaddlePaddle.")
    onnx.save(m, str(tmp_path / "m.onnx"))
    out = tmp_path / "m.ptpk"
    assert main(["compile", str(tmp_path / "m.onnx"), "--target", "vulkan:lavapipe", "--input-shape", "x=6,8",
                 "-o", str(out)]) == 0
    from portable.package import Package

    exe = Package(out).executable(Package(out).targets[0])
    assert tuple(exe.inputs[0].shape) == (6, 8)
    assert main(["compile", str(tmp_path / "m.onnx"), "--target", "vulkan:lavapipe", "--input-shape", "x=a,b",
                 "-o", str(out)]) == 2


def test_shape_inference_without_the_weights_infers_what_onnx_does():
    """Large weights enter shape inference as types only; the types inferred, and the weights, are as before."""
    from portable.frontend.onnx_shapes import INFERENCE_STRIP_BYTES, infer_shapes

    w = rand(64, 96)
    assert w.nbytes >= INFERENCE_STRIP_BYTES
    m = make([helper.make_node("MatMul", ["x", "w"], ["h"]),
              helper.make_node("Shape", ["h"], ["s"]),
              helper.make_node("Reshape", ["h", "flat"], ["y"])],
             [helper.make_tensor_value_info("x", T.FLOAT, [2, 64])],
             [helper.make_tensor_value_info("y", T.FLOAT, None)],
             [("w", w), ("flat", np.array([-1], np.int64))])
    want = onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    got = infer_shapes(m)
    assert got.SerializeToString() == want.SerializeToString()
    assert [d.dim_value for d in got.graph.output[0].type.tensor_type.shape.dim] == [192]
    np.testing.assert_array_equal(numpy_helper.to_array(got.graph.initializer[0]), w)
