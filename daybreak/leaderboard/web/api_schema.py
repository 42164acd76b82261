"""The leaderboard API's contract: the OpenAPI 3.1 document `daybreak leaderboard serve` publishes at
``/openapi.json`` (and renders as a page at ``/docs``), versioned with the API (:data:`API_VERSION`).

The routes (daybreak.leaderboard.web.app) read their parameters by hand, so that a bad value is a 400 in the
leaderboard's words (an integer is ASCII digits within bounds; a board's query is daybreak.leaderboard.ranking.query's
parser); this module declares what they take and what they answer: each parameter's schema, the three bodies of a
submission, every response body, and one error body, ``{"error": "..."}``, for every error of every route (a page
answers its own 400, 404 and 503 as a short HTML page; the limits the server enforces before any route answer in
JSON). tests/test_leaderboard_api.py holds the document and the server to each other with schemathesis.

:data:`API_VERSION` is semantic: a change a client could break on (a field removed or retyped, a parameter or
status code changed) raises the major number, an addition the minor one.
"""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import BaseModel, Field

from daybreak.leaderboard.ingest.importer import MAX_RUN_FILES
from daybreak.leaderboard.ingest.submission import CONTROL_CHARACTERS, PROVENANCES
from daybreak.leaderboard.ranking.query import (
    AVAILABILITIES, CLOCK_RULES, DIVISIONS, MAX_COUNT, MAX_TEXT_CHARS, ORDERS, SORTS,
)
from daybreak.leaderboard.web.limits import MAX_REQUEST_BYTES

API_VERSION = "1.1.0"  # 1.1: 304 (ETag), 429 (per-client budgets), Link
TITLE = "daybreak leaderboard"
MAX_TOP = 1000  # rows one API call returns at most
DEFAULT_TOP = 100
MAX_OFFSET = 10**9
MAX_PAGE = 10**7
MAX_ID = 2**31 - 1  # ids are INTEGER columns: a larger number is no id (and would overflow PostgreSQL's int4)
MAX_TASK_CHARS = 64
SECURITY_SCHEME = "submitterToken"

DESCRIPTION = f"""\
The leaderboard's JSON API and pages. Every error of the API is one JSON object, `{{"error": "..."}}` (schema
`Error`); a page (`/`, `/tasks/...`, `/entries/...`) answers its own errors as a short HTML page. Uploads
(`POST /api/submissions`) and reproduction requests need a submitter token from the host:
`Authorization: Bearer TOKEN`. Limits: a request body of at most {MAX_REQUEST_BYTES:,} bytes by default (413), a
request head of at most 16 KiB (431), a body sent within 30 s (408); a client (an address, or an IPv6 /64) that
sends more requests a second, or takes more of the server's time, than its share gets a 429 with `Retry-After`,
and too many connections from one client or in all a 503 with `Retry-After`. A page or answer that has not
changed since the `ETag` a client sends in `If-None-Match` is a 304 without a body. Integer parameters are ASCII
digits within their bounds; a parameter sent empty (`?sort=`) takes its default, as a form's empty fields do.
A board's filters intersect: an empty range (`min_count=9&max_count=8`) is a board with no rows.
This document is served at `/openapi.json` and as a page at `/docs`; `info.version` is the API's version."""


# --- bodies ------------------------------------------------------------------------------------------------------


class Error(BaseModel):
    """Every error the API answers: one line saying what was wrong (the field, the limit, the known values)."""

    error: str = Field(description="what was wrong, on one line")


class ObjectiveInfo(BaseModel):
    name: str
    title: str
    unit: str
    kind: str = Field(description="train or inference: which entries the objective ranks")


class TaskInfo(BaseModel):
    """A task of the leaderboard and the objectives each of its boards ranks."""

    name: str
    title: str
    metric: str
    target: float
    target_label: str
    dawnbench: bool = Field(description="one of DAWNBench v1's own tasks")
    clock_rules: str
    notes: list[str]
    objectives: list[ObjectiveInfo]


class Rules(BaseModel):
    """The rule set a time follows: DAWNBench v1's clock, or MLPerf Training's (with its round and division)."""

    clock_rules: str
    label: str
    mlperf_round: str | None = None
    division: str | None = None
    availability: str | None = None
    target: float | None = None
    target_label: str | None = None


class Runs(BaseModel):
    """A multi-run entry (a `daybreak repeat`): its ranked time is the olympic mean of the reached runs' times."""

    n: int
    reached: int
    reached_fraction: float
    cv: float | None
    times_s: list[float]
    score: str


