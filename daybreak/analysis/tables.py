"""Markdown tables for the analyses' text output and the report (one place, so no analysis imports the report)."""

from __future__ import annotations

from typing import Any


def md_text(text: Any) -> str:
    """Record text for Markdown: no raw HTML (``<`` and ``>`` as entities), one line."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def markdown_table(header: list[str], body: list[list[str]]) -> str:
    def cell(text: Any) -> str:
        return md_text(str(text).replace("\\", "\\\\").replace("|", "\\|"))

    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in body]
    return "\n".join(lines)
