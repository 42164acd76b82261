"""The JSON API's reads: the tasks, a board's rows (paged: ``top``/``offset``, ``X-Total-Count`` and ``Link``), one
entry, and the health check. Answered from the page cache while what they show stands."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from fastapi.responses import Response

from daybreak.leaderboard.ranking.objectives import OBJECTIVES, leaderboard, with_reference
from daybreak.leaderboard.tasks import all_tasks, task_names
from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.boardpage import reference
from daybreak.leaderboard.web.cache import Rendered, as_json, cached
from daybreak.leaderboard.web.errors import board_query, error, id_param, int_param
from daybreak.leaderboard.web.pages import entry_json, task_json

router = APIRouter(tags=["api"])


# a route that returns data (not a Response) says response_model=None: its return annotation is for the type
# checker, not a model FastAPI validates the data with (the document declares the responses: api_schema)
@router.get("/api/tasks", operation_id="list_tasks", summary="The tasks and their objectives",
            responses=api.responses({**api.ok_json(list[api.TaskInfo], "every task", headers=api.VALIDATORS),
                                     **api.NOT_MODIFIED}))
async def api_tasks(request: Request) -> Response:
    return await cached(request, ("tasks",), (), lambda: as_json([task_json(t) for t in all_tasks()]))


@router.get("/api/leaderboard/{task}/{objective}", operation_id="get_board",
            summary="One board's rows, filtered and sorted",
            responses=api.responses({**api.ok_json(list[api.BoardRow], "the rows, best first (or as sorted)",
                                                   headers=api.TOTAL_COUNT, links=api.FIRST_ROW_LINK),
                                     **api.NOT_MODIFIED},
                                    404, why={404: "unknown task or objective, or a ref not on this board"}),
            openapi_extra={"parameters": [api.TOP, api.OFFSET, *api.BOARD_QUERY]})
async def api_board(task: str, objective: str, request: Request) -> Response:
    if task not in task_names():
        return error(404, f"unknown task; known: {', '.join(task_names())}")
    if objective not in OBJECTIVES:
        return error(404, f"unknown objective; known: {', '.join(OBJECTIVES)}")
    top = int_param(request.query_params.get("top"), "top", 1, api.MAX_TOP, api.DEFAULT_TOP)
    offset = int_param(request.query_params.get("offset"), "offset", 0, api.MAX_OFFSET, 0)
    query = board_query(request.query_params)
    store, obj = request.app.state.store, OBJECTIVES[objective]

    def render() -> Rendered:
        ref = reference(store, task, obj, query)
        rows = leaderboard(store, task, obj, top=top, offset=offset, query=query)
        total = store.count_ranked(task, obj.column, query=query)
        links = _page_links(f"/api/leaderboard/{task}/{objective}", query.params(), top, offset, total)
        return as_json(with_reference(rows, ref, obj) if ref is not None else rows,
                       headers=(("X-Total-Count", str(total)), *((("Link", links),) if links else ())))

    key = ("board-json", task, objective, top, offset, tuple(sorted(query.params().items())))
    return await cached(request, key, ("entries",), render)


def _page_links(path: str, params: dict[str, Any], top: int, offset: int, total: int) -> str:
    """RFC 8288 links to the first, previous and next pages of ``top`` rows."""
    def link(at: int, rel: str) -> str:
        return f'<{path}?{urlencode({**params, "top": top, "offset": at})}>; rel="{rel}"'

    links = [link(0, "first")]
    if offset > 0:
        links.append(link(max(0, offset - top), "prev"))
    if offset + top < total:
        links.append(link(offset + top, "next"))
    return ", ".join(links)


@router.get("/api/entries/{entry_id}", operation_id="get_entry", summary="One entry",
            responses=api.responses({**api.ok_json(api.Entry, "the entry", links=api.REPRODUCE_LINK,
                                                   headers=api.VALIDATORS),
                                     **api.NOT_MODIFIED}, 404, why={404: "no such entry"}))
async def api_entry(entry_id: str, request: Request) -> Response:
    number = id_param(entry_id, api.MAX_ID)
    if number is None:
        return error(404, "no such entry")
    store = request.app.state.store

    def render() -> Rendered:
        entry = store.get(number)
        return as_json({"error": "no such entry"}, 404) if entry is None else as_json(entry_json(entry))

    return await cached(request, ("entry-json", number), ("entries",), render)


@router.get("/healthz", operation_id="health", summary="Whether the server and its database answer",
            responses=api.responses(api.ok_json(api.Health, "up, with the number of entries")), response_model=None)
def healthz(request: Request) -> dict[str, Any]:
    return {"ok": True, "entries": request.app.state.store.count()}
