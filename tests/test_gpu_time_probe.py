"""benchmarks/gpu_time_probe.py given a package: a device-clock figure for each dispatch, on every device."""

import json
import sys
from pathlib import Path

import numpy as np
from conftest import open_device

import portable
from portable import package, profiles

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_time_probe  # noqa: E402


def test_each_dispatch_of_a_package_is_timed(device, tmp_path):
    live = open_device(device)
    g = portable.Graph("two_kernels")  # a row softmax, then a matmul with a constant weight
    x = g.input((32, 64))
    g.output(g.matmul(g.softmax(x, axis=-1), g.constant(np.eye(64, dtype=np.float32))))
    path = tmp_path / "m.ptpk"
    package.build(g, [f"{live.info.api}:{profiles.match(live.info)['name']}"], path)
    pkg = package.Package(path)
    exe = pkg.executable(pkg.select(live.info, profiles.match(live.info)["name"]))  # a variant where limits ask
    gpu_time_probe.profile_dispatches(path, device, tmp_path / "d.json")
    rec = json.loads((tmp_path / "d.json").read_text())
    assert [d["grid"] for d in rec["dispatches"]] == [list(d.grid) for d in exe.dispatches]
    assert all(d["ms"] > 0 for d in rec["dispatches"]) and len(rec["runs_total_ms"]) == 5
    assert abs(rec["total_ms"] - sum(d["ms"] for d in rec["dispatches"])) < 1e-9
