"""ONNX ArgMax / ArgMin on every device, with the device's own profile and with the nvidia profile's kernels, where
each runs as two reductions a workgroup shares (compiler/graph/arg_reductions.py): the first index of the extreme value,
ties and NaN included, as numpy gives it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import foreign_profile

import portable

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")


def _model(op: str, rows: int, cols: int) -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, cols])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, [rows, 1])
    node = helper.make_node(op, ["x"], ["y"], axis=1, keepdims=1)
    return helper.make_model(helper.make_graph([node], "g", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _inputs(rows: int, cols: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[1, [5, 9, cols - 1]] = 50.0   # ties for the maximum: the first wins
    x[2, [3, 700 % cols]] = -50.0   # ties for the minimum
    x[3, :] = 0.25                  # all equal
    x[4, 17 % cols] = np.nan        # a NaN: its index, for both
    return x


@pytest.mark.parametrize("profile", ["", "nvidia"])
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("cols", [2048, 300])
def test_arg_reductions_give_the_first_index(device, op, profile, cols):
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    rows = 6
    model = _model(op, rows, cols)
    if profile:
        live = open_device(device)
        opts = foreign_profile(profile, live)
        exe = CompiledGraph(compile_module(graph_text(model), opts, (live.info.api,)), live)
    else:
        exe = portable.compile(model, device=device)
    x = _inputs(rows, cols)
    y, = exe(x)
    want = (np.argmax if op == "ArgMax" else np.argmin)(x, axis=1).reshape(rows, 1)
    assert y.dtype == np.int64
    np.testing.assert_array_equal(y, want)
    exe.close()
