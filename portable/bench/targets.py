"""The targets of ../shared/BENCHMARKS.md checked against one run's figures: the report's "Targets" section.

Each rule names the profile it holds for, the workloads, the figure (a peer's time over portable's, or the
fraction of the device's peak) and the table it is read from: back to back (kernel time without submission
latency) where portable and the peer both have one, device-only otherwise. A missed target prints the reason
found by reading the generated code (REASONS), next to the figures of this run that bear on it; a miss without
a recorded reason says so.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from .peaks import fraction_of_peak


@dataclass(frozen=True)
class Rule:
    what: str
    workloads: str  # fnmatch pattern over workload ids
    peer: str  # the peer whose time portable's is divided into; "peak": fraction of the device's peak
    at_least: float

    def figure(self, mine: float, theirs: float | None, fraction: float | None) -> float | None:
        if self.peer == "peak":
            return fraction
        return theirs / mine if theirs else None


RULES: dict[str, list[Rule]] = {
    "nvidia": [
        Rule("f32 matmul 4096 >= 0.8x PyTorch (TF32 off)", "matmul_4096_f32", "torch", 0.8),
        Rule("f16 matmul 4096 >= 0.5x PyTorch", "matmul_4096_f16", "torch", 0.5),
        Rule("bandwidth-bound ops >= 80% of HBM bandwidth", "softmax_*", "peak", 0.8),
        Rule("bandwidth-bound ops >= 80% of HBM bandwidth", "layernorm_*", "peak", 0.8),
        Rule("bandwidth-bound ops >= 80% of HBM bandwidth", "ew_chain_*", "peak", 0.8),
        Rule("bandwidth-bound ops >= 80% of HBM bandwidth", "add_*", "peak", 0.8),
        Rule("conv2d >= 0.5x PyTorch", "*conv*", "torch", 0.5),
    ],
    "lavapipe": [Rule(">= 3x IREE on every workload", "*", "iree", 3.0)],
    "pocl": [
        Rule(">= 2x tinygrad on every workload", "*", "tinygrad", 2.0),
        Rule("matmul within 3x of numpy", "matmul_*", "numpy", 1 / 3),
    ],
}

STREAM_WORKLOAD = "scale_4096"
# Pure streams (one elementwise op per element): their times over two or more sizes give the device's streaming
# floor, t = fixed + bytes / rate, that any kernel moving the same bytes is held against (stream_floor).
STREAM_FAMILIES = ("scale", "add")
_STREAM = ("one read of each input and one write of the output per element (PORTABLE_DUMP: one workgroup per row, "
           "the row held in registers between the reductions); a copy of the same bytes is the floor it is held "
           "against")
_HOST_STREAM = ("memory-bound: one float16 (16-float vector) load per input and one float16 store (nontemporal "
                "past the device's cache) per work-item, and each call adds PoCL's submission and wait; the host's "
                "own libraries on the same silicon are the comparison")
_LAVAPIPE_STREAM = ("memory-bound: reads through uniform texel buffers (codegen_spirv/texel_reads.py, llvmpipe's image "
                    "path, a texel per lane) and vec4 storage-buffer stores (llvmpipe stores each lane's vector "
                    "component by component; vector<4xi64> and image stores were slower), the fastest forms "
                    "benchmarks/texel_probe.py found on this driver; IREE's kernel moves vec4 of f32 through storage "
                    "buffers, which took 0.9-1.7x as long as our form there (ssbo_vec4 against "
                    "texel_fetch_ssbo_store), so the ratio moves with what IREE spends around its kernel, which "
                    "varies with the host and the run")
# (profile, workload pattern) -> why the target is missed, from the generated code.
REASONS: dict[tuple[str, str], str] = {
    ("nvidia", "softmax_*"): _STREAM,
    ("nvidia", "layernorm_*"): _STREAM + "; two dependent workgroup reductions (mean, then variance) per row",
    ("pocl", "add_*"): _HOST_STREAM,
    ("pocl", "scale_*"): _HOST_STREAM,
    ("lavapipe", "add_*"): _LAVAPIPE_STREAM,
    ("lavapipe", "scale_*"): _LAVAPIPE_STREAM,
    ("lavapipe", "ew_chain_*"): _LAVAPIPE_STREAM + "; here three inputs (the bias row read once for its 4 rows), and "
                                "the tanh-GELU is one exp per output (gelu_as_sigmoid) where IREE's kernel has 9 FMAs",
}


def _reason(profile: str, wid: str) -> str:
    for (prof, pattern), text in REASONS.items():
        if prof == profile and fnmatch.fnmatch(wid, pattern):
            return text
    return "no reason recorded"


def section(result: dict, dev: dict, idx: dict, ms, where: dict) -> list[str]:
    """Markdown lines: every target of `dev`'s profile against this run (`idx`: report.index, `ms`: report.median_ms,
    `where`: peer -> where it ran comparably with `dev`, report.peers_for)."""
    rules = RULES.get(dev["profile"])
    if not rules:
        return []
    sc = dev["size_class"]
    ws = result["workloads"].get(sc, {})
    lines = [f"Targets for profile {dev['profile']} (back to back where both sides have it, else device-only):", "",
             "| target | workload | figure | met | why not |", "|---|---|---|---|---|"]
    for rule in rules:
        for wid, w in ws.items():
            if not fnmatch.fnmatch(wid, rule.workloads):
                continue
            mine_rec = idx.get(("portable", dev["uri"], sc, wid))
            theirs_rec = idx.get((rule.peer, where.get(rule.peer), sc, wid)) if rule.peer != "peak" else None
            key = "kernel_ms" if ms(mine_rec, "kernel_ms") and (rule.peer == "peak" or ms(theirs_rec, "kernel_ms")) \
                else "device_ms"
            mine, theirs = ms(mine_rec, key), ms(theirs_rec, key)
            if mine is None:
                continue
            frac = fraction_of_peak(dev["name"], w, mine / 1e3) if rule.peer == "peak" else None
            fig = rule.figure(mine, theirs, frac)
            if fig is None and rule.peer != "peak":  # the peer has no time here: say so rather than drop the row
                status = f"{theirs_rec.get('status')} at {theirs_rec.get('stage', 'run')}" if theirs_rec else "not run"
                lines.append(f"| {rule.what} | {wid} | — | not judged | {rule.peer} has no time here ({status}) |")
                continue
            if fig is None:
                continue
            shown = f"{100 * fig:.1f}% ({key})" if rule.peer == "peak" else f"{fig:.2f}x {rule.peer} ({key})"
            met = fig >= rule.at_least
            why = "" if met else _reason(dev["profile"], wid) + _context(result, dev, idx, ms, rule, wid, key, where)
            lines.append(f"| {rule.what} | {wid} | {shown} | {'yes' if met else '**no**'} | {why} |")
    return lines


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through (xs, ys); xs must hold two distinct values."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def stream_floor(result: dict, dev: dict, idx: dict, ms, key: str) -> tuple[float, float, list[str]] | None:
    """(fixed ms, bytes per ms, workloads fitted): the least-squares line t = fixed + bytes / rate through this
    run's pure streams on `dev` (STREAM_FAMILIES, portable's kernels), where two or more sizes ran and the fit
    is physical (fixed >= 0, rate > 0). A kernel that moves N bytes cannot beat the copies' fixed + N / rate."""
    sc = dev["size_class"]
    pts = []
    for wid, w in result["workloads"].get(sc, {}).items():
        t = ms(idx.get(("portable", dev["uri"], sc, wid)), key)
        if w.get("family") in STREAM_FAMILIES and t:
            pts.append((float(w["bytes"]), t, wid))
    if len({b for b, _, _ in pts}) < 2:
        return None
    fixed, slope = line_fit([b for b, _, _ in pts], [t for _, t, _ in pts])
    if slope <= 0 or fixed < 0:
        return None
    return fixed, 1 / slope, sorted(wid for _, _, wid in pts)


