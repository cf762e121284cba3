"""The benchmark harness: a workload table, peers measured side by side in the same run, JSON/Markdown/PNG.

    portable bench [--device all|vulkan:0|...] [--filter PATTERN] [--out DIR] [--quick]

See README.md here. Nothing in this package is imported by `import portable`.
"""

from .runner import BenchConfig, run_bench
from .workloads import TABLE, Workload, build, select

__all__ = ["TABLE", "BenchConfig", "Workload", "build", "run_bench", "select"]
