"""The package's import graph: no cycles and no import from a lower layer to a higher one, counting every import
(module level, inside functions, and under ``if TYPE_CHECKING``: an import moved into a function to dodge a
cycle is still a cycle).

The layers are STYLE.md's, low to high:

    readers (data/) < measure, records < tasks, models, recipes < train, infer, sweep < analysis, leaderboard < cli

Within a tier the order written below holds too (it is the order of ``shared/hooks/layers.py``, so this test and
that hook agree): measure < records, tasks < models < recipes, train < infer < sweep < external, analysis <
leaderboard. The top-level modules are placed by what they are:

- foundation, below data/: ``errors``, ``text``, ``fileio``, ``version``, ``commands_index`` (plain helpers),
  ``registry`` (the registries' machinery), ``rules`` (the clock rule sets), ``metrics`` (the typed metrics),
  ``mlperf_benchmarks`` (MLPerf Training's benchmarks, targets and run counts per round: one table for every
  reader), ``pricing`` (the price catalog), ``launch`` and ``processes`` (process helpers), ``plugins`` (plug-in
  files for the registries), ``options`` (the option machinery) and
  ``config`` (RunConfig: every run option, declared once), ``executors`` (where trial processes run: local
  subprocesses or a Slurm job array); each imports nothing above ``errors`` and ``rules``;
- ``external`` (``daybreak time``) sits in the train/infer/sweep tier;
- ``experiments`` (trials as fresh processes, executors, paired statistics) sits between analysis (whose statistics
  it uses) and the leaderboard (whose reproductions run through its executors);
- cli: ``cli``, ``__main__``, ``squad_commands`` and the package itself (``daybreak.run``, the Python API).

Every module must belong to a layer: a new package is placed here when it is added.
"""

import ast
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "daybreak"

FOUNDATION = ("daybreak.errors", "daybreak.text", "daybreak.fileio", "daybreak.version", "daybreak.commands_index",
              "daybreak.plugins", "daybreak.registry", "daybreak.rules", "daybreak.metrics",
              "daybreak.mlperf_benchmarks", "daybreak.options", "daybreak.config", "daybreak.pricing",
              "daybreak.launch", "daybreak.processes", "daybreak.executors")
# low to high; a module's rank is the index of the first prefix that names it
TIERS: list[tuple[str, ...]] = [
    FOUNDATION,
    ("daybreak.data",),
    ("daybreak.measure", "daybreak.records"),
    ("daybreak.tasks", "daybreak.models", "daybreak.recipes"),
    ("daybreak.train", "daybreak.infer", "daybreak.sweep", "daybreak.external"),
    ("daybreak.analysis", "daybreak.experiments", "daybreak.leaderboard"),
    ("daybreak.squad_commands", "daybreak.cli", "daybreak.__main__", "daybreak"),
]
ORDER = [prefix for tier in TIERS for prefix in tier]


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    return imports_in(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py", modules)


def imports_in(source: str, me: str, is_package: bool, modules: set[str]) -> set[str]:
    """Every daybreak module the source of module ``me`` imports, wherever the import statement is."""
    tree = ast.parse(source)
    package = me if is_package else me.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rsplit(".", 1)[0] if "." in name else ""
            # a submodule taking names from its own package's __init__ (a registry) is not an edge
            if name and name != me and not me.startswith(name + "."):
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PKG.rglob("*.py")}
    modules = set(files)
    return {m: imports_of(p, modules) for m, p in files.items()}


def rank(module: str) -> int | None:
    """Position of the module's layer in ORDER (the most specific prefix wins: ``daybreak`` is the API)."""
    best = None
    for i, prefix in enumerate(ORDER):
        if module == prefix or module.startswith(prefix + "."):
            if best is None or len(prefix) > len(ORDER[best]):
                best = i
    return best


def tier(module: str) -> int:
    r = rank(module)
    assert r is not None
    return next(i for i, t in enumerate(TIERS) if ORDER[r] in t)


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

    sys.setrecursionlimit(10_000)
    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {t}" for m, deps in g.items() for t in deps if rank(t) > rank(m))  # type: ignore[operator]


def test_every_module_has_a_layer():
    assert [m for m in graph() if rank(m) is None] == []


def test_no_import_cycles():
    found = cycles(graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_upward_imports():
    assert upward_imports(graph()) == []


def test_the_checks_catch_what_they_are_for():
    """A hand-made graph with one upward import (a task file importing the runner) and one cycle is caught."""
    g = {"daybreak.tasks.toy": {"daybreak.train.batches"}, "daybreak.train.batches": set(),
         "daybreak.data.a": {"daybreak.data.b"}, "daybreak.data.b": {"daybreak.data.a"}}
    assert upward_imports(g) == ["daybreak.tasks.toy -> daybreak.train.batches"]
    assert cycles(g) == [["daybreak.data.a", "daybreak.data.b"]]
    assert tier("daybreak.tasks.batches") == tier("daybreak.recipes") < tier("daybreak.train.runner")
    assert tier("daybreak.metrics") == 0 and tier("daybreak") == len(TIERS) - 1


@pytest.mark.parametrize("source, found", [
    ("def f():\n    from daybreak.train.runner import run\n", {"daybreak.train.runner"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from daybreak.recipes import TrainSetup\n",
     {"daybreak.recipes"}),
    ("from ..models import create_model\n", {"daybreak.models"}),
    ("from . import TASKS\n", set()),  # its own package's registry
])
def test_function_level_type_checking_and_relative_imports_count(source, found):
    assert imports_in(source, "daybreak.tasks.toy", False, set(graph())) == found
