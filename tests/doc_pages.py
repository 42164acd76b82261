"""The documentation the tests execute: README.md and every Markdown page of the site (docs/**/*.md), wherever a
section lives, before or after it moves from the README into the site (scripts/readme_to_docs.py).

- ``DOC_FILES``: the files, README first;
- ``bash_commands()``: every command line of their ``bash`` blocks (continuations joined, comments dropped);
- ``section(title)``: the text of the README section called ``title``, from README.md while it is there, else from
  the page it moved to (which marks where it starts with ``<!-- from README: TITLE -->``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOC_FILES: list[Path] = [README, *sorted((ROOT / "docs").rglob("*.md"))]
ORIGIN = re.compile(r"^<!-- from README: (.+?) -->[ \t]*$", re.M)
FENCE = re.compile(r"^\s*(```|~~~)")


def text(file: Path) -> str:
    return file.read_text(encoding="utf-8")


def doc_text() -> str:
    """Every documentation file's text, one after the other."""
    return "\n".join(text(f) for f in DOC_FILES)


def bash_commands(files: list[Path] | None = None) -> list[str]:
    """Every command line of the files' ``bash`` blocks, continuations joined, comments dropped, each once, in
    order."""
    out: list[str] = []
    for file in files or DOC_FILES:
        for block in re.findall(r"```bash\n(.*?)```", text(file), re.S):
            block = re.sub(r"\\\n\s*", " ", block)
            for line in block.splitlines():
                line = re.split(r"\s+#", line, maxsplit=1)[0].strip()
                if line and not line.startswith("#") and line not in out:
                    out.append(line)
    return out


def _readme_section(readme: str, title: str) -> str | None:
    lines = readme.splitlines(keepends=True)
    fenced, start, out = False, None, []
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if heading and start is not None:
            break
        if heading and heading.group(1) == title:
            start = i
            continue
        if start is not None:
            out.append(line)
    return None if start is None else "".join(out)


def section(title: str, files: list[Path] | None = None) -> tuple[Path, str]:
    """(file, text) of the README section ``title``: its own text, up to the next heading in README.md; in a docs
    page, up to the next moved section or the page's end. ``files``: README first, then the pages (DOC_FILES)."""
    files = files or DOC_FILES
    found = _readme_section(text(files[0]), title)
    if found is not None:
        return files[0], found
    for file in files[1:]:
        page = text(file)
        starts = list(ORIGIN.finditer(page))
        for k, m in enumerate(starts):
            if m.group(1) == title:
                end = starts[k + 1].start() if k + 1 < len(starts) else len(page)
                body = page[m.end():end].lstrip("\n")
                if re.match(r"#{1,6} ", body):  # the section's heading, kept on its page: not its text
                    body = body.split("\n", 1)[1] if "\n" in body else ""
                return file, body
    raise LookupError(f"no README section {title!r} in README.md or docs/ (moved without its origin comment?)")
