"""A second OpenCL driver with what PoCL lacks: the Intel CPU OpenCL runtime (pip package intel-opencl-rt, in the
test extra) has the sub_group_* built-ins (cl_intel_subgroups) and the device-attribute query. It is registered for
a child pytest run only (OCL_ICD_VENDORS names a folder holding just its ICD), so the rest of the suite keeps its
devices; the child runs the tests that need those features and would skip on PoCL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = Path(sys.prefix) / "lib" / "libintelocl.so"  # where pip puts the wheel's libraries (RUNPATH $ORIGIN)
TESTS = ["tests/test_row_fusion.py::test_rows_reduced_by_subgroups_of_any_width",
         "tests/test_runtime_cl.py::test_device_ids_come_from_the_vendor_queries"]


@pytest.fixture(scope="module")
def intel_env(tmp_path_factory):
    if not RUNTIME.exists():
        pytest.skip(f"the Intel CPU OpenCL runtime is not installed ({RUNTIME} is missing): "
                    f"pip install -e '.[test]' installs intel-opencl-rt on x86-64 Linux")
    vendors = tmp_path_factory.mktemp("icd")
    (vendors / "intel-cpu.icd").write_text(f"{RUNTIME}\n")
    env = dict(os.environ, OCL_ICD_VENDORS=str(vendors), PORTABLE_TEST_DEVICES="opencl:0")
    listing = subprocess.run([sys.executable, "-m", "portable", "devices"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
    assert re.search(r"^opencl:0 .*\| driver Intel\(R\) OpenCL", listing.stdout, re.M), listing.stdout + listing.stderr
    return env


def test_subgroup_reductions_and_device_ids_on_intels_cpu_runtime(intel_env):
    """Row chains reduced by sub_group_reduce_* at the width this driver picks, checked against numpy (NaN rows
    too), and the PCI-style device id read through cl_intel_device_attribute_query: every case runs, none skips."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT,
                       env=intel_env, capture_output=True, text=True, timeout=900)
    tail = r.stdout[-6000:] + r.stderr[-2000:]
    assert r.returncode == 0, tail
    passed = re.search(r"\b(\d+) passed\b", r.stdout)
    assert passed and int(passed.group(1)) >= 13 and "skipped" not in r.stdout, tail  # 12 row cases + the ids
