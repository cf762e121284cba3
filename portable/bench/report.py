"""The Markdown report: per device, portable against each peer that ran on the same device, as ratios."""

from __future__ import annotations

import math

from . import targets
from .peaks import fraction_of_peak, peak_for


def peers_for(result: dict, dev: dict) -> list[tuple[str, str]]:
    """(peer, where) pairs comparable with portable on `dev`: same device, or the same silicon."""
    out = []
    same_api = {"vulkan": "iree", "opencl": "tinygrad"}[dev["api"]]
    out.append((same_api, dev["uri"]))
    torch = result["peers"].get("torch@torch") or {}
    torch_dev = str(torch.get("device", ""))
    if torch and "unavailable" not in torch and (torch_dev.startswith("cuda") == (dev["device_type"] != "cpu")):
        out.append(("torch", "torch"))
    if dev["device_type"] == "cpu":
        out += [("numpy", "host"), ("onnxruntime", "host")]
    return out


def annotate(result: dict) -> None:
    """Add throughput (GFLOP/s, GB/s of minimum traffic) and fraction of the device peak to every ok record,
    and the peaks used to the result (idempotent)."""
    names = {d["uri"]: d["name"] for d in result["devices"]}
    torch = result["peers"].get("torch@torch") or {}
    if str(torch.get("device", "")).startswith("cuda"):
        names["torch"] = torch.get("name", "")
    result["peaks"] = {n: peak_for(n) for n in set(names.values()) if peak_for(n)}
    for r in result["results"]:
        w = result["workloads"].get(r["size_class"], {}).get(r["workload"])
        if r.get("status") != "ok" or not w:
            continue
        for key in ("device_ms", "e2e_ms", "kernel_ms"):
            if not r.get(key):
                continue
            s = r[key]["median_ms"] / 1e3
            kind = key[:-3]
            r[f"gflops_{kind}"] = round(w["flops"] / s / 1e9, 3)
            r[f"gbps_{kind}"] = round(w["bytes"] / s / 1e9, 3)
            f = fraction_of_peak(names.get(r.get("device"), ""), w, s)
            if f is not None:
                r[f"fraction_of_peak_{kind}"] = round(f, 4)


def index(result: dict) -> dict:
    return {(r["peer"], r.get("device"), r["size_class"], r["workload"]): r for r in result["results"]}


def throughput(w: dict, ms: float) -> str:
    s = ms / 1e3
    if w["bound"] == "compute":
        return f"{w['flops'] / s / 1e9:.1f} GFLOP/s"
    return f"{w['bytes'] / s / 1e9:.1f} GB/s"


def median_ms(rec: dict | None, key: str = "device_ms") -> float | None:
    if rec and rec.get("status") == "ok" and rec.get(key):
        return rec[key]["median_ms"]
    return None


def _cell(rec: dict | None, key: str = "device_ms") -> str:
    if rec is None:
        return "—"
    ms = median_ms(rec, key)
    if ms is not None:
        return f"{ms:.3f}" if ms < 10 else f"{ms:.1f}"
    if rec.get("status") == "ok":
        return "—"  # ran, but has no such measurement (kernel_ms: no batched path)
    return {"wrong": "WRONG", "error": "error", "timeout": "timeout", "unsupported": "n/a",
            "skipped": "skipped"}.get(rec["status"], rec["status"])


def _ratio(mine: float | None, theirs: float | None) -> str:
    if mine is None or theirs is None:
        return "—"
    r = theirs / mine
    return f"{r:.2f}×" if r >= 0.1 else f"{r:.3f}×"


