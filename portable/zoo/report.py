"""The zoo's Markdown matrix (model x device) from its results JSON."""

from __future__ import annotations

from pathlib import Path


def _num(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else "-"


def _cell(rec: dict | None) -> str:
    if not rec:
        return "-"
    s = rec.get("status", "?")
    if s in ("pass", "fail"):
        rel = rec.get("max_rel")
        rel_s = _num(rel, ".1e") if isinstance(rel, float) else str(rel)
        return (f"**{s}** {rel_s} · {_num(rec.get('compile_s'), '.1f')} s · "
                f"{_num(rec.get('steady_ms'), '.1f')} ms")
    op = rec.get("op")
    return f"**{s}**" + (f" `{op}`" if op else f" ({rec.get('error_type', '')})")


def _ordered(models: dict) -> list[tuple[str, dict]]:
    """The models in registry order (the JSON keeps them sorted by name), unknown names last."""
    from .registry import ENTRIES

    rank = {e.name: i for i, e in enumerate(ENTRIES)}
    return sorted(models.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


def summary(data: dict) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for d in data["devices"]:
        c = {"pass": 0, "fail": 0, "unsupported": 0, "error": 0, "total": 0}
        for cells in data["cells"].values():
            if d in cells:
                s = cells[d].get("status", "error")
                c[s] = c.get(s, 0) + 1
                c["total"] += 1
        out[d] = c
    return out


def markdown(data: dict) -> str:
    meta, devices = data["meta"], data["devices"]
    lines = [f"# Model zoo on {', '.join(devices)}", ""]
    lines += [(f"- date: {meta.get('date', '')}, host: {meta.get('host', '')}, wall time: "
              f"{_num(meta.get('wall_s'), '.0f')} s"), f"- command: `{meta.get('command', '')}`"]
    for uri, info in meta.get("device_info", {}).items():
        if uri in devices:
            lines.append(f"- {uri}: {info.get('name', '')} ({info.get('driver', '')} {info.get('driver_version', '')})"
                         f", profile {info.get('profile', '')}")
    pk = meta.get("packages", {})
    lines.append("- packages: " + ", ".join(f"{k} {v}" for k, v in pk.items() if v))
    lines += ["", ("Each cell: status, max relative error (max |out - ref| / max |ref| over the outputs, against "
              f"onnxruntime CPU; pass at <= {meta.get('tolerance', 1e-3):g}), compile seconds (empty cache), "
              "steady ms (median after a warm-up run). Failures name the failing ONNX op where the error does."), ""]
    lines.append("| device | pass | fail | unsupported | error |")
    lines.append("|---|---|---|---|---|")
    for d, c in summary(data).items():
        lines.append(f"| {d} | {c['pass']}/{c['total']} | {c['fail']} | {c['unsupported']} | {c['error']} |")
    lines += ["", "| model | family | exporter | opset | input | " + " | ".join(devices) + " | onnxruntime ms |",
              "|---|---|---|---|---|" + "---|" * len(devices) + "---|"]
    for name, info in _ordered(data["models"]):
        prep = info.get("prepare", {})
        shapes = "; ".join("x".join(map(str, s)) or "scalar" for s, _ in info["inputs"].values())
        cells = data["cells"].get(name, {})
        lines.append(f"| {name} | {info['family']} | {info['exporter']} | {prep.get('opset', info.get('opset'))} | "
                     f"{shapes} | " + " | ".join(_cell(cells.get(d)) for d in devices) +
                     f" | {_num(prep.get('ort_ms'), '.1f')} |")
    fails = [(n, d, r) for n, _ in _ordered(data["models"]) for d, r in data["cells"].get(n, {}).items()
             if r.get("status") != "pass"]
    if fails:
        lines += ["", "## Failures", "", "| model | device | status | stage | op (node) | first line of the error |",
                  "|---|---|---|---|---|---|"]
        for n, d, r in fails:
            op = f"{r['op']} ({r.get('node', '')})" if r.get("op") else "-"
            err = str(r.get("error", "")).replace("|", "\\|").replace("\n", " ")[:300]
            where = f" [{r['where']}]" if r.get("where") else ""
            lines.append(f"| {n} | {d} | {r.get('status')} | {r.get('stage', '')} | {op} | "
                         f"{r.get('error_type', '')}: {err}{where} |")
    notes = [(n, i) for n, i in _ordered(data["models"]) if i.get("note") or i.get("licence")]
    if notes:
        lines += ["", "## Models", ""]
        for n, i in notes:
            lic = f" (file from `{i['source'][5:]}`, {i['licence']})" if i.get("licence") else ""
            lines.append(f"- {n}: {i.get('note', '')}{lic}")
    return "\n".join(lines) + "\n"


def write(data: dict, out: Path) -> Path:
    p = out / "zoo.md"
    p.write_text(markdown(data))
    return p
