"""Outputs against reference outputs with dtype-aware tolerances (as onnx's backend tests compare them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Half-precision types cannot meet float32's rtol: two ulps of each (onnx's runner does the same for bfloat16).
_MIN_RTOL = {"float16": 2 * 2.0**-10, "bfloat16": 2 * 2.0**-7}


def tolerance(dtype: np.dtype, rtol: float, atol: float) -> tuple[float, float]:
    """(rtol, atol) for comparing values of `dtype`; integers and bools compare exactly."""
    if dtype.kind in "iub":
        return 0.0, 0.0
    return max(rtol, _MIN_RTOL.get(dtype.name, 0.0)), atol


def _errors(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max abs error, max rel error) over elements where both are finite."""
    if out.size == 0:
        return 0.0, 0.0
    o, r = out.astype(np.float64), ref.astype(np.float64)
    fin = np.isfinite(o) & np.isfinite(r)
    if not fin.any():
        return 0.0, 0.0
    d = np.abs(o[fin] - r[fin])
    denom = np.abs(r[fin])
    rel = np.where(denom > 0, d / np.where(denom > 0, denom, 1), np.where(d > 0, np.inf, 0.0))
    return float(d.max()), float(rel.max())


def compare_outputs(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray], rtol: float, atol: float) -> dict:
    """A record: status pass | fail, with max_abs / max_rel error and a message naming the first bad output."""
    if len(outs) != len(refs):
        return {"status": "fail", "message": f"{len(outs)} outputs, expected {len(refs)}"}
    max_abs = max_rel = 0.0
    problems = []
    for i, (o, r) in enumerate(zip(outs, refs)):
        o, r = np.asarray(o), np.asarray(r)
        if r.dtype == object:
            problems.append(f"output {i}: reference of dtype object (strings) cannot be compared")
            continue
        if tuple(o.shape) != tuple(r.shape):
            problems.append(f"output {i}: shape {tuple(o.shape)}, expected {tuple(r.shape)}")
            continue
        if o.dtype != r.dtype:
            problems.append(f"output {i}: dtype {o.dtype}, expected {r.dtype}")
            continue
        rt, at = tolerance(r.dtype, rtol, atol)
        if r.dtype.kind in "iub":
            bad = o != r
            a, rel = _errors(o, r) if r.dtype.kind != "b" else (float(bad.any()), float(bad.any()))
        else:
            o64, r64 = o.astype(np.float64), r.astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                bad = ~np.isclose(o64, r64, rtol=rt, atol=at, equal_nan=True)
            a, rel = _errors(o, r)
        max_abs, max_rel = max(max_abs, a), max(max_rel, rel)
        if bad.any():
            idx = np.unravel_index(int(np.argmax(bad)), bad.shape) if bad.ndim else ()
            where = tuple(int(x) for x in idx)
            problems.append(f"output {i} ({r.dtype}): {int(bad.sum())}/{bad.size} elements off (first at {where}:"
                            f" got {o[idx]!r}, expected {r[idx]!r}; rtol {rt:g} atol {at:g})")
    rec = {"status": "fail" if problems else "pass", "max_abs": max_abs, "max_rel": max_rel}
    if problems:
        rec["message"] = "; ".join(problems)[:2000]
    return rec
