"""Without the compiler extra, compiling says which extra to install (no traceback from deep in an import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NO_MLIR = "import sys; sys.modules['torch_mlir'] = None\n"  # the import fails as on a runtime-only install


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_MLIR + code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_demo_without_compiler_names_the_extra():
    done = _run("from portable.cli import main; sys.exit(main(['demo']))")
    assert done.returncode == 2, done.stderr
    assert "CompilerMissing" in done.stderr and "portable[compiler]" in done.stderr
    assert "Traceback" not in done.stderr


def test_compile_without_compiler_is_a_portable_error():
    done = _run("import portable\n"
                "from portable.errors import CompilerMissing\n"
                "g = portable.Graph(); g.output(g.relu(g.input((4,))))\n"
                "try:\n    portable.compile(g)\n"
                "except CompilerMissing as e:\n    print('refused:', e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: compiling needs the MLIR Python bindings")
