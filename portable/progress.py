"""Progress of a long compile on stderr: which stage it is in (and which kernel of how many at codegen), shown once
the compile has run for a while, then one closing line with the total and the slowest stages. No MLIR here."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from . import config

DELAY_S = 2.0  # compiles shorter than this print nothing
LINE_EVERY_S = 5.0  # without a terminal: at most one kernel line this often (stage lines always)


class Progress:
    """Timings of one compile's steps; `step(name)` closes the previous step and opens `name`."""

    def __init__(self, label: str = "compile", enabled: bool | None = None, stream: TextIO | None = None):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        on = config.progress()
        self.enabled = (on if on is not None else _is_tty(self.stream)) if enabled is None else enabled
        self.tty = _is_tty(self.stream)
        self.start = self._last = time.perf_counter()
        self.current = ""
        self.times: dict[str, float] = {}
        self._printed = 0.0  # when the last line went out (0: none yet)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def step(self, name: str) -> None:
        self._close()
        self.current = name
        self._show(f"{name}", force=True)

    def kernel(self, k: int, n: int) -> None:
        """Codegen reached kernel k (1-based) of n: a line of its own without a terminal only every LINE_EVERY_S."""
        self._show(f"{self.current}: kernel {k} of {n}", force=False)

    def finish(self) -> dict[str, float]:
        """Close the last step; print the total if anything was printed. Returns {step: seconds}."""
        self._close()
        if self._printed:
            slow = sorted(self.times.items(), key=lambda kv: -kv[1])[:4]
            detail = ", ".join(f"{k} {v:.1f} s" for k, v in slow if v >= 0.05)
            self._write(f"{self.label}: done in {self.elapsed():.1f} s" + (f" ({detail})" if detail else ""), end=True)
        return dict(self.times)

    def _close(self) -> None:
        now = time.perf_counter()
        if self.current:
            self.times[self.current] = self.times.get(self.current, 0.0) + now - self._last
        self._last = now

    def _show(self, what: str, force: bool) -> None:
        if not self.enabled or self.elapsed() < DELAY_S:
            return
        now = time.perf_counter()
        if not self.tty and not force and now - self._printed < LINE_EVERY_S:
            return
        self._printed = now
        self._write(f"{self.label}: {what} ({self.elapsed():.0f} s)", end=not self.tty)

    def _write(self, text: str, end: bool) -> None:
        try:
            if self.tty:  # one line, rewritten in place
                self.stream.write("\r\x1b[K" + text + ("\n" if end else ""))
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or broken stderr never fails a compile
            self.enabled = False


def _is_tty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False
