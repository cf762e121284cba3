"""One workload on one peer: prepare, check the answer against numpy, then time device-only and end to end."""

from __future__ import annotations

import time
import traceback

import numpy as np

from .peers.base import Unsupported
from .timing import measure
from .workloads import Workload

MAX_ERROR_CHARS = 3000
BATCH_MAX_MS = 500.0  # slower device calls are not timed back to back (kernel_ms): 20 of them take > 10 s
# GPU sizes: keep calling the workload for this long before timing it. Measured on the H200 (Vulkan timestamps,
# benchmarks/results/h200/README.md): after a second of host-side work the GPU ran add 64 Mi at 0.44 ms per
# call for its first ~0.3 s of load, then 0.19 ms; PyTorch's figures are taken warm the same way.
SETTLE_S = {"gpu": 1.0}


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """max |out - ref| / max |ref| in f32 (inf for a shape mismatch or a NaN/inf where ref has none)."""
    out = np.asarray(out)
    if out.shape != ref.shape:
        return float("inf")
    o, r = out.astype(np.float32), ref.astype(np.float32)
    diff = np.abs(o - r)
    if not np.all(np.isfinite(diff)):
        return float("inf")
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    return float(np.max(diff)) / max(scale, 1e-30) if diff.size else 0.0


def _error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    if not str(e):
        text += "\n" + traceback.format_exc(limit=4)
    return text[:MAX_ERROR_CHARS]


def bench_one(peer, w: Workload, inputs: list[np.ndarray], ref: np.ndarray, iters: int | None = None) -> dict:
    """A result record: status ok | wrong | error | unsupported, error text, max_rel_err, device_ms, e2e_ms."""
    rec: dict = {"workload": w.id, "size_class": w.size_class, "peer": peer.name, "status": "error",
                 "tolerance": w.tolerance()}
    t0 = time.perf_counter()
    try:
        prep = peer.prepare(w, inputs)
    except Unsupported as e:
        rec.update(status="unsupported", error=str(e)[:MAX_ERROR_CHARS])
        return rec
    except Exception as e:  # noqa: BLE001 - a failure of the peer is a result, not a crash of the harness
        rec.update(stage="prepare", error=_error(e))
        return rec
    rec["prepare_s"] = round(time.perf_counter() - t0, 3)
    stage = "first run"
    try:
        out = prep.run_e2e(inputs)
        err = relative_error(out, ref)
        rec["max_rel_err"] = err if np.isfinite(err) else None
        if not err <= w.tolerance():
            rec.update(status="wrong", error=f"max |out - ref| / max |ref| = {err:.3g} > {w.tolerance():g} "
                                             f"(output {np.asarray(out).shape} {np.asarray(out).dtype})")
            return rec
        stage = "warm-up"
        first = None
        for _ in range(max(1, peer.warmup)):
            t1 = time.perf_counter()
            prep.run_device()
            first = time.perf_counter() - t1
        dev_out = prep.device_result()  # the timed path computes the right thing too
        if dev_out is not None:
            derr = relative_error(dev_out, ref)
            if not derr <= w.tolerance():
                rec.update(status="wrong", error=f"device-only path: max |out - ref| / max |ref| = {derr:.3g} > "
                                                 f"{w.tolerance():g} (end-to-end path was right: {err:.3g})")
                return rec
        settle = SETTLE_S.get(w.size_class, 0.0)
        t1 = time.perf_counter()
        while time.perf_counter() - t1 < settle:
            prep.run_device()
        stage = "timing"
        rec["device_ms"] = measure(prep.run_device, first_s=first, iters=iters)
        # Back to back only where submission latency can matter: a call past BATCH_MAX_MS (a whole model on a
        # CPU driver) would take minutes 20 times over, and its latency share is negligible anyway.
        n = prep.run_device_batch() if rec["device_ms"]["median_ms"] < BATCH_MAX_MS else 0  # warms the batch too
        if n:
            batched = measure(prep.run_device_batch, first_s=rec["device_ms"]["median_ms"] * n / 1e3, iters=iters)
            rec["kernel_ms"] = {k: round(batched[k] / n, 5) for k in ("median_ms", "min_ms", "max_ms")}
            rec["kernel_ms"]["batch"] = n
        if getattr(peer, "host", False):
            rec["e2e_ms"] = rec["device_ms"]
        else:
            rec["e2e_ms"] = measure(lambda: prep.run_e2e(inputs), first_s=rec["device_ms"]["median_ms"] / 1e3,
                                    iters=iters)
        rec["status"] = "ok"
        rec["info"] = prep.info()
        if prep.notes:
            rec["notes"] = prep.notes
    except Exception as e:  # noqa: BLE001
        rec.update(stage=stage, error=_error(e))
    finally:
        try:
            prep.close()
        except Exception as e:  # noqa: BLE001 - a failed cleanup is worth a note, not the result
            rec["close_error"] = _error(e)
    return rec
