"""Reproduction jobs: queue one (``POST /api/entries/{id}/reproduce``, with a submitter token) and read one. A job
is shown without internal names: not the token's name, not the worker's host and process (pages.job_json)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for
from daybreak.leaderboard.web import api_schema as api
from daybreak.leaderboard.web.cache import Rendered, as_json, cached
from daybreak.leaderboard.web.errors import error, id_param
from daybreak.leaderboard.web.pages import job_json
from daybreak.leaderboard.web.routes.submissions import submitter

router = APIRouter(tags=["api"])


@router.post("/api/entries/{entry_id}/reproduce", operation_id="reproduce_entry",
             summary="Queue a reproduction of an entry on the host",
             responses=api.responses({**api.ok_json(api.Queued, "already queued or running", links=api.JOB_LINK),
                                      **api.ok_json(api.Queued, "queued", 202, links=api.JOB_LINK)},
                                     401, 403, 404, 422,
                                     why={404: "no such entry", 422: "the entry cannot be reproduced here (it names "
                                                                     "no daybreak task and recipe)"}),
             openapi_extra={"security": [{api.SECURITY_SCHEME: []}]})
async def api_reproduce(entry_id: str, request: Request) -> JSONResponse:
    requester = submitter(request)
    number = id_param(entry_id, api.MAX_ID)
    store = request.app.state.store
    entry = None if number is None else await run_in_threadpool(store.get, number)
    if entry is None:
        return error(404, "no such entry")
    try:
        plan_for(entry)
    except ReproduceError as e:
        return error(422, f"entry {entry.id} cannot be reproduced: {e}")
    job, created = await run_in_threadpool(store.enqueue, entry.id, requester)
    return JSONResponse({"queued": created, "job": job_json(job)}, status_code=202 if created else 200)


@router.get("/api/jobs/{job_id}", operation_id="get_job", summary="A reproduction's job",
            responses=api.responses({**api.ok_json(api.Job, "the job", headers=api.VALIDATORS), **api.NOT_MODIFIED},
                                    404, why={404: "no such job"}))
async def api_job(job_id: str, request: Request) -> Response:
    number = id_param(job_id, api.MAX_ID)
    if number is None:
        return error(404, "no such job")
    store = request.app.state.store

    def render() -> Rendered:
        job = store.get_job(number)
        return as_json({"error": "no such job"}, 404) if job is None else as_json(job_json(job))

    return await cached(request, ("job", number), ("jobs",), render)
