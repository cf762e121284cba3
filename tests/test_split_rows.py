"""Row reductions with too few rows for the device, split along the row (compiler/graph/split_rows.py): each row's
slices reduce in workgroups of their own, a small kernel combines the partials, the elementwise ops run over the
slices, reading the chain's inputs again instead of rows an earlier kernel wrote."""

from __future__ import annotations

import pytest
from test_row_fusion import BUILD, _run

import portable
from portable.compiler.graph import split_rows

# Rows of 64 threads each, in workgroup memory as on a GPU profile; 64 rows' worth of threads fill this pretend
# device.
GPU = {"reduction_threads": 64, "row_fusion_shared_bytes": 49152, "fill_threads": 64 * 64}
COLS = split_rows.MIN_ROW
SLICES = 32  # 3 rows x 32 slices x 64 threads: the 4096 threads of GPU


def _partial(d) -> bool:
    """A dispatch of a workgroup per slice of each row (the final elementwise kernel's grid differs)."""
    return sorted(g for g in d.grid if g != 1) == [3, SLICES]


@pytest.mark.parametrize("family", ["softmax", "layernorm"])
def test_few_long_rows_are_split(device, tmp_path, family):
    """3 rows x 32 slices: partial reductions over 96 workgroups, combined, then the elementwise ops over the slices
    (checked against numpy in _run); with rows enough for the device it compiles as without fill_threads."""
    g, shapes = BUILD[family](3, COLS)
    exe = _run(g, shapes, device, tmp_path, **GPU)
    partials = [d for d in exe.dispatches if _partial(d)]
    # Five dispatches; layernorm's two combining kernels are the same body, generated once.
    assert len(exe.dispatches) == 5 and len(partials) == 2, [tuple(d.grid) for d in exe.dispatches]
    g, shapes = BUILD[family](64, COLS)
    whole = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=49152)
    assert [d.grid for d in _run(g, shapes, device, tmp_path, **GPU).dispatches] == [d.grid for d in whole.dispatches]


def test_rows_that_do_not_divide_stay_whole(device, tmp_path):
    g, shapes = BUILD["softmax"](3, COLS + 1)
    whole = _run(g, shapes, device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=49152)
    assert [d.grid for d in _run(g, shapes, device, tmp_path, **GPU).dispatches] == [d.grid for d in whole.dispatches]


def test_cpu_profiles_do_not_split(device, tmp_path):
    """The CPU drivers' own profiles (no fill_threads: a few rows keep their few cores busy) split nothing."""
    g, shapes = BUILD["softmax"](3, COLS)
    exe = _run(g, shapes, device, tmp_path)
    assert not [d for d in exe.dispatches if _partial(d)]


def test_split_max_and_column_broadcast(device, tmp_path):
    """A max over x * w with a per-column weight w (read along the row: split with it) and a per-row bias (read
    whole), checked against numpy in _run."""
    g = portable.Graph()
    x, w, b = g.input((2, COLS), "float32"), g.input((COLS,), "float32"), g.input((2, 1), "float32")
    xw = g.mul(x, w)
    g.output(g.add(g.sub(xw, g.max(xw, axis=-1, keepdims=True)), b))
    exe = _run(g, [(2, COLS), (COLS,), (2, 1)], device, tmp_path, **GPU)
    assert len(exe.kernels) == 3  # partial maxima, their combination, the rows


@pytest.mark.parametrize("op,cols", [("sum", 4097), ("max", 1000)])
def test_lone_row_reduction_reads_columns_cyclically(device, tmp_path, monkeypatch, op, cols):
    """On a GPU profile a reduction alone is a row chain of one op (row_chains.find_chains `single`): its threads
    take columns t, t + T, ... (tile_reduction_using_for, coalesced) rather than a contiguous piece each
    (tile_reduction_using_forall); split_rows' partials rely on it. Checked against numpy in _run."""
    g = portable.Graph()
    g.output(getattr(g, op)(g.input((5, cols), "float32"), axis=-1))
    monkeypatch.setenv("PORTABLE_DUMP", str(tmp_path / "dump"))
    _run(g, [(5, cols)], device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=49152)
    script = "".join(p.read_text() for p in (tmp_path / "dump").rglob("*tile-and-map-script.mlir"))
    assert "tile_reduction_using_for " in script and "tile_reduction_using_forall" not in script


def test_lone_reduction_keeps_its_epilogue(device, tmp_path):
    """relu(sum(x)): the relu stays the reduction kernel's epilogue (a chain of one would leave it a second
    kernel), so that reduction keeps the plain workgroup form."""
    g = portable.Graph()
    g.output(g.relu(g.sum(g.input((5, 4097), "float32"), axis=-1)))
    exe = _run(g, [(5, 4097)], device, tmp_path, reduction_threads=64, row_fusion_shared_bytes=49152)
    assert len(exe.kernels) == 1
