"""A worker process: takes cases over a pipe, runs them (execute.run_case), streams records back.

Each worker is a fresh interpreter (`python -m portable.conformance.worker FD`: no driver state inherited)
that opens devices lazily and keeps them for its lifetime. Its stdout/stderr go to a log file, with
faulthandler on, so a crashing kernel or a segfault in MLIR leaves a traceback the parent can quote.

Messages to the parent: ("begin", column) before each stage, ("record", column, dict), ("done", case name).
"""

from __future__ import annotations

import faulthandler
import sys


def main(fd: int) -> None:
    """Serve cases over the socket `fd` until told to stop (None) or the parent goes away."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    faulthandler.enable(file=sys.stderr, all_threads=False)
    import warnings

    warnings.simplefilter("ignore")
    from .cases import Case
    from .execute import run_case

    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        case_fields, columns, profile, repro_dir = msg
        case = Case(**case_fields)
        print(f"=== {case.name} on {', '.join(columns)}", flush=True)

        def begin(col: str) -> None:
            conn.send(("begin", col))

        def emit(col: str, rec: dict) -> None:
            conn.send(("record", col, rec))

        try:
            run_case(case, columns, profile, emit, begin, repro_dir)
        except BaseException as e:  # noqa: BLE001 - report it; the parent decides the rest of the columns
            conn.send(("crash", f"{type(e).__name__}: {e}"))
        conn.send(("done", case.name))


if __name__ == "__main__":
    main(int(sys.argv[1]))
