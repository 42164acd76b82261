"""`daybreak leaderboard serve`: the leaderboard as a web site (FastAPI, server-rendered Jinja2 pages) + JSON API.

Pages: ``/`` (every task x objective table, top 10), ``/tasks/{task}/{objective}?page=N`` (one full table, 100
rows a page, with its filters and, for training time, the time-vs-cost and record plots), ``/entries/{id}`` (an
entry: its accuracy-vs-time curve as inline SVG, provenance, runs, reproductions and all its metadata);
``?provenance=reproduced,daybreak-run`` filters the tables. A board and its API take the board query of
daybreak.leaderboard.ranking.query:
``?accelerator=NVIDIA+V100&framework=PyTorch&min_count=8&since=2018-01-01&year=2018``
``&rules=mlperf&division=closed&availability=available&sort=date&order=desc&ref=ENTRY_ID`` (a bad value: 400).
API: ``GET /api/tasks``, ``GET /api/leaderboard/{task}/{objective}?top=N&offset=M&provenance=...`` (and the board
query), ``GET /api/entries/{id}``, ``POST /api/submissions``, ``POST /api/entries/{id}/reproduce``,
``GET /api/jobs/{id}``; all of it declared in the OpenAPI document served at ``/openapi.json`` and shown at ``/docs``
(daybreak.leaderboard.web.api_schema), every error in one body, ``{"error": "..."}``.

The app is assembled here from one router per area (daybreak.leaderboard.web.routes: pages, api, submissions,
jobs), the door every request passes first (daybreak.leaderboard.web.door: sizes, budgets, the token before the
body, cancelling abandoned requests), the page cache the reads are answered from (daybreak.leaderboard.web.cache:
kept until the data changes, ETag and 304) and the error handlers (daybreak.leaderboard.web.errors). The HTTP
server and its connection limits: daybreak.leaderboard.web.server.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.door import SECURITY_HEADERS, Door
from daybreak.leaderboard.web.errors import error, install
from daybreak.leaderboard.web.limits import MAX_REQUEST_BYTES, Limits
from daybreak.leaderboard.web.server import (
    CYCLE_ATTRIBUTES, H11_ATTRIBUTES, H11_METHODS, UVICORN_TESTED, ClientTable, guarded_protocol, h11_protocol,
    server_config,
)
from daybreak.leaderboard.web.tokens import MIN_TOKEN_CHARS, Token, load_tokens, match_token

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Store

__all__ = ["CYCLE_ATTRIBUTES", "ClientTable", "H11_ATTRIBUTES", "H11_METHODS", "Limits", "MIN_TOKEN_CHARS",
           "SECURITY_HEADERS", "Token", "UVICORN_TESTED", "create_app", "error", "guarded_protocol", "h11_protocol",
           "load_tokens", "match_token", "server_config"]


def create_app(store: Store | str | None = None, *, token_file: str | Path | None = None,
               tokens: list[Token] | None = None, max_request_bytes: int = MAX_REQUEST_BYTES,
               limits: Limits | None = None, page_cache: bool = True) -> FastAPI:
    """The ASGI app. ``store``: a Store or a database URL (None: the default database). Its OpenAPI document
    (daybreak.leaderboard.web.api_schema) is served at ``/openapi.json`` and as a page at ``/docs``.
    ``page_cache=False`` renders every read anew (the load benchmark's baseline)."""
    from daybreak.leaderboard.ranking.objectives import OBJECTIVES
    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.tasks import task_names
    from daybreak.leaderboard.web.cache import PageCache
    from daybreak.leaderboard.web.pages import Site
    from daybreak.leaderboard.web.routes import api as api_routes, jobs, pages, submissions

    limits = limits or Limits(max_body_bytes=max_request_bytes)
    if store is None or isinstance(store, str):
        store = Store(store)
    app = FastAPI(title=api.TITLE, version=api.API_VERSION, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    app.state.store, app.state.limits = store, limits
    app.state.tokens = tokens if tokens is not None else load_tokens(token_file) if token_file is not None else []
    app.state.site = Site(store)
    app.state.cache = PageCache(store, enabled=page_cache)
    for router in (pages.router, api_routes.router, submissions.router, jobs.router):
        app.include_router(router)
    install(app)
    app.add_middleware(Door, limits=limits, tokens=lambda: app.state.tokens)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = api.openapi_document(app.routes, task_names(), list(OBJECTIVES))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its document
    return app


def door_of(app: FastAPI) -> Door | None:
    """The app's door (its stats), once the app has served a request (Starlette builds its middleware then)."""
    stack: Any = app.middleware_stack
    while stack is not None and not isinstance(stack, Door):
        stack = getattr(stack, "app", None)
    return stack if isinstance(stack, Door) else None
