"""Elementwise consumers that read a reduction's result through an expand_shape run in its kernel
(compiler/graph/epilogue_shapes.py), on every device."""

import numpy as np
from conftest import compile_and_load

import portable


def _residual_after_reshape(k: int = 512, n: int = 64, returned: bool = False) -> portable.Graph:
    """x @ w reshaped to [1, 1, n] (a decoder's [batch, seq, hidden]), plus a residual r of that shape."""
    g = portable.Graph("residual")
    x, w, r = g.input((1, k)), g.input((k, n)), g.input((1, 1, n))
    y = g.reshape(g.matmul(x, w), (1, 1, n))
    g.output(*((g.add(r, y), y) if returned else (g.add(r, y),)))
    return g


def test_residual_add_after_a_reshape_joins_the_split_sum(device, tmp_path):
    """Partial sums (one kernel), then their sum with the residual added (one kernel): the Add reads the sum
    through the reshape and still runs in its kernel."""
    g = _residual_after_reshape()
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    assert len(exe.dispatches) == 2
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 512), (512, 64), (1, 1, 64))]
    np.testing.assert_allclose(loaded(*xs)[0], xs[2] + (xs[0] @ xs[1]).reshape(1, 1, 64), rtol=1e-4, atol=1e-4)


def test_reshaped_result_used_elsewhere_stays_apart(device, tmp_path):
    """The product is also an output: its kernel must write it as it is, so the Add stays a kernel of its own."""
    g = _residual_after_reshape(returned=True)
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    assert len(exe.dispatches) == 3
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((1, 512), (512, 64), (1, 1, 64))]
    prod = (xs[0] @ xs[1]).reshape(1, 1, 64)
    out = loaded(*xs)
    np.testing.assert_allclose(out[0], xs[2] + prod, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out[1], prod, rtol=1e-4, atol=1e-4)
