"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks``), run at every build: the Reference pages are
generated from the code (scripts/gen_reference.py) and added to the site's files, so they can never be stale and
are never edited by hand.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
sys.path.insert(0, str(SCRIPTS))

import gen_reference  # noqa: E402


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in gen_reference.all_pages().items():
        if files.get_file_from_path(path) is not None:
            raise RuntimeError(f"docs/{path} is generated at build time (scripts/gen_reference.py): remove the file")
        files.append(File.generated(config, path, content=text))
    return files
