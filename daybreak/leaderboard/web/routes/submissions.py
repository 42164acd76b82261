"""Uploads: ``POST /api/submissions``, a form (``multipart/form-data`` or urlencoded: ``submission``, ``tsv``,
``run``, ``task``) or an ``application/json`` record, from a holder of a submitter token. The door checked the
token before it read the body (daybreak.leaderboard.web.door); an upload is ``self-reported`` whatever it says."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from daybreak.leaderboard.ingest.importer import MAX_RUN_FILES, parse_submission
from daybreak.leaderboard.ingest.submission import MAX_FILE_BYTES, PROVENANCE_SELF, SubmissionError, one_line
from daybreak.leaderboard.tasks import task_names
from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.errors import Rejected, error
from daybreak.leaderboard.web.tokens import Refusal, authorize

router = APIRouter(tags=["api"])
FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


def submitter(request: Request) -> str:
    """The submitter the door found in the request's token (checked here again where no door stands before the
    app: a 401 or 403 otherwise)."""
    name = request.scope.get("state", {}).get("submitter")
    if name is not None:
        return str(name)
    found = authorize(list(request.scope.get("headers") or []), request.app.state.tokens)
    if isinstance(found, Refusal):
        raise Rejected(found.status, found.message, dict(found.headers))
    return found.name


@router.post("/api/submissions", operation_id="submit", summary="Upload one submission",
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
    name = submitter(request)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    task, source = request.query_params.get("task"), "upload"
    tsv_bytes: bytes | None = None
    run_files: list[tuple[str, bytes]] = []
    if ctype in FORMS:
        json_bytes, tsv_bytes, run_files, source, form_task = await _form(request)
        if form_task is not None:
            task = form_task.strip() or None
    elif ctype == "application/json":
        json_bytes = await request.body()
    else:
        raise Rejected(415, "send a form (multipart/form-data or urlencoded; fields submission, tsv, run, task) or "
                            "application/json")
    if task is not None and len(task) > api.MAX_TASK_CHARS:
        raise Rejected(422, "task name too long")
    try:
        sub = await run_in_threadpool(parse_submission, json_bytes, tsv_bytes, source=source, task=task,
                                      what="submission", tsv_what="tsv", run_files=run_files or None)
    except SubmissionError as e:
        return error(422, str(e))
    sub.provenance = PROVENANCE_SELF  # provenance is the host's to say
    if isinstance(sub.document, dict) and "provenance" in sub.document:
        sub.notes.append("the submission's own 'provenance' field is ignored: the host sets provenance")
    sub.submitter = name
    sub.ranked_at = datetime.now(timezone.utc).replace(tzinfo=None)  # ties: when this server received it
    entry_id, created = await run_in_threadpool(request.app.state.store.add, sub)
    return JSONResponse({"stored": created, "duplicate": not created, "id": entry_id, "url": f"/entries/{entry_id}",
                         "task": sub.task, "kind": sub.kind, "provenance": PROVENANCE_SELF},
                        status_code=201 if created else 200)


async def _form(request: Request) -> tuple[bytes, bytes | None, list[tuple[str, bytes]], str, str | None]:
    """A form's submission, TSV, run records, source name and task (the body was read whole by the door)."""
    try:
        form = await request.form(max_files=MAX_RUN_FILES + 4, max_fields=MAX_RUN_FILES + 4,
                                  max_part_size=MAX_FILE_BYTES)
    except Exception as e:  # noqa: BLE001 - python-multipart/starlette raise several kinds
        detail = getattr(e, "detail", None) or getattr(e, "message", None) or str(e) or type(e).__name__
        raise Rejected(400, f"unreadable multipart form: {one_line(str(detail), 120)}")
    unknown = sorted(set(form.keys()) - {"submission", "tsv", "task", "run"})
    if unknown:
        raise Rejected(400, f"unexpected form field {one_line(unknown[0], 40)!r} (expected submission, tsv, run, task)")
    if len(form.getlist("submission")) != 1 or len(form.getlist("tsv")) > 1 or len(form.getlist("task")) > 1:
        raise Rejected(400, "the form needs exactly one 'submission' and at most one 'tsv' and 'task'")
    if len(form.getlist("run")) > MAX_RUN_FILES:
        raise Rejected(400, f"at most {MAX_RUN_FILES} 'run' records")
    json_bytes, filename = await _part(form.get("submission"))
    tsv_bytes = (await _part(form.get("tsv")))[0] if form.get("tsv") is not None else None
    run_files = []
    for i, run_part in enumerate(form.getlist("run")):
        data, name = await _part(run_part)
        run_files.append((name or f"run {i + 1}", data))
    task = form.get("task")
    if task is not None and not isinstance(task, str):
        raise Rejected(400, "'task' must be a text field")
    return json_bytes, tsv_bytes, run_files, f"upload:{filename}" if filename else "upload", task


async def _part(part: Any) -> tuple[bytes, str]:
    """A form field's bytes and, for a file, its base name (display only: never used as a path)."""
    if isinstance(part, UploadFile):
        data = await part.read(MAX_FILE_BYTES + 1)
        name = (part.filename or "").replace("\\", "/").split("/")[-1]
        return data, one_line(name, 200)
    if isinstance(part, str):
        return part.encode("utf-8"), ""
    raise Rejected(400, "missing form field 'submission'")
