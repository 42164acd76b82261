"""The leaderboard's pages (Jinja2, autoescaped) for the web server and the static export.

The same templates serve both: ``link(...)`` makes absolute URLs for the server and relative file paths for the
static site. File and URL names come only from the task and objective registries, integer entry ids and a board
query's static name (daybreak.leaderboard.ranking.query: enumerated values, years, and slugs with a hash for accelerator
and framework names), never from a submission as is.

A board page (``board_html``) is filtered, sorted and paged by a BoardQuery; the static export writes each board,
then one page per sort column and order and one per value of each filter (``tasks/cifar10/train-time/
sort-date-desc.html``, ``.../accelerator-nvidia-v100-3f2a9c1b.html``, ``.../year-2018.html``), linked from it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import quote, urlencode, urlparse

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from daybreak.errors import ConfigError
from daybreak.version import __version__
from daybreak.leaderboard.web import boardpage
from daybreak.leaderboard.web.plot import curve_svg
from daybreak.leaderboard.ranking.query import (
    AVAILABILITIES, CLOCK_RULES, DIVISIONS, FILTERS, ORDERS, SORTS, BoardQuery,
)
from daybreak.leaderboard.ranking.objectives import (
    OBJECTIVES, Objective, format_hms, leaderboard, rules_of, unranked_reason, with_reference,
)
from daybreak.leaderboard.ingest.submission import FORMAT_REPEAT, PROVENANCE_SELF
from daybreak.leaderboard.tasks import LeaderboardTask, all_tasks, leaderboard_task

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store
    from daybreak.metrics import Metric

TEMPLATES = Path(__file__).resolve().parent / "templates"
INDEX_TOP = 10
PAGE_ROWS = 100  # rows per page of a full table on the server
MAX_REPRODUCTIONS = 20  # an entry page on the server lists its latest reproductions (the export lists all)

Link = boardpage.Link


def server_link(kind: str, **kw: Any) -> str:
    """``query``: a BoardQuery (its parameters); ``provenance``: a comma list (the index's filter); ``page``."""
    params = dict(kw["query"].params()) if kw.get("query") is not None else {}
    params.update({k: str(v) for k, v in (("provenance", kw.get("provenance")), ("page", kw.get("page"))) if v})
    suffix = ("?" + urlencode(params)) if params else ""
    if kind == "index":
        return "/" + suffix
    if kind == "board":
        return f"/tasks/{quote(kw['task'])}/{quote(kw['objective'])}" + suffix
    if kind == "entry":
        return f"/entries/{int(kw['entry_id'])}"
    raise ValueError(kind)


def static_link(depth: int) -> Link:
    prefix = "../" * depth

    def link(kind: str, **kw: Any) -> str | None:
        """A board's page for ``query`` (None where the export writes none: see BoardQuery.static_name)."""
        if kind == "index":
            return prefix + "index.html"
        if kind == "board":
            name = (kw.get("query") or BoardQuery()).static_name()
            board = f"{prefix}tasks/{quote(kw['task'])}/{quote(kw['objective'])}"
            return None if name is None else f"{board}.html" if not name else f"{board}/{quote(name)}.html"
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


def accuracy_text(task: LeaderboardTask, accuracy: float, unit: str | None = None, metric: str | None = None) -> str:
    """An entry's accuracy in its own metric: an MLPerf ResNet-50 entry on the imagenet board reached 75.9% top-1,
    not the board's top-5."""
    quality = _other_metric(task, metric)
    if quality is not None:
        text = f"{accuracy * 100:.2f}% {quality.label}" if quality.show_percent else f"{quality.label} {accuracy:.4f}"
    else:
        text = f"F1 {accuracy:.4f}" if task.metric == "f1" else f"{accuracy * 100:.2f}% {task.metric_label}"
    # how the file wrote it (percent or fraction); an MLPerf metric's unit (a loss, a score) is its definition's
    return text + (f" (the file wrote {unit})" if unit in ("percent", "fraction") else "")


def _other_metric(task: LeaderboardTask, metric: str | None) -> Metric | None:
    """The Metric of an entry whose metric is not its board's, or of an MLPerf board; None otherwise."""
    from daybreak.metrics import metric_named

    if metric is None or (metric == task.metric and task.quality is None):
        return None
    return metric_named(metric)


def entry_json(entry: Any) -> dict[str, Any]:
    from daybreak.leaderboard.store.database import run_times

    return {
        "id": entry.id, "task": entry.task, "kind": entry.kind, "model": entry.model, "hardware": entry.hardware,
        "framework": entry.framework, "author": entry.author, "author_email": entry.author_email,
        "code_url": entry.code_url, "date": entry.submitted_at.date().isoformat(),
        "submitted_at": entry.submitted_at.isoformat(), "imported_at": entry.imported_at.isoformat(),
        "source": entry.source, "source_format": entry.source_format, "submitter": entry.submitter,
        "metric": entry.metric, "target": entry.target, "accuracy": entry.accuracy,
        "accuracy_unit": entry.accuracy_unit, "time_to_target_s": _finite(entry.time_to_target_s),
        "epochs_to_target": _finite(entry.epochs_to_target), "cost_per_hour": _finite(entry.cost_per_hour),
        "train_cost_usd": _finite(entry.train_cost_usd), "latency_ms": _finite(entry.latency_ms),
        "cost_per_example_usd": _finite(entry.cost_per_example_usd),
        "inference_cost_10k_usd": _finite(entry.inference_cost_10k_usd),
        "train_energy_j": _finite(entry.train_energy_j),
        "inference_energy_10k_j": _finite(entry.inference_energy_10k_j),
        "energy_covers": entry.energy_covers or None,
        "provenance": entry.provenance or PROVENANCE_SELF, "provenance_detail": entry.provenance_detail or "",
        "rules": rules_of(entry, entry.clock_rules or "dawnbench"),
        "runs": None if not entry.runs_n else {
            "n": entry.runs_n, "reached": entry.runs_reached, "reached_fraction": (entry.runs_reached or 0) /
            entry.runs_n, "cv": _finite(entry.runs_cv), "times_s": run_times(entry), "score": "olympic mean"},
        "reproduction_of": entry.reproduction_of, "reproduced_by": entry.reproduced_by,
        "reproduction_ratio": _finite(entry.reproduction_ratio), "reproduction_status": entry.reproduction_status,
        "curve": entry.curve, "tsv_columns": entry.tsv_columns, "notes": entry.notes, "document": entry.document,
        "content_hash": entry.content_hash,
    }


def job_json(job: Any) -> dict[str, Any]:
    """A job as the public sees it (the API, the entry page): without internal names. Who asked is "a submitter"
    (a token's name is the host's) or "the host"; each worker that took the job is "worker 1", "worker 2", ... in
    the order they took it, in its history and reason (a worker's name is its host, process id and a random tag)."""
    def iso(t: datetime | None) -> str | None:
        return None if t is None else t.isoformat()

    public = _public_names(job)

    def clean(text: str) -> str:
        for name, alias in public:
            text = text.replace(name, alias)
        return text

    return {"id": job.id, "entry_id": job.entry_id, "status": job.status, "reason": clean(job.reason or ""),
            "requested_by": "the host" if job.requested_by in ("", "cli") else "a submitter",
            "created_at": iso(job.created_at), "started_at": iso(job.started_at),
            "finished_at": iso(job.finished_at), "attempts": job.attempts, "lease": job.lease or 0,
            "history": [clean(line) for line in job.history_lines], "result_entry_id": job.result_entry_id,
            "url": f"/api/jobs/{int(job.id)}"}


def _public_names(job: Any) -> list[tuple[str, str]]:
    """(internal name, public alias), longest names first: the workers named in the job's "taken by" lines (and
    its current worker), and who queued it."""
    workers: list[str] = []
    for line in job.history_lines:
        _, _, event = line.partition(" ")
        if event.startswith("taken by ") and event[9:] not in workers:
            workers.append(event[9:])
    if job.worker and job.worker not in workers:
        workers.append(job.worker)
    names = [(name, f"worker {i}") for i, name in enumerate(workers, 1) if name]
    if job.requested_by:
        names.append((f"queued by {job.requested_by}",
                      "queued by " + ("the host" if job.requested_by == "cli" else "a submitter")))
    return sorted(names, key=lambda pair: -len(pair[0]))


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


PROVENANCE_TEXT = {
    "reproduced": "re-run by the host, which reached the target",
    "daybreak-run": "a daybreak run directory imported by the host",
    "self-reported": "submitted: the host has not re-run it",
}


@dataclass
class Board:
    objective: Objective
    rows: list[dict[str, Any]]
    total: int


class Site:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True)
        self.env.globals["provenance_text"] = PROVENANCE_TEXT
        self.env.globals["BoardQuery"] = BoardQuery
        self.env.filters["pct"] = lambda v: "-" if v is None else f"{v * 100:.1f}%"
        self.env.filters["pvalue"] = lambda p: "-" if p is None else (f"{p:.2g}" if p >= 1e-4 else "< 0.0001")

    def _render(self, template: str, link: Link, **context: Any) -> str:
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        context.setdefault("provenance", [])
        return self.env.get_template(template).render(link=link, version=__version__, generated=generated,
                                                      server=link is server_link, **context)

    # -- data ----------------------------------------------------------------------------------------------

    def sections(self, top: int | None = INDEX_TOP, provenance: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every task x objective: the first ``top`` rows (columns only, LIMIT) and the count of the rest. An MLPerf
        benchmark's board is on the index once it holds an entry."""
        out = []
        for task in all_tasks():
            if task.clock_rules == "mlperf" and not self.store.count(task.name):
                continue
            boards = []
            for obj in OBJECTIVES.values():
                rows = leaderboard(self.store, task.name, obj, top=top, provenance=provenance)
                total = self.store.count_ranked(task.name, obj.column, provenance=provenance)
                boards.append(Board(obj, rows, total))
            out.append({"task": task, "boards": boards})
        return out

    def entry_context(self, entry: Any, ranks: dict[str, tuple[int, int]] | None = None,
                      reproductions: list[Any] | None = None, jobs: list[Any] | None = None) -> dict[str, Any]:
        """Everything the entry page shows. ``ranks``/``reproductions``: precomputed by the static export (one
        pass over each board); without them two COUNT queries per objective and one query find them."""
        task = leaderboard_task(entry.task)
        rank_list, unranked = [], []
        for obj in OBJECTIVES.values():
            if obj.kind != entry.kind:
                continue
            if getattr(entry, obj.column) is None:
                unranked.append({"title": obj.title, "reason": unranked_reason(entry, obj)})
                continue
            found = ranks.get(obj.name) if ranks is not None else self.store.rank_of(entry, obj.column)
            if found is None:
                unranked.append({"title": obj.title, "reason": unranked_reason(entry, obj)})
                continue
            rank_list.append({"objective": obj, "rank": found[0], "total": found[1],
                              "display": obj.display(getattr(entry, obj.column))})
        curve = entry.curve
        svg = None
        quality = _other_metric(task, entry.metric)
        label = quality.label if quality is not None else task.metric_label
        percent = quality.show_percent if quality is not None else task.metric != "f1"
        if curve:
            reached = entry.time_to_target_s / 3600.0 if entry.time_to_target_s is not None else None
            svg = curve_svg(curve, entry.target, metric=entry.metric, reached_hours=reached,
                            title=f"{entry.model}: {label} vs. training time", percent=percent,
                            axis=None if percent else label)
        document = entry.document
        runs = document.get("runs") if entry.source_format == FORMAT_REPEAT and isinstance(document, dict) else None
        reproductions_total = None  # all of them are listed
        if reproductions is None:  # the server's page: the latest MAX_REPRODUCTIONS, and how many in all
            reproductions = self.store.reproductions_of(entry.id, limit=MAX_REPRODUCTIONS)
            if len(reproductions) == MAX_REPRODUCTIONS:
                reproductions_total = self.store.count_reproductions(entry.id)
        original = None
        if entry.reproduction_of is not None:
            listed = self.store.list_rows([entry.reproduction_of]) if ranks is None else []
            original = listed[0] if listed else SimpleNamespace(id=entry.reproduction_of, model="entry "
                                                              f"{entry.reproduction_of}")
        return {
            "entry": entry, "task": task, "ranks": rank_list, "unranked": unranked, "svg": svg, "curve": curve,
            "code_href": safe_href(entry.code_url),
            "metric_label": (label[0].upper() + label[1:] + (" (%)" if percent else "") if quality is not None
                             else "Accuracy (%)" if percent else "F1"),
            "accuracy_text": accuracy_text(task, entry.accuracy, entry.accuracy_unit, entry.metric),
            "rules": rules_of(entry, entry.clock_rules or "dawnbench"),
            "document_text": json.dumps(document, indent=2, ensure_ascii=False),
            "hms": format_hms, "runs": runs, "reproductions": reproductions, "original": original,
            "reproductions_total": reproductions_total,
            "jobs": [job_json(j) for j in jobs or []], "reproducible": reproducible_reason(entry),
            "accuracy_significance": next((n for n in entry.notes if n.startswith("final accuracy: ")), None),
            "acc": (lambda a: f"{a * 100:.2f}") if percent else (lambda a: f"{a:.4f}"),
        }

    # -- pages ---------------------------------------------------------------------------------------------

    def index_html(self, link: Link = server_link, provenance: Sequence[str] | None = None) -> str:
        return self._render("index.html", link, sections=self.sections(provenance=provenance),
                            total_entries=self.store.count(), provenance=provenance or [])

    def facets(self, task: str, obj: Objective) -> dict[str, list[tuple[Any, int]]]:
        """Each filter dimension's values on one board, with their numbers of entries (unfiltered)."""
        return {dim: self.store.facets(task, obj.column, dim) for dim in FILTERS}

    def board_html(self, task: str, objective: str, link: Link = server_link, page: int = 1,
                   per_page: int | None = PAGE_ROWS, provenance: Sequence[str] | None = None,
                   rows: list[dict[str, Any]] | None = None, query: BoardQuery | None = None,
                   facets: dict[str, list[tuple[Any, int]]] | None = None) -> str:
        """One board, filtered and ordered by ``query`` (``rows``: all of them, already read: the export)."""
        lb_task, obj = leaderboard_task(task), OBJECTIVES[objective]
        query = (query or BoardQuery()).replace(**({"provenance": tuple(provenance)} if provenance else {}))
        ref = boardpage.reference(self.store, lb_task.name, obj, query)
        if rows is None:
            total = self.store.count_ranked(lb_task.name, obj.column, query=query)
            rows = leaderboard(self.store, lb_task.name, obj, top=per_page, offset=(page - 1) * (per_page or 0),
                               query=query)
        else:
            total = len(rows)
        if ref is not None:
            rows = with_reference([dict(r) for r in rows], ref, obj)
        facets = self.facets(lb_task.name, obj) if facets is None else facets
        server = link is server_link
        filtered = bool(query.filters())
        all_total = self.store.count_ranked(lb_task.name, obj.column) if filtered else total
        return self._render(
            "board.html", link, task=lb_task, objective=obj, rows=rows, total=total, page=page,
            pages=1 if not per_page else max(1, -(-total // per_page)), query=query, ref=ref,
            provenance=list(query.provenance), filtered=filtered, all_total=all_total,
            headers=boardpage.headers(lb_task.name, obj, query, link),
            sort_links=boardpage.sort_links(lb_task.name, obj, query, link) if all_total else [],
            filters=boardpage.filter_groups(facets, lb_task.name, obj, query, link, server),
            choices=boardpage.shown_facets(facets), plots=boardpage.plots(self.store, lb_task.name, obj, query, link),
            sorts=SORTS, orders=ORDERS, rules_choices=CLOCK_RULES, divisions=DIVISIONS, availabilities=AVAILABILITIES)

    def entry_html(self, entry: Any, link: Link = server_link, **context: Any) -> str:
        return self._render("entry.html", link, **self.entry_context(entry, **context))

    def api_html(self, document: dict[str, Any]) -> str:
        """The server's /docs page: the OpenAPI ``document``'s operations and schemas, rendered here (no script:
        it works offline and under the pages' Content-Security-Policy)."""
        from daybreak.leaderboard.web.api_schema import component_fields, operations

        return self._render("api.html", server_link, info=document["info"], openapi=document["openapi"],
                            operations=operations(document), components=component_fields(document))


def reproducible_reason(entry: Any) -> str | None:
    """None when the host can re-run ``entry`` (it names a daybreak task and recipe), else why not."""
    from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for

    try:
        plan_for(entry)
    except ReproduceError as e:
        return str(e)
    return None


def task_json(task: LeaderboardTask) -> dict[str, Any]:
    return {"name": task.name, "title": task.title, "metric": task.metric, "target": task.target,
            "target_label": task.target_label, "dawnbench": task.dawnbench, "clock_rules": task.clock_rules,
            "notes": list(task.notes),
            "objectives": [{"name": o.name, "title": o.title, "unit": o.unit, "kind": o.kind}
                           for o in OBJECTIVES.values()]}
