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

A submission is either a form (``multipart/form-data`` or urlencoded) with the fields ``submission`` (a
DAWNBench v1 JSON, daybreak's result.json / inference.json, or a repeat's summary.json), ``tsv`` (the DAWNBench
training TSV), ``run`` (one per run of a repeat summary: its result.json) and ``task`` (when the JSON does not
say), or an ``application/json`` body (daybreak records, DAWNBench inference JSON; ``?task=`` names the task).
It needs a submitter token from the host's token file, sent as ``Authorization: Bearer TOKEN`` (the only header
read for it), compared in constant time on the raw bytes. Everything uploaded is ``self-reported``,
whatever it says about itself; a rejected submission gets a 4xx with ``{"error": "..."}`` and stores nothing;
the same content submitted twice is stored once.

Limits (see :class:`Limits`): request bodies (1 MiB, counted as they arrive, whether or not a Content-Length is
sent), request heads (16 KiB), time to send a request head (10 s) and a body (30 s), idle keep-alive (5 s), a
connection's lifetime (5 min), concurrent connections (200; more get a 503), and per client address 32 connections
and 8 stalled request heads (a new connection beyond either gets a 503 at once). Integer parameters are ASCII
digits within bounds (400 otherwise). A database that cannot be reached gives a 503 with the reason, not a 500.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from daybreak.errors import ConfigError
from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.api_schema import DEFAULT_TOP, MAX_ID, MAX_OFFSET, MAX_PAGE, MAX_TASK_CHARS, MAX_TOP
from daybreak.leaderboard.web.limits import MAX_REQUEST_BYTES, Limits
from daybreak.leaderboard.ingest.submission import MAX_FILE_BYTES, PROVENANCE_SELF, SubmissionError, one_line

if TYPE_CHECKING:
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from daybreak.leaderboard.ranking.query import BoardQuery
    from daybreak.leaderboard.store.database import Entry, Store

MIN_TOKEN_CHARS = 16
_DIGITS = re.compile(r"^[0-9]{1,19}$", re.ASCII)
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
     b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


@dataclass(frozen=True)
class Token:
    name: str
    secret: bytes


