"""`daybreak leaderboard serve`: the leaderboard as a web site (FastAPI, server-rendered Jinja2 pages) + JSON API.

Pages: ``/`` (every task x objective table), ``/tasks/{task}/{objective}`` (one full table),
``/entries/{id}`` (an entry: its accuracy-vs-time curve as inline SVG and all its metadata).
API: ``GET /api/tasks``, ``GET /api/leaderboard/{task}/{objective}?top=N``, ``GET /api/entries/{id}``,
``POST /api/submissions``.

A submission is either a form (``multipart/form-data`` or urlencoded) with the fields ``submission`` (a
DAWNBench v1 JSON, or daybreak's result.json / inference.json), ``tsv`` (the DAWNBench training TSV) and
``task`` (when the JSON does not say), or an ``application/json`` body (daybreak records, DAWNBench inference
JSON; ``?task=`` names the task).
It needs a submitter token from the host's token file, sent as ``Authorization: Bearer TOKEN`` (or
``X-Daybreak-Token``), compared in constant time. Requests are limited to 1 MiB; a rejected submission gets a
4xx with ``{"error": "..."}`` and stores nothing; the same content submitted twice is stored once.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from daybreak.errors import ConfigError
from daybreak.leaderboard.submission import MAX_FILE_BYTES, SubmissionError, one_line

MAX_REQUEST_BYTES = 1024 * 1024
MIN_TOKEN_CHARS = 16
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
    tokens = []
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
    given = presented.encode("utf-8", "replace")
    found = None
    for token in tokens:
        if hmac.compare_digest(given, token.secret):
            found = token
    return found


class _Guard:
    """ASGI middleware: refuse bodies declared over the limit before reading them; add security headers."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            text = length.decode("latin-1").strip()
            if not text.isdigit():
                return await _send_json(send, 400, {"error": "bad Content-Length header"})
            if int(text) > self.limit:
                return await _send_json(send, 413, {"error": f"request body of {int(text):,} bytes is over the "
                                                             f"{self.limit:,}-byte limit"})

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers") or []) + SECURITY_HEADERS
            await send(message)

        return await self.app(scope, receive, send_with_headers)


async def _send_json(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})


