"""The fuzz suite in its bounded form (tests/fuzz/harness.py; the long run is documented there): the corpus of inputs
that once crashed, hung, returned wrong numbers or raised outside PortableError, then a few generated ONNX models,
MLIR texts and packages per device, each in a worker process under a timeout."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis", reason="the fuzz suite needs hypothesis (pip install -e '.[test]')")

from fuzz.harness import Worker, corpus, fuzz

# What each corpus input must give now: refused cleanly, or (a damaged but harmless name) run and match onnxruntime.
EXPECTED = {"graph-name-not-utf8.onnx": "ok", "reduce-sum-all-3x65535.onnx": "ok"}


def test_corpus(device):
    worker = Worker(device, timeout=120)
    try:
        seen = {name: worker.run(kind, data) for name, kind, data in corpus()}
    finally:
        worker.close()
    assert len(seen) >= 8
    for name, res in seen.items():
        assert res["outcome"] == EXPECTED.get(name, "clean"), (name, res)


def test_bounded_fuzz_run(device, tmp_path):
    """A few inputs of each kind (derandomized: the same ones every run); none may crash, hang, raise outside
    PortableError or differ from onnxruntime."""
    res = fuzz(device, examples=6, tmp=tmp_path, timeout=120)
    assert all(c["distinct"] >= 3 for c in res["counts"].values()), res["counts"]
    assert not res["bad"], [(kind, r) for kind, _, r in res["bad"]]