def device_table(result: dict, dev: dict, key: str = "device_ms") -> list[str]:
    idx, sc = index(result), dev["size_class"]
    peers = peers_for(result, dev)
    peak = peak_for(dev["name"])
    head = ["workload", "shape", "portable ms"]
    for p, _ in peers:
        head += [f"{p} ms", f"{p}/portable"]
    head += ["portable throughput"] + (["of peak"] if peak else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for wid, w in result["workloads"].get(sc, {}).items():
        mine = idx.get(("portable", dev["uri"], sc, wid))
        row = [wid, w["label"], _cell(mine, key)]
        for p, where in peers:
            r = idx.get((p, where, sc, wid))
            row += [_cell(r, key), _ratio(median_ms(mine, key), median_ms(r, key))]
        ms = median_ms(mine, key)
        row.append(throughput(w, ms) if ms else "—")
        if peak:
            f = fraction_of_peak(dev["name"], w, ms / 1e3) if ms else None
            row.append(f"{100 * f:.3g}%" if f is not None else "—")
        lines.append("| " + " | ".join(row) + " |")
    row = ["geomean", "(workloads both ran)", ""]
    for p, where in peers:
        rs = [median_ms(idx.get((p, where, sc, wid)), key) / median_ms(idx.get(("portable", dev["uri"], sc, wid)), key)
              for wid in result["workloads"].get(sc, {})
              if median_ms(idx.get((p, where, sc, wid)), key)
              and median_ms(idx.get(("portable", dev["uri"], sc, wid)), key)]
        g = math.exp(sum(math.log(r) for r in rs) / len(rs)) if rs else None
        row += ["", f"**{g:.2f}×** ({sum(r > 1 for r in rs)}/{len(rs)} faster)" if g else "—"]
    row += [""] + ([""] if peak else [])
    lines.append("| " + " | ".join(row) + " |")
    return lines


def markdown(result: dict) -> str:
    L = [f"# portable benchmark ({result['started']})", ""]
    L.append(f"Command: `{result['command']}`  ")
    h = result["host"]
    L.append(f"Host: {h['hostname']}, {h['cpu']} ({h['cpu_count']} CPUs), Python {h['python']}, load average "
             f"{h.get('loadavg_at_start')} at start, {h.get('loadavg_at_end')} at end  ")
    pk = ", ".join(f"{k} {v}" for k, v in result["packages"].items() if v)
    L.append(f"Packages: {pk}  ")
    src = result.get("source") or {}
    if src:
        L.append(f"portable source: commit {src.get('commit') or '?'}"
                 f"{' + uncommitted changes' if src.get('dirty') else ''}, compiler fingerprint "
                 f"{src.get('compiler_fingerprint', '?')}  ")
    m = result["mode"]
    if m["kind"] == "import":
        L.append(f"portable and IREE ran ahead-of-time executables from `{m['dir']}` (profile {m['profile']}, "
                 f"exported {m['exported']})  ")
    L.append(f"Wall time: {result.get('wall_s', '?')} s")
    if result.get("timing", {}).get("rounds"):
        L.append(f"Rounds: {result['timing']['rounds']}.")
    L += ["", ("Ratios are **peer time / portable time** (> 1: portable is faster), medians, same inputs, same "
          "device. First table per device: device-only time (inputs resident; includes submit and the wait for "
          "completion). Second: end to end (numpy in, numpy out: upload + compute + download). numpy and "
          "onnxruntime run on the host CPU, which is the same silicon as the CPU drivers. "
          "Cells: WRONG = output differs from numpy (a failure), n/a = the peer has no form of it, "
          "— = not run."), ""]
    refs = sorted({w["reference"] for ws in result["workloads"].values() for w in ws.values() if w.get("reference")})
    if refs:
        L += [f"Model workloads are checked against {', '.join(refs)} on the same ONNX file, not numpy.", ""]
    for dev in result["devices"]:
        peers = ", ".join(f"{p}" for p, _ in peers_for(result, dev))
        L.append(f"## {dev['uri']}: {dev['name']} ({dev['driver']} {dev['driver_version']}), "
                 f"profile {dev['profile']}, {dev['size_class']} sizes")
        L.append("")
        L.append(f"Device-only, vs {peers}:")
        L.append("")
        L += device_table(result, dev, "device_ms")
        if any(r.get("kernel_ms") and r.get("device") == dev["uri"] for r in result["results"]):
            L += ["", ("Back to back (the plan recorded 20 times into one submission, one wait; per run: kernel time "
                       "without the submission and completion latency; PyTorch: 20 calls, one synchronize):"), ""]
            L += device_table(result, dev, "kernel_ms")
        L += ["", "End to end (with transfers):", ""]
        L += device_table(result, dev, "e2e_ms")
        L.append("")
        checked = targets.section(result, dev, index(result), median_ms, dict(peers_for(result, dev)))
        if checked:
            L += checked + [""]
    for k, v in result["peers"].items():
        if "unavailable" in v:
            L.append(f"Not run: **{k}**: {v['unavailable'].splitlines()[0]}  ")
    bad = [r for r in result["results"] if r["status"] not in ("ok", "skipped")]
    if bad:
        L += ["", "## Not ok", "", "| peer | device | workload | status | what |", "|---|---|---|---|---|"]
        for r in bad:
            first = (r.get("error") or "").strip().splitlines()
            what = (first[0] if first else "")[:220].replace("|", "\\|")
            L.append(f"| {r['peer']} | {r.get('device', '')} | {r['workload']} | {r['status']} | {what} |")
        L.append("")
    if result.get("driver_failures"):
        L += ["## Notes", ""] + [f"- {f}" for f in result["driver_failures"]] + [""]
    L += ["## Peers", ""]
    for k, v in result["peers"].items():
        L.append(f"- **{k}**: " + ", ".join(f"{a}={b}" for a, b in v.items()))
    L += ["", "## Workloads", "", "| id | size class | shape | GFLOP | MB moved | bound | built with |",
          "|---|---|---|---|---|---|---|"]
    for sc, ws in result["workloads"].items():
        for wid, w in ws.items():
            L.append(f"| {wid} | {sc} | {w['label']} | {w['flops'] / 1e9:.3f} | {w['bytes'] / 1e6:.1f} | "
                     f"{w['bound']} | {w['built_with']} |")
    return "\n".join(L) + "\n"
