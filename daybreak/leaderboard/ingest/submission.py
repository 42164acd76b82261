"""Submission: one validated, normalized leaderboard entry, whatever file it came from.

Every reader (DAWNBench v1 JSON + TSV, daybreak's result.json and inference.json) turns its input into a
:class:`Submission` or raises :class:`SubmissionError` with a one-line reason. Nothing is stored until a whole
submission has been validated, so a file that cannot be used leaves no partial rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from daybreak.errors import DaybreakError
# CONTROL_CHARACTERS: re-exported for the board's queries
from daybreak.leaderboard.ingest.text_rules import CONTROL_CHARACTERS as CONTROL_CHARACTERS
from daybreak.leaderboard.ingest.text_rules import nfc, nfc_document, printable, text_problem
from daybreak.text import one_line as text_one_line

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

Record = TypeVar("Record", bound="BaseModel")

# Bounds on what one submission may hold. The web server's request limit (1 MiB) covers a JSON and its TSV.
MAX_FILE_BYTES = 1024 * 1024
MAX_TSV_ROWS = 10_000
MAX_FIELD_CHARS = 1_000  # any string of a submitted document, keys included: model, hardware, instance, optimizer,
# ... (the real DAWNBench files stay under 400, a daybreak record's longest string under 300)
MAX_JSON_DEPTH = 32
MAX_SOURCE_CHARS = 500
# Numbers. Every ranked quantity has an upper bound, so that every derived objective stays finite and small
# enough to store, sort and print: hours, USD per hour, ms per example and USD per example are at most
# MAX_QUANTITY (1e6), so a time is at most 3.6e9 s and a cost at most 1e6 h x 1e6 $/h = 1e12 USD (10,000
# examples: 1e10 USD). Any other number anywhere in a submitted JSON (free-form fields included) must be finite
# and at most MAX_ABS_NUMBER in magnitude (1e15: more than the bytes of memory of any machine a record describes).
MAX_QUANTITY = 1e6
MAX_SECONDS = MAX_QUANTITY * 3600.0
MAX_ABS_NUMBER = 1e15
MAX_INT_DIGITS = 20  # a JSON integer literal longer than this is out of range whatever its value
# Energy (joules, from daybreak's hardware counters): at most 1e12 J (1 TJ, about 280 MWh: 10,000 GPUs at 1 kW for a
# day), below the store's ranking bound.
MAX_ENERGY_J = 1e12
# Dates: DAWNBench opened in 2017 (its earliest real submission is dated 2017-10-11); nothing is dated before
# 2017-01-01 or after tomorrow (UTC).
EARLIEST_DATE = datetime(2017, 1, 1)

PROVENANCE_REPRODUCED = "reproduced"  # re-run by the host (`daybreak leaderboard reproduce` / the worker)
PROVENANCE_RUN = "daybreak-run"  # a daybreak run directory imported on the host
PROVENANCE_SELF = "self-reported"  # DAWNBench files, uploads, `daybreak time` records of external programs
PROVENANCES = (PROVENANCE_REPRODUCED, PROVENANCE_RUN, PROVENANCE_SELF)  # most trusted first

FORMAT_DAWNBENCH = "dawnbench-v1"
FORMAT_RUN = "daybreak.run"
FORMAT_INFERENCE = "daybreak.inference"
FORMAT_REPEAT = "daybreak.repeat"

KIND_TRAIN = "train"
KIND_INFERENCE = "inference"


class SubmissionError(DaybreakError):
    """A submission that cannot be used: ``str(err)`` says which field or line and why, on one line."""


@dataclass
class Submission:
    kind: str  # "train" or "inference"
    task: str
    source_format: str  # FORMAT_*
    source: str  # where it came from, for display only (never opened as a path)
    model: str
    hardware: str
    framework: str
    submitted_at: datetime  # naive UTC; DAWNBench's timestamp is a date (midnight)
    metric: str
    target: float  # fraction
    accuracy: float  # fraction: training, at the first row at/above target; inference, the stated accuracy
    accuracy_unit: str  # how the file wrote it: "percent" or "fraction"; an MLPerf metric's unit ("loss", "score")
    document: dict[str, Any]  # the submitted JSON as parsed (all metadata)
    author: str = ""
    author_email: str = ""
    code_url: str = ""
    time_to_target_s: float | None = None
    epochs_to_target: float | None = None
    cost_per_hour: float | None = None
    train_cost_usd: float | None = None
    latency_ms: float | None = None
    cost_per_example_usd: float | None = None
    inference_cost_10k_usd: float | None = None
    # Energy from daybreak's counters (never from a DAWNBench file): joules to the target under DAWNBench's clock,
    # or joules per 10,000 examples of the batch-1 pass; ``energy_covers`` names the kinds ("gpu+cpu_package").
    train_energy_j: float | None = None
    inference_energy_10k_j: float | None = None
    energy_covers: str = ""
    curve: list[tuple[float, float, float | None]] = field(default_factory=list)  # (hours, accuracy, epoch)
    tsv_columns: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    submitter: str | None = None
    content_hash: str = ""
    # Set by the host, never read from the submission: see PROVENANCES.
    provenance: str = PROVENANCE_SELF
    provenance_detail: str = ""
    ranked_at: datetime | None = None  # the tie-break date (None: submitted_at; uploads: when the server got it)
    # Multi-run entries (a `daybreak repeat` directory): the ranked time is the olympic mean of run_times_s.
    runs_n: int | None = None
    runs_reached: int | None = None
    runs_cv: float | None = None
    run_times_s: list[float] | None = None  # DAWNBench-clock times of the runs that reached the target
    reproduction_of: int | None = None  # a host reproduction: the entry it re-ran
    # The system, structured (schema 4; the submitted free text stays in ``hardware``): filled by each reader from
    # what its format states (daybreak's recorded system, MLPerf's systems/*.json) or parsed from DAWNBench's free
    # text (daybreak.leaderboard.ingest.systems). "" / None: not stated.
    accelerator: str = ""  # "NVIDIA V100", "Google TPU v3", "CPU" (no accelerator)
    accelerator_count: int | None = None  # accelerators in the whole system (all nodes)
    cpu: str = ""  # "Intel Xeon E5-2686 v4", "2-core AMD EPYC"
    framework_name: str = ""  # "PyTorch", "TensorFlow", "MXNet", ...
    framework_version: str = ""  # "2.13.0", "1.8" ("" when the submission does not say)
    cloud_instance: str = ""  # "p3.16xlarge", "gcp-g2-standard-4" ("" when not a named cloud instance)
    # Attribution (schema 4): the code that ran, when the record knows it.
    code_commit: str = ""  # git commit of the code (daybreak runs: the checkout the run started from)
    recipe_sha256: str = ""  # SHA-256 of the recipe file that ran (daybreak runs)
    # Which benchmark and rules the time follows (schema 4): "dawnbench" (DAWNBench v1's clock: daybreak runs and
    # DAWNBench files) or "mlperf" (MLPerf Training's run_start..run_stop: import-mlperf); an MLPerf entry's round
    # ("v4.0"), division ("closed"/"open") and availability ("available", "preview", "rdi").
    clock_rules: str = "dawnbench"
    mlperf_round: str = ""
    division: str = ""
    availability: str = ""

    def finish(self, hashed: dict[str, Any]) -> "Submission":
        """Set the content hash from the normalized content (so CRLF/spacing variants of a file are the same),
        after a last check that every number the store keeps is finite and in range."""
        self.check_numbers()
        payload = {"format": self.source_format, "kind": self.kind, "task": self.task, **hashed}
        self.content_hash = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
        return self

    def check_numbers(self) -> None:
        """Every stored number finite and within its bound, whatever reader made this submission: nothing the
        store keeps can overflow when ranked, multiplied or printed."""
        # an accuracy is a fraction; an MLPerf benchmark's loss, log perplexity or score (its unit) is not
        quality = 1.0 if self.accuracy_unit in ("fraction", "percent") else MAX_QUANTITY
        bounds = {"target": quality, "accuracy": quality, "time_to_target_s": MAX_SECONDS, "epochs_to_target": MAX_QUANTITY,
                  "cost_per_hour": MAX_QUANTITY, "train_cost_usd": MAX_QUANTITY * MAX_QUANTITY,
                  "latency_ms": MAX_QUANTITY, "cost_per_example_usd": MAX_QUANTITY,
                  "inference_cost_10k_usd": MAX_QUANTITY * 10_000, "runs_cv": MAX_QUANTITY,
                  "train_energy_j": MAX_ENERGY_J, "inference_energy_10k_j": MAX_ENERGY_J}
        for name, bound in bounds.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SubmissionError(f"{self.source}: {name} is not a finite number")
            if not 0 <= value <= bound:
                raise SubmissionError(f"{self.source}: {name} {value:g} is out of range (0 to {bound:g})")
        for name in ("time_to_target_s", "latency_ms", "train_energy_j", "inference_energy_10k_j"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise SubmissionError(f"{self.source}: {name} must be greater than 0")
        for point in self.curve:
            for value in point:
                if value is not None and not (math.isfinite(value) and abs(value) <= MAX_SECONDS):
                    raise SubmissionError(f"{self.source}: a point of the accuracy curve is out of range")
        for value in self.run_times_s or []:
            if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
                raise SubmissionError(f"{self.source}: a run's time is out of range")
        if not isinstance(self.energy_covers, str) or len(self.energy_covers) > 64:
            raise SubmissionError(f"{self.source}: energy_covers is not a short list of kinds")
        if self.provenance not in PROVENANCES:
            raise ValueError(f"unknown provenance {self.provenance!r}")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def one_line(text: str, limit: int = 300) -> str:
    """Text for a message, on one line and at most ``limit`` characters (daybreak.text.one_line)."""
    return text_one_line(str(text), limit)


# Text: what every string of a submitted document may hold (keys included), and how it is normalised (NFC), in
# daybreak.leaderboard.ingest.text_rules; names from outside are printed with printable() (escapes for what is refused).


class _Refused:
    """A JSON number the leaderboard refuses, left in place by the decoder's hooks so that the walk over the
    document (:func:`check_document`) can say where it is."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


