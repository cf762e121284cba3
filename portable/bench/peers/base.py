"""The contract every peer fills in: prepare a workload once, then run it device-only or end to end."""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from ..workloads import Workload


class Unavailable(Exception):
    """The peer cannot run on this host at all (package not installed, no such device): every workload skips."""


class Unsupported(Exception):
    """The peer has no way to run this workload (an op or dtype it lacks); only this workload skips."""


BATCH = 20  # runs per batched submission


class Prepared(ABC):
    """One workload loaded on one peer, inputs already resident where the peer keeps them."""

    notes: str = ""

    @abstractmethod
    def run_device(self) -> None:
        """Compute once on the resident inputs and return after the device has finished (no transfers)."""

    @abstractmethod
    def run_e2e(self, inputs: list[np.ndarray]) -> np.ndarray:
        """Host arrays in, host array out: upload, compute, download."""

    def run_device_batch(self) -> int:
        """Compute BATCH times back to back in one submission (or one stream) and wait once; returns how many
        ran, 0 where the peer has no such path. Amortizes submission and completion latency away, so that
        kernel speed and launch overhead show apart."""
        return 0

    def device_result(self) -> np.ndarray | None:
        """The output of the device-only path (run once, then read back), so the path that is timed is
        checked too; None where it is the same path as run_e2e."""
        return None

    def info(self) -> dict:
        """Extra facts worth recording (kernel count, compile time, target)."""
        return {}

    def close(self) -> None:  # noqa: B027 (optional hook: most peers hold nothing to release)
        pass


class Peer(ABC):
    """A system we measure against (or portable itself) on one device."""

    name: str = ""
    warmup: int = 1  # calls before timing; tinygrad's JIT needs two to capture

    @abstractmethod
    def describe(self) -> dict:
        """Device name, driver and package versions as this peer sees them; raises Unavailable."""

    @abstractmethod
    def prepare(self, w: Workload, inputs: list[np.ndarray]) -> Prepared:
        """Compile/load `w` and place `inputs` on the device; raises Unsupported or any error (a failure)."""

    def close(self) -> None:  # noqa: B027 (optional hook: most peers hold nothing to release)
        pass
