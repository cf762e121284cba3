"""Repeated layers (the same ops on the same shapes, other weights) share one kernel: each distinct kernel body is
generated and built once, and every dispatch still reads its own weights."""

from __future__ import annotations

import numpy as np
import pytest

import portable

onnx = pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")


def _layers(rng, widths=(64, 64, 64, 64, 32)) -> tuple[bytes, np.ndarray, np.ndarray]:
    """relu(x @ W_i + b_i) repeated; equal widths make identical layers, the last one differs."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    x = rng.standard_normal((16, widths[0])).astype(np.float32)
    nodes, inits, want, prev = [], [], x, "x"
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        inits += [nh.from_array(w, f"W{i}"), nh.from_array(b, f"B{i}")]
        out = "y" if i == len(widths) - 2 else f"h{i}"
        nodes += [h.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]), h.make_node("Add", [f"m{i}", f"B{i}"], [f"a{i}"]),
                  h.make_node("Relu", [f"a{i}"], [out])]
        want, prev = np.maximum(want @ w + b, 0), out
    g = h.make_graph(nodes, "layers", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, want.shape)], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString(), x, want


def test_identical_layers_share_a_kernel(device, tmp_path):
    model, x, want = _layers(np.random.default_rng(0))
    path = tmp_path / "layers.onnx"
    path.write_bytes(model)
    exe = portable.compile(str(path), device=device)
    try:
        (y,) = exe(x)
        kernels, dispatches = exe.executable.kernels, exe.executable.dispatches
    finally:
        exe.close()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    used = [d.kernel for d in dispatches]
    assert sorted(set(used)) == list(range(len(kernels)))  # every kernel is dispatched
    assert len(dispatches) == 4 and len(kernels) == 2, f"{len(kernels)} kernels for {used}"
    assert used[0] == used[1] == used[2] != used[3]
