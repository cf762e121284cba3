"""MaxPool / AveragePool as exporters write them (ceil_mode with pads, asymmetric pads, count_include_pad, auto_pad,
dilations, Indices, 1-D to 3-D): the ONNX-level rewrites of onnx_decomp_pool.py checked with onnxruntime itself,
whole models run on every device against onnxruntime, and the dump naming the path each pool took."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="pooling is checked against onnxruntime")
from onnx import TensorProto as T
from onnx import helper

import portable
from portable.errors import UnsupportedOp
from portable.frontend import onnx_decompose
from portable.frontend.onnx_checks import name_nodes
from portable.frontend.onnx_decompose import decompose, paths
from portable.frontend.onnx_import import infer_shapes, onnx_to_mlir, pin_shapes

RNG = np.random.default_rng(11)


def A(**attrs):
    return attrs


def pool_model(op, shape, opset=17, outputs=("y",), dtype=T.FLOAT, name="pool1", **attrs):
    x = helper.make_tensor_value_info("x", dtype, list(shape))
    outs = [helper.make_tensor_value_info(o, T.INT64 if i else dtype, None) for i, o in enumerate(outputs)]
    node = helper.make_node(op, ["x"], list(outputs), name=name, **attrs)
    m = helper.make_model(helper.make_graph([node], "g", [x], outs), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def ort_run(m, feeds: dict):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def rewritten(m):
    """The model after the frontend's ONNX-level rewrites (what torch-mlir is given)."""
    d = onnx.ModelProto()
    d.CopyFrom(m)
    name_nodes(d.graph)
    pin_shapes(d)
    return decompose(infer_shapes(d), infer_shapes)


def compare(got, refs, atol=1e-5):
    assert len(got) == len(refs)
    for g, r in zip(got, refs):
        g = np.asarray(g)
        if r.dtype == np.uint8 and g.dtype == np.int8:
            g = g.view(np.uint8)  # the frontend types uint8 values as signless i8
        assert g.shape == r.shape, (g.shape, r.shape)
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=1e-5, atol=atol)


# Cases torch-mlir gets wrong: each rewritten, and the rewrite computes what onnxruntime computes.
WRONG_UPSTREAM = [
    # ceil_mode windows that would start in the end padding: dropped by onnxruntime, kept by ONNX inference.
    ("MaxPool", (1, 2, 9), 17, A(kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)),
    ("MaxPool", (1, 2, 5, 6, 5), 17, A(kernel_shape=[2, 3, 2], strides=[2, 2, 2], pads=[1] * 6, ceil_mode=1)),
    ("AveragePool", (1, 2, 9), 17, A(kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1, count_include_pad=0)),
    # count_include_pad=1 with ceil_mode windows past the padded input: divided by the taps inside it.
    ("AveragePool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=1)),
    ("AveragePool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1,
                                        count_include_pad=1)),
    ("AveragePool", (1, 2, 9), 17, A(kernel_shape=[3], strides=[2], pads=[1, 0], ceil_mode=1, count_include_pad=1)),
    ("AveragePool", (1, 2, 10, 9), 19, A(kernel_shape=[3, 2], strides=[2, 3], dilations=[2, 2], pads=[1, 0, 1, 1],
                                         ceil_mode=1, count_include_pad=1)),
]

# Cases torch-mlir lowers right: left to it.
RIGHT_UPSTREAM = [
    ("MaxPool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1)),
    ("MaxPool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER")),
    ("MaxPool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", (1, 2, 7, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, count_include_pad=0)),
    ("AveragePool", (1, 2, 7, 8), 17, A(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], count_include_pad=1)),
    ("AveragePool", (1, 2, 8, 8), 17, A(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER",
                                        count_include_pad=1)),
]


def _id(case):
    op, shape, _, attrs = case
    return f"{op}-{len(shape) - 2}d-" + "-".join(f"{k}{v}" for k, v in attrs.items()).replace(" ", "")


@pytest.mark.parametrize("case", WRONG_UPSTREAM, ids=_id)
def test_rewrite_matches_onnxruntime(case):
    op, shape, opset, attrs = case
    m = pool_model(op, shape, opset, **attrs)
    x = RNG.standard_normal(shape).astype(np.float32)
    d = rewritten(m)
    assert [n.op_type for n in d.graph.node] != [op], "expected the project's decomposition"
    compare(ort_run(d, A(x=x)), ort_run(m, A(x=x)))
    assert any("pool1" in line and "decomposed" in line for line in paths(d))


@pytest.mark.parametrize("case", RIGHT_UPSTREAM, ids=_id)
def test_left_to_torch_mlir(case):
    op, shape, opset, attrs = case
    d = rewritten(pool_model(op, shape, opset, **attrs))
    assert [n.op_type for n in d.graph.node] == [op]
    assert paths(d) == [line for line in paths(d) if line.endswith("torch-mlir's lowering")] and paths(d)


