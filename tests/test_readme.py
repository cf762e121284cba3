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


def _trust_section() -> tuple[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Trusting a package", 1)[1].split("\n## ", 1)[0]
    shell, = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    python, = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return shell, python


@pytest.mark.skipif("vulkan:0" not in AVAILABLE,
                    reason=f"the trust example loads on vulkan:0; this host has {AVAILABLE}")
def test_trust_commands_run_as_written(tmp_path):
    """The README's keygen / compile --sign-key / sign / verify commands run as written (`.venv/bin/portable` is this
    interpreter's portable), and its load calls run the package: pinned by the hash compile printed, signed by the
    trusted key, and with trust="any", in a process whose cache never saw the package (so not "built here")."""
    pytest.importorskip("cryptography")
    shell, python = _trust_section()
    (tmp_path / "models").symlink_to(ROOT / "models")
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "portable").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m portable "$@"\n')
    (venv_bin / "portable").chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT), PORTABLE_CACHE_DIR=str(tmp_path / "cache-build"))
    env.pop("PORTABLE_TRUSTED_KEYS", None)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", shell], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    digest = re.search(r"content hash ([0-9a-f]{64})", done.stdout).group(1)
    assert re.search(r"trusted: signed by [0-9a-f]{16}", done.stdout), done.stdout
    assert oct((tmp_path / "release.key").stat().st_mode)[-3:] == "600"
    script = tmp_path / "load.py"
    script.write_text(python.replace("<the hash compile printed>", digest))
    env["PORTABLE_CACHE_DIR"] = str(tmp_path / "cache-elsewhere")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(r"signed by [0-9a-f]{16}\n", done.stdout), done.stdout
    # Without any of the four, the same file is refused.
    refused = subprocess.run([sys.executable, "-c", "import portable; portable.load('mnv2.ptpk', device='vulkan:0')"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert refused.returncode != 0 and "UntrustedPackage" in refused.stderr, refused.stderr[-2000:]