def load_tokens(path: str | Path) -> list[Token]:
    """The host's submitter tokens: one per line, ``TOKEN`` or ``NAME TOKEN``; ``#`` starts a comment line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the token file ({getattr(e, 'strerror', None) or e})") from None
    tokens: list[Token] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) > 2:
            raise ConfigError(f"{path}: line {number}: expected TOKEN or NAME TOKEN")
        name, secret = (parts[0], parts[1]) if len(parts) == 2 else (f"token-{number}", parts[0])
        if len(secret) < MIN_TOKEN_CHARS:
            raise ConfigError(f"{path}: line {number}: token shorter than {MIN_TOKEN_CHARS} characters")
        tokens.append(Token(name[:100], secret.encode("utf-8")))
    if not tokens:
        raise ConfigError(f"{path}: no tokens in the token file")
    return tokens


def match_token(tokens: list[Token], presented: str | None) -> Token | None:
    """Constant-time comparison against every configured token (no early exit on a match)."""
    if not presented:
        return None
    try:
        given = presented.encode("latin-1")  # the header's raw bytes (HTTP headers arrive decoded as latin-1)
    except UnicodeEncodeError:
        given = presented.encode("utf-8", "replace")
    found = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret):
            found = token
    return found


class _Guard:
    """ASGI middleware: bodies over the limit are refused (413: a declared Content-Length before reading, else
    counted as they arrive); a body not received within the time limit gets a 408; security headers on every
    response. A body is read whole before the app sees it (the largest one allowed is 1 MiB)."""

    def __init__(self, app: ASGIApp, limit: int, body_timeout_s: float = 30.0, max_header_bytes: int = 16 * 1024
                 ) -> None:
        self.app = app
        self.limit = limit
        self.body_timeout_s = body_timeout_s
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        # a complete head that arrived at once (the protocol bounds only heads still arriving)
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
            len(k) + len(v) + 4 for k, v in scope.get("headers") or [])
        if head > self.max_header_bytes:
            return await _send_json(send, 431, {"error": f"request head of {head:,} bytes is over the "
                                                         f"{self.max_header_bytes:,}-byte limit"})
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None:
            text = length.decode("latin-1").strip()
            if not _DIGITS.match(text):
                return await _send_json(send, 400, {"error": "bad Content-Length header"})
            if int(text) > self.limit:
                await _send_json(send, 413, {"error": f"request body of {int(text):,} bytes is over the "
                                                      f"{self.limit:,}-byte limit"})
                return await self._drain(receive)
        has_body = (length is not None and length.strip() not in (b"", b"0")) or b"transfer-encoding" in headers
        if has_body:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.body_timeout_s
            chunks: list[bytes] = []
            size = 0
            while True:
                remaining = deadline - loop.time()
                try:
                    if remaining <= 0:
                        raise asyncio.TimeoutError
                    message = await asyncio.wait_for(receive(), remaining)
                except asyncio.TimeoutError:
                    return await _send_json(send, 408, {"error": f"the request body did not arrive within "
                                                                 f"{self.body_timeout_s:g} s"})
                if message["type"] == "http.disconnect":
                    return None
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.limit:
                    await _send_json(send, 413, {"error": f"request body over the {self.limit:,}-byte limit"})
                    return await self._drain(receive, deadline)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            receive = _replay(b"".join(chunks), then=receive)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers") or []) + SECURITY_HEADERS
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    async def _drain(self, receive: Receive, deadline: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        await _drain_body(receive, 4 * self.limit, min(deadline or float("inf"), loop.time() + self.body_timeout_s))


async def _drain_body(receive: Receive, cap: int, deadline: float) -> None:
    """Read and drop what is left of a refused body (at most ``cap`` bytes, until ``deadline``), so the client,
    still sending, reads the error response instead of a connection reset; then the connection is closed."""
    loop = asyncio.get_running_loop()
    size = 0
    while size <= cap:
        remaining = deadline - loop.time()
        if remaining <= 0:
            return
        try:
            message = await asyncio.wait_for(receive(), remaining)
        except asyncio.TimeoutError:
            return
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        size += len(message.get("body", b""))


async def _send_json(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


class _Rejected(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _int_param(text: str | None, name: str, lo: int, hi: int, default: int) -> int:
    """An integer query/path parameter: ASCII digits only (no ``²``, no sign, no 64-bit overflow), in [lo, hi]."""
    if text is None or text == "":
        return default
    if not _DIGITS.match(text) or not lo <= int(text) <= hi:
        raise _Rejected(400, f"{name} must be a whole number from {lo} to {hi:,}")
    return int(text)


def _provenance_param(text: str | None) -> list[str] | None:
    from daybreak.leaderboard.ranking.objectives import parse_provenance

    if text is None:
        return None
    if len(text) > 200:
        raise _Rejected(400, "provenance filter too long")
    try:
        return parse_provenance(text)
    except ConfigError as e:
        raise _Rejected(400, str(e)) from None


def _board_query(params: Mapping[str, str]) -> BoardQuery:
    """The board query of a request's parameters (daybreak.leaderboard.ranking.query); a bad value is a 400."""
    from daybreak.leaderboard.ranking.query import QueryError, parse_query

    try:
        return parse_query(params)
    except QueryError as e:
        raise _Rejected(400, one_line(str(e), 300)) from None


