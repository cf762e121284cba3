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
