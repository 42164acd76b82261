"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks``), run at every build:

- the Reference pages are generated from the code (scripts/gen_reference.py) and added to the site's files, so they
  can never be stale and are never edited by hand;
- a page that names a README section with a marker (``<!-- readme: TITLE -->``, scripts/readme_to_docs.py) shows
  that section's text as README.md has it, until the section moves to the page.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import gen_reference  # noqa: E402
import readme_to_docs  # noqa: E402

PENDING = ('!!! note "Moving from the README"\n    This page shows the README\'s section{s} {titles} as README.md has '
           "{them} until {it_they} move{s_verb} here.\n\n")


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in gen_reference.all_pages().items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} is generated at build time (scripts/gen_reference.py): remove the file")
        files.append(File.generated(config, path, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    titles = [m.group(2) for m in readme_to_docs.MARKER.finditer(markdown)]
    if not titles:
        return markdown
    included = readme_to_docs.include(markdown)
    many = len(titles) > 1
    note = PENDING.format(s="s" if many else "", titles=", ".join(f"\u201c{t}\u201d" for t in titles),
                          them="them" if many else "it", it_they="they" if many else "it", s_verb="" if many else "s")
    title_end = included.find("\n\n") + 2 if included.startswith("# ") else 0
    return included[:title_end] + note + included[title_end:]
