"""Readable views of a results JSON: summary per column, per-op summary, the cases x columns matrix
(Markdown and HTML), and FAILURES.md: compiler failures grouped by cause, with counts and repros."""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

STATUSES = ("pass", "fail", "unsupported", "error", "compiled-only")
_COLORS = {"pass": "#c8f7c5", "fail": "#f7c5c5", "unsupported": "#e0e0e0", "error": "#f7e1a1",
           "compiled-only": "#c5dcf7", "": "#ffffff"}


def columns(data: dict) -> list[str]:
    cols: list[str] = list(data.get("columns") or [])
    for per in data["results"].values():
        for c in per:
            if c not in cols:
                cols.append(c)
    return cols


def summary(data: dict) -> dict[str, dict[str, Any]]:
    """Per column: counts per status, pass rate, and pass rate over cases whose dtypes the device supports."""
    out = {}
    for col in columns(data):
        recs = [per[col] for per in data["results"].values() if col in per]
        c = Counter(r["status"] for r in recs)
        n = len(recs)
        dtype_unsup = sum(1 for r in recs if r["status"] == "unsupported" and r.get("reason") == "dtype")
        unsup_import = sum(1 for r in recs if r["status"] == "unsupported" and r.get("phase") == "import")
        out[col] = {"total": n, **{s: c.get(s, 0) for s in STATUSES}, "unsupported_import": unsup_import,
                    "unsupported_compiler": c.get("unsupported", 0) - unsup_import,
                    "pass_rate": c.get("pass", 0) / n if n else 0.0,
                    "pass_rate_supported_dtypes": c.get("pass", 0) / (n - dtype_unsup) if n - dtype_unsup else 0.0}
    return out


def per_op(data: dict) -> dict[str, dict[str, Counter]]:
    """op -> column -> Counter of statuses."""
    ops: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for name, per in data["results"].items():
        op = data["cases"].get(name, {}).get("op", "?")
        for col, r in per.items():
            ops[op][col][r["status"]] += 1
    return ops