class Reproduction(BaseModel):
    status: str | None
    ratio: float | None
    reproduced_by: int | None
    reproduction_of: int | None


class BoardRow(BaseModel):
    """One ranked row of a board. With ``ref``, each row also has its value as a ratio to the reference's."""

    rank: int
    value: float
    unit: str
    display: str
    model: str
    hardware: str
    framework: str
    author: str
    date: str
    source: str
    entry_id: int
    task: str
    objective: str
    accuracy: float
    provenance: str
    provenance_detail: str
    runs: Runs | None
    rule_set: Rules
    reproduction: Reproduction | None
    accelerator: str
    accelerator_count: int | None
    cpu: str
    framework_name: str
    framework_version: str
    cloud_instance: str
    rules: str
    clock_rules: str
    mlperf_round: str
    division: str
    availability: str
    p_value_vs_above: float | None = Field(description="Welch's t-test against the row above (multi-run rows)")
    significant_vs_above: bool | None
    energy_covers: str | None = Field(None, description="energy boards: which counters the joules cover")
    ref_ratio: float | None = Field(None, description="with ref: this row's value / the reference's")
    ref_text: str | None = None


class Entry(BaseModel):
    """One entry: every number the boards rank, its provenance, curve, notes and the submitted document."""

    id: int
    task: str
    kind: str
    model: str
    hardware: str
    framework: str
    author: str
    author_email: str
    code_url: str
    date: str
    submitted_at: str
    imported_at: str
    source: str
    source_format: str
    submitter: str | None
    metric: str
    target: float
    accuracy: float
    accuracy_unit: str
    time_to_target_s: float | None
    epochs_to_target: float | None
    cost_per_hour: float | None
    train_cost_usd: float | None
    latency_ms: float | None
    cost_per_example_usd: float | None
    inference_cost_10k_usd: float | None
    train_energy_j: float | None
    inference_energy_10k_j: float | None
    energy_covers: str | None
    provenance: str
    provenance_detail: str
    rules: Rules
    runs: Runs | None
    reproduction_of: int | None
    reproduced_by: int | None
    reproduction_ratio: float | None
    reproduction_status: str | None
    curve: list[list[float | None]] = Field(description="[hours, accuracy (fraction), epoch or null] per point")
    tsv_columns: list[str]
    notes: list[str]
    document: dict[str, Any] = Field(description="the submitted JSON, as stored")
    content_hash: str


class Job(BaseModel):
    """A reproduction: queued -> running -> done or failed (with its reason)."""

    id: int
    entry_id: int
    status: str
    reason: str
    requested_by: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    attempts: int
    lease: int
    history: list[str]
    result_entry_id: int | None
    url: str


class Stored(BaseModel):
    """What became of a submission: stored (201) or already there (200, ``duplicate``)."""

    stored: bool
    duplicate: bool
    id: int
    url: str
    task: str
    kind: str
    provenance: str


class Queued(BaseModel):
    """A reproduction request: queued now (202) or already queued or running (200)."""

    queued: bool
    job: Job


class Health(BaseModel):
    ok: bool
    entries: int


# --- parameters ----------------------------------------------------------------------------------------------------

# What a text filter may hold: no control character (else a 400), written as \uXXXX escapes: the same pattern in
# ECMA-262 (JSON Schema's) and Python regular expressions. (A lone surrogate, refused too, cannot arrive: a query
# string is decoded from UTF-8, an invalid sequence as U+FFFD.)
_PRINTABLE = "^[^" + "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in CONTROL_CHARACTERS) + "]*$"
_PROVENANCE = "({})?".format("|".join(PROVENANCES))


