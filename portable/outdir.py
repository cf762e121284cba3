"""Where a command writes its results: a new directory every run, so no run overwrites another's (or a
committed report)."""

from __future__ import annotations

import socket
from datetime import UTC, datetime
from pathlib import Path


def new_dir(root: str | Path, stem: str | None = None) -> Path:
    """root/stem, or root/stem-2, -3...: never a directory that exists. The stem defaults to <date>-<host>."""
    if stem is None:
        stem = f"{datetime.now(UTC):%Y-%m-%d}-{socket.gethostname().split('.')[0] or 'host'}"
    root = Path(root)
    p, n = root / stem, 2
    while p.exists():
        p, n = root / f"{stem}-{n}", n + 1
    return p
