"""pyopencl, imported once for the room, and the two ways a program object is made.

A host without pyopencl (a Vulkan-only phone package) must still import portable and list devices, so the
import failure is kept as a reason instead of being raised here.
"""

from __future__ import annotations

from typing import Any

try:
    import pyopencl as cl

    IMPORT_ERROR: str | None = None
except Exception as e:  # ImportError, or OSError from a broken OpenCL loader
    cl = None  # type: ignore[assignment]
    IMPORT_ERROR = f"pyopencl cannot be imported ({type(e).__name__}: {e}); install it with `pip install pyopencl`"


# pyopencl.Program adds its own source-build cache on some platforms and its include path to the options.
# We build the underlying program object instead, so our binary cache is the only cache (the `builds`
# counter then means real driver compiles everywhere) and the driver sees exactly our options.


def program_from_source(context: Any, source: str) -> Any:
    """An unbuilt program object for OpenCL C `source`."""
    return cl._cl._Program(context, source)


def program_from_binary(context: Any, device: Any, binary: bytes) -> Any:
    """An unbuilt program object for a driver binary obtained earlier from `program_binary`."""
    return cl._cl._Program(context, [device], [binary])


def program_binary(program: Any) -> bytes:
    """The driver binary of a built single-device program."""
    return bytes(program.get_info(cl.program_info.BINARIES)[0])
