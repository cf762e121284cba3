"""The README's quickstart runs as written, from the checkout, in a process of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AVAILABLE

ROOT = Path(__file__).resolve().parents[1]


def quickstart() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "README's Quickstart section has no python block"
    return blocks[0]


@pytest.mark.skipif(not {"vulkan:0", "opencl:0"} <= set(AVAILABLE),
                    reason=f"the quickstart names vulkan:0 and opencl:0; this host has {AVAILABLE}")
def test_quickstart_runs_as_written(tmp_path):
    # Its relative paths (models/onnx/...) are the checkout's; what it writes (g.ptx) lands in tmp_path.
    (tmp_path / "models").symlink_to(ROOT / "models")
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(r"\d+\n", done.stdout), done.stdout  # the decoder's next token, printed last
    assert (tmp_path / "g.ptx").is_file()
