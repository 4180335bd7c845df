"""The import rules of bench/, checked from the source (no module is imported): which layer may
import which, no import circle, and imports inside functions only for heavy or optional packages."""
from __future__ import annotations

import ast
from pathlib import Path

# layer -> the layers it may import (itself always); README: How the code is laid out
ALLOWED = {
    "core": set(),
    "data": {"core"},
    "worker": {"core", "data"},
    "store": {"core"},
    "analysis": {"store", "core"},
    "harness": {"analysis", "store", "data", "core"},
    "present": {"analysis", "store", "core"},
    "cli": {"harness", "present", "analysis", "store", "data", "core"},
    "pytest_plugin": {"harness", "present", "analysis", "store", "data", "core"},
    "__main__": {"cli"},
    "__init__": set(),
}
# packages a function may import where it is needed: heavy to import, or not installed everywhere
LAZY_OK = {"torch", "torchvision", "matplotlib", "pynvml", "nvidia", "markdown", "timm"}


def modules(root: Path) -> dict[str, Path]:
    """Dotted name (bench.core.case) -> file, for every module under the package folder `root`."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = f.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import of `module`, bench's own resolved
    to the deepest known module (`from .x import name` counts as importing x, or x.name if a module)."""
    tree = ast.parse(path.read_text())
    is_package = path.name == "__init__.py"
    found = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, in_function) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(module, is_package, child)
                for a in child.names:
                    full = f"{target}.{a.name}"
                    found.append((full if full in known else target, child.lineno, in_function))
            visit(child, nested)
    visit(tree, False)
    return found


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "bench":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def violations(root: Path) -> list[str]:
    """Every broken rule under the package folder `root`, one line each; empty when the layers hold."""
    mods = modules(root)
    known = set(mods)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    out = []
    for m, path in mods.items():
        for target, line, lazy in imports(m, path, known):
            where = f"{path.relative_to(root.parent)}:{line}"
            own = layer(m)
            if layer(target) is None:
                if lazy and target.split(".")[0] not in LAZY_OK:
                    out.append(f"{where}: imports {target} inside a function (only {', '.join(sorted(LAZY_OK))} may be)")
                continue
            if lazy:
                out.append(f"{where}: imports {target} inside a function (bench's own modules are imported at the top)")
            if target in known:
                graph[m].add(target)
            theirs = layer(target)
            if theirs != own and theirs not in ALLOWED.get(own, set()):
                out.append(f"{where}: {own} may not import {theirs} ({m} imports {target})")
    return out + [f"import circle: {' -> '.join(c)}" for c in cycles(graph)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected group of modules that import each other (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group) + [sorted(group)[0]])
    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found