def _integer(lo: int, hi: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    """An optional query parameter; sent empty it takes its default (as an HTML form's empty fields do)."""
    return {"name": name, "in": "query", "required": False, "allowEmptyValue": True, "schema": schema,
            "description": description}


def _text() -> dict[str, Any]:
    return {"type": "string", "maxLength": MAX_TEXT_CHARS, "pattern": _PRINTABLE}


def _date_schema() -> dict[str, Any]:
    return {"type": "string", "format": "date", "pattern": "^(19|[2-9][0-9])[0-9]{2}-[0-9]{2}-[0-9]{2}$"}


PROVENANCE = _query("provenance", {"type": "string", "maxLength": 200,
                                   "pattern": rf"^\s*{_PROVENANCE}\s*(,\s*{_PROVENANCE}\s*)*$"},
                    "keep these provenances (a comma list: reproduced, daybreak-run, self-reported)")
BOARD_QUERY = [
    _query("accelerator", _text(), "only entries on this accelerator (NVIDIA V100; case does not matter)"),
    _query("framework", _text(), "only entries of this framework (PyTorch; case does not matter)"),
    _query("min_count", _integer(0, MAX_COUNT), "at least this many accelerators"),
    _query("max_count", _integer(0, MAX_COUNT), "at most this many accelerators"),
    _query("since", _date_schema(), "submitted on or after this date"),
    _query("until", _date_schema(), "submitted on or before this date"),
    _query("year", _integer(1900, 9999), "submitted in this year"),
    PROVENANCE,
    _query("rules", {"type": "string", "enum": list(CLOCK_RULES)}, "the clock rules the time follows"),
    _query("division", {"type": "string", "enum": list(DIVISIONS)}, "MLPerf division"),
    _query("availability", {"type": "string", "enum": list(AVAILABILITIES)}, "MLPerf availability"),
    _query("sort", {"type": "string", "enum": list(SORTS), "default": "rank"}, "the column to order by"),
    _query("order", {"type": "string", "enum": list(ORDERS), "default": "asc"}, "ascending or descending"),
    _query("ref", _integer(1, MAX_ID), "an entry of this board: each row's value also as a ratio to this entry's "
                                       "(an entry not on the board: 404)"),
]
TOP = _query("top", {**_integer(1, MAX_TOP), "default": DEFAULT_TOP}, "rows to return")
OFFSET = _query("offset", {**_integer(0, MAX_OFFSET), "default": 0}, "rows to skip")
PAGE = _query("page", {**_integer(1, MAX_PAGE), "default": 1}, "the page of 100 rows")


def path_schemas(tasks: Sequence[str], objectives: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The path parameters' schemas (the routes take them as text: anything else is a 404)."""
    return {"task": {"type": "string", "enum": list(tasks)},
            "objective": {"type": "string", "enum": list(objectives)},
            "entry_id": _integer(1, MAX_ID), "job_id": _integer(1, MAX_ID)}


# --- a submission's three bodies -------------------------------------------------------------------------------------

_RECORD_KINDS = ["daybreak.run", "daybreak.inference", "daybreak.repeat"]
_SUBMISSION = ("the submission: a DAWNBench v1 JSON, daybreak's result.json or inference.json, or a `daybreak "
               "repeat` summary.json")
_TSV = "a DAWNBench v1 training submission's TSV (epoch, hours, top1Accuracy or the task's metric, one row a line)"
_RUN = f"with a repeat summary, the result.json of each of its runs (at most {MAX_RUN_FILES})"
_TASK = "the task, when the JSON does not say (a DAWNBench file)"


def request_body_schemas(tasks: Sequence[str]) -> dict[str, dict[str, Any]]:
    task = {"type": "string", "enum": list(tasks), "description": _TASK}
    binary = {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
    return {
        "SubmissionJson": {
            "title": "SubmissionJson", "type": "object", "additionalProperties": True,
            "description": "A daybreak record (result.json: kind daybreak.run; inference.json: kind "
                           "daybreak.inference) or a DAWNBench v1 inference JSON (no kind; `?task=` names its task). "
                           "A DAWNBench training JSON needs its TSV and a repeat summary its runs: send those as a "
                           "form. Every string at most 1,000 characters, every number finite.",
            "properties": {"kind": {"type": "string", "enum": _RECORD_KINDS,
                                    "description": "daybreak's records say what they are; a DAWNBench file has none"}},
        },
        "SubmissionForm": {
            "title": "SubmissionForm", "type": "object", "required": ["submission"], "additionalProperties": False,
            "description": "multipart/form-data: the files as they are on disk.",
            "properties": {"submission": {**binary, "description": _SUBMISSION}, "tsv": {**binary, "description": _TSV},
                           "run": {"type": "array", "items": binary, "maxItems": MAX_RUN_FILES, "description": _RUN},
                           "task": task},
        },
        "SubmissionUrlencoded": {
            "title": "SubmissionUrlencoded", "type": "object", "required": ["submission"],
            "additionalProperties": False, "description": "application/x-www-form-urlencoded: the files' text.",
            "properties": {"submission": {"type": "string", "description": _SUBMISSION + " (its text)"},
                           "tsv": {"type": "string", "description": _TSV},
                           "run": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_RUN_FILES,
                                   "description": _RUN},
                           "task": task},
        },
    }


SUBMISSION_BODY: dict[str, Any] = {
    "required": True,
    "description": "One submission, as a form (the files: multipart, or their text: urlencoded) or one JSON record. "
                   f"The whole request is at most {MAX_REQUEST_BYTES:,} bytes by default.",
    "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/SubmissionJson"}},
        "multipart/form-data": {
            "schema": {"$ref": "#/components/schemas/SubmissionForm"},
            "encoding": {"submission": {"contentType": "application/json"},
                         "tsv": {"contentType": "text/tab-separated-values"},
                         "run": {"contentType": "application/json"}},
        },
        "application/x-www-form-urlencoded": {"schema": {"$ref": "#/components/schemas/SubmissionUrlencoded"}},
    },
}


