"""The Null backend: plans of real compiles checked without a driver (dispatch count, grids within the profile's
limits, every output written by some dispatch), and the buffer traffic it records."""

from __future__ import annotations

import numpy as np
import pytest

from portable import profiles
from portable.bench import workloads as W
from portable.errors import InvalidPlan, PortableError
from portable.executable import Dispatch
from portable.runtime_null import NullBackend, trace

pytest.importorskip("torch_mlir", reason="compiling needs the MLIR bindings (the compiler extra)")
from portable.compiler.pipeline import compile_module


def _compile(text: str, name: str, api: str):
    prof = profiles.all_profiles()[name]
    return compile_module(text, profiles.codegen_options(prof), (api,)), prof


def _written_slots(t) -> set[int]:
    return {b.buffer for d in t.dispatches for b in d.bindings if "w" in b.access}


def _check_plan(exe, prof):
    t = trace(exe, limits=prof.limits)
    counts = prof.limits.max_workgroup_count or (65535, 65535, 65535)
    assert len(t.dispatches) == len(exe.dispatches) >= 1
    for d in t.dispatches:
        assert all(1 <= g <= c for g, c in zip(d.grid, counts)), d
        wg = d.workgroup_size
        assert wg[0] * wg[1] * wg[2] <= prof.limits.max_workgroup_invocations
    # Every buffer a dispatch only reads holds an input, a constant or an earlier dispatch's result.
    ready = set(exe.input_slots) | set(exe.constants)
    for d in t.dispatches:
        assert {b.buffer for b in d.bindings if b.access == "r"} <= ready, d
        ready |= {b.buffer for b in d.bindings if "w" in b.access}
    outputs = {slot for slot, _ in exe.outputs}
    assert outputs <= _written_slots(t), f"outputs {outputs - _written_slots(t)} written by no dispatch"
    return t


@pytest.mark.parametrize("name, api", [("nvidia", "vulkan"), ("lavapipe", "vulkan"), ("pocl", "opencl")])
def test_matmul_plan(name, api):
    exe, prof = _compile(W.build("matmul_1024_f32", "tiny").mlir, name, api)
    t = _check_plan(exe, prof)
    # One kernel reads A and B and writes C: nothing else on any of these profiles.
    assert len(t.dispatches) == 1
    (d,) = t.dispatches
    assert sorted(b.access for b in d.bindings) == ["r", "r", "w"]
    assert {b.buffer for b in d.bindings if b.access == "r"} == set(exe.input_slots)


def test_small_onnx_model_plan():
    onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package")
    from onnx import TensorProto, helper

    from portable.frontend.onnx_import import onnx_to_mlir

    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (16, 8), rng.standard_normal((16, 8)).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, (8,), rng.standard_normal(8).astype(np.float32))
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "tiny_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (4, 16))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (4, 8))], [w, b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    text = onnx_to_mlir(onnx.load_from_string(model.SerializeToString()))
    text = text if isinstance(text, str) else str(text)
    for name, api in (("generic", "vulkan"), ("nvidia", "opencl")):
        exe, prof = _compile(text, name, api)
        t = _check_plan(exe, prof)
        # The matmul with its bias and ReLU, then the softmax's max, exp, sum and division at most.
        assert 1 <= len(t.dispatches) <= 5, [[b.access for b in d.bindings] for d in t.dispatches]
        # The weights travel as constants and are uploaded before any dispatch.
        assert len(t.uploads) == len(exe.constants) >= 1


def test_a_grid_past_the_device_limits_is_refused():
    exe, prof = _compile(W.build("add_64Mi", "tiny").mlir, "generic", "vulkan")
    d = exe.dispatches[0]
    exe.dispatches[0] = Dispatch(d.kernel, d.slots, (70000, 1, 1), d.push_constants, d.offsets, d.sizes)
    with pytest.raises(InvalidPlan, match=r"grid \(70000, 1, 1\) outside"):
        trace(exe, limits=prof.limits)
    assert issubclass(InvalidPlan, PortableError)


def test_buffer_traffic_round_trips():
    be = NullBackend()
    buf = be.allocate(64)
    be.upload(buf, np.arange(16, dtype=np.float32))
    view = be.view(buf, 0, 32)
    assert np.array_equal(be.download(view, 32).view(np.float32), np.arange(8, dtype=np.float32))
    assert be.trace.uploads == [(buf.id, 64)] and be.trace.downloads == [(buf.id, 32)]


def test_null_device_through_the_public_api():
    """'null:0' is a device like any other: compile and run go through the session, kernels compute nothing."""
    import portable
    from portable.devices import open_device

    cg = portable.compile(W.build("softmax_4096", "tiny").mlir, "null:0", targets=("vulkan",))
    before = len(open_device("null:0").backend.trace.dispatches)
    (y,) = cg(np.ones((64, 64), np.float32))
    trace_ = open_device("null:0").backend.trace
    assert y.shape == (64, 64) and not y.any()  # nothing ran: the output buffer kept its zeros
    assert len(trace_.dispatches) - before == len(cg.executable.dispatches) >= 1
    assert trace_.uploads and trace_.downloads
