"""Everything one board page shows besides its rows, for the web server and the static export alike: the sortable
column headers, the filter links (one list per dimension, with the number of entries of each value), the reference
entry of ``?ref=`` and, on a training-time board, the two plots of daybreak.leaderboard.web.boardplot.

Links go through the page's ``link`` function: on the server they keep the other parameters of the query; in the
static export they lead to the pages it writes (one filter or one sort at a time), and a header or option with no
such page is plain text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from daybreak.leaderboard.web.boardplot import (
    cost_time_svg, impossible, impossible_time, pareto_front, points_of, record_history, record_svg,
)
from daybreak.leaderboard.ranking.query import FILTERS, ORDERS, SORTS, BoardQuery, QueryError, acceptable
from daybreak.leaderboard.ranking.objectives import Objective, reference_value

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store

# (sort key, heading); the value column's heading is the objective's and sorts by rank like the rank column
COLUMNS = (("rank", "Rank"), ("rank", None), ("model", "Model"), ("accelerator", "Accelerator"), ("count", "Count"),
           ("framework", "Framework"), ("date", "Date"), ("rules", "Rules"), ("provenance", "Provenance"),
           ("runs", "Runs"))
MLPERF_ONLY = ("rules", "division", "availability")  # listed once the board has an MLPerf entry
RULES_TEXT = {"dawnbench": "DAWNBench v1", "mlperf": "MLPerf"}
ARROWS = {"asc": "\u2191", "desc": "\u2193"}
MAX_PLOT_POINTS = 5000
PLOTTED = "train-time"  # the objective whose board has the plots

# a page's link maker: link("board", task=..., objective=..., query=...), link("entry", entry_id=...), link("index");
# None: a page the static export does not write (a filter's variant without a page of its own)
Link = Callable[..., str | None]


def headers(task: str, obj: Objective, query: BoardQuery, link: Link) -> list[dict[str, Any]]:
    """The table's headings: each links to the board sorted on it (the current sort: the other order)."""
    out = []
    for key, title in COLUMNS:
        active = query.sort == key
        order = ("desc" if query.order == "asc" else "asc") if active else "asc"
        href = link("board", task=task, objective=obj.name, query=query.replace(sort=key, order=order))
        out.append({"title": title or obj.header, "key": key, "href": href, "active": active and title is not None,
                    "order": query.order})
    return out


def sort_links(task: str, obj: Objective, query: BoardQuery, link: Link) -> list[dict[str, Any]]:
    """Every sort column in both orders, keeping the query's filters (the static export: where it has the page)."""
    out = []
    for key in SORTS:
        for order in ORDERS:
            href = link("board", task=task, objective=obj.name, query=query.replace(sort=key, order=order))
            out.append({"label": f"{key} {ARROWS[order]}", "href": href,
                        "on": (query.sort, query.order) == (key, order)})
    return out if any(o["href"] for o in out) else []


def shown_facets(facets: dict[str, list[tuple[Any, int]]]) -> dict[str, list[tuple[Any, int]]]:
    """The dimensions and values a board lists (and the static export writes pages for): values a query takes;
    the MLPerf dimensions once the board has an MLPerf entry."""
    mlperf = any(value == "mlperf" for value, _ in facets.get("rules", []))
    out = {dim: [(v, n) for v, n in values if acceptable(dim, v)] for dim, values in facets.items()
           if mlperf or dim not in MLPERF_ONLY}
    return {dim: values for dim, values in out.items() if values}


def filter_groups(facets: dict[str, list[tuple[Any, int]]], task: str, obj: Objective, query: BoardQuery,
                  link: Link, server: bool) -> list[dict[str, Any]]:
    """One list of links per dimension: "all" and each value with its number of entries. On the server a link
    keeps the query's other filters and its order; in the static export it is the page of that one filter."""
    base = query if server else BoardQuery()
    groups: list[dict[str, Any]] = []
    for dim, values in shown_facets(facets).items():
        current = getattr(query, dim)
        current = ",".join(current) if isinstance(current, tuple) else current
        options: list[dict[str, Any]] = [{"label": "all", "count": None, "on": current in ("", None),
                    "href": link("board", task=task, objective=obj.name, query=base.replace(**{dim: _default(dim)}))}]
        for value, count in values:
            q = base.replace(**{dim: (value,) if dim == "provenance" else value})
            options.append({"label": RULES_TEXT.get(value, value) if dim == "rules" else str(value), "count": count,
                            "on": str(current).lower() == str(value).lower(),
                            "href": link("board", task=task, objective=obj.name, query=q)})
        groups.append({"dim": dim, "title": FILTERS[dim], "options": options})
    return groups


def static_variants(facets: dict[str, list[tuple[Any, int]]]) -> list[BoardQuery]:
    """The pages the static export writes for one board besides the board itself: each sort column in each order,
    and each value of each listed filter dimension (one at a time)."""
    sorts = [BoardQuery(sort=s, order=o) for s in SORTS for o in ORDERS if (s, o) != ("rank", "asc")]
    return sorts + [BoardQuery().replace(**{dim: (v,) if dim == "provenance" else v})
                    for dim, values in shown_facets(facets).items() for v, _ in values]


def _default(dim: str) -> Any:
    return BoardQuery.__dataclass_fields__[dim].default


class MissingReference(QueryError):
    """``ref`` names no entry of this board (a 404 on the web: the parameter is well formed, its entry is absent)."""


def reference(store: Store, task: str, obj: Objective, query: BoardQuery) -> Any | None:
    """The reference entry's list row (None without ``ref``); MissingReference when it has no value on this board."""
    if query.ref is None:
        return None
    found = store.list_rows([query.ref])
    row = found[0] if found else None
    try:
        reference_value(row, task, obj)
    except QueryError as e:
        raise MissingReference(str(e)) from None
    return row


def plots(store: Store, task: str, obj: Objective, query: BoardQuery, link: Link) -> dict[str, Any] | None:
    """The training-time board's two plots over the rows the filters keep (the best MAX_PLOT_POINTS of them)."""
    if obj.name != PLOTTED:
        return None
    ranked = store.ranked(task, obj.column, limit=MAX_PLOT_POINTS, query=query.replace(sort="rank", order="asc"))
    points = points_of([r.entry for r in ranked])
    if not points:
        return None

    def entry_link(entry_id: int) -> str:
        href = link("entry", entry_id=entry_id)
        assert href is not None  # every entry has a page
        return href

    priced = sum(1 for p in points if p.cost_usd and p.cost_usd > 0)
    off_scale = sum(1 for p in points if impossible(p) is not None)
    return {"cost_time": cost_time_svg(points, entry_link), "record": record_svg(points, entry_link),
            "points": len(points), "priced": priced, "unpriced": len(points) - priced,
            "front": len(pareto_front([p for p in points if impossible(p) is None])),
            "records": len(record_history([p for p in points if impossible_time(p) is None])),
            "off_scale": off_scale, "capped": len(points) == MAX_PLOT_POINTS}
