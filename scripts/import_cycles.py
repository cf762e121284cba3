"""Import cycles among portable's modules (module-level imports, as Python runs them at import time), and imports
that break the layering: codegen rooms importing compiler internals, the runtime or core files importing MLIR.

  python scripts/import_cycles.py      # exit 1 on any cycle or layering break
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_imports() -> dict[str, set[str]]:
    mods: dict[str, tuple[Path, list[str]]] = {}
    for p in (ROOT / "portable").rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = (p, parts[:-1])
    graph: dict[str, set[str]] = {}
    for name, (p, pkg) in mods.items():
        deps = set()
        for node in ast.parse(p.read_text()).body:  # module level only: imports inside functions run later
            if isinstance(node, ast.ImportFrom):
                base = pkg[:len(pkg) - node.level + 1] if node.level else []
                absmod = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    full = f"{absmod}.{a.name}"
                    deps.add(full if full in mods else absmod)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def layering(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    bad = []
    for m, deps in graph.items():
        for d in deps:
            if m.startswith(("portable.codegen_spirv", "portable.codegen_opencl")) and \
                    d.startswith("portable.compiler"):
                bad.append((m, d))
            if m.startswith(("portable.runtime_vk", "portable.runtime_cl", "portable.memory")) and \
                    d.startswith(("portable.ir", "portable.compiler")):
                bad.append((m, d))
    return bad


def main() -> int:
    graph = module_imports()
    found, bad = cycles(graph), layering(graph)
    for c in found:
        print("cycle:", " <-> ".join(c))
    for m, d in bad:
        print(f"layering: {m} imports {d}")
    print(f"{len(graph)} modules, {len(found)} import cycles, {len(bad)} layering breaks")
    return 1 if found or bad else 0


if __name__ == "__main__":
    sys.exit(main())