def _reject_constant(name: str) -> _Refused:
    return _Refused(f"{name} is not a number JSON allows")


def _out_of_range(text: str) -> _Refused:
    return _Refused(f"the number {one_line(text, 30)} is out of range (at most {MAX_ABS_NUMBER:g} in magnitude)")


def _parse_float(text: str) -> float | _Refused:
    number = float(text)
    if not math.isfinite(number) or abs(number) > MAX_ABS_NUMBER:
        return _out_of_range(text)
    return number


def _parse_int(text: str) -> int | _Refused:
    digits = text.lstrip("-")
    if len(digits) > MAX_INT_DIGITS or abs(int(text)) > MAX_ABS_NUMBER:
        return _out_of_range(text)
    return int(text)


class _JsonRefused(ValueError):
    """A JSON value the leaderboard refuses while parsing (raised from the decoder's hooks)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a key given twice is refused (JSON parsers disagree on which value wins)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _JsonRefused(f"duplicate key {one_line(printable(key), 40)!r} in an object")
        out[key] = value
    return out


def decode_text(data: bytes, what: str) -> str:
    """A submitted file's text: at most MAX_FILE_BYTES, UTF-8 (a BOM is dropped)."""
    if len(data) > MAX_FILE_BYTES:
        raise SubmissionError(f"{what}: {len(data):,} bytes, more than the {MAX_FILE_BYTES:,} allowed")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SubmissionError(f"{what}: not UTF-8 text (bad byte at offset {e.start})") from None


