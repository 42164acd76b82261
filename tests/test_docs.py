"""The documentation site (mkdocs.yml, docs/): its Reference is generated from the code and covers all of it, every
README section has exactly one home in it, its navigation holds every page, and it builds strictly (slow)."""

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
import readme_to_docs  # noqa: E402


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


def test_every_readme_section_has_exactly_one_home_in_the_site():
    assert readme_to_docs.problems() == []
    assert len(readme_to_docs.sections(readme_to_docs.README.read_text(encoding="utf-8"))) >= 30


def test_the_move_check_finds_a_section_without_a_home_and_a_marker_without_a_section(tmp_path):
    (tmp_path / "page.md").write_text("# Page\n\n<!-- readme: One -->\n\n<!-- readme-body: Gone -->\n")
    readme = "# Title\n\ntext\n\n```bash\n# not a heading\n```\n\n## One\n\nbody of one\n\n### Two\n\nbody of two\n"
    found = readme_to_docs.problems(readme, tmp_path)
    assert any("'Title' has no home" in p for p in found) and any("'Two' has no home" in p for p in found)
    assert any("names 'Gone', which is not a README section" in p for p in found)
    assert not any("not a heading" in p for p in found)  # a '#' line in a code block is no section
    page = readme_to_docs.include("# Page\n\n<!-- readme: One -->\n\n<!-- readme-body: Two -->\n", readme)
    assert page == "# Page\n\n## One\n\nbody of one\n\nbody of two\n"


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
    assert "Moving from the README" in clocks and "MLPerf" in clocks  # the README's section, until it moves
    assert (site / "reference" / "openapi.json").exists()


def test_the_move_rehearsed_keeps_every_section_and_every_example(tmp_path):
    """scripts/readme_to_docs.py --apply on a copy: afterwards every README section is found where it moved
    (tests/doc_pages.section: what the example tests read), with the same text, and the documentation's command
    lines are the same ones, so every example keeps running; a README cut to its front door loses nothing."""
    import shutil

    from doc_pages import bash_commands, section

    shutil.copytree(DOCS, tmp_path / "docs")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (tmp_path / "README.md").write_text(readme, encoding="utf-8")
    before_files = [tmp_path / "README.md", *sorted((tmp_path / "docs").rglob("*.md"))]
    titles = [s.title for s in readme_to_docs.sections(readme)]
    before = {t: section(t, before_files)[1] for t in titles}
    commands = bash_commands(before_files)

    written = readme_to_docs.apply(readme, tmp_path / "docs")
    assert len(written) >= 25 and readme_to_docs.markers(tmp_path / "docs") == []
    (tmp_path / "README.md").write_text("# daybreak\n\nThe front door.\n", encoding="utf-8")  # cut (a stand-in)
    after_files = [tmp_path / "README.md", *sorted((tmp_path / "docs").rglob("*.md"))]
    for title in titles:
        if title == "daybreak":  # the front door keeps its title
            continue
        where, text = section(title, after_files)  # (the last section of a page runs on to the page's end)
        assert where != tmp_path / "README.md" and text.strip().startswith(before[title].strip()), title
    assert set(bash_commands(after_files)) == set(commands)