def _pools_model():
    """One graph with a pool of each kind an exporter writes (one compile per device): the outputs in order."""
    specs = [  # (input shape, op, attrs)
        ((1, 3, 9), "MaxPool", A(kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)),
        ((1, 3, 7, 8), "AveragePool", A(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                                        count_include_pad=1)),
        ((1, 3, 7, 8), "AveragePool", A(kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1], count_include_pad=0)),
        ((1, 3, 7, 8), "MaxPool", A(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_LOWER")),
        ((1, 3, 7, 8), "MaxPool", A(kernel_shape=[3, 3], dilations=[2, 2], pads=[1, 1, 1, 1])),
        ((1, 2, 5, 5, 5), "MaxPool", A(kernel_shape=[2, 2, 2], strides=[2, 2, 2], pads=[1] * 6, ceil_mode=1)),
        ((1, 2, 5, 6, 5), "AveragePool", A(kernel_shape=[2, 3, 2], strides=[2, 2, 2], ceil_mode=1,
                                           count_include_pad=1)),
        ((1, 3, 7, 8), "GlobalAveragePool", {}),
        ((1, 3, 9), "GlobalMaxPool", {}),
    ]
    nodes, ins, outs = [], [], []
    for i, (shape, op, attrs) in enumerate(specs):
        ins.append(helper.make_tensor_value_info(f"x{i}", T.FLOAT, list(shape)))
        outs.append(helper.make_tensor_value_info(f"y{i}", T.FLOAT, None))
        nodes.append(helper.make_node(op, [f"x{i}"], [f"y{i}"], name=f"pool{i}", **attrs))
    m = helper.make_model(helper.make_graph(nodes, "pools", ins, outs), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, [s for s, _, _ in specs]


def test_pools_run_like_onnxruntime(device):
    m, shapes = _pools_model()
    xs = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    compare(portable.run(m, *xs, device=device), ort_run(m, {f"x{i}": x for i, x in enumerate(xs)}))


def test_max_pool_indices(device):
    """Indices over the whole tensor, with pads, ceil_mode and column-major storage_order."""
    nodes, outs = [], []
    for i, attrs in enumerate([A(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                               A(kernel_shape=[2, 2], strides=[2, 2], storage_order=1),
                               A(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1], ceil_mode=1,
                                 storage_order=1)]):
        nodes.append(helper.make_node("MaxPool", ["x"], [f"y{i}", f"i{i}"], name=f"pool{i}", **attrs))
        outs += [helper.make_tensor_value_info(f"y{i}", T.FLOAT, None),
                 helper.make_tensor_value_info(f"i{i}", T.INT64, None)]
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3, 7, 8])],
                                            outs), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    x = RNG.permutation(2 * 3 * 7 * 8).reshape(2, 3, 7, 8).astype(np.float32)  # no ties: one index per window
    compare(portable.run(m, x, device=device), ort_run(m, A(x=x)))


def test_max_pool_uint8(device):
    m = pool_model("MaxPool", (1, 2, 7, 8), dtype=T.UINT8, kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])
    x = RNG.integers(0, 256, (1, 2, 7, 8)).astype(np.uint8)
    compare(portable.run(m, x, device=device), ort_run(m, A(x=x)))


def _torch_export(dynamo: bool, path):
    torch = pytest.importorskip("torch", reason="torch exports need torch")

    class Pools(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.p1 = torch.nn.MaxPool1d(2, 2, padding=1, ceil_mode=True)
            self.p2 = torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=True)
            self.p3 = torch.nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)

        def forward(self, x, y):
            return self.p1(x) * 2, self.p2(y) + 1, self.p3(y)

    x, y = torch.randn(1, 2, 9), torch.randn(1, 2, 6, 6)
    module = Pools().eval()
    torch.onnx.export(module, (x, y), str(path), dynamo=dynamo, opset_version=18 if dynamo else 17)
    return path.read_bytes(), [x.numpy(), y.numpy()], [t.numpy() for t in module(x, y)]


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_torch_exported_pools(device, dynamo, tmp_path):
    """PyTorch's ceil_mode pools as both exporters write them: the sizes PyTorch and onnxruntime compute."""
    try:
        data, xs, torch_outs = _torch_export(dynamo, tmp_path / "pools.onnx")
    except ImportError as e:  # the dynamo exporter needs onnxscript
        pytest.skip(f"the {'dynamo' if dynamo else 'legacy'} exporter is not usable here: {e}")
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    refs = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})
    compare(refs, torch_outs)
    compare(portable.run(data, *xs, device=device), refs)


def test_dump_names_each_path(tmp_path, monkeypatch):
    monkeypatch.setenv("PORTABLE_DUMP", str(tmp_path))
    m, _shapes = _pools_model()
    portable.compile(m, device=portable.devices()[0][0].uri)
    (found,) = tmp_path.glob("*/*-onnx-decompositions.txt")
    lines = found.read_text().splitlines()
    assert lines[0].startswith("node 'pool0' (op MaxPool, ceil_mode=1")
    assert "decomposed: Pad(-inf) + MaxPool" in lines[0]
    assert "node 'pool1' (op AveragePool" in lines[1] and "divisor" in lines[1]
    assert lines[2].startswith("node 'pool2' (op AveragePool") and lines[2].endswith("torch-mlir's lowering")
    assert "attributes {portable.onnx_paths" not in next(found.parent.glob("*-preprocess.mlir")).read_text()


def test_upstream_failure_names_node_and_attributes(monkeypatch):
    """Without the rewrite, torch-mlir fails on a dropped ceil_mode window: an UnsupportedOp naming the node and
    its attributes on the first line, torch-mlir's diagnostics after (no CompileError, no traceback)."""
    monkeypatch.setitem(onnx_decompose.REWRITES, "MaxPool", lambda node, b: False)
    m = pool_model("MaxPool", (1, 2, 9), kernel_shape=[2], strides=[2], pads=[1, 1], ceil_mode=1)
    try:
        onnx_to_mlir(m)
    except UnsupportedOp as e:
        first, *rest = str(e).splitlines()
        assert first.startswith("node 'pool1' (op MaxPool, ceil_mode=1, kernel_shape=[2], pads=[1, 1], strides=[2])")
        assert rest, "the MLIR diagnostics follow the first line"
    else:
        pytest.skip("torch-mlir lowers this case now: the rewrite may not be needed any more")
