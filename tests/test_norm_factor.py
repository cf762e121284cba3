"""Row scales factored out of matmuls (compiler/graph/norm_factor.py): RMSNorm(x) @ W runs as r * (x @ (g * W)), the
gain folded into the weights while compiling, the row factor in the matmul's epilogue; on every device, against
numpy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import compile_and_load

import portable

RNG = np.random.default_rng(5)
EPS = 1e-5


def _rms_norm(g: portable.Graph, x, gain: np.ndarray | None):
    r = g.rsqrt(g.add(g.mean(g.mul(x, x), axis=-1, keepdims=True), EPS))
    y = g.mul(x, r)
    return g.mul(y, g.constant(gain)) if gain is not None else y


def _folded(exe, weights: list[np.ndarray]) -> bool:
    """Whether some 2-d constant of `exe` is the concatenation of `weights` (several: a merged matmul's)."""
    want = np.concatenate(weights, axis=1)
    return any(c.shape == want.shape and np.allclose(c, want, rtol=1e-6, atol=0)
               for c in exe.executable.constants.values())


def _check(g, exe, *inputs, rtol=2e-5, atol=2e-5):
    for out, ref in zip(exe(*inputs), g.reference(*inputs)):
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("rows,depth,width", [(1, 96, 40), (1, 512, 64), (3, 96, 24), (1, 7, 5)])
@pytest.mark.parametrize("with_gain", [True, False])
def test_norm_into_one_matmul(device, rows, depth, width, with_gain):
    """The norm feeds one projection (an LM head): the importer's fusion has put it into the matmul's body."""
    g = portable.Graph()
    x = g.input((rows, depth))
    gain = RNG.uniform(0.5, 1.5, depth).astype(np.float32) if with_gain else None
    w = RNG.standard_normal((depth, width)).astype(np.float32)
    g.output(g.matmul(_rms_norm(g, x, gain), g.constant(w)))
    exe = portable.compile(g.to_mlir(), device=device)
    assert _folded(exe, [w * gain[:, None] if with_gain else w])
    _check(g, exe, RNG.standard_normal((rows, depth)).astype(np.float32) * 3)
    exe.close()


@pytest.mark.parametrize("rows", [1, 2])
def test_norm_into_several_projections(device, rows):
    """Q, K and V read the same norm. One row: they merge first (horizontal.py) and the merged matmul reads x
    against the concatenated folded weights. Two rows: they stay three matmuls, each reading x."""
    g = portable.Graph()
    x = g.input((rows, 128))
    gain = RNG.uniform(0.5, 1.5, 128).astype(np.float32)
    n = _rms_norm(g, x, gain)
    ws = [RNG.standard_normal((128, 32)).astype(np.float32) for _ in range(3)]
    q, k, v = (g.matmul(n, g.constant(w)) for w in ws)
    g.output(g.add(g.mul(q, k), v))
    exe = portable.compile(g.to_mlir(), device=device)
    folded = [w * gain[:, None] for w in ws]
    assert _folded(exe, folded) if rows == 1 else all(_folded(exe, [f]) for f in folded)
    _check(g, exe, RNG.standard_normal((rows, 128)).astype(np.float32))
    exe.close()


def test_norm_read_elsewhere_stays(device):
    """The normalized activation is also an output: it is computed anyway, so the matmul keeps reading it."""
    g = portable.Graph()
    x = g.input((2, 64))
    gain = RNG.uniform(0.5, 1.5, 64).astype(np.float32)
    n = _rms_norm(g, x, gain)
    w = RNG.standard_normal((64, 16)).astype(np.float32)
    g.output(g.matmul(n, g.constant(w)), n)
    exe = portable.compile(g.to_mlir(), device=device)
    assert _folded(exe, [w]) and not _folded(exe, [w * gain[:, None]])
    _check(g, exe, RNG.standard_normal((2, 64)).astype(np.float32))
    exe.close()


def test_scales_that_vary_along_k_stay(device):
    """x * x is no row scale: nothing folds, and the product is still right."""
    g = portable.Graph()
    x = g.input((1, 48))
    w = RNG.standard_normal((48, 8)).astype(np.float32)
    g.output(g.matmul(g.mul(g.mul(x, x), g.constant(np.full(48, 2.0, np.float32))), g.constant(w)))
    exe = portable.compile(g.to_mlir(), device=device)
    assert _folded(exe, [w]) and not _folded(exe, [w * 2])
    _check(g, exe, RNG.standard_normal((1, 48)).astype(np.float32))
    exe.close()


def test_split_products_start_beside_the_norm(device, tmp_path):
    """Split along K (a decode step's shape), the partial sums read x itself: they wait for nothing, the sum of
    squares runs beside them, and the row factor is applied where the partial sums are added."""
    g = portable.Graph()
    x = g.input((1, 512))
    gain = RNG.uniform(0.5, 1.5, 512).astype(np.float32)
    w = RNG.standard_normal((512, 64)).astype(np.float32)
    g.output(g.matmul(_rms_norm(g, x, gain), g.constant(w)))
    exe, loaded = compile_and_load(g.to_mlir(), device, tmp_path, fill_threads=4096)
    partials = 32 * 64 * 4  # 32 slices of 16 rows
    split = [d for d in exe.dispatches if partials in {exe.slots[s].nbytes for s in d.slots}]
    assert exe.input_slots[0] in split[0].slots  # reads x, not a normalized copy of it
    assert len(exe.dispatches) == 3  # sum of squares, partial sums, their sum times the row factor
    xs = RNG.standard_normal((1, 512)).astype(np.float32)
    np.testing.assert_allclose(loaded(xs)[0], g.reference(xs)[0], rtol=1e-4, atol=1e-4)