def create_app(store: Store | str | None = None, *, token_file: str | Path | None = None,
               tokens: list[Token] | None = None, max_request_bytes: int = MAX_REQUEST_BYTES,
               limits: Limits | None = None) -> FastAPI:
    """The ASGI app. ``store``: a Store or a database URL (None: the default database). Its OpenAPI document
    (daybreak.leaderboard.web.api_schema) is served at ``/openapi.json`` and as a page at ``/docs``."""
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException

    from daybreak.leaderboard.ingest.importer import MAX_RUN_FILES, parse_submission
    from daybreak.leaderboard.web.boardpage import MissingReference, reference
    from daybreak.leaderboard.ranking.query import QueryError
    from daybreak.leaderboard.ranking.objectives import OBJECTIVES, leaderboard, with_reference
    from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for
    from daybreak.leaderboard.web.pages import Site, entry_json, job_json, task_json
    from daybreak.leaderboard.store.database import Store, StoreError
    from daybreak.leaderboard.tasks import all_tasks, task_names

    limits = limits or Limits(max_body_bytes=max_request_bytes)
    if store is None or isinstance(store, str):
        store = Store(store)
    if tokens is None and token_file is not None:
        tokens = load_tokens(token_file)
    site = Site(store)
    app = FastAPI(title=api.TITLE, version=api.API_VERSION, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    app.state.store = store
    app.state.tokens = tokens or []
    app.state.limits = limits
    app.add_middleware(_Guard, limit=limits.max_body_bytes, body_timeout_s=limits.body_timeout_s,
                       max_header_bytes=limits.max_header_bytes)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = api.openapi_document(app.routes, task_names(), list(OBJECTIVES))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend its document

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def not_found_page(what: str) -> HTMLResponse:
        return HTMLResponse(f"<!DOCTYPE html><title>Not found</title><p>{_esc(what)} not found. "
                            '<a href="/">All tasks</a></p>', status_code=404)

    def find_entry(entry_id: str) -> Entry | None:
        if not _ENTRY_ID.match(entry_id) or int(entry_id) > MAX_ID:
            return None
        return store.get(int(entry_id))

    def is_api(request: Request) -> bool:
        return request.url.path.startswith("/api/") or request.url.path == "/healthz"

    @app.exception_handler(_Rejected)
    async def _rejected(request: Request, exc: _Rejected) -> Response:
        if not is_api(request) and exc.status in (400, 404):
            title = "Bad request" if exc.status == 400 else "Not found"
            return HTMLResponse(f"<!DOCTYPE html><title>{title}</title><p>{_esc(exc.message)}. "
                                '<a href="/">All tasks</a></p>', status_code=exc.status)
        return error(exc.status, exc.message, exc.headers)

    @app.exception_handler(QueryError)
    async def _bad_query(request: Request, exc: QueryError) -> Response:
        status = 404 if isinstance(exc, MissingReference) else 400  # ref names no entry of this board
        return await _rejected(request, _Rejected(status, one_line(str(exc), 300)))

    @app.exception_handler(HTTPException)
    async def _routing_error(request: Request, exc: HTTPException) -> JSONResponse:
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
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """A parameter FastAPI validates (the routes here parse theirs by hand: a route added with typed
        parameters) in the one error body too."""
        errors = exc.errors()
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return error(422, one_line(f"{where}: {first.get('msg', 'invalid')}", 300))

    @app.exception_handler(StoreError)
    async def _unavailable(request: Request, exc: StoreError) -> Response:
        message = f"the leaderboard database is unavailable: {one_line(str(exc), 300)}"
        if is_api(request):
            return error(503, message, {"Retry-After": "30"})
        return HTMLResponse(f"<!DOCTYPE html><title>Unavailable</title><p>{_esc(message)}. Try again in a minute.</p>",
                            status_code=503, headers={"Retry-After": "30"})

    # -- pages -----------------------------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse, operation_id="index_page", tags=["pages"],
             summary="Every board's first rows", responses=api.responses(api.OK_HTML, page=True),
             openapi_extra={"parameters": [api.PROVENANCE]})
    def index(request: Request) -> HTMLResponse:
        provenance = _provenance_param(request.query_params.get("provenance"))
        return HTMLResponse(site.index_html(provenance=provenance))

    @app.get("/tasks/{task}/{objective}", response_class=HTMLResponse, operation_id="board_page", tags=["pages"],
             summary="One board, filtered, sorted and paged",
             responses=api.responses(api.OK_HTML, 404, page=True, why={404: "no such board, or a ref not on it"}),
             openapi_extra={"parameters": [api.PAGE, *api.BOARD_QUERY]})
    def board(task: str, objective: str, request: Request) -> HTMLResponse:
        if task not in task_names() or objective not in OBJECTIVES:
            return not_found_page("leaderboard")
        page = _int_param(request.query_params.get("page"), "page", 1, MAX_PAGE, 1)
        query = _board_query(request.query_params)
        return HTMLResponse(site.board_html(task, objective, page=page, query=query))

    @app.get("/entries/{entry_id}", response_class=HTMLResponse, operation_id="entry_page", tags=["pages"],
             summary="One entry: its curve, provenance, runs and metadata",
             responses=api.responses(api.OK_HTML, 404, page=True, why={404: "no such entry"}))
    def entry_page(entry_id: str) -> HTMLResponse:
        entry = find_entry(entry_id)
        if entry is None:
            return not_found_page("entry")
        return HTMLResponse(site.entry_html(entry, jobs=store.jobs(entry_id=entry.id, limit=5)))

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(site.api_html(app.openapi()))

    # -- JSON API --------------------------------------------------------------------------------------------

    # a route that returns data (not a Response) says response_model=None: its return annotation is for the type
    # checker, not a model FastAPI validates the data with (the document declares the responses: api_schema)
    @app.get("/api/tasks", operation_id="list_tasks", tags=["api"], summary="The tasks and their objectives",
             responses=api.responses(api.ok_json(list[api.TaskInfo], "every task")), response_model=None)
    def api_tasks() -> list[dict[str, Any]]:
        return [task_json(t) for t in all_tasks()]

    @app.get("/api/leaderboard/{task}/{objective}", operation_id="get_board", tags=["api"],
             summary="One board's rows, filtered and sorted",
             responses=api.responses(api.ok_json(list[api.BoardRow], "the rows, best first (or as sorted)",
                                                 headers=api.TOTAL_COUNT, links=api.FIRST_ROW_LINK),
                                     404, why={404: "unknown task or objective, or a ref not on this board"}),
             openapi_extra={"parameters": [api.TOP, api.OFFSET, *api.BOARD_QUERY]})
    def api_board(task: str, objective: str, request: Request) -> JSONResponse:
        if task not in task_names():
            return error(404, f"unknown task; known: {', '.join(task_names())}")
        if objective not in OBJECTIVES:
            return error(404, f"unknown objective; known: {', '.join(OBJECTIVES)}")
        top = _int_param(request.query_params.get("top"), "top", 1, MAX_TOP, DEFAULT_TOP)
        offset = _int_param(request.query_params.get("offset"), "offset", 0, MAX_OFFSET, 0)
        query = _board_query(request.query_params)
        obj = OBJECTIVES[objective]
        ref = reference(store, task, obj, query)
        rows = leaderboard(store, task, obj, top=top, offset=offset, query=query)
        total = store.count_ranked(task, obj.column, query=query)
        return JSONResponse(with_reference(rows, ref, obj) if ref is not None else rows,
                            headers={"X-Total-Count": str(total)})

    @app.get("/api/entries/{entry_id}", operation_id="get_entry", tags=["api"], summary="One entry",
             responses=api.responses(api.ok_json(api.Entry, "the entry", links=api.REPRODUCE_LINK), 404,
                                     why={404: "no such entry"}), response_model=None)
    def api_entry(entry_id: str) -> JSONResponse | dict[str, Any]:
        entry = find_entry(entry_id)
        return error(404, "no such entry") if entry is None else entry_json(entry)

    @app.post("/api/entries/{entry_id}/reproduce", operation_id="reproduce_entry", tags=["api"],
              summary="Queue a reproduction of an entry on the host",
              responses=api.responses({**api.ok_json(api.Queued, "already queued or running", links=api.JOB_LINK),
                                       **api.ok_json(api.Queued, "queued", 202, links=api.JOB_LINK)},
                                      401, 403, 404, 422,
                                      why={404: "no such entry", 422: "the entry cannot be reproduced here (it names "
                                                                      "no daybreak task and recipe)"}),
              openapi_extra={"security": [{api.SECURITY_SCHEME: []}]})
    def api_reproduce(entry_id: str, request: Request) -> JSONResponse:
        requester = _authorize(request, app.state.tokens)
        entry = find_entry(entry_id)
        if entry is None:
            return error(404, "no such entry")
        try:
            plan_for(entry)
        except ReproduceError as e:
            return error(422, f"entry {entry.id} cannot be reproduced: {e}")
        job, created = store.enqueue(entry.id, requester)
        return JSONResponse({"queued": created, "job": job_json(job)}, status_code=202 if created else 200)

    @app.get("/api/jobs/{job_id}", operation_id="get_job", tags=["api"], summary="A reproduction's job",
             responses=api.responses(api.ok_json(api.Job, "the job"), 404, why={404: "no such job"}),
             response_model=None)
    def api_job(job_id: str) -> JSONResponse | dict[str, Any]:
        job = store.get_job(int(job_id)) if _ENTRY_ID.match(job_id) and int(job_id) <= MAX_ID else None
        return error(404, "no such job") if job is None else job_json(job)

    @app.get("/healthz", operation_id="health", tags=["api"], summary="Whether the server and its database answer",
             responses=api.responses(api.ok_json(api.Health, "up, with the number of entries")), response_model=None)
    def healthz() -> dict[str, Any]:
        return {"ok": True, "entries": store.count()}

    @app.post("/api/submissions", operation_id="submit", tags=["api"], summary="Upload one submission",
              responses=api.responses({**api.ok_json(api.Stored, "already stored: the same content, stored once",
                                                     links=api.ENTRY_LINK),
                                       **api.ok_json(api.Stored, "stored", 201, links=api.ENTRY_LINK)},
                                      401, 403, 415, 422),
              openapi_extra={"requestBody": api.SUBMISSION_BODY, "parameters": [api.submission_task(task_names())],
                             "security": [{api.SECURITY_SCHEME: []}]})
    async def submit(request: Request) -> JSONResponse:
        """A DAWNBench v1 JSON with its TSV, daybreak's result.json or inference.json, or a `daybreak repeat`
        summary.json with its runs' result.json. Whatever it says about itself, an upload is ``self-reported``;
        the same content submitted twice is stored once."""
        submitter = _authorize(request, app.state.tokens)
        body = await _read_limited(request, limits.max_body_bytes)
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        task = request.query_params.get("task")
        tsv_bytes = None
        run_files: list[tuple[str, bytes]] = []
        source = "upload"
        if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
            replay = Request(request.scope, receive=_replay(body))
            try:
                form = await replay.form(max_files=MAX_RUN_FILES + 4, max_fields=MAX_RUN_FILES + 4,
                                         max_part_size=MAX_FILE_BYTES)
            except Exception as e:  # noqa: BLE001 - python-multipart/starlette raise several kinds
                detail = getattr(e, "detail", None) or getattr(e, "message", None) or str(e) or type(e).__name__
                raise _Rejected(400, f"unreadable multipart form: {one_line(str(detail), 120)}")
            unknown = sorted(set(form.keys()) - {"submission", "tsv", "task", "run"})
            if unknown:
                raise _Rejected(400, f"unexpected form field {one_line(unknown[0], 40)!r} "
                                     "(expected submission, tsv, run, task)")
            if len(form.getlist("submission")) != 1 or len(form.getlist("tsv")) > 1 or len(form.getlist("task")) > 1:
                raise _Rejected(400, "the form needs exactly one 'submission' and at most one 'tsv' and 'task'")
            if len(form.getlist("run")) > MAX_RUN_FILES:
                raise _Rejected(400, f"at most {MAX_RUN_FILES} 'run' records")
            part = form.get("submission")
            json_bytes, filename = await _part(part, UploadFile)
            if filename:
                source = f"upload:{filename}"
            if form.get("tsv") is not None:
                tsv_bytes, _ = await _part(form.get("tsv"), UploadFile)
            for i, run_part in enumerate(form.getlist("run")):
                data, name = await _part(run_part, UploadFile)
                run_files.append((name or f"run {i + 1}", data))
            form_task = form.get("task")
            if form_task is not None:
                if not isinstance(form_task, str):
                    raise _Rejected(400, "'task' must be a text field")
                task = form_task.strip() or None
        elif ctype == "application/json":
            json_bytes = body
        else:
            raise _Rejected(415, "send a form (multipart/form-data or urlencoded; fields submission, tsv, run, task) "
                                 "or application/json")
        if task is not None and len(task) > MAX_TASK_CHARS:
            raise _Rejected(422, "task name too long")
        try:
            sub = await run_in_threadpool(parse_submission, json_bytes, tsv_bytes, source=source, task=task,
                                          what="submission", tsv_what="tsv", run_files=run_files or None)
        except SubmissionError as e:
            return error(422, str(e))
        # provenance is the host's to say: an upload is self-reported whatever it claims about itself
        sub.provenance = PROVENANCE_SELF
        if isinstance(sub.document, dict) and "provenance" in sub.document:
            sub.notes.append("the submission's own 'provenance' field is ignored: the host sets provenance")
        sub.submitter = submitter
        sub.ranked_at = datetime.now(timezone.utc).replace(tzinfo=None)  # ties: when this server received it
        entry_id, created = await run_in_threadpool(store.add, sub)
        return JSONResponse({"stored": created, "duplicate": not created, "id": entry_id,
                             "url": f"/entries/{entry_id}", "task": sub.task, "kind": sub.kind,
                             "provenance": PROVENANCE_SELF},
                            status_code=201 if created else 200)

    @app.get("/favicon.ico", status_code=204, operation_id="favicon", tags=["pages"], summary="No icon",
             responses=api.responses({204: {"description": "no icon"}}))
    def favicon() -> Response:
        return Response(status_code=204)

    return app


