"""ONNX conformance: the onnx package's backend test cases run on every device, as matrices.

    portable conformance --device all --filter 'test_relu|test_add' --jobs 2
"""

from .cases import Case, discover
from .report import summary
from .runner import Results, run

__all__ = ["Case", "discover", "run", "Results", "summary"]