def _context(result: dict, dev: dict, idx: dict, ms, rule: Rule, wid: str, key: str, where: dict) -> str:
    """This run's figures that bear on a miss: beside a bandwidth target, the floor this run's copies put under
    the workload's bytes (stream_floor; else the streaming workload's fraction of peak), with PyTorch's copies
    against ours where it ran; beside a device-only time, the kernel alone (back to back)."""
    sc = dev["size_class"]
    notes = []
    ws = result["workloads"].get(sc, {})
    fit = stream_floor(result, dev, idx, ms, key) if rule.peer == "peak" and wid in ws else None
    floor_ms = fit[0] + ws[wid]["bytes"] / fit[1] if fit else None
    best = fraction_of_peak(dev["name"], ws[wid], floor_ms / 1e3) if fit else None
    if best is not None:
        fitted = fit[2]
        mine = ms(idx.get(("portable", dev["uri"], sc, wid)), key)
        notes.append(f"this run's copies ({', '.join(fitted)}) fit t = {1e3 * fit[0]:.1f} us + bytes / "
                     f"{fit[1] / 1e9:.2f} TB/s: for these {ws[wid]['bytes'] / 2**20:.0f} MiB at least "
                     f"{1e3 * floor_ms:.1f} us, {100 * best:.1f}% of peak at best; this kernel {mine / floor_ms:.2f}x "
                     "that")
        copies = [(ms(idx.get(("torch", where.get("torch"), sc, f)), key),
                   ms(idx.get(("portable", dev["uri"], sc, f)), key)) for f in fitted]
        if where.get("torch") and all(t and m for t, m in copies):
            notes.append("PyTorch's copies take " + " / ".join(f"{t / m:.2f}x" for t, m in copies) + " these times")
    elif rule.peer == "peak" and wid != STREAM_WORKLOAD and STREAM_WORKLOAD in ws:
        ref_ms = ms(idx.get(("portable", dev["uri"], sc, STREAM_WORKLOAD)), key)
        f = fraction_of_peak(dev["name"], ws[STREAM_WORKLOAD], ref_ms / 1e3) if ref_ms else None
        if f is not None:
            notes.append(f"{STREAM_WORKLOAD} in this run: {100 * f:.1f}%")
    libs = [(t, p) for p in ("numpy", "torch", "onnxruntime") if p in where and p != rule.peer
            for t in [ms(idx.get((p, where[p], sc, wid)), "device_ms")] if t]
    theirs = ms(idx.get((rule.peer, where.get(rule.peer), sc, wid)), key) if rule.peer != "peak" else None
    if libs and theirs:
        t, p = min(libs)
        notes.append(f"meeting it takes at most {theirs / rule.at_least:.3f} ms; the fastest library on this "
                     f"silicon, {p}, took {t:.3f} ms")
    alone = ms(idx.get(("portable", dev["uri"], sc, wid)), "kernel_ms")
    if key == "device_ms" and alone:
        notes.append(f"portable's kernel alone (back to back): {alone:.3f} ms")
    return f" ({'; '.join(notes)})" if notes else ""