def cell(r: dict | None) -> str:
    """Short text for one matrix cell."""
    if r is None:
        return ""
    s = r["status"]
    if s == "pass":
        return "pass"
    if s == "fail":
        a = r.get("max_abs")
        return f"FAIL {float(a):.1e}" if isinstance(a, (int, float)) else "FAIL"
    if s == "unsupported":
        return f"unsup ({r.get('reason', 'op')})"
    if s == "error":
        return f"ERROR {r.get('stage', '')}".strip()
    return s


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def markdown(data: dict) -> str:
    cols = columns(data)
    meta = data.get("meta", {})
    lines = ["# portable ONNX conformance", ""]
    if meta:
        shown = {k: v for k, v in sorted(meta.items()) if v and not isinstance(v, (dict, list))}
        lines.append(", ".join(f"{k}: {v}" for k, v in shown.items()))
        lines.append("")
        for uri, dev in sorted((meta.get("devices") or {}).items()):
            lines.append(f"- `{uri}`: {dev.get('name')} | driver {dev.get('driver')} {dev.get('driver_version', '')} "
                         f"| profile {dev.get('profile')}")
        lines.append("")
    lines += ["## Summary", "", "| column | cases | pass | fail | unsupported (frontend / compiler) | error | "
              "compiled-only | pass rate | pass rate (supported dtypes) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for col, s in summary(data).items():
        lines.append(f"| {col} | {s['total']} | {s['pass']} | {s['fail']} | {s['unsupported']} "
                     f"({s['unsupported_import']} / {s['unsupported_compiler']}) | {s['error']} | "
                     f"{s['compiled-only']} | {_pct(s['pass_rate'])} | {_pct(s['pass_rate_supported_dtypes'])} |")
    lines += ["", "Frontend: the ONNX model did not reach linalg (op without a torch-mlir lowering, dtype, "
              "sequence/optional types). Compiler: UnsupportedOp raised by portable's compiler. 'Supported dtypes' "
              "leaves out cases whose dtypes portable does not take (uint16/32/64, strings, complex, float8, int4)."]
    folded = sum(1 for per in data["results"].values() for r in per.values() if r.get("folded_inputs"))
    if folded:
        lines += ["", f"{folded} results ran with shape-determining inputs folded to constants "
                      "(compile-per-shape; see `folded_inputs` in the JSON)."]
    lines += ["", "## Per op", "", "| op | cases | " + " | ".join(cols) + " |",
              "|---|---:|" + "---|" * len(cols)]
    ops = per_op(data)
    ncases = Counter(data["cases"].get(n, {}).get("op", "?") for n in data["results"])
    for op in sorted(ops):
        row = []
        for col in cols:
            c = ops[op].get(col, Counter())
            tot = sum(c.values())
            extra = ", ".join(f"{c[s]} {s}" for s in STATUSES[1:] if c[s])
            row.append(f"{c['pass']}/{tot}" + (f" ({extra})" if extra else ""))
        lines.append(f"| {op} | {ncases[op]} | " + " | ".join(row) + " |")
    lines += ["", "## Cases", "", "| case | op | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for name in sorted(data["results"]):
        per = data["results"][name]
        op = data["cases"].get(name, {}).get("op", "?")
        lines.append(f"| {name} | {op} | " + " | ".join(_md_escape(cell(per.get(c))) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def html_report(data: dict) -> str:
    cols = columns(data)
    e = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>portable ONNX conformance</title><style>",
           "body{font-family:sans-serif;font-size:13px} table{border-collapse:collapse;margin-bottom:2em}",
           "td,th{border:1px solid #ccc;padding:2px 6px} th{background:#f0f0f0;position:sticky;top:0}",
           "td.n{text-align:right}</style></head><body><h1>portable ONNX conformance</h1>"]
    meta = data.get("meta", {})
    if meta:
        out.append("<p>" + e(", ".join(f"{k}: {v}" for k, v in sorted(meta.items())
                                        if v and not isinstance(v, (dict, list)))) + "</p>")
    out.append("<h2>Summary</h2><table><tr><th>column</th><th>cases</th>" +
               "".join(f"<th>{s}</th>" for s in STATUSES) +
               "<th>pass rate</th><th>pass rate (supported dtypes)</th></tr>")
    for col, s in summary(data).items():
        out.append(f"<tr><td>{e(col)}</td><td class=n>{s['total']}</td>" +
                   "".join(f"<td class=n style='background:{_COLORS[st]}'>{s[st]}</td>" for st in STATUSES) +
                   f"<td class=n>{_pct(s['pass_rate'])}</td>"
                   f"<td class=n>{_pct(s['pass_rate_supported_dtypes'])}</td></tr>")
    out.append("</table><h2>Per op</h2><table><tr><th>op</th>" + "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
    ops = per_op(data)
    for op in sorted(ops):
        row = []
        for col in cols:
            c = ops[op].get(col, Counter())
            tot = sum(c.values())
            frac = c["pass"] / tot if tot else 0
            color = _COLORS["pass"] if frac == 1 else _COLORS["fail"] if frac == 0 else "#f7f3c5"
            title = ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s])
            row.append(f"<td class=n style='background:{color}' title='{e(title)}'>{c['pass']}/{tot}</td>")
        out.append(f"<tr><td>{e(op)}</td>{''.join(row)}</tr>")
    out.append("</table><h2>Cases</h2><table><tr><th>case</th><th>op</th>" +
               "".join(f"<th>{e(c)}</th>" for c in cols) + "</tr>")
    for name in sorted(data["results"]):
        per = data["results"][name]
        op = data["cases"].get(name, {}).get("op", "?")
        tds = []
        for col in cols:
            r = per.get(col)
            st = r["status"] if r else ""
            title = (r.get("message") or r.get("reason") or "") if r else ""
            if r and r.get("status") == "fail":
                title = f"max abs {r.get('max_abs')}, max rel {r.get('max_rel')}. {title}"
            tds.append(f"<td style='background:{_COLORS.get(st, '#fff')}' title='{e(str(title)[:1500])}'>"
                       f"{e(cell(r))}</td>")
        out.append(f"<tr><td>{e(name)}</td><td>{e(op)}</td>{''.join(tds)}</tr>")
    out.append("</table></body></html>")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------- failures
_NOISE = [
    (re.compile(r"\(IR of the failing stage written to [^)]*\)"), ""),
    (re.compile(r"%[\w\d_#:]+"), "%v"),
    (re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b"), "N"),
    (re.compile(r"tensor<[^>]*>"), "tensor<..>"),
    (re.compile(r"memref<[^>]*>"), "memref<..>"),
    (re.compile(r"vector<[^>]*>"), "vector<..>"),
    (re.compile(r"'[^']*\.mlir'"), "'..'"),
    (re.compile(r"loc\([^)]*\)"), ""),
    (re.compile(r"\s+"), " "),
]


def cause(rec: dict) -> str:
    """A failure's cause with numbers, SSA names and shapes stripped, so equal causes group together."""
    msg = rec.get("message") or ""
    if rec["status"] == "fail":
        if "elements off" not in msg:
            return "wrong result" + (" (shape)" if "shape" in msg else " (dtype)" if "dtype" in msg else "")
        got = re.search(r"output \d+ \((\w+)\)", msg) or re.search(r"got np\.(\w+)", msg)
        kind = got.group(1) if got else "?"
        return f"wrong values ({'bool' if kind in ('True_', 'False_', 'bool_') else kind} output)"
    # The first line that names an error, not the generic preamble.
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    pick = next((ln for ln in lines if re.search(r"error:|failed|not supported|unsupported|unknown|cannot|invalid",
                                                  ln, re.I) and "Failure while executing pass pipeline" not in ln),
                lines[0] if lines else "")
    if pick.endswith(":") and pick in lines and lines.index(pick) + 1 < len(lines):
        pick = f"{pick} {lines[lines.index(pick) + 1]}"  # "X failed at node N:" says little without the next line
    if "Fatal Python error" in msg:
        pick = next((ln for ln in lines if "Fatal Python error" in ln), pick)
    gpu_func = re.search(r"failed to legalize operation 'gpu.func'.*?function_type = \(([^)]*)\)", msg)
    if gpu_func:  # what a kernel signature cannot be lowered for is mostly its element types: group by them
        elems = sorted(set(re.findall(r"memref<(?:[\d?]+x)*(\w+)", gpu_func.group(1))))
        return f"failed to legalize operation 'gpu.func' (kernel buffers of {', '.join(elems)})"
    for rx, rep in _NOISE:
        pick = rx.sub(rep, pick)
    # The op instance after "...: %v = ..." differs per case; the cause is what precedes it.
    pick = re.split(r":\s*(?:%v\s*=|\"?%v\"?\s*=|\"[\w.]+\"\(|[a-z_]+\.[\w.]+ %v)", pick, maxsplit=1)[0]
    pick = re.sub(r'error: "-":N:N: |Failure while executing pass pipeline: ', "", pick)
    return pick.strip()[:220]


def compiler_failures(data: dict, phase: str = "compiler") -> list[dict]:
    """Errors and wrong results grouped by (stage, cause), most frequent first. phase "compiler": everything
    past the ONNX import (compile, kernel build, run, numerics); phase "import": the frontend's errors."""
    groups: dict[tuple[str, str], dict] = {}
    for name, per in data["results"].items():
        op = data["cases"].get(name, {}).get("op", "?")
        for col, r in per.items():
            in_import = r.get("phase") == "import"
            if r["status"] not in ("error", "fail", "unsupported") or in_import != (phase == "import"):
                continue
            if r["status"] == "unsupported" and phase == "import":
                continue
            stage = r.get("stage", "run") if r["status"] != "fail" else "numerics"
            if r["status"] == "unsupported":
                stage += " (unsupported)"
            key = (stage, cause(r))
            g = groups.setdefault(key, {"stage": stage, "cause": key[1], "count": 0, "ops": Counter(),
                                        "columns": Counter(), "cases": [], "message": r.get("message", ""),
                                        "traceback": r.get("traceback", "")})
            g["count"] += 1
            g["ops"][op] += 1
            g["columns"][col] += 1
            if name not in g["cases"]:
                g["cases"].append(name)
    return sorted(groups.values(), key=lambda g: -g["count"])


def failures_markdown(data: dict, repro_dir: Path | None = None, out_dir: Path | None = None,
                      case_models: dict[str, str] | None = None, top: int = 30) -> str:
    groups = compiler_failures(data)
    total = sum(g["count"] for g in groups)
    lines = ["# Compiler failures in the ONNX conformance run", "",
             f"{total} results (case x column) failed past the ONNX import: errors in a compile stage, a kernel "
             f"build or a run, UnsupportedOp raised by the compiler, and wrong results. Grouped by stage and "
             f"cause (numbers, SSA names and shapes "
             f"stripped), most frequent first. Repro: the imported MLIR (linalg on tensors) of the smallest case "
             f"of each group; feed it to `portable.compile(open(path).read(), device=...)`.", "",
             "| # | stage | cause | count | ops (cases) | columns |", "|---:|---|---|---:|---|---|"]
    for i, g in enumerate(groups[:top], 1):
        ops = ", ".join(f"{o} ({n})" for o, n in g["ops"].most_common(8)) + (" ..." if len(g["ops"]) > 8 else "")
        cols = ", ".join(f"{c} ({n})" for c, n in g["columns"].most_common())
        lines.append(f"| {i} | {g['stage']} | {_md_escape(g['cause'])} | {g['count']} | {_md_escape(ops)} | {cols} |")
    for i, g in enumerate(groups[:top], 1):
        lines += ["", f"## {i}. {g['stage']}: {g['cause']}", "",
                  f"{g['count']} results; ops: {', '.join(o for o, _ in g['ops'].most_common())}", "",
                  f"Cases: {', '.join(g['cases'][:20])}{' ...' if len(g['cases']) > 20 else ''}", ""]
        repro = _smallest_repro(g["cases"], repro_dir)
        if repro is not None:
            rel = repro.relative_to(out_dir) if out_dir and repro.is_relative_to(out_dir) else repro
            text = repro.read_text()
            lines += [f"Repro `{rel}` ({len(text)} bytes):", ""]
            if len(text) < 3000:
                lines += ["```mlir", text.rstrip(), "```", ""]
        if case_models and g["cases"][0] in case_models:
            lines += [f"ONNX model of {g['cases'][0]}: `{case_models[g['cases'][0]]}`", ""]
        msg = g["message"].strip()
        if g.get("traceback"):
            msg += "\n\n" + g["traceback"].strip()
        lines += ["Message (first case):", "", "```", msg[:2500], "```"]
    front = compiler_failures(data, "import")
    if front:
        lines += ["", "# Frontend (ONNX import through torch-mlir) errors", "",
                  "Not compiler failures: the ONNX model did not reach linalg. Listed for completeness.", "",
                  "| stage | cause | count | ops (cases) |", "|---|---|---:|---|"]
        for g in front[:top]:
            ops = ", ".join(f"{o} ({n})" for o, n in g["ops"].most_common(8))
            lines.append(f"| {g['stage']} | {_md_escape(g['cause'])} | {g['count']} | {_md_escape(ops)} |")
    return "\n".join(lines) + "\n"


def referenced_repros(data: dict, repro_dir: Path, top: int = 30) -> set[Path]:
    """The repro files FAILURES.md shows (the smallest of each of the top groups)."""
    keep = set()
    for g in compiler_failures(data)[:top]:
        p = _smallest_repro(g["cases"], repro_dir)
        if p is not None:
            keep.add(p)
    return keep


def _smallest_repro(cases: list[str], repro_dir: Path | None) -> Path | None:
    if not repro_dir or not repro_dir.is_dir():
        return None
    found = [repro_dir / f"{c}.mlir" for c in cases if (repro_dir / f"{c}.mlir").exists()]
    return min(found, key=lambda p: p.stat().st_size) if found else None


def write_all(data: dict, out_dir: Path, stem: str, repro_dir: Path | None = None,
              case_models: dict[str, str] | None = None) -> list[Path]:
    """Write <stem>.md, <stem>.html and FAILURES.md (when there are compiler failures) into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.md", out_dir / f"{stem}.html"]
    paths[0].write_text(markdown(data))
    paths[1].write_text(html_report(data))
    fails = out_dir / ("FAILURES.md" if stem == "results" else f"{stem}-FAILURES.md")
    fails.write_text(failures_markdown(data, repro_dir, out_dir, case_models))
    paths.append(fails)
    return paths