def submission_task(tasks: Sequence[str]) -> dict[str, Any]:
    return _query("task", {"type": "string", "enum": list(tasks)}, "with a JSON body, the task when the JSON does "
                                                                   "not say (a DAWNBench inference JSON)")


# --- responses --------------------------------------------------------------------------------------------------------

_ERROR_JSON = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_HTML = {"text/html": {"schema": {"type": "string"}}}
WHY = {
    400: "a parameter with a bad value, or a request the server cannot read (a bad Content-Length, a form it "
         "cannot parse, unexpected form fields)",
    401: "no submitter token, or not one of the host's (`Authorization: Bearer TOKEN`)",
    403: "submissions are closed: the server was started without --token-file",
    404: "not found",
    408: "the request body did not arrive within the body timeout (30 s by default)",
    413: f"the request body is over the limit ({MAX_REQUEST_BYTES:,} bytes by default)",
    415: "a body that is neither a form (multipart/form-data, urlencoded) nor application/json",
    422: "a submission the leaderboard refuses: the message names the field and why; nothing is stored",
    431: "the request head (request line and headers) is over 16 KiB",
    429: "your address (an IPv6 /64) sent more requests a second, or took more of the server's time, than its "
         "share, or sends too many bodies at once: try again after Retry-After seconds",
    503: "the database cannot be reached, or too many connections (from your address, or in all): try again after "
         "Retry-After seconds",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "required": True, "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "seconds to wait", "required": True, "schema": {"type": "string"}}},
    503: {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}},
}
COMMON = (400, 408, 413, 429, 431, 503)  # the limits every request is held to, before any route


def responses(ok: dict[int | str, dict[str, Any]], *codes: int, page: bool = False,
              why: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """An operation's responses: ``ok`` (its successes), then each error code in ``codes`` and every COMMON one, each
    with the Error body (a page's own 400, 404 and 503 are HTML: a page declares both). ``why``: the operation's
    own words for a code."""
    out = dict(ok)
    for code in sorted({*codes, *COMMON}):
        content: dict[str, Any] = dict(_ERROR_JSON)
        if page and code in (400, 404, 503):
            content = {**_HTML, **(_ERROR_JSON if code != 404 else {})}
        answer: dict[str, Any] = {"description": (why or {}).get(code, WHY[code]), "content": content}
        if code in _HEADERS:
            answer["headers"] = _HEADERS[code]
        out[code] = answer
    return out


def ok_json(model: Any, description: str, code: int = 200, **extra: Any) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": model, "description": description, **extra}}


# a GET answered from the page cache: its validators, and a 304 when the client's still hold
VALIDATORS = {"ETag": {"description": "the answer's entity tag (a hash of its body)", "schema": {"type": "string"}},
              "Last-Modified": {"description": "when the data it shows last changed", "schema": {"type": "string"}}}
NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "not modified: the ETag sent in If-None-Match (or the If-Modified-Since date) still holds",
          "headers": VALIDATORS}}


OK_HTML: dict[int | str, dict[str, Any]] = {200: {"description": "the page", "content": _HTML, "headers": VALIDATORS},
                                             **NOT_MODIFIED}
TOTAL_COUNT = {"X-Total-Count": {"description": "rows the board's filters keep, all pages together", "required": True,
                                 "schema": {"type": "string", "pattern": "^[0-9]+$"}},
               "Link": {"description": "the first, previous and next pages (RFC 8288: rel=first, prev, next)",
                        "schema": {"type": "string"}},
               **VALIDATORS}
ENTRY_LINK = {"GetEntry": {"operationId": "get_entry", "parameters": {"entry_id": "$response.body#/id"},
                           "description": "the stored entry"}}
