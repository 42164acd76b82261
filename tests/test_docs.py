"""The documentation site (mkdocs.yml, docs/): its Reference is generated from the code and covers all of it, its
navigation holds every page, and it builds strictly (slow)."""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

import daybreak

ROOT = Path(daybreak.__file__).parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "scripts"))

import gen_reference  # noqa: E402


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return gen_reference.all_pages()


def _nav_paths(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_paths(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_paths(value)]
    return []


def test_the_cli_reference_shows_every_command_and_option(generated):
    from daybreak.commands_index import COMMANDS

    options = list(gen_reference.cli_options())
    assert len(options) > 300  # every option of every command and subcommand
    # an option as a code span: `--seed N`; a positional argument too, in brackets where it is optional: `[TASK]`
    missing = [(page, option) for page, option in options
               if not re.search(r"`\[?" + re.escape(option) + r"(?![\w-])", generated[page])]
    assert missing == []
    for c in COMMANDS:
        page = generated[f"reference/cli/{c.name}.md"]
        assert page.startswith(f"# daybreak {c.name}\n") and c.help.split(" ")[0] in page
        assert (f"daybreak[{c.extra}]" in page) == bool(c.extra)
    index = generated["reference/cli/index.md"]
    assert all(f"({c.name}.md)" in index for c in COMMANDS)


def test_a_new_option_appears_in_the_reference_without_anyone_writing_it(monkeypatch):
    """The pages come from the parsers themselves: an option a command module adds is on its page."""
    import daybreak.train.commands as train

    real = train.register

    def register(sub):
        real(sub)
        sub.choices["show"].add_argument("--brand-new-flag", metavar="N", help="a flag added *today* [x]")

    monkeypatch.setattr(train, "register", register)
    page = gen_reference.cli_pages()["reference/cli/show.md"]
    assert "- `--brand-new-flag N`: a flag added \\*today\\* \\[x\\]" in page


def test_every_record_format_has_its_page():
    found = set()
    import daybreak.records

    names = [f"daybreak.records.{m.name}" for m in pkgutil.iter_modules(daybreak.records.__path__)]
    for name in [*names, "daybreak.analysis.roofline"]:
        for obj in vars(importlib.import_module(name)).values():
            if (isinstance(obj, type) and issubclass(obj, BaseModel) and "kind" in obj.model_fields
                    and str(obj.model_fields["kind"].default).startswith("daybreak.")):
                found.add(obj.__name__)
    assert found == {name for _, _, name, _ in gen_reference.RECORDS}


def test_record_pages_list_every_field_with_its_comment(generated):
    from daybreak.records.run import RunResult

    page = generated["reference/records/run.md"]
    for name in RunResult.model_fields:
        assert f"| `{name}` |" in page, name
    # the comment beside a field in the source is its description
    assert "| `optimizer` | string or null | `null` | the class of the recipe's optimizer" in page
    assert "[SystemInfo](common.md#systeminfo)" in page  # a shared model, linked
    assert "## SystemInfo" in generated["reference/records/common.md"]


def test_the_api_page_is_the_document_the_app_serves(generated):
    from fastapi.testclient import TestClient

    from daybreak.leaderboard.web.app import create_app

    with TestClient(create_app("sqlite://")) as client:
        served = client.get("/openapi.json").json()
    assert json.loads(generated["reference/openapi.json"]) == served
    page = generated["reference/openapi.md"]
    for path, item in served["paths"].items():
        for method in item:
            assert f"## {method.upper()} {gen_reference.md_text(path)}" in page


def test_the_navigation_holds_every_page_and_only_pages_that_exist(generated):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_paths(config["nav"])
    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    made = {p for p in generated if p.endswith(".md")}
    assert not written & set(generated)  # a generated page is never also a file (the build refuses it)
    assert sorted(set(nav)) == sorted(nav)  # each page once
    assert set(nav) == written | made
    assert config["strict"] is True and config["hooks"] == ["scripts/mkdocs_hooks.py"]


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = tmp_path / "site"
    run = (site / "reference" / "cli" / "run" / "index.html").read_text(encoding="utf-8")
    assert "--full-schedule" in run
    clocks = (site / "concepts" / "clock-rules" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in clocks and "MLPerf Training" in clocks  # the moved section, its table rendered
    assert (site / "reference" / "openapi.json").exists()