def load_json(data: bytes, what: str) -> Any:
    """Parse JSON bytes with the leaderboard's limits: size, UTF-8, no duplicate keys, then
    :func:`check_document`'s (numbers, nesting, text)."""
    text = decode_text(data, what)
    if not text.strip():
        raise SubmissionError(f"{what}: empty file, expected a JSON object")
    try:
        obj = json.loads(text, parse_constant=_reject_constant, parse_float=_parse_float, parse_int=_parse_int,
                         object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise SubmissionError(f"{what}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise SubmissionError(f"{what}: invalid JSON: nested too deeply") from None
    except ValueError as e:  # _JsonRefused, integer literals too long for int()
        raise SubmissionError(f"{what}: invalid JSON: {one_line(str(e), 120)}") from None
    check_document(obj, what)
    obj, clash = nfc_document(obj)
    if clash is not None:
        raise SubmissionError(f"{what}: invalid JSON: duplicate key {one_line(printable(clash), 40)!r} in an object "
                              "(two keys are the same text in Unicode's composed form, NFC)")
    return obj


def field_path(parts: Any) -> str:
    """A place in a document as the messages write it: ``history[0].clock_s.dawnbench`` ("document" for the
    whole); keys from outside are shown printable."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            key = one_line(printable(str(part)), 60)
            out += f".{key}" if out else key
    return out or "document"


def check_document(obj: Any, what: str) -> None:
    """Every value of a parsed document, in document order: every number finite and at most MAX_ABS_NUMBER in
    magnitude, nesting at most MAX_JSON_DEPTH deep, and every string (keys included) real Unicode (JSON's
    ``\\ud800`` escapes can make lone surrogates), at most MAX_FIELD_CHARS long, without control or invisible
    characters (daybreak.leaderboard.ingest.text_rules). The first problem is refused, naming its place."""
    stack: list[tuple[Any, tuple[Any, ...], int]] = [(obj, (), 1)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise SubmissionError(f"{what}: JSON nested more than {MAX_JSON_DEPTH} levels deep")
        if isinstance(item, _Refused):
            raise SubmissionError(f"{what}: {field_path(path)}: invalid JSON: {item.reason}")
        if isinstance(item, dict):
            for key in item:
                _check_text(key, (*path, key), what, "key")
            stack.extend(((value, (*path, key), depth + 1) for key, value in reversed(item.items())))
        elif isinstance(item, list):
            stack.extend(((value, (*path, i), depth + 1) for i, value in reversed(list(enumerate(item)))))
        elif isinstance(item, str):
            _check_text(item, path, what, "text")


def _check_text(text: str, path: tuple[Any, ...], what: str, which: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SubmissionError(f"{what}: {field_path(path)}: invalid Unicode in a string ({which}: a lone "
                              "surrogate escape such as \\ud800)") from None
    if len(text) > MAX_FIELD_CHARS:
        raise SubmissionError(f"{what}: {field_path(path)}: the {which} is {len(text):,} characters long, more than "
                              f"the {MAX_FIELD_CHARS:,} allowed")
    problem = text_problem(text)
    if problem:
        raise SubmissionError(f"{what}: {field_path(path)}: the {which} {problem}")


def text_field(doc: dict[str, Any], key: str, what: str, *, required: bool) -> str:
    """A display string: str, trimmed, no control or invisible characters, at most MAX_FIELD_CHARS, in NFC. '' when
    optional and absent."""
    value = doc.get(key)
    if value is None:
        if required:
            raise SubmissionError(f"{what}: required field {key!r} is missing" if key not in doc
                                  else f"{what}: required field {key!r} is null")
        return ""
    if not isinstance(value, str):
        raise SubmissionError(f"{what}: {key!r} must be a string, not {json_type(value)}")
    value = value.strip()
    if required and not value:
        raise SubmissionError(f"{what}: required field {key!r} is empty")
    if len(value) > MAX_FIELD_CHARS:
        raise SubmissionError(f"{what}: {key!r} is {len(value):,} characters long, "
                              f"more than the {MAX_FIELD_CHARS:,} allowed")
    problem = text_problem(value)
    if problem:
        raise SubmissionError(f"{what}: {key!r} {problem}")
    return nfc(value)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def shown(value: Any) -> str:
    """A submitted value as a message shows it: JSON's spelling for true/false/null, a short printable repr of text,
    the type of a container."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return repr(one_line(printable(value), 40))
    return json_type(value)


# pydantic's error types -> what the value must be (the leaderboard's words)
_MUST_BE = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number", "finite_number": "a finite number",
    "string_type": "a string", "bool_type": "true or false", "bool_parsing": "true or false",
    "dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
    "list_type": "a list", "datetime_type": "an ISO 8601 date-time", "datetime_parsing": "an ISO 8601 date-time",
    "datetime_from_date_parsing": "an ISO 8601 date-time",
}
_BOUNDS = {"greater_than_equal": (">=", "ge"), "greater_than": (">", "gt"), "less_than_equal": ("<=", "le"),
           "less_than": ("<", "lt")}


def validation_message(err: ValidationError) -> str:
    """The first error of a pydantic ValidationError on one line, naming the field:
    ``nodes: must be >= 1, not -1``, ``seed: must be an integer, not true``."""
    first = err.errors(include_url=False)[0]
    where = field_path(p for p in first.get("loc", ()) if not (isinstance(p, str) and "[" in p and "]" in p))
    kind, value, ctx = first.get("type", ""), first.get("input"), first.get("ctx") or {}
    if kind == "missing":
        return f"{where}: required field is missing"
    if kind in _MUST_BE:
        return f"{where}: must be {_MUST_BE[kind]}, not {shown(value)}"
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        return f"{where}: must be {sign} {shown(ctx.get(key))}, not {shown(value)}"
    if kind == "literal_error":
        return f"{where}: must be {ctx.get('expected', 'one of the known values')}, not {shown(value)}"
    message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if kind == "value_error" and message.startswith("must be") and ", not " not in message:
        message += f", not {shown(value)}"
    return f"{where}: {one_line(message, 160)}"


def validate_record(model: type[Record], doc: Any, what: str, label: str) -> Record:
    """``doc`` (a parsed JSON document) as a ``model`` record, validated in pydantic's strict mode: numbers are
    JSON numbers (no booleans, no strings), integers are integers, text is text, date-times are ISO 8601 strings;
    plus the model's own constraints. One-line SubmissionError naming the field otherwise."""
    from pydantic import ValidationError

    if not isinstance(doc, dict):
        raise SubmissionError(f"{what}: expected a JSON object, found {json_type(doc)}")
    try:
        return model.model_validate_json(canonical_json(doc), strict=True)
    except ValidationError as e:
        raise SubmissionError(f"{what}: invalid {label}: {validation_message(e)}") from None
    except (ValueError, TypeError, OverflowError) as e:  # a validator deeper down
        raise SubmissionError(f"{what}: invalid {label}: {one_line(str(e), 120)}") from None


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$", re.ASCII)


def parse_number(value: Any, what: str) -> float:
    """A JSON number (or a plain decimal string such as "3.06"); finite; booleans are not numbers."""
    if isinstance(value, bool) or value is None:
        raise SubmissionError(f"{what} must be a number, not {json_type(value)}")
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:
            raise SubmissionError(f"{what} is too large") from None
    elif isinstance(value, str) and _NUMBER.match(value.strip()):
        number = float(value.strip())
    else:
        shown = repr(value)[:40] if isinstance(value, str) else json_type(value)
        raise SubmissionError(f"{what} must be a number, not {shown}")
    if not math.isfinite(number):
        raise SubmissionError(f"{what} must be a finite number")
    return number


@overload
def number_field(doc: dict[str, Any], key: str, what: str, *, required: Literal[True], positive: bool = True,
                 maximum: float = MAX_QUANTITY) -> float: ...


@overload
def number_field(doc: dict[str, Any], key: str, what: str, *, required: bool, positive: bool = True,
                 maximum: float = MAX_QUANTITY) -> float | None: ...


def number_field(doc: dict[str, Any], key: str, what: str, *, required: bool, positive: bool = True,
                 maximum: float = MAX_QUANTITY) -> float | None:
    """A number field; None when optional and absent or null (DAWNBench files write null for 'not priced')."""
    if doc.get(key) is None:
        if required:
            raise SubmissionError(f"{what}: required field {key!r} is " + ("missing" if key not in doc else "null"))
        return None
    number = parse_number(doc[key], f"{what}: {key!r}")
    if positive and number <= 0:
        raise SubmissionError(f"{what}: {key!r} must be greater than 0, not {number:g}")
    if number > maximum:
        raise SubmissionError(f"{what}: {key!r} {number:g} is out of range (at most {maximum:g})")
    return number


_DATE = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$", re.ASCII)
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$", re.ASCII)


def parse_timestamp(value: Any, what: str) -> datetime:
    """DAWNBench's ``timestamp``: ``YYYY-MM-DD`` (some files write ``2019-7-22``) or an ISO 8601 date-time.

    Returns naive UTC. A date more than a day in the future is refused.
    """
    if not isinstance(value, str):
        raise SubmissionError(f"{what}: 'timestamp' must be a string YYYY-MM-DD, not {json_type(value)}")
    text = value.strip()
    m = _DATE.match(text)
    try:
        if m:
            when = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif _DATETIME.match(text):
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
            if when.tzinfo is not None:
                when = when.astimezone(timezone.utc).replace(tzinfo=None)
        else:
            raise ValueError("format")
    except ValueError as e:
        detail = "expected YYYY-MM-DD" if str(e) == "format" else one_line(str(e), 60)
        raise SubmissionError(f"{what}: 'timestamp' {one_line(text, 40)!r} is not a date ({detail})") from None
    return check_date(when, f"{what}: 'timestamp' {text!r}")


def check_date(when: datetime, what: str) -> datetime:
    """A date in [2017-01-01, tomorrow] (naive UTC), else SubmissionError naming ``what``."""
    when = as_naive_utc(when)
    if when < EARLIEST_DATE:
        raise SubmissionError(f"{what} is before {EARLIEST_DATE.date().isoformat()} (DAWNBench opened in 2017)")
    if when > datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(days=1):
        raise SubmissionError(f"{what} is in the future")
    return when


def as_naive_utc(when: datetime) -> datetime:
    return when.astimezone(timezone.utc).replace(tzinfo=None) if when.tzinfo is not None else when


def accuracy_value(value: Any, what: str) -> tuple[float, str]:
    """One accuracy as written -> (fraction, unit). Above 1 is percent (at most 100); 0..1 is a fraction."""
    number = parse_number(value, what)
    if number < 0 or number > 100:
        raise SubmissionError(f"{what} is {number:g}: out of range (0-100 percent or 0-1 fraction)")
    return (number / 100.0, "percent") if number > 1.0 else (number, "fraction")


def reaches(accuracy: float, target: float) -> bool:
    """``accuracy >= target`` for fractions, forgiving the last bit of a percent/100 conversion."""
    return accuracy >= target - 1e-12


def today() -> date:
    return datetime.now(timezone.utc).date()
