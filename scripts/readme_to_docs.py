"""The README's move into the documentation site (0.5.0), checked: nothing of the old README was lost.

The README was one 2,300-line page until 0.5.0; its 35 sections moved into docs/ (each page marks where a moved
section starts with ``<!-- from README: TITLE -->``, which tests/doc_pages.py finds), and the README became the
front door. This script checks the move against the README as it was::

    git show a027dd2:README.md > /tmp/old-README.md      # or any README from before the move
    python scripts/readme_to_docs.py --lost /tmp/old-README.md

Every sentence of the old README (every table row and its cells, every line of a code block, every list item's
sentences, each cut at ``.``, ``;``, ``!``, ``?`` and around a parenthesis) must stand somewhere in README.md or docs/**/*.md, as
text: links are read as their text, ``**`` and double quotes are ignored, and whitespace and indentation do not
count. It prints each one that does not (``LOST:``; a section's title is ``TITLE:``, since a moved section's page
title may stand for it) and exits 1 if any fragment other than a title is missing. A sentence edited on purpose
(a "see below" turned into a link) is listed too: read the list.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
FENCE = re.compile(r"^\s*(```|~~~)")
CUT = "\u0000"


def norm(text: str) -> str:
    """Markdown as the text a reader reads, on one line."""
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = re.sub(r"\{\s*[#.][^}]*\}", " ", text)  # attr_list's {#id}
    for mark in ("**", '"', "\u201c", "\u201d"):
        text = text.replace(mark, "")
    text = re.sub(r"^\s*(#{1,6}\s|[-*]\s|\d+\.\s|>\s?)", " ", text, flags=re.M)
    return " ".join(text.split())


def fragments(text: str) -> tuple[list[str], set[str]]:
    """The text's sentences and table cells (at least 12 characters), and its section titles."""
    lines, titles, fenced = [], set(), False
    for line in text.splitlines():
        if FENCE.match(line):  # a fence cuts; each line of a code block is a fragment of its own
            fenced = not fenced
            lines.append(CUT)
            continue
        heading = None if fenced else HEADING.match(line)
        if heading:  # a title is a fragment of its own
            titles.add(norm(heading.group(1)))
            lines.append(CUT + heading.group(1) + CUT)
        elif fenced or line.lstrip().startswith("|"):  # and so is a table's row
            lines += [CUT, line, CUT]
        else:
            lines.append(line)
    out = []
    for piece in norm("\n".join(lines)).split(CUT):
        if norm(piece) in titles:
            out.append(norm(piece))
            continue
        for frag in re.split(r"(?<=[.;!?])\s+|\s+\|\s*\|\s*|\s\(|\)\s", piece):
            frag = frag.strip(" |()")
            if len(frag) >= 12:
                out.append(frag)
    return out, titles


def lost(old: str, files: list[Path]) -> tuple[list[str], list[str], int]:
    """(sentences, titles) of ``old`` found in none of ``files``, and the number of fragments checked."""
    union = norm("\n".join(f.read_text(encoding="utf-8") for f in files))
    loose = union.replace("`", "")
    frags, titles = fragments(old)
    missing = [f for f in frags if f not in union and f.replace("`", "") not in loose]
    return [f for f in missing if f not in titles], [f for f in missing if f in titles], len(frags)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check that every sentence of an old README is in README.md or "
                                                 "docs/ (the README's move into the site, 0.5.0).")
    parser.add_argument("--lost", type=Path, required=True, metavar="OLD_README",
                        help="the README from before the move (git show a027dd2:README.md)")
    args = parser.parse_args(argv)
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    sentences, titles, n = lost(args.lost.read_text(encoding="utf-8"), files)
    for t in titles:
        print(f"TITLE: {t}")
    for s in sentences:
        print(f"LOST: {s}")
    print(f"{n} fragments of {args.lost}: {len(sentences)} sentences and {len(titles)} section titles not found "
          f"verbatim in README.md and docs/ ({len(files)} files)", file=sys.stderr)
    return 1 if sentences else 0


if __name__ == "__main__":
    raise SystemExit(main())
