"""Large ONNX weights travel beside the MLIR text (portable/ir/weights.py): the text names them by a digest of
their values, the compiler puts them back at parse, and nothing about the compile changes but its memory."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
pytest.importorskip("torch_mlir", reason="the MLIR Python bindings (torch-mlir wheel) are not installed")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import portable  # noqa: E402
from portable.api import graph_text  # noqa: E402
from portable.errors import CompileError  # noqa: E402
from portable.ir import weights  # noqa: E402
from portable.ir.mlir import ir  # noqa: E402

RNG = np.random.default_rng(3)


def _linear(w: np.ndarray, bias: np.ndarray):
    """y = x @ w + bias, with x of 4 rows."""
    k, n = w.shape
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [4, k])], [helper.make_tensor_value_info("y", T.FLOAT, [4, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _constant_values(module) -> list[np.ndarray]:
    found = []

    def visit(op):
        if op.name == "arith.constant" and isinstance(op.attributes["value"], ir.DenseElementsAttr):
            attr = op.attributes["value"]
            if not attr.is_splat:
                found.append(np.array(attr))
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


W = RNG.standard_normal((64, 128)).astype(np.float32)  # 32 KiB: outlined
B = RNG.standard_normal(128).astype(np.float32)  # 512 bytes: stays in the text


def test_large_weights_leave_the_text_small_ones_stay():
    text = graph_text(_linear(W, B))
    assert isinstance(text, weights.ModuleText)
    assert len(text.weights) == 1
    (name, values), = text.weights.items()
    assert f"dense_resource<{name}> : tensor<64x128xf32>" in text
    np.testing.assert_array_equal(values, W)
    assert len(text) < W.nbytes  # the hex of W alone would be twice its bytes
    assert 'dense<"0x' in text  # the bias, inline as before


def test_names_follow_the_values():
    """The compile cache keys on the text: equal weights give equal text, one changed element a different one."""
    w2 = W.copy()
    w2[7, 9] += 1.0
    a, b, c = graph_text(_linear(W, B)), graph_text(_linear(W.copy(), B)), graph_text(_linear(w2, B))
    assert str(a) == str(b)
    assert str(a) != str(c)


def test_parse_puts_the_model_weight_back():
    text = graph_text(_linear(W, B))
    with ir.Context(), ir.Location.unknown():
        found = _constant_values(weights.parse(text))
    assert any(v.shape == W.shape and np.array_equal(v, W) for v in found)


@pytest.mark.parametrize("dtype", ["f32", "f16", "i8", "i64"])
def test_values_round_trip_exactly(dtype):
    np_type = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i64": np.int64}[dtype]
    values = (RNG.standard_normal((160, 128)) * 50).astype(np_type)
    zero = "0.0" if dtype.startswith("f") else "0"
    with ir.Context(), ir.Location.unknown():
        t = f"tensor<160x128x{dtype}>"
        module = ir.Module.parse(f"func.func @f() -> {t} {{\n  %c = arith.constant dense<{zero}> : {t}\n"
                                 f"  return %c : {t}\n}}")
        op = module.body.operations[0].regions[0].blocks[0].operations[0]
        op.attributes["value"] = ir.DenseElementsAttr.get(values, type=ir.Type.parse(t))
        out = weights.outline(module)
        assert len(out.weights) == 1 and "dense_resource<pw_" in out
        (got,) = _constant_values(weights.parse(out))
    assert got.dtype == values.dtype
    np.testing.assert_array_equal(got, values)


def test_pickled_text_keeps_its_weights():
    """Workers (zoo, conformance, bench) receive the text through pickling."""
    text = graph_text(_linear(W, B))
    back = pickle.loads(pickle.dumps(text))
    assert isinstance(back, weights.ModuleText) and str(back) == str(text)
    np.testing.assert_array_equal(next(iter(back.weights.values())), W)


def test_text_without_its_weights_is_a_clear_error(device):
    text = graph_text(_linear(W, B))
    with pytest.raises(CompileError, match="outlined but its values are not given"):
        portable.compile(str(text), device=device)
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    (y,) = portable.run(text, x, device=device)  # the process keeps working; the real text runs
    np.testing.assert_allclose(y, x @ W + B, rtol=1e-4, atol=1e-4)


def test_outlined_model_runs(device):
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    (y,) = portable.run(_linear(W, B), x, device=device)
    np.testing.assert_allclose(y, x @ W + B, rtol=1e-4, atol=1e-4)


def test_external_data_model_runs_and_its_data_file_names_it(device, tmp_path):
    """Exporters write models past ~2 GB (and optimum's LLM exports) as model.onnx + a data file: the weights are
    in the data file, so the compile cache must be keyed by them, not by model.onnx's bytes alone."""
    path = tmp_path / "model.onnx"
    onnx.save_model(_linear(W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    assert (tmp_path / "model.onnx_data").stat().st_size >= W.nbytes
    x = RNG.standard_normal((4, 64)).astype(np.float32)
    (y,) = portable.run(str(path), x, device=device)
    np.testing.assert_allclose(y, x @ W + B, rtol=1e-4, atol=1e-4)
    # New weights in the data file only (model.onnx unchanged): a new compile, the new answer.
    before = path.read_bytes()
    (tmp_path / "model.onnx_data").unlink()  # onnx appends to an existing data file
    onnx.save_model(_linear(2 * W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    assert path.read_bytes() == before
    (y2,) = portable.run(str(path), x, device=device)
    np.testing.assert_allclose(y2, x @ (2 * W) + B, rtol=1e-4, atol=1e-4)


def test_model_loaded_without_its_external_data_is_a_clear_error(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save_model(_linear(W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    bare = onnx.load(str(path), load_external_data=False)
    with pytest.raises(CompileError, match="initializer 'w' keeps its values in the external file 'model.onnx_data'"):
        graph_text(bare)
    (tmp_path / "model.onnx_data").unlink()
    with pytest.raises(CompileError, match="keeps its values in .*model.onnx_data, which does not exist"):
        graph_text(str(path))


def test_external_data_is_mapped_not_read(tmp_path):
    """A model saved with its weights beside it keeps them in the data file while it compiles: its large
    initializers are read-only maps of that file (page cache, not the process's memory); the graph keeps stubs."""
    from portable.frontend.onnx_source import OnnxSource

    path = tmp_path / "model.onnx"
    onnx.save_model(_linear(W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    src = OnnxSource(str(path))
    assert isinstance(src.weights["w"], np.memmap) and not src.weights["w"].flags.writeable
    np.testing.assert_array_equal(src.weights["w"], W)
    assert all(not t.HasField("raw_data") for t in src.model.graph.initializer if t.name == "w")


def test_split_copies_no_weights_into_the_graph_and_leaves_the_model(tmp_path):
    from portable.frontend.onnx_weights import is_stub, split

    model = _linear(W, B)
    before = model.SerializeToString()
    m, arrays = split(model)
    assert model.SerializeToString() == before
    np.testing.assert_array_equal(arrays["w"], W)
    stubs = {t.name: is_stub(t) for t in m.graph.initializer}
    assert stubs["w"] and m.ByteSize() < W.nbytes // 4
    assert [n.op_type for n in m.graph.node] == ["MatMul", "Add"] and m.opset_import[0].version == 17


def test_external_data_outside_the_model_folder_is_refused(tmp_path):
    inner = tmp_path / "models"
    inner.mkdir()
    path = inner / "model.onnx"
    onnx.save_model(_linear(W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    m = onnx.load(str(path), load_external_data=False)
    (inner / "model.onnx_data").rename(tmp_path / "model.onnx_data")
    for t in m.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../model.onnx_data"
    onnx.save_model(m, str(path))
    with pytest.raises(CompileError, match="outside the model's folder"):
        graph_text(str(path))


def test_external_data_linked_from_elsewhere_says_so(tmp_path):
    """A data file that is a symbolic link to a file outside the model's folder (a Hugging Face hub snapshot) is
    refused, as the onnx package refuses it, with what to do."""
    inner = tmp_path / "snapshot"
    inner.mkdir()
    path = inner / "model.onnx"
    onnx.save_model(_linear(W, B), str(path), save_as_external_data=True, location="model.onnx_data",
                    size_threshold=1024)
    (inner / "model.onnx_data").rename(tmp_path / "blob")
    (inner / "model.onnx_data").symlink_to(tmp_path / "blob")
    with pytest.raises(CompileError, match="symbolic link .* local_dir"):
        graph_text(str(path))