_ENTRY_ID = re.compile(r"^[0-9]{1,12}$", re.ASCII)


def _esc(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def _authorize(request: Request, tokens: list[Token]) -> str:
    if not tokens:
        raise _Rejected(403, "submissions are closed: this server was started without --token-file")
    header = request.headers.get("authorization", "")
    presented = header[7:].strip() if header[:7].lower() == "bearer " else ""
    if not presented:
        hint = (" (X-Daybreak-Token is not read: the token goes in the Authorization header)"
                if "x-daybreak-token" in request.headers else "")
        raise _Rejected(401, f"a submitter token is required (Authorization: Bearer TOKEN){hint}",
                        {"WWW-Authenticate": "Bearer"})
    token = match_token(tokens, presented.strip())
    if token is None:
        raise _Rejected(401, "invalid submitter token", {"WWW-Authenticate": "Bearer"})
    return token.name


async def _read_limited(request: Request, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _Rejected(413, f"request body over the {limit:,}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _replay(body: bytes, then: Receive | None = None) -> Receive:
    """An ASGI receive that gives ``body`` once, then the connection's own messages (``then``: a disconnect when
    the client goes away) or, without one, a disconnect."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if then is not None:
            return await then()
        return {"type": "http.disconnect"}

    return receive


async def _part(part: Any, upload_type: type[UploadFile]) -> tuple[bytes, str]:
    """A form field's bytes and, for a file, its base name (display only: never used as a path)."""
    if isinstance(part, upload_type):
        data = await part.read(MAX_FILE_BYTES + 1)
        name = (part.filename or "").replace("\\", "/").split("/")[-1]
        return data, one_line(name, 200)
    if isinstance(part, str):
        return part.encode("utf-8"), ""
    raise _Rejected(400, "missing form field 'submission'")


# --- the HTTP server -----------------------------------------------------------------------------------------


# guarded_protocol subclasses uvicorn's *private* h11 protocol (uvicorn has no public hook for a head timeout or a
# connection age). It is tested with the uvicorn versions pyproject.toml allows (>=0.30,<0.55: 0.30.0 and 0.54.0
# run the limit tests); what it relies on is listed here and checked by h11_protocol() at start-up and by
# tests/test_leaderboard_cli.py, so a uvicorn that changed it fails loudly instead of serving without the limits.
# The alternative to this dependency is a reverse proxy's own limits (README, Leaderboard).
UVICORN_TESTED = ">=0.30,<0.55"
H11_METHODS = ("connection_made", "data_received", "handle_events", "on_response_complete", "connection_lost")
H11_ATTRIBUTES = ("loop", "transport", "cycle")  # set by H11Protocol.__init__ / connection_made
CYCLE_ATTRIBUTES = ("response_complete", "keep_alive")  # of the RequestResponseCycle in .cycle


def h11_protocol() -> type[H11Protocol]:
    """uvicorn's private ``H11Protocol``, after checking that it still has the methods the guard overrides; a
    one-line ConfigError naming the tested versions if it does not."""
    import uvicorn

    hint = (f"uvicorn {getattr(uvicorn, '__version__', '?')} changed the private h11 protocol the leaderboard's "
            f"connection limits rely on: install uvicorn{UVICORN_TESTED}")
    try:
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError as e:
        raise ConfigError(f"{hint} ({e})") from None
    missing = [name for name in H11_METHODS if not callable(getattr(H11Protocol, name, None))]
    if missing:
        raise ConfigError(f"{hint} (H11Protocol has no {', '.join(missing)})")
    return H11Protocol


REFUSED_LINGER_S = 1.0  # a refused connection is closed this long after its 503
STALLED_AFTER_S = 1.0  # a request head still unfinished this long after it was due counts as stalled


class ClientTable:
    """What each remote address holds of one server: its open connections, and its stalled request heads
    (connections whose head is still unfinished ``STALLED_AFTER_S`` after the connection opened or, on a kept-alive
    connection, after its next head began). A burst of ordinary requests is never counted: their heads arrive within
    a round trip. One event loop uses it: no lock."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.connections: dict[str, int] = {}
        self.stalled: dict[str, int] = {}

    def admit(self, address: str) -> str | None:
        """Count a new connection from ``address`` -> None, or why it is refused (nothing is counted then)."""
        if self.connections.get(address, 0) >= self.limits.max_client_connections:
            return (f"too many connections from your address ({self.limits.max_client_connections} open, the most "
                    "one client may hold)")
        if self.stalled.get(address, 0) >= self.limits.max_client_heads:
            return self.too_many_heads()
        self.add(self.connections, address, 1)
        return None

    def too_many_heads(self) -> str:
        return (f"too many unfinished requests from your address ({self.limits.max_client_heads} connections still "
                "sending their request head)")

    @staticmethod
    def add(table: dict[str, int], address: str, delta: int) -> None:
        count = table.get(address, 0) + delta
        if count > 0:
            table[address] = count
        else:
            table.pop(address, None)


def guarded_protocol(limits: Limits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the timeouts it lacks: a connection must send a complete request head within
    ``header_timeout_s`` of opening (or of its previous response), whether it sends nothing or one byte at a
    time (a partial head gets a 408); a connection older than ``max_connection_s`` is closed after its current
    response. And the per-client limits (:class:`ClientTable`): a connection from an address that already holds
    ``max_client_connections`` connections, or ``max_client_heads`` stalled request heads, gets a 503 at once; a
    head that stalls beyond an address's ``max_client_heads`` gets a 408; so that stalled half-requests from one
    address cannot fill the global ``max_connections``."""
    H11Protocol = h11_protocol()
    clients = ClientTable(limits)

    # a class made from the protocol class h11_protocol() checked: to the checker a base it cannot see (a variable)
    class GuardedH11Protocol(H11Protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            self._grace: asyncio.TimerHandle | None = None  # the head's STALLED_AFTER_S timer
            self._partial = False
            self._old: asyncio.TimerHandle | None = None
            self._address: str | None = None
            self._stalled = False  # counted in clients.stalled
            address = str(self.client[0]) if self.client else ""
            refused = clients.admit(address)
            if refused is not None:
                self._refuse(refused)
                return
            self._address = address
            self._old = self.loop.call_later(limits.max_connection_s, self._too_old)
            self._arm_head()
            self._start_grace()

        def _refuse(self, why: str) -> None:
            """The 503 at once; the connection is closed a second later, without reading from it and without
            counting it against the global limit: a client that reconnects as soon as it is closed does so once a
            second per connection, not thousands of times."""
            self.connections.discard(self)
            body = json.dumps({"error": why}).encode("utf-8")
            self.transport.pause_reading()
            self.transport.write(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                                 b"content-length: " + str(len(body)).encode() + b"\r\nretry-after: 10\r\n"
                                 b"connection: close\r\n\r\n" + body)
            self._old = self.loop.call_later(REFUSED_LINGER_S, self.transport.close)

        def _start_grace(self) -> None:
            if self._grace is None and not self._stalled:
                self._grace = self.loop.call_later(STALLED_AFTER_S, self._head_stalled)

        def _head_stalled(self) -> None:
            """The head is still unfinished: count it; beyond the address's share, end this connection."""
            self._grace = None
            if self._address is None or self._head_timer is None or self.transport.is_closing():
                return
            self._stalled = True
            clients.add(clients.stalled, self._address, 1)
            if clients.stalled[self._address] > limits.max_client_heads:
                self._write_408(clients.too_many_heads())
                self.transport.close()

        def _head_done(self) -> None:
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
            if self._stalled and self._address is not None:
                clients.add(clients.stalled, self._address, -1)
            self._stalled = False

        def _write_408(self, why: str) -> None:
            body = json.dumps({"error": why}).encode("utf-8")  # the API's one error body
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n"
                                 + body)

        def _arm_head(self) -> None:
            self._cancel_head()
            self._partial = False
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timeout)

        def _cancel_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            if self.transport.is_closing():
                return
            if self._partial:
                self._write_408("request head not received in time")
            self.transport.close()

        def _too_old(self) -> None:
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()
            else:
                self.cycle.keep_alive = False  # closed once this response is sent

        def data_received(self, data: bytes) -> None:
            if self._address is None:
                return  # refused: the 503 is on its way, the request is not read
            if self._head_timer is not None:
                self._partial = True
                self._start_grace()  # a kept-alive connection's next head has begun
            super().data_received(data)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._cancel_head()  # a request head arrived; its body has the app's own time limit
                self._head_done()

        def on_response_complete(self) -> None:
            self._arm_head()  # before super(): a pipelined request it starts cancels the timer again
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head()
            if self._old is not None:
                self._old.cancel()
            if self._address is not None:
                self._head_done()
                clients.add(clients.connections, self._address, -1)
                self._address = None
            super().connection_lost(exc)

    return GuardedH11Protocol


def server_config(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, limits: Limits | None = None,
                  **kwargs: Any) -> uvicorn.Config:
    """The uvicorn configuration the leaderboard is served with (``serve`` and the tests use it): the app's
    limits plus the protocol's (head size and time, keep-alive, connection age, concurrent connections)."""
    import uvicorn

    limits = limits or getattr(app.state, "limits", None) or Limits()
    options: dict[str, Any] = dict(log_level="info", lifespan="off", server_header=False, proxy_headers=False)
    options.update(kwargs)
    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits), loop="asyncio",
                          h11_max_incomplete_event_size=limits.max_header_bytes,
                          # uvicorn declares an int; it hands the value to loop.call_later, which takes a float
                          timeout_keep_alive=limits.keep_alive_s,  # type: ignore[arg-type]
                          limit_concurrency=limits.max_connections, **options)
