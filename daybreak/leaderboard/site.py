"""The leaderboard's pages (Jinja2, autoescaped) for the web server and the static export.

The same templates serve both: ``link(...)`` makes absolute URLs for the server and relative file paths for the
static site. File and URL names come only from the task and objective registries and integer entry ids, never
from a submission.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import quote, urlparse

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from daybreak import __version__
from daybreak.fileio import atomic_write_text
from daybreak.leaderboard.plot import curve_svg
from daybreak.leaderboard.ranking import OBJECTIVES, Objective, format_hms, leaderboard, row
from daybreak.leaderboard.tasks import LeaderboardTask, all_tasks, get_task

TEMPLATES = Path(__file__).resolve().parent / "templates"
INDEX_TOP = 10

Link = Callable[..., str]


def server_link(kind: str, **kw: Any) -> str:
    if kind == "index":
        return "/"
    if kind == "board":
        return f"/tasks/{quote(kw['task'])}/{quote(kw['objective'])}"
    if kind == "entry":
        return f"/entries/{int(kw['entry_id'])}"
    raise ValueError(kind)


def static_link(depth: int) -> Link:
    prefix = "../" * depth

    def link(kind: str, **kw: Any) -> str:
        if kind == "index":
            return prefix + "index.html"
        if kind == "board":
            return f"{prefix}tasks/{quote(kw['task'])}/{quote(kw['objective'])}.html"
        if kind == "entry":
            return f"{prefix}entries/{int(kw['entry_id'])}.html"
        raise ValueError(kind)

    return link


def safe_href(url: str | None) -> str | None:
    """Only http(s) URLs become links (no ``javascript:`` and friends); Jinja escapes the attribute."""
    if not url:
        return None
    try:
        parsed = urlparse(url)
    except ValueError:
        return None
    return url if parsed.scheme in ("http", "https") and parsed.netloc else None


def accuracy_text(task: LeaderboardTask, accuracy: float, unit: str | None = None) -> str:
    text = f"F1 {accuracy:.4f}" if task.metric == "f1" else f"{accuracy * 100:.2f}% {task.metric_label}"
    return text + (f" (the file wrote {unit})" if unit else "")


def entry_json(entry: Any) -> dict[str, Any]:
    return {
        "id": entry.id, "task": entry.task, "kind": entry.kind, "model": entry.model, "hardware": entry.hardware,
        "framework": entry.framework, "author": entry.author, "author_email": entry.author_email,
        "code_url": entry.code_url, "date": entry.submitted_at.date().isoformat(),
        "submitted_at": entry.submitted_at.isoformat(), "imported_at": entry.imported_at.isoformat(),
        "source": entry.source, "source_format": entry.source_format, "submitter": entry.submitter,
        "metric": entry.metric, "target": entry.target, "accuracy": entry.accuracy,
        "accuracy_unit": entry.accuracy_unit, "time_to_target_s": entry.time_to_target_s,
        "epochs_to_target": entry.epochs_to_target, "cost_per_hour": entry.cost_per_hour,
        "train_cost_usd": entry.train_cost_usd, "latency_ms": entry.latency_ms,
        "cost_per_example_usd": entry.cost_per_example_usd, "inference_cost_10k_usd": entry.inference_cost_10k_usd,
        "curve": entry.curve, "tsv_columns": entry.tsv_columns, "notes": entry.notes, "document": entry.document,
        "content_hash": entry.content_hash,
    }


@dataclass
class Board:
    objective: Objective
    rows: list[dict[str, Any]]
    total: int


class Site:
    def __init__(self, store):
        self.store = store
        self.env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True)

    def _render(self, template: str, link: Link, **context: Any) -> str:
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        return self.env.get_template(template).render(link=link, version=__version__, generated=generated, **context)

    # -- data ----------------------------------------------------------------------------------------------

    def sections(self, top: int | None = INDEX_TOP) -> list[dict[str, Any]]:
        out = []
        for task in all_tasks():
            boards = []
            for obj in OBJECTIVES.values():
                ranked = self.store.ranked(task.name, obj.column)
                rows = [row(r.entry, obj, i) for i, r in enumerate(ranked, start=1)]
                boards.append(Board(obj, rows[:top] if top else rows, len(rows)))
            out.append({"task": task, "boards": boards})
        return out

    def entry_context(self, entry: Any) -> dict[str, Any]:
        task = get_task(entry.task)
        ranks, unranked = [], []
        for obj in OBJECTIVES.values():
            if obj.kind != entry.kind:
                continue
            if getattr(entry, obj.column) is None:
                unranked.append(obj.title)
                continue
            ranked = self.store.ranked(entry.task, obj.column)
            position = next(i for i, r in enumerate(ranked, start=1) if r.entry.id == entry.id)
            ranks.append({"objective": obj, "rank": position, "total": len(ranked),
                          "display": obj.display(getattr(entry, obj.column))})
        curve = entry.curve
        svg = None
        if curve:
            reached = entry.time_to_target_s / 3600.0 if entry.time_to_target_s is not None else None
            svg = curve_svg(curve, entry.target, metric=entry.metric, reached_hours=reached,
                            title=f"{entry.model}: {task.metric_label} vs. training time")
        return {
            "entry": entry, "task": task, "ranks": ranks, "unranked": unranked, "svg": svg, "curve": curve,
            "code_href": safe_href(entry.code_url), "metric_label": "F1" if task.metric == "f1" else "Accuracy (%)",
            "accuracy_text": accuracy_text(task, entry.accuracy, entry.accuracy_unit),
            "document_text": json.dumps(entry.document, indent=2, ensure_ascii=False),
            "hms": format_hms,
            "acc": (lambda a: f"{a:.4f}") if task.metric == "f1" else (lambda a: f"{a * 100:.2f}"),
        }

    # -- pages ---------------------------------------------------------------------------------------------

    def index_html(self, link: Link = server_link) -> str:
        return self._render("index.html", link, sections=self.sections(), total_entries=self.store.count())

    def board_html(self, task: str, objective: str, link: Link = server_link) -> str:
        lb_task, obj = get_task(task), OBJECTIVES[objective]
        rows = leaderboard(self.store, lb_task.name, obj)
        return self._render("board.html", link, task=lb_task, objective=obj, rows=rows)

    def entry_html(self, entry: Any, link: Link = server_link) -> str:
        return self._render("entry.html", link, **self.entry_context(entry))

    # -- static export -------------------------------------------------------------------------------------

    def export(self, folder: Path) -> int:
        """Write the whole site as static files under ``folder``; returns the number of files written."""
        folder = Path(folder)
        written = 0

        def write(rel: str, text: str) -> None:
            nonlocal written
            atomic_write_text(folder / rel, text)
            written += 1

        write("index.html", self.index_html(static_link(0)))
        tasks_json = []
        for task in all_tasks():
            tasks_json.append(task_json(task))
            for obj in OBJECTIVES.values():
                write(f"tasks/{task.name}/{obj.name}.html", self.board_html(task.name, obj.name, static_link(2)))
                write(f"api/leaderboard/{task.name}/{obj.name}.json",
                      json.dumps(leaderboard(self.store, task.name, obj), indent=2) + "\n")
        write("api/tasks.json", json.dumps(tasks_json, indent=2) + "\n")
        for entry in self.store.entries():
            write(f"entries/{int(entry.id)}.html", self.entry_html(entry, static_link(1)))
            write(f"api/entries/{int(entry.id)}.json", json.dumps(entry_json(entry), indent=2) + "\n")
        return written


def task_json(task: LeaderboardTask) -> dict[str, Any]:
    return {"name": task.name, "title": task.title, "metric": task.metric, "target": task.target,
            "target_label": task.target_label, "dawnbench": task.dawnbench,
            "objectives": [{"name": o.name, "title": o.title, "unit": o.unit, "kind": o.kind}
                           for o in OBJECTIVES.values()]}