FIRST_ROW_LINK = {"GetEntry": {"operationId": "get_entry", "parameters": {"entry_id": "$response.body#/0/entry_id"},
                               "description": "the first row's entry"}}
REPRODUCE_LINK = {"ReproduceEntry": {"operationId": "reproduce_entry", "parameters": {"entry_id": "$response.body#/id"},
                                     "description": "queue a reproduction of this entry"}}
JOB_LINK = {"GetJob": {"operationId": "get_job", "parameters": {"job_id": "$response.body#/job/id"},
                       "description": "the reproduction's job"}}


# --- the document -------------------------------------------------------------------------------------------------


def openapi_document(routes: Sequence[Any], tasks: Sequence[str], objectives: Sequence[str]) -> dict[str, Any]:
    """The OpenAPI document of the app's ``routes``: FastAPI's, with the path parameters' schemas (the routes take
    them as text), the submission bodies' schemas and the submitter token's security scheme filled in."""
    from fastapi.openapi.utils import get_openapi

    document = get_openapi(title=TITLE, version=API_VERSION, description=DESCRIPTION, routes=list(routes))
    schemas = path_schemas(tasks, objectives)
    for item in document["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path":
                    parameter["schema"] = schemas[parameter["name"]]
            # FastAPI declares a 422 of its own validation wherever a route has a parameter; these routes take
            # theirs as text, which that validation never refuses: their 422s are the ones declared above
            if _fastapi_validation(operation["responses"].get("422")):
                del operation["responses"]["422"]
    components = document.setdefault("components", {})
    components["schemas"] = {name: schema for name, schema in components.get("schemas", {}).items()
                             if name not in ("HTTPValidationError", "ValidationError")}
    components["schemas"]["Error"] = Error.model_json_schema()  # the error bodies' (declared by reference)
    components["schemas"].update(request_body_schemas(tasks))
    components["securitySchemes"] = {SECURITY_SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "a submitter token from the host's token file (`serve --token-file`)"}}
    return document


def _fastapi_validation(answer: dict[str, Any] | None) -> bool:
    schema = (answer or {}).get("content", {}).get("application/json", {}).get("schema", {})
    return bool(schema.get("$ref", "").endswith("/HTTPValidationError"))


# --- the /docs page -----------------------------------------------------------------------------------------------


def operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The document's operations, in its order, as the /docs page lists them."""
    out = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            body = op.get("requestBody", {}).get("content", {})
            out.append({
                "method": method.upper(), "path": path, "id": op.get("operationId", ""),
                "summary": op.get("summary", ""), "description": op.get("description", ""),
                "secured": bool(op.get("security")),
                "parameters": [{"name": p["name"], "in": p["in"], "required": p.get("required", False),
                                "type": schema_text(p.get("schema", {})), "description": p.get("description", "")}
                               for p in op.get("parameters", [])],
                "bodies": [{"type": media, "schema": schema_text(content.get("schema", {}))}
                           for media, content in body.items()],
                "responses": [{"code": code, "description": answer.get("description", ""),
                               "types": [f"{media}: {schema_text(c.get('schema', {}))}"
                                         for media, c in answer.get("content", {}).items()]}
                              for code, answer in op.get("responses", {}).items()],
            })
    return out


def schema_text(schema: dict[str, Any]) -> str:
    """A schema in a few words: ``Entry``, ``array of BoardRow``, ``integer 1 to 1000``, ``one of rank, model``."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(schema_text(s) for s in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {schema_text(schema.get('items', {}))}"
    if kind == "integer" and "minimum" in schema and "maximum" in schema:
        return f"integer {_number(schema['minimum'])} to {_number(schema['maximum'])}"
    if kind == "string" and schema.get("format") in ("binary", "date"):
        return "file" if schema["format"] == "binary" else "date (YYYY-MM-DD)"
    if kind == "string" and "maxLength" in schema:
        return f"string (at most {schema['maxLength']:,} characters)"
    return str(kind)


def _number(n: int) -> str:
    return f"{n:,}" if n >= 10_000 else str(n)  # 1,000,000 but 1900


def component_fields(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each component schema with its fields (name, type, required, description), for the /docs page."""
    out = []
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        required = set(schema.get("required", []))
        fields = [{"name": field, "type": schema_text(sub), "required": field in required,
                   "description": sub.get("description", "")}
                  for field, sub in schema.get("properties", {}).items()]
        out.append({"name": name, "description": schema.get("description", ""), "fields": fields})
    return out

