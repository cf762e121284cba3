"""Patterns of real exported models, made the way users make them (torch.onnx, the files PyPI packages ship):
ShuffleNet's channel shuffle (shape chains computed from `x.size()`), reflection pads of audio front ends (Silero
VAD's STFT), and grids past the device's workgroup-count limit."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the 'onnx' package (pip install 'portable[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference (pip install 'portable[test]')")
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import portable
from portable.frontend.onnx_decomp_pad import source_indices
from portable.frontend.onnx_fold import fold_once
from portable.frontend.onnx_shapes import infer_shapes, pin_shapes

RNG = np.random.default_rng(31)


def reference(model, *arrays):
    # A path stays a path: the dynamo exporter writes weights to a .data file beside the model.
    data = str(model) if isinstance(model, (str, Path)) else model if isinstance(model, bytes) \
        else model.SerializeToString()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), arrays)})


def check(outs, refs, rtol=1e-4, atol=1e-5):
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape, (o.shape, r.shape)
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def _torch():
    return pytest.importorskip("torch", reason="the models are exported from PyTorch (pip install 'portable[models]')")


# ------------------------------------------------------------------------------------------------ shape chains


def _shuffle_net(torch, blocks: int):
    """Stacked 1x1 convolutions each followed by torchvision's channel shuffle, written as torchvision writes it:
    the view's sizes come from `x.size()` and `channels // groups` (Shape -> Gather -> Div -> Cast -> Concat ->
    Reshape in a legacy export)."""

    def channel_shuffle(x, groups: int):
        batch, channels, height, width = x.size()
        x = x.view(batch, groups, channels // groups, height, width)
        return torch.transpose(x, 1, 2).contiguous().view(batch, -1, height, width)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(torch.nn.Conv2d(8, 8, 1) for _ in range(blocks))

        def forward(self, x):
            for conv in self.convs:
                x = channel_shuffle(torch.relu(conv(x)), 2)
            return x

    torch.manual_seed(0)
    return Net().eval()


def _export_shuffle(torch, path: Path, blocks: int) -> tuple[Path, np.ndarray]:
    x = torch.randn(1, 8, 6, 6)
    torch.onnx.export(_shuffle_net(torch, blocks), (x,), str(path), opset_version=15, dynamo=False,
                      input_names=["input"], dynamic_axes={"input": {0: "batch"}})
    return path, x.numpy()


def test_channel_shuffle_shapes_fold_in_one_sweep(tmp_path):
    """Every block's shape chain depends on the Reshape of the block before it: one folding sweep must see each
    folded Reshape's result shape at once, not one block per whole-model inference round (a 16-block ShuffleNet
    ran out of rounds at stage3.3)."""
    torch = _torch()
    path, _ = _export_shuffle(torch, tmp_path / "shuffle.onnx", blocks=12)
    m = onnx.load(str(path))
    assert sum(n.op_type == "Shape" for n in m.graph.node) >= 12, "the export no longer computes shapes at run time"
    pin_shapes(m, {"input": (1, 8, 6, 6)})
    m = infer_shapes(m)
    assert fold_once(m) > 0
    left = [n.name for n in m.graph.node if n.op_type in ("Shape", "Gather", "Div", "Cast", "Concat", "Unsqueeze")]
    assert left == [], f"shape chains left after one sweep: {left[:5]}"
    consts = {i.name for i in m.graph.initializer}
    assert all(n.input[1] in consts for n in m.graph.node if n.op_type == "Reshape")


def test_channel_shuffle_runs_like_onnxruntime(device, tmp_path):
    torch = _torch()
    path, x = _export_shuffle(torch, tmp_path / "shuffle.onnx", blocks=10)
    for batch in (1, 2):  # the batch is dynamic: each shape set folds its own chains
        xb = np.repeat(x, batch, axis=0)
        check(portable.run(str(path), xb, device=device), reference(path, xb))


# ------------------------------------------------------------------------------------------------ pads


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("size,begin,end", [(7, 3, 2), (7, 0, 6), (5, -2, 3), (4, 2, -3), (1, 2, 2)])
def test_source_indices_match_numpy(mode, size, begin, end):
    if mode == "reflect" and size == 1:
        pytest.skip("reflect needs two elements (onnxruntime refuses one)")
    x = np.arange(size) * 10
    want = np.pad(x, (max(begin, 0), max(end, 0)), mode=mode)[max(-begin, 0):len(x) + max(begin, 0) + max(end, 0)
                                                                - max(-end, 0)]
    np.testing.assert_array_equal(x[source_indices(size, begin, end, mode)], want)


def _pad_model(mode: str, shape, pads, axes=None, opset=18):
    inputs = ["x", "pads"] + (["", "axes"] if axes is not None else [])
    inits = [numpy_helper.from_array(np.array(pads, np.int64), "pads")]
    if axes is not None:
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
    g = helper.make_graph([helper.make_node("Pad", inputs, ["y"], name="the pad", mode=mode)], "pads",
                          [helper.make_tensor_value_info("x", T.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


PAD_CASES = {
    "reflect-last-axis": ("reflect", (2, 3, 40), [0, 0, 16, 0, 0, 16], None),
    "reflect-2d": ("reflect", (1, 2, 9, 7), [0, 0, 3, 2, 0, 0, 1, 4], None),
    "edge-with-crop": ("edge", (2, 5, 6), [0, -1, 3, 0, 2, -2], None),
    "reflect-axes": ("reflect", (3, 8, 5), [2, 1, 3, 1], [-2, 2]),
    "wrap": ("wrap", (2, 6, 5), [0, 2, 4, 0, 3, 1], None),
}


@pytest.mark.parametrize("case", list(PAD_CASES))
def test_pads_by_mode_run_like_onnxruntime(device, case):
    mode, shape, pads, axes = PAD_CASES[case]
    m = _pad_model(mode, shape, pads, axes, opset=19 if mode == "wrap" else 18)
    x = RNG.standard_normal(shape).astype(np.float32)
    check(portable.run(m, x, device=device), reference(m, x))


class _Stft:
    """Silero VAD's front end as its PyTorch source writes it: a reflection pad of the chunk, then frames."""

    @staticmethod
    def module(torch):
        class Frames(torch.nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.basis = torch.nn.Conv1d(1, 16, 128, stride=64, bias=False)

            def forward(self, x):
                x = torch.nn.functional.pad(x.unsqueeze(1), (64, 64), mode="reflect")
                return self.basis(x).abs()

        return Frames().eval()


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy15", "dynamo18"])
def test_reflect_pad_export_runs_like_onnxruntime(device, dynamo, tmp_path):
    """torch-mlir lowers a reflection pad through a reversed index map that tiling cannot size; the Pad is
    rewritten into constant-index Gathers first."""
    torch = _torch()
    x = torch.randn(1, 512)
    path = tmp_path / "stft.onnx"
    try:
        torch.onnx.export(_Stft.module(torch), (x,), str(path), dynamo=dynamo, opset_version=18 if dynamo else 15)
    except ImportError as e:  # the dynamo exporter needs onnxscript
        pytest.skip(f"the {'dynamo' if dynamo else 'legacy'} exporter is not usable here: {e}")
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert "Pad" in ops, ops
    check(portable.run(str(path), x.numpy(), device=device), reference(path, x.numpy()), rtol=1e-4, atol=1e-4)


def _silero(file: str) -> Path:
    try:
        dist = metadata.distribution("silero-vad")
    except metadata.PackageNotFoundError:
        pytest.skip("Silero VAD's ONNX files ship in the silero-vad package: pip install -e '.[models]'")
    return Path(dist.locate_file(f"silero_vad/data/{file}"))


@pytest.mark.parametrize("file,inputs", [
    ("silero_vad_16k_op15.onnx", {"input": (1, 512), "state": (2, 1, 128), "sr": 16000}),
    ("silero_vad_openvino_16k.onnx", {"input": (1, 576), "state": (2, 1, 128)}),
], ids=["op15", "lstm"])
def test_silero_vad_as_shipped(device, file, inputs):
    path = _silero(file)
    arrays = [np.array(v, np.int64) if isinstance(v, int) else (0.1 * RNG.standard_normal(v)).astype(np.float32)
              for v in inputs.values()]
    check(portable.run(str(path), *arrays, device=device), reference(path, *arrays), rtol=1e-3, atol=1e-5)


# ------------------------------------------------------------------------------------------------ grids


def _wide_conv():
    """FCN-ResNet50's head as its legacy export writes it: a 3x3 convolution over 2048 channels at 28x28. Its
    im2col tiles into 2048 x 3 x 3 x 4 = 73728 workgroups on lavapipe, past 65535 in any one grid dimension."""
    w = (0.01 * RNG.standard_normal((8, 2048, 3, 3))).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="/classifier/classifier.0/Conv",
                                            kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "head",
                          [helper.make_tensor_value_info("x", T.FLOAT, [1, 2048, 28, 28])],
                          [helper.make_tensor_value_info("y", T.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])


@pytest.mark.parametrize("name", ["lavapipe", "pocl", "nvidia", "arm-mali-valhall"])
def test_no_grid_past_the_profile_limit(name):
    """Every dispatch of the plan within the profile's workgroup counts, whatever the tiles; the wide im2col on a
    linearized grid of more than one dimension."""
    from portable import profiles
    from portable.compiler.pipeline import compile_module
    from portable.frontend.onnx_import import onnx_to_mlir

    opts = profiles.codegen_options(profiles.all_profiles()[name])
    limit = opts["max_workgroup_count"]
    exe = compile_module(onnx_to_mlir(_wide_conv()), opts, ("opencl",))
    grids = [tuple(d.grid) for d in exe.dispatches]
    assert all(all(0 < g <= m for g, m in zip(grid, limit)) for grid in grids), (grids, limit)
    items = [g * w for d in exe.dispatches for g, w in zip(d.grid, exe.kernels[d.kernel].workgroup_size)]
    assert max(items) < 2 ** 31
    if name == "lavapipe":  # the shape that had asked for 73728 workgroups in x
        assert max(g[0] * g[1] * g[2] for g in grids) > limit[0], grids


def test_wide_grid_runs_like_onnxruntime(device):
    m = _wide_conv()
    x = RNG.standard_normal((1, 2048, 28, 28)).astype(np.float32)
    check(portable.run(m, x, device=device), reference(m, x), rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------------------------ BatchNormalization


def _bn_net(torch):
    """A BatchNorm the legacy exporter cannot fold into a Conv (after a ReLU, as in pre-activation ResNets and
    DenseNet), and a BatchNorm1d after a Linear: exported as BatchNormalization nodes."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3)
            self.bn2d = torch.nn.BatchNorm2d(8)
            self.fc = torch.nn.Linear(8, 6)
            self.bn1d = torch.nn.BatchNorm1d(6)

        def forward(self, x):
            y = self.bn2d(torch.relu(self.conv(x)))
            return y, self.bn1d(self.fc(y.mean((2, 3))))

    torch.manual_seed(3)
    net = Net().eval()
    for bn in (net.bn2d, net.bn1d):
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        bn.weight.data.normal_()
        bn.bias.data.normal_()
    return net


@pytest.mark.parametrize("opset", [13, 14])
def test_batch_norm_before_opset_15_runs_like_onnxruntime(device, opset, tmp_path):
    """torch-mlir lowers BatchNormalization only from opset 15; older ones become a per-channel Mul and Add, and
    the dump's path notes say so."""
    from portable.frontend.onnx_decompose import decompose, paths

    torch = _torch()
    x = torch.randn(2, 3, 12, 12)
    path = tmp_path / "bn.onnx"
    torch.onnx.export(_bn_net(torch), (x,), str(path), dynamo=False, opset_version=opset)
    m = onnx.load(str(path))
    assert sum(n.op_type == "BatchNormalization" for n in m.graph.node) == 2
    notes = paths(decompose(infer_shapes(m), infer_shapes))
    assert sum("BatchNormalization" in s and "decomposed" in s for s in notes) == 2, notes
    check(portable.run(str(path), x.numpy(), device=device), reference(path, x.numpy()), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------ refusals


def test_dynamically_quantized_lstm_is_refused_naming_node_op_and_attributes(tmp_path):
    """onnxruntime's quantize_dynamic of a torch LSTM export (how OCR packages such as ddddocr ship their
    recognisers) holds com.microsoft:DynamicQuantizeLSTM, which onnxruntime runs and nothing here lowers: the
    refusal is an UnsupportedOp naming the node, the op and its attributes, raised before any lowering."""
    torch = _torch()
    quant = pytest.importorskip("onnxruntime.quantization", reason="onnxruntime's quantization tools")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(16, 32, batch_first=True)
            self.fc = torch.nn.Linear(32, 10)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])

    torch.manual_seed(5)
    x = torch.randn(1, 7, 16)
    fp32, q = tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx"
    torch.onnx.export(Net().eval(), (x,), str(fp32), dynamo=False, opset_version=13)
    quant.quantize_dynamic(str(fp32), str(q), op_types_to_quantize=["LSTM", "MatMul"])
    node = next(n for n in onnx.load(str(q)).graph.node if n.op_type == "DynamicQuantizeLSTM")
    assert reference(q, x.numpy())[0].shape == (1, 7, 10)  # onnxruntime runs it
    with pytest.raises(portable.UnsupportedOp) as err:
        portable.compile(str(q), device="null:0")
    msg = str(err.value)
    assert f"node '{node.name}' (op com.microsoft:DynamicQuantizeLSTM, " in msg, msg
    assert "hidden_size=32" in msg, msg
