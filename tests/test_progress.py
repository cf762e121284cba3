"""Progress of long compiles (portable/progress.py): stage lines once a compile has run DELAY_S, kernel lines at
codegen, a closing line with the slowest stages; nothing for short compiles or when switched off."""

from __future__ import annotations

import io

import numpy as np
import pytest

from portable import progress
from portable.progress import Progress


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = _Clock()
    monkeypatch.setattr(progress.time, "perf_counter", c)
    return c


def test_quiet_until_the_delay_then_stages_and_a_summary(clock):
    out = io.StringIO()
    p = Progress("compiling", enabled=True, stream=out)
    p.step("parse")
    clock.t += 0.5
    p.step("dispatch")
    assert out.getvalue() == ""  # 0.5 s in: a short compile prints nothing
    clock.t += 3.0
    p.step("tile-and-map")
    clock.t += 6.0
    p.step("codegen")
    p.kernel(1, 3)  # within LINE_EVERY_S of the stage's line: none of its own without a terminal
    clock.t += 6.0
    p.kernel(2, 3)
    p.kernel(3, 3)
    times = p.finish()
    assert out.getvalue().splitlines() == [
        "compiling: tile-and-map (4 s)",
        "compiling: codegen (10 s)",
        "compiling: codegen: kernel 2 of 3 (16 s)",
        "compiling: done in 15.5 s (tile-and-map 6.0 s, codegen 6.0 s, dispatch 3.0 s, parse 0.5 s)",
    ]
    assert times == {"parse": 0.5, "dispatch": 3.0, "tile-and-map": 6.0, "codegen": 6.0}


def test_short_or_disabled_compiles_print_nothing(clock, monkeypatch):
    out = io.StringIO()
    p = Progress(enabled=False, stream=out)
    p.step("a")
    clock.t += 10
    p.step("b")
    p.finish()
    assert out.getvalue() == ""
    monkeypatch.setenv("PORTABLE_PROGRESS", "0")
    assert not Progress(stream=out).enabled
    monkeypatch.setenv("PORTABLE_PROGRESS", "1")
    assert Progress(stream=out).enabled  # a StringIO is no terminal: only the variable turns it on
    monkeypatch.delenv("PORTABLE_PROGRESS")
    assert not Progress(stream=out).enabled


def test_a_closed_stderr_never_fails_a_compile(clock):
    out = io.StringIO()
    out.close()
    p = Progress(enabled=True, stream=out)
    clock.t += 5
    p.step("codegen")
    assert p.finish() == {"codegen": 0.0} and not p.enabled


def test_compile_reports_its_stages(monkeypatch, capsys, tmp_path):
    """A real compile with PORTABLE_PROGRESS=1 and no delay: the import, every stage of STAGES and the codegen's
    kernels show on stderr, then the total."""
    import portable
    from portable.compiler.pipeline import STAGES

    monkeypatch.setenv("PORTABLE_PROGRESS", "1")
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)
    g = portable.Graph()
    x = g.input((4, 8))
    g.output(g.relu(g.add(x, x)))
    out = portable.compile(g, device="null:0")(np.ones((4, 8), np.float32))  # the null device computes nothing
    assert out[0].shape == (4, 8)
    err = capsys.readouterr().err
    for st in STAGES:
        assert f"compiling for null:0: {st.name} (" in err
    assert "codegen: kernel 1 of" in err and "compiling for null:0: done in" in err
