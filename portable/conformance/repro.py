"""`python -m portable.conformance.repro CASE_JSON OUT.mlir`: the imported MLIR of one case, written to a file.

Run in its own process by the CLI (torch-mlir can crash on a model; a repro must not take the report down).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .cases import Case

REPRO_LIMIT = 256 * 1024  # repros above this size are not kept


def write_repro(case: Case, out: Path, timeout_s: float = 120.0) -> bool:
    """Import `case` in a child process and write its MLIR to `out`; False if that failed for any reason."""
    import dataclasses

    try:
        r = subprocess.run([sys.executable, "-m", "portable.conformance.repro",
                            json.dumps(dataclasses.asdict(case)), str(out)],
                           capture_output=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and out.exists()


def main(argv: list[str]) -> int:
    from .execute import import_case

    fields = json.loads(argv[0])
    fields["data_sets"] = tuple((tuple(i), tuple(o)) for i, o in fields["data_sets"])
    _, payload = import_case(Case(**fields))
    if not isinstance(payload, tuple) or len(payload[0]) > REPRO_LIMIT:
        return 1
    out = Path(argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(payload[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
