"""Horizontal fusion (compiler/graph/horizontal.py): matmuls that share their left operand run as one matmul over the
concatenated weights, each former result read in place as a slice of its output; on every device, against
numpy."""

from __future__ import annotations

import numpy as np
import pytest

import portable

RNG = np.random.default_rng(11)


def _qkv_graph(rows: int, widths: tuple[int, ...], depth: int = 96):
    """x [rows, depth] times one weight per width; the first result squared, the second doubled (one row: both
    reshaped to heads first, as a decoder's Q and K, so the kernels after it take views of the fused output
    at an offset), the rest returned as they are (they stay apart: a returned result needs a buffer of its own)."""
    g = portable.Graph()
    x = g.input((rows, depth))
    ws = [RNG.standard_normal((depth, w)).astype(np.float32) for w in widths]
    outs = [g.matmul(x, g.constant(w)) for w in ws]
    a, b = outs[0], outs[1]
    if rows == 1:
        a, b = (g.reshape(v, (w // 4, 1, 4)) for v, w in zip(outs[:2], widths[:2]))
    results = [g.mul(a, a), g.add(b, b)] + outs[2:]
    g.output(*results)
    return g, ws


@pytest.mark.parametrize("rows,widths", [(1, (64, 64, 64)), (1, (36, 100, 12)), (1, (8, 20, 4)),
                                         (5, (64, 32, 96)), (3, (8, 20, 4))])
def test_shared_lhs_matmuls_run_as_one(device, rows, widths):
    """Widths whose offsets are whole vec4s and widths whose are not (their views keep scalar accesses). One row
    (a decode step) merges; several rows stay apart (their slices would be strided)."""
    g, ws = _qkv_graph(rows, widths)
    exe = portable.compile(g.to_mlir(), device=device)
    weights = sorted(a.shape for a in exe.executable.constants.values() if a.ndim == 2)
    expected = sorted([(96, widths[0] + widths[1])] + [(96, w) for w in widths[2:]]) if rows == 1 else \
        sorted((96, w) for w in widths)
    assert weights == expected, f"weights {weights}, expected {expected}"
    x = RNG.standard_normal((rows, 96)).astype(np.float32)
    for out, ref in zip(exe(x), g.reference(x)):
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-4)
    exe.close()


def test_matmuls_with_their_own_epilogues_stay_apart(device):
    """Each result goes to an elementwise op of its own, which runs in its matmul's kernel: merged, those ops
    would be kernels of their own, so the matmuls stay two kernels."""
    g = portable.Graph()
    x = g.input((1, 64))
    ws = [RNG.standard_normal((64, w)).astype(np.float32) for w in (32, 48)]
    a, b = (g.matmul(x, g.constant(w)) for w in ws)
    g.output(g.relu(a), g.mul(b, b))
    exe = portable.compile(g.to_mlir(), device=device)
    assert sorted(c.shape for c in exe.executable.constants.values() if c.ndim == 2) == [(64, 32), (64, 48)]
    x0 = RNG.standard_normal((1, 64)).astype(np.float32)
    for out, ref in zip(exe(x0), g.reference(x0)):
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-4)
    exe.close()


def test_matmuls_with_other_left_operands_stay_apart(device):
    g = portable.Graph()
    x, y = g.input((2, 32)), g.input((2, 32))
    w = RNG.standard_normal((32, 16)).astype(np.float32)
    g.output(g.matmul(x, g.constant(w)), g.matmul(y, g.constant(w)))
    exe = portable.compile(g.to_mlir(), device=device)
    assert all(a.shape != (32, 32) for a in exe.executable.constants.values())
    xs = [RNG.standard_normal((2, 32)).astype(np.float32) for _ in range(2)]
    for out, ref in zip(exe(*xs), g.reference(*xs)):
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    exe.close()


def _rmsnorm_mlp_onnx(rng, hidden=64, ffn=96) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A Llama MLP block as torch.onnx exports it at decode time: x [1, 1, hidden], RMSNorm (Pow, ReduceMean,
    Add, Sqrt, Div, Mul, Mul by its weight), gate and up projections, SwiGLU, down projection, residual Add."""
    pytest.importorskip("onnx", reason="the ONNX frontend needs the onnx package (test extra)")
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    x = rng.standard_normal((1, 1, hidden)).astype(np.float32)
    gamma = (rng.random(hidden) + 0.5).astype(np.float32)
    wg, wu = ((rng.standard_normal((hidden, ffn)) / 8).astype(np.float32) for _ in range(2))
    wd = (rng.standard_normal((ffn, hidden)) / 8).astype(np.float32)
    consts = {"two": np.float32(2), "eps": np.float32(1e-6), "one": np.float32(1), "axes": np.array([-1])}
    inits = [nh.from_array(np.asarray(v), k) for k, v in consts.items()]
    inits += [nh.from_array(a, n) for a, n in ((gamma, "gamma"), (wg, "Wg"), (wu, "Wu"), (wd, "Wd"))]
    nodes = [h.make_node("Pow", ["x", "two"], ["sq"]), h.make_node("ReduceMean", ["sq", "axes"], ["var"], keepdims=1),
             h.make_node("Add", ["var", "eps"], ["ve"]), h.make_node("Sqrt", ["ve"], ["sd"]),
             h.make_node("Div", ["one", "sd"], ["inv"]), h.make_node("Mul", ["x", "inv"], ["xr"]),
             h.make_node("Mul", ["gamma", "xr"], ["xn"]),
             h.make_node("MatMul", ["xn", "Wg"], ["gate"]), h.make_node("MatMul", ["xn", "Wu"], ["up"]),
             h.make_node("Sigmoid", ["gate"], ["sg"]), h.make_node("Mul", ["gate", "sg"], ["silu"]),
             h.make_node("Mul", ["silu", "up"], ["act"]), h.make_node("MatMul", ["act", "Wd"], ["down"]),
             h.make_node("Add", ["x", "down"], ["y"])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, x.shape)], inits)
    xn = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * gamma
    gate, up = xn @ wg, xn @ wu
    want = x + (gate / (1 + np.exp(-gate)) * up) @ wd
    return h.make_model(g, opset_imports=[h.make_opsetid("", 18)]).SerializeToString(), x, want


def test_gate_and_up_projections_after_rmsnorm_merge_with_their_row_scale(device, tmp_path):
    """Exported with a [1, 1, hidden] activation, the projections are plain one-row matmuls only once their unit
    loops are joined, after the norm's row scale was factored out of each (norm_factor.py) into an elementwise op
    of its own: the same computation for both, so the two merge with it, the scale applied once over the merged
    output."""
    model, x, want = _rmsnorm_mlp_onnx(np.random.default_rng(2))
    (tmp_path / "mlp.onnx").write_bytes(model)
    with portable.compile(str(tmp_path / "mlp.onnx"), device=device) as exe:
        assert (64, 192) in [c.shape for c in exe.executable.constants.values()]
        np.testing.assert_allclose(exe(x)[0], want, rtol=2e-5, atol=2e-5)
