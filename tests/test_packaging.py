"""What `pip install daybreak` gives: a lean core (run, infer, throughput, time, experiments, analyses) without the
leaderboard's server stack, extras declared once (pyproject.toml, and daybreak.commands_index.EXTRAS for the
modules each brings), a command whose extra is missing answering in one line which to install, the package's
non-Python files in the wheel, and one version: ``daybreak --version``, CHANGELOG.md and every record.

The wheel itself, installed alone into a fresh environment, is exercised by .ci/wheel-smoke.sh (CI).
"""

from __future__ import annotations

import ast
import fnmatch
import importlib
import importlib.metadata as metadata
import importlib.util
import json
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

import daybreak
from daybreak.cli import main
from daybreak.commands_index import BY_NAME, COMMANDS, EXTRAS, extra_providing
from daybreak.version import __version__

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(daybreak.__file__).parent.parent
PACKAGE = ROOT / "daybreak"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
OPTIONAL = PROJECT["optional-dependencies"]
# extras that are not a part of the package users run, but of working on it (loadtest: Locust, for
# benchmarks/leaderboard_load.py)
TOOLING = {"test", "docs", "release", "loadtest"}
LEADERBOARD = next(e for e in EXTRAS if e.name == "leaderboard")


def requirement_name(req: str) -> str:
    """The normalized distribution name of a requirement string ('psycopg[binary]>=3.1' -> 'psycopg')."""
    return re.split(r"[\s\[<>=!~;(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


# --- the extras -------------------------------------------------------------------------------------------------


def test_the_extras_users_install_are_the_ones_the_command_line_knows():
    assert set(OPTIONAL) - TOOLING == {e.name for e in EXTRAS}
    assert {c.extra for c in COMMANDS if c.extra} <= {e.name for e in EXTRAS}


def test_the_core_install_holds_none_of_the_leaderboard_stack():
    core = {requirement_name(r) for r in PROJECT["dependencies"]}
    server = {requirement_name(r) for r in OPTIONAL["leaderboard"]}
    assert server == {"sqlalchemy", "fastapi", "uvicorn", "jinja2", "python-multipart", "psycopg"}
    assert not core & server
    # what run, infer, throughput, time, the experiments and the analyses use stays in the core
    assert {"torch", "numpy", "pydantic", "scipy", "scikit-learn", "mlperf-logging", "matplotlib"} <= core


def test_each_extras_modules_come_from_its_own_packages():
    """The modules commands_index.EXTRAS names for an extra are provided by that extra's requirements (or what they
    bring), and each installed requirement provides one of them: the two declarations cannot drift apart."""
    providers = metadata.packages_distributions()
    checked = 0
    for extra in EXTRAS:
        wanted = {requirement_name(r) for r in OPTIONAL[extra.name]}
        brought = set(wanted)
        for name in wanted:  # and their own requirements (fastapi brings starlette)
            try:
                brought |= {requirement_name(r) for r in metadata.requires(name) or [] if "extra ==" not in r}
            except metadata.PackageNotFoundError:
                pass
        for module in extra.modules:
            dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
            if dists:  # installed here
                assert dists & brought, f"{extra.name}: {module} comes from {dists}, not from {sorted(brought)}"
                checked += 1
        for name in wanted:
            try:
                dist = metadata.distribution(name)
            except metadata.PackageNotFoundError:
                continue
            tops = {m for m, ds in providers.items() if dist.metadata["Name"] in ds}
            assert tops & set(extra.modules), f"{extra.name}: {name} provides {sorted(tops)}, none of which is named"
    assert checked >= len(LEADERBOARD.modules) - 1  # the test extra installs the leaderboard's (multipart: one name)


def _imports(file: Path) -> list[str]:
    """Every module a file imports, at any depth (inside functions too), absolute names."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    package = ".".join(file.relative_to(ROOT).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                out.append(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                out.append(node.module)
    return out


def test_only_the_leaderboard_imports_the_server_stack():
    """Statically, at any depth: no module outside daybreak/leaderboard imports a module of the leaderboard extra or
    the leaderboard itself, so every other command works from the core install."""
    offenders = []
    for file in sorted(PACKAGE.rglob("*.py")):
        if file.is_relative_to(PACKAGE / "leaderboard"):
            continue
        for name in _imports(file):
            if name.split(".")[0] in LEADERBOARD.modules or name.startswith("daybreak.leaderboard"):
                offenders.append(f"{file.relative_to(ROOT)}: {name}")
    assert offenders == []
    # and the commands that live there are the ones that say they need it
    assert {c.name for c in COMMANDS if c.module.startswith("daybreak.leaderboard")} == {
        c.name for c in COMMANDS if c.extra == "leaderboard"}


BLOCKER = textwrap.dedent("""
    import sys
    BLOCKED = set(sys.argv[1].split(","))
    class Blocker:  # as if those packages were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Blocker())
    sys.argv = sys.argv[1:]
""")


def without(modules: tuple[str, ...] | list[str], code: str, *args: str, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in which ``modules`` cannot be imported."""
    return subprocess.run([sys.executable, "-c", BLOCKER + code, ",".join(modules), *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd)


CLI = "from daybreak.cli import main\nsys.exit(main(sys.argv[1:]))\n"


@pytest.mark.parametrize("argv", [["leaderboard", "serve", "--port", "0"], ["leaderboard", "import", "."],
                                  ["leaderboard", "show", "--task", "digits", "--objective", "train-time"]])
def test_a_leaderboard_command_without_its_extra_says_which_to_install(tmp_path, argv):
    proc = without(LEADERBOARD.modules, CLI, *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    line = proc.stderr.strip()
    command = " ".join(argv[:2])
    assert line.startswith(f"daybreak: error: `daybreak {command}` needs daybreak's leaderboard extra"), line
    assert line.endswith("pip install 'daybreak[leaderboard]'"), line
    assert list(tmp_path.iterdir()) == []  # nothing made (no database)


def test_without_the_extra_the_help_still_works_and_the_core_commands_too(tmp_path):
    proc = without(LEADERBOARD.modules, CLI, "leaderboard", "serve", "--help")
    assert proc.returncode == 0 and "--port" in proc.stdout, proc.stderr
    # every command's parser builds (what a core command registers imports nothing of the extra)
    proc = without(LEADERBOARD.modules, "from daybreak.cli import build_parser\nbuild_parser()\nprint('ok')\n")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
    proc = without(LEADERBOARD.modules, CLI, "tasks")
    assert proc.returncode == 0 and "digits" in proc.stdout, proc.stderr


def test_a_missing_module_that_no_extra_provides_is_a_bug_with_its_traceback(monkeypatch):
    import daybreak.train.commands as train_commands

    def broken(args):
        raise ModuleNotFoundError("No module named 'nosuchmodule'", name="nosuchmodule")

    monkeypatch.setattr(train_commands, "cmd_tasks", broken, raising=True)
    with pytest.raises(ModuleNotFoundError):
        main(["tasks"])
    assert extra_providing("nosuchmodule") is None
    assert extra_providing("sqlalchemy.orm").name == "leaderboard"  # type: ignore[union-attr]


def test_a_command_module_that_needs_an_extra_to_register_says_so_too(monkeypatch, capsys):
    """Should a command module import its extra at the top, even `--help` would fail: one line instead."""
    real = importlib.import_module

    def fake(name, *args):
        if name == BY_NAME["leaderboard"].module:
            raise ModuleNotFoundError("No module named 'fastapi'", name="fastapi")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", fake)
    with pytest.raises(SystemExit) as e:
        main(["leaderboard", "--help"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'daybreak[leaderboard]'" in err


# --- the wheel's files ------------------------------------------------------------------------------------------


def test_every_file_of_the_package_is_declared_to_go_into_the_wheel():
    """Every non-Python file under daybreak/ matches a package-data pattern (templates, catalog JSON, py.typed),
    and every pattern matches a file: a template added without its pattern would be missing from the wheel."""
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["daybreak"]
    files = [p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert files, "the package has data files"
    assert [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)] == []
    assert [pat for pat in patterns if not any(fnmatch.fnmatch(f, pat) for f in files)] == []


# --- one version ------------------------------------------------------------------------------------------------


def test_the_version_is_declared_once_and_printed(capsys):
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "daybreak.version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", __version__)
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"daybreak {__version__}"
    assert daybreak.__version__ == __version__
    installed = metadata.version("daybreak")  # the editable install's metadata, made from the same attribute
    assert installed == __version__, f"reinstall: the installed metadata says {installed}"


def test_the_changelog_says_what_this_version_changed():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.startswith("# Changelog") and "Keep a Changelog" in text and "Semantic Versioning" in text
    released = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert released and [v for v, _ in released] == sorted((v for v, _ in released),
                                                           key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    release = __version__.split(".dev")[0]
    if ".dev" in __version__:  # on its way to `release`: the Unreleased section says so, above every release
        unreleased = text.split("## [Unreleased]\n", 1)[1].split("\n## ", 1)[0]
        assert f"To be released as {release}" in unreleased
        assert release not in [v for v, _ in released]
        assert text.index("## [Unreleased]") < text.index(f"## [{released[0][0]}]")
    else:
        assert released[0][0] == release
    for section in re.split(r"^## ", text, flags=re.M)[1:]:  # each release says what changed, in the usual headings
        assert re.search(r"^### (Added|Changed|Deprecated|Removed|Fixed|Security)$", section, re.M), section[:60]


def _record_models() -> list[type[BaseModel]]:
    import daybreak.records

    found: dict[str, type[BaseModel]] = {}
    modules = [f"daybreak.records.{m.name}" for m in pkgutil.iter_modules(daybreak.records.__path__)]
    for name in [*modules, "daybreak.analysis.roofline"]:
        for obj in vars(importlib.import_module(name)).values():
            if (isinstance(obj, type) and issubclass(obj, BaseModel) and "kind" in obj.model_fields
                    and str(obj.model_fields["kind"].default).startswith("daybreak.")):  # a file's record kind
                found[obj.__name__] = obj
    return list(found.values())


def test_every_record_type_carries_the_version_that_wrote_it():
    from typing import Literal

    from daybreak.records.base import Record, Versioned

    models = _record_models()
    assert len(models) >= 15  # run, inference, throughput, peak, the experiments and the analyses
    assert [m.__name__ for m in models if not issubclass(m, Versioned)] == []

    class Toy(Record):
        kind: Literal["daybreak.toy"] = "daybreak.toy"
        seconds: float

    fresh = Toy(seconds=1.0)  # made now: this version
    assert fresh.daybreak_version == __version__
    saved = json.loads(fresh.model_dump_json())
    assert saved["daybreak_version"] == __version__ and saved["kind"] == "daybreak.toy"
    assert Toy.model_validate_json(fresh.model_dump_json()).daybreak_version == __version__
    # read from a file: what the file says; a record from before 0.5 is not stamped with today's version
    older = {k: v for k, v in saved.items() if k != "daybreak_version"}
    assert Toy.model_validate(older).daybreak_version is None
    assert Toy.model_validate_json(json.dumps({**older, "daybreak_version": "0.4.0"}), strict=True
                                   ).daybreak_version == "0.4.0"
    assert fresh.model_copy(update={"seconds": 2.0}).daybreak_version == __version__


def test_a_real_run_records_the_version_twice(tmp_path):
    """result.json of an actual run: the record's daybreak_version and its system's daybreak."""
    from daybreak.records.run import RunResult

    assert main(["run", "digits", "--out", str(tmp_path / "run"), "-q", "--set", "epochs=1", "--full-schedule"]) == 3
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["daybreak_version"] == __version__ and saved["system"]["daybreak"] == __version__
    assert RunResult.load(tmp_path / "run").daybreak_version == __version__


def test_the_tooling_extras_hold_what_the_tests_and_ci_use():
    test = {requirement_name(r) for r in OPTIONAL["test"]}
    assert "daybreak" in test and {"pytest", "mypy"} <= test
    (self_ref,) = [r for r in OPTIONAL["test"] if requirement_name(r) == "daybreak"]
    extras = re.search(r"\[(.*)\]", self_ref)
    assert extras and set(extras.group(1).split(",")) == {"leaderboard", "docs", "release"}
    for extra in ("docs", "release"):  # pinned, so that a strict build or a check means the same everywhere
        for req in OPTIONAL[extra]:
            assert requirement_name(req) == "daybreak" or "==" in req, req
    for module in ("mkdocs", "material", "mkdocstrings", "build", "twine"):
        assert importlib.util.find_spec(module) is not None, f"{module}: pip install -e '.[test]'"
