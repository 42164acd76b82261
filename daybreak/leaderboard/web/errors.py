"""The leaderboard's refusals: one error body, ``{"error": "..."}``, for every error of the API (a page's own 400,
404 and 503 are a short HTML page), the exception handlers that make it, and the parameter readers whose bad values
they answer."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from daybreak.errors import ConfigError
from daybreak.leaderboard.ingest.submission import one_line

if TYPE_CHECKING:
    from daybreak.leaderboard.ranking.query import BoardQuery

_DIGITS = re.compile(r"^[0-9]{1,19}$", re.ASCII)
ID = re.compile(r"^[0-9]{1,12}$", re.ASCII)


class Rejected(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def esc(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def not_found_page(what: str) -> str:
    return f'<!DOCTYPE html><title>Not found</title><p>{esc(what)} not found. <a href="/">All tasks</a></p>'


def is_api(request: Request) -> bool:
    return request.url.path.startswith("/api/") or request.url.path == "/healthz"


def int_param(text: str | None, name: str, lo: int, hi: int, default: int) -> int:
    """An integer query/path parameter: ASCII digits only (no ``²``, no sign, no 64-bit overflow), in [lo, hi]."""
    if text is None or text == "":
        return default
    if not _DIGITS.match(text) or not lo <= int(text) <= hi:
        raise Rejected(400, f"{name} must be a whole number from {lo} to {hi:,}")
    return int(text)


def id_param(text: str, most: int) -> int | None:
    """An entry's or job's id from its path, or None (no such row) for anything that is not one."""
    return int(text) if ID.match(text) and int(text) <= most else None


def provenance_param(text: str | None) -> list[str] | None:
    from daybreak.leaderboard.ranking.objectives import parse_provenance

    if text is None:
        return None
    if len(text) > 200:
        raise Rejected(400, "provenance filter too long")
    try:
        return parse_provenance(text)
    except ConfigError as e:
        raise Rejected(400, str(e)) from None


def board_query(params: Mapping[str, str]) -> BoardQuery:
    """The board query of a request's parameters (daybreak.leaderboard.ranking.query); a bad value is a 400."""
    from daybreak.leaderboard.ranking.query import QueryError, parse_query

    try:
        return parse_query(params)
    except QueryError as e:
        raise Rejected(400, one_line(str(e), 300)) from None


def install(app: FastAPI) -> None:
    """Every error the app answers, in the one error body (a page's 400, 404 and 503 as HTML)."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    from daybreak.leaderboard.ranking.query import QueryError
    from daybreak.leaderboard.store.database import StoreError
    from daybreak.leaderboard.web.boardpage import MissingReference

    @app.exception_handler(Rejected)
    async def rejected(request: Request, exc: Rejected) -> Response:
        if not is_api(request) and exc.status in (400, 404):
            title = "Bad request" if exc.status == 400 else "Not found"
            return HTMLResponse(f"<!DOCTYPE html><title>{title}</title><p>{esc(exc.message)}. "
                                '<a href="/">All tasks</a></p>', status_code=exc.status)
        return error(exc.status, exc.message, exc.headers)

    @app.exception_handler(QueryError)
    async def bad_query(request: Request, exc: QueryError) -> Response:
        status = 404 if isinstance(exc, MissingReference) else 400  # ref names no entry of this board
        return await rejected(request, Rejected(status, one_line(str(exc), 300)))

    @app.exception_handler(HTTPException)
    async def routing_error(request: Request, exc: HTTPException) -> JSONResponse:
        """FastAPI's own answers (a path no route serves, a method a route does not take) in the one error body."""
        if exc.status_code == 404:
            message = "not found: no page or API route at this path (the API: /docs)"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow", "")
            message = f"method {one_line(request.method, 20)} not allowed here" + (f" (allowed: {allowed})"
                                                                                   if allowed else "")
        else:
            message = one_line(str(exc.detail), 300)
        return error(exc.status_code, message, dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """A parameter FastAPI validates (the routes here parse theirs by hand: a route added with typed
        parameters) in the one error body too."""
        errors = exc.errors()
        first: Any = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(422, one_line(f"{where}: {first.get('msg', 'invalid')}", 300))

    @app.exception_handler(StoreError)
    async def unavailable(request: Request, exc: StoreError) -> Response:
        message = f"the leaderboard database is unavailable: {one_line(str(exc), 300)}"
        if is_api(request):
            return error(503, message, {"Retry-After": "30"})
        return HTMLResponse(f"<!DOCTYPE html><title>Unavailable</title><p>{esc(message)}. Try again in a minute.</p>",
                            status_code=503, headers={"Retry-After": "30"})