class _Rejected(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def create_app(store=None, *, token_file: str | Path | None = None, tokens: list[Token] | None = None,
               max_request_bytes: int = MAX_REQUEST_BYTES):
    """The ASGI app. ``store``: a Store or a database URL (None: the default database)."""
    from daybreak.leaderboard.importer import parse_submission
    from daybreak.leaderboard.ranking import OBJECTIVES, leaderboard
    from daybreak.leaderboard.site import Site, entry_json, task_json
    from daybreak.leaderboard.store import Store
    from daybreak.leaderboard.tasks import all_tasks, task_names

    if store is None or isinstance(store, str):
        store = Store(store)
    if tokens is None and token_file is not None:
        tokens = load_tokens(token_file)
    site = Site(store)
    app = FastAPI(title="daybreak leaderboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store
    app.state.tokens = tokens or []
    app.add_middleware(_Guard, limit=max_request_bytes)

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def not_found_page(what: str) -> HTMLResponse:
        return HTMLResponse(f"<!DOCTYPE html><title>Not found</title><p>{_esc(what)} not found. "
                            '<a href="/">All tasks</a></p>', status_code=404)

    def find_entry(entry_id: str):
        if not entry_id.isdigit() or len(entry_id) > 12:
            return None
        return store.get(int(entry_id))

    @app.exception_handler(_Rejected)
    async def _rejected(request: Request, exc: _Rejected):
        return error(exc.status, exc.message, exc.headers)

    # -- pages -----------------------------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def index():
        return HTMLResponse(site.index_html())

    @app.get("/tasks/{task}/{objective}", response_class=HTMLResponse)
    def board(task: str, objective: str):
        if task not in task_names() or objective not in OBJECTIVES:
            return not_found_page("leaderboard")
        return HTMLResponse(site.board_html(task, objective))

    @app.get("/entries/{entry_id}", response_class=HTMLResponse)
    def entry_page(entry_id: str):
        entry = find_entry(entry_id)
        if entry is None:
            return not_found_page("entry")
        return HTMLResponse(site.entry_html(entry))

    # -- JSON API --------------------------------------------------------------------------------------------

    @app.get("/api/tasks")
    def api_tasks():
        return [task_json(t) for t in all_tasks()]

    @app.get("/api/leaderboard/{task}/{objective}")
    def api_board(task: str, objective: str, top: int | None = None):
        if task not in task_names():
            return error(404, f"unknown task; known: {', '.join(task_names())}")
        if objective not in OBJECTIVES:
            return error(404, f"unknown objective; known: {', '.join(OBJECTIVES)}")
        if top is not None and top < 1:
            return error(400, "top must be at least 1")
        return leaderboard(store, task, objective, top=top)

    @app.get("/api/entries/{entry_id}")
    def api_entry(entry_id: str):
        entry = find_entry(entry_id)
        return error(404, "no such entry") if entry is None else entry_json(entry)

    @app.get("/healthz")
    def healthz():
        return {"ok": True, "entries": store.count()}

    @app.post("/api/submissions")
    async def submit(request: Request):
        submitter = _authorize(request, app.state.tokens)
        body = await _read_limited(request, max_request_bytes)
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        task = request.query_params.get("task")
        tsv_bytes = None
        source = "upload"
        if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
            replay = Request(request.scope, receive=_replay(body))
            try:
                form = await replay.form(max_files=8, max_fields=8, max_part_size=MAX_FILE_BYTES)
            except Exception as e:  # noqa: BLE001 - python-multipart/starlette raise several kinds
                detail = getattr(e, "detail", None) or getattr(e, "message", None) or str(e) or type(e).__name__
                raise _Rejected(400, f"unreadable multipart form: {one_line(str(detail), 120)}")
            unknown = sorted(set(form.keys()) - {"submission", "tsv", "task"})
            if unknown:
                raise _Rejected(400, f"unexpected form field {one_line(unknown[0], 40)!r} "
                                     "(expected submission, tsv, task)")
            if len(form.getlist("submission")) != 1 or len(form.getlist("tsv")) > 1 or len(form.getlist("task")) > 1:
                raise _Rejected(400, "the form needs exactly one 'submission' and at most one 'tsv' and 'task'")
            part = form.get("submission")
            json_bytes, filename = await _part(part, UploadFile)
            if filename:
                source = f"upload:{filename}"
            if form.get("tsv") is not None:
                tsv_bytes, _ = await _part(form.get("tsv"), UploadFile)
            form_task = form.get("task")
            if form_task is not None:
                if not isinstance(form_task, str):
                    raise _Rejected(400, "'task' must be a text field")
                task = form_task.strip() or None
        elif ctype == "application/json":
            json_bytes = body
        else:
            raise _Rejected(415, "send a form (multipart/form-data or urlencoded; fields submission, tsv, task) "
                                 "or application/json")
        if task is not None and len(task) > 64:
            raise _Rejected(422, "task name too long")
        try:
            sub = await run_in_threadpool(parse_submission, json_bytes, tsv_bytes, source=source, task=task,
                                          what="submission", tsv_what="tsv")
        except SubmissionError as e:
            return error(422, str(e))
        sub.submitter = submitter
        entry_id, created = await run_in_threadpool(store.add, sub)
        return JSONResponse({"stored": created, "duplicate": not created, "id": entry_id,
                             "url": f"/entries/{entry_id}", "task": sub.task, "kind": sub.kind},
                            status_code=201 if created else 200)

    @app.get("/favicon.ico")
    def favicon():
        return Response(status_code=204)

    return app


def _esc(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def _authorize(request, tokens: list[Token]) -> str:
    if not tokens:
        raise _Rejected(403, "submissions are closed: this server was started without --token-file")
    header = request.headers.get("authorization", "")
    presented = header[7:].strip() if header[:7].lower() == "bearer " else request.headers.get("x-daybreak-token")
    if not presented:
        raise _Rejected(401, "a submitter token is required (Authorization: Bearer TOKEN)",
                        {"WWW-Authenticate": "Bearer"})
    token = match_token(tokens, presented.strip())
    if token is None:
        raise _Rejected(401, "invalid submitter token", {"WWW-Authenticate": "Bearer"})
    return token.name


async def _read_limited(request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _Rejected(413, f"request body over the {limit:,}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


def _replay(body: bytes):
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


async def _part(part: Any, upload_type) -> tuple[bytes, str]:
    """A form field's bytes and, for a file, its base name (display only: never used as a path)."""
    if isinstance(part, upload_type):
        data = await part.read(MAX_FILE_BYTES + 1)
        name = (part.filename or "").replace("\\", "/").split("/")[-1]
        return data, one_line(name, 200)
    if isinstance(part, str):
        return part.encode("utf-8"), ""
    raise _Rejected(400, "missing form field 'submission'")
