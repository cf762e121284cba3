"""Physical limits per device, for the fraction-of-peak column: dense FLOP/s per dtype and memory bandwidth.

Keyed by a substring of the device name the driver reports. Only devices with a published figure are here;
CPU drivers (lavapipe, PoCL) run on whatever host CPU they find, so they have no entry.
"""

from __future__ import annotations

# name substring -> peaks. Sources: NVIDIA H200 / H100 SXM datasheets (dense, no sparsity).
PEAKS: dict[str, dict[str, float]] = {
    "H200": {"float32": 67e12, "float16": 990e12, "bandwidth": 4.8e12},
    "H100": {"float32": 67e12, "float16": 990e12, "bandwidth": 3.35e12},
}


def peak_for(device_name: str) -> dict[str, float] | None:
    for key, val in PEAKS.items():
        if key.lower() in (device_name or "").lower():
            return val
    return None


def fraction_of_peak(device_name: str, w: dict, seconds: float) -> float | None:
    """Achieved / peak: FLOP/s against the dtype's peak for compute-bound work, bytes/s against bandwidth for
    memory-bound work. `w` is a workload entry of the results JSON."""
    peak = peak_for(device_name)
    if not peak or seconds <= 0:
        return None
    if w["bound"] == "compute":
        p = peak.get(w["dtype"])
        return w["flops"] / seconds / p if p else None
    return w["bytes"] / seconds / peak["bandwidth"]
