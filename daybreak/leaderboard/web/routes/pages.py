"""The web pages: every board's first rows (``/``), one board (``/tasks/{task}/{objective}``), one entry, the API's
page (``/docs``). Each answered from the page cache (daybreak.leaderboard.web.cache) while what it shows stands."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from daybreak.leaderboard.ranking.objectives import OBJECTIVES
from daybreak.leaderboard.tasks import task_names
from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.cache import Rendered, cached, html
from daybreak.leaderboard.web.errors import board_query, id_param, int_param, not_found_page, provenance_param

router = APIRouter(tags=["pages"])


@router.get("/", response_class=HTMLResponse, operation_id="index_page", summary="Every board's first rows",
            responses=api.responses(api.OK_HTML, page=True), openapi_extra={"parameters": [api.PROVENANCE]})
async def index(request: Request) -> Response:
    provenance = provenance_param(request.query_params.get("provenance"))
    site = request.app.state.site
    return await cached(request, ("index", tuple(provenance or ())), ("entries",),
                        lambda: html(site.index_html(provenance=provenance)))


@router.get("/tasks/{task}/{objective}", response_class=HTMLResponse, operation_id="board_page",
            summary="One board, filtered, sorted and paged",
            responses=api.responses(api.OK_HTML, 404, page=True, why={404: "no such board, or a ref not on it"}),
            openapi_extra={"parameters": [api.PAGE, *api.BOARD_QUERY]})
async def board(task: str, objective: str, request: Request) -> Response:
    if task not in task_names() or objective not in OBJECTIVES:
        return HTMLResponse(not_found_page("leaderboard"), status_code=404)
    page = int_param(request.query_params.get("page"), "page", 1, api.MAX_PAGE, 1)
    query = board_query(request.query_params)
    site = request.app.state.site
    key = ("board", task, objective, page, tuple(sorted(query.params().items())))
    return await cached(request, key, ("entries",),
                        lambda: html(site.board_html(task, objective, page=page, query=query)))


@router.get("/entries/{entry_id}", response_class=HTMLResponse, operation_id="entry_page",
            summary="One entry: its curve, provenance, runs and metadata",
            responses=api.responses(api.OK_HTML, 404, page=True, why={404: "no such entry"}))
async def entry_page(entry_id: str, request: Request) -> Response:
    number = id_param(entry_id, api.MAX_ID)
    if number is None:
        return HTMLResponse(not_found_page("entry"), status_code=404)
    store, site = request.app.state.store, request.app.state.site

    def render() -> Rendered:
        entry = store.get(number)
        if entry is None:
            return html(not_found_page("entry"), 404)
        return html(site.entry_html(entry, jobs=store.jobs(entry_id=entry.id, limit=5)))

    return await cached(request, ("entry", number), ("entries", "jobs"), render)


@router.get("/docs", response_class=HTMLResponse, include_in_schema=False)
async def docs(request: Request) -> Response:
    site, document = request.app.state.site, request.app.openapi()
    return await cached(request, ("docs",), (), lambda: html(site.api_html(document)))


@router.get("/favicon.ico", status_code=204, operation_id="favicon", summary="No icon",
            responses=api.responses({204: {"description": "no icon"}}))
def favicon() -> Response:
    return Response(status_code=204)
