"""The package's import graph: no cycles (module-level, inside functions or for type checking only), and the
lower layers never import the higher ones (readers never import training, the leaderboard or the CLI)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "daybreak"

# a module of the left-hand layer must not import any module starting with one of these
FORBIDDEN = {
    "daybreak.data": ("daybreak.train", "daybreak.tasks", "daybreak.recipes", "daybreak.models", "daybreak.measure",
                      "daybreak.records", "daybreak.leaderboard", "daybreak.analysis", "daybreak.infer",
                      "daybreak.sweep", "daybreak.external", "daybreak.cli"),
    "daybreak.rules": ("daybreak.",),
    "daybreak.metrics": ("daybreak.",),
    "daybreak.records": ("daybreak.train", "daybreak.leaderboard", "daybreak.analysis", "daybreak.sweep",
                         "daybreak.external", "daybreak.infer", "daybreak.cli"),
    "daybreak.measure": ("daybreak.train", "daybreak.records", "daybreak.sweep", "daybreak.leaderboard",
                         "daybreak.analysis", "daybreak.cli"),
    "daybreak.models": ("daybreak.train", "daybreak.recipes", "daybreak.tasks", "daybreak.leaderboard",
                        "daybreak.analysis", "daybreak.cli"),
}


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in modules:
                name = name.rsplit(".", 1)[0] if "." in name else ""
            if name and name != me:
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    modules = set(files)
    return {m: imports_of(p, modules) for m, p in files.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            # a package __init__ importing its own submodules and vice versa is not a layering cycle
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

    import sys

    sys.setrecursionlimit(10_000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(layer):
    bad = []
    for mod, deps in graph().items():
        if mod == layer or mod.startswith(layer + "."):
            for dep in deps:
                if any(dep == f or dep.startswith(f if f.endswith(".") else f + ".") or dep == f.rstrip(".")
                       for f in FORBIDDEN[layer]) and not (dep == layer or dep.startswith(layer + ".")):
                    bad.append(f"{mod} -> {dep}")
    assert bad == []
