"""The README's sections and their homes in the documentation site, so that moving them is mechanical.

Each page of docs/ that a README section moves to names it with a marker line::

    <!-- readme: Tasks -->          the section "Tasks" with its heading (as a level-2 heading or below)
    <!-- readme-body: Setup -->     the section's text without its heading (the page's title stands for it)

Until the move, the site's build (scripts/mkdocs_hooks.py) puts each named section's text, as README.md has it
now, where its marker stands, so that the site is whole and every section is built strictly already. A section is
a heading's own text: from the heading to the next heading of any level (headings inside code blocks are not
headings).

    python scripts/readme_to_docs.py --check   # every README section has exactly one home, every marker a section
    python scripts/readme_to_docs.py --apply   # the move: each marker replaced by its section's text, for good

After ``--apply`` the README keeps what the front door needs (cut by hand to a few hundred lines), and this script
and the markers are gone.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"

MARKER = re.compile(r"^<!-- (readme|readme-body): (.+?) -->[ \t]*$", re.M)
FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Section:
    level: int  # 1 for '#', 2 for '##', ...
    title: str
    body: str  # the text under the heading, up to the next heading
    line: int  # the heading's line number in the README (1-based)


def sections(text: str) -> list[Section]:
    """The README's sections in order; the text before the first heading belongs to none (there is none)."""
    found: list[tuple[int, str, int]] = []  # level, title, index of the heading line
    lines = text.splitlines(keepends=True)
    fenced = False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = re.match(r"^(#{1,6})\s+(.+?)\s*#*\s*$", line)
        if m and not fenced:
            found.append((len(m.group(1)), m.group(2), i))
    out = []
    for k, (level, title, i) in enumerate(found):
        end = found[k + 1][2] if k + 1 < len(found) else len(lines)
        out.append(Section(level, title, "".join(lines[i + 1:end]).strip("\n") + "\n", i + 1))
    return out


def markers(docs: Path = DOCS) -> list[tuple[Path, str, str]]:
    """(page, kind, README title) of every marker in the docs' Markdown pages, in page order."""
    out = []
    for page in sorted(docs.rglob("*.md")):
        for m in MARKER.finditer(page.read_text(encoding="utf-8")):
            out.append((page, m.group(1), m.group(2)))
    return out


def problems(readme: str | None = None, docs: Path = DOCS) -> list[str]:
    """What stops the move being mechanical: a README section without a home, one with two, a marker that names no
    section, a title used by two sections."""
    found = sections(readme if readme is not None else README.read_text(encoding="utf-8"))
    titles = [s.title for s in found]
    out = [f"README.md: two sections are called {t!r}" for t in sorted({t for t in titles if titles.count(t) > 1})]
    homes: dict[str, list[str]] = {}
    for page, _, title in markers(docs):
        homes.setdefault(title, []).append(str(page.relative_to(docs)))
    for s in found:
        where = homes.get(s.title, [])
        if not where:
            out.append(f"README.md:{s.line}: section {s.title!r} has no home in docs/ (add a marker "
                       f"'<!-- readme: {s.title} -->' to the page it moves to)")
        elif len(where) > 1:
            out.append(f"README.md:{s.line}: section {s.title!r} has two homes: {', '.join(where)}")
    for title, where in homes.items():
        if title not in titles:
            out.append(f"docs/{where[0]}: marker names {title!r}, which is not a README section")
    return out


ORIGIN = "<!-- from README: {title} -->"  # where a moved section starts (tests/doc_pages.py finds it by it)


def include(markdown: str, readme: str | None = None, *, mark_origin: bool = False) -> str:
    """``markdown`` (a page) with each marker replaced by its README section's text; ``mark_origin``: each section
    preceded by an ORIGIN comment naming it (the move keeps them, so that tests find a section where it moved)."""
    by_title = {s.title: s for s in sections(readme if readme is not None else README.read_text(encoding="utf-8"))}
    named = [by_title[m.group(2)] for m in MARKER.finditer(markdown) if m.group(2) in by_title]
    top = min((s.level for s in named), default=2)

    def one(m: re.Match[str]) -> str:
        section = by_title.get(m.group(2))
        if section is None:
            return m.group(0)  # left for --check to report
        origin = ORIGIN.format(title=section.title) + "\n\n" if mark_origin else ""
        if m.group(1) == "readme-body":
            return (origin + section.body).rstrip("\n")
        level = 2 + section.level - top
        return f"{origin}{'#' * level} {section.title}\n\n{section.body}".rstrip("\n")

    return MARKER.sub(one, markdown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The README's sections and their pages in docs/.")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="every section has exactly one home (exit 1 if not)")
    what.add_argument("--apply", action="store_true", help="move: write each section into its page, for good")
    args = parser.parse_args(argv)
    found = problems()
    for p in found:
        print(p, file=sys.stderr)
    if found:
        return 1
    if args.check:
        print(f"{len(sections(README.read_text(encoding='utf-8')))} README sections, each with one home in docs/")
        return 0
    for page in apply(README.read_text(encoding="utf-8"), DOCS):
        print(f"{page.relative_to(ROOT)}: sections written in")
    print("now cut README.md to the front door (what it is, the two commands, one example output, links)")
    return 0


def apply(readme: str, docs: Path) -> list[Path]:
    """The move: every page with markers gets its sections' text for good (each after a comment naming it); returns
    the pages written."""
    pages = sorted({p for p, _, _ in markers(docs)})
    for page in pages:
        page.write_text(include(page.read_text(encoding="utf-8"), readme, mark_origin=True), encoding="utf-8")
    return pages


if __name__ == "__main__":
    raise SystemExit(main())
