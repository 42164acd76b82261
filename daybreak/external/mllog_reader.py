"""Reading an external program's MLPerf ``:::MLLOG`` stream: lines -> events, and what the log declares.

Pure functions only (no processes, no files): ``parse_line`` turns one line of program output into events
(or malformed-line reports), ``parse_log`` a whole log file's bytes; ``log_info`` collects what the program
declares about itself (framework, model, seed, batch size, ``submission_*``); ``TargetWatch`` watches a live
stream for the target. What the events add up
to is daybreak.external.mllog_analysis (``analyze``), the clock cross-check daybreak.external.mllog_clock and the
run's status daybreak.external.mllog_verdict (``verdict``).

Two readings of a line, one per kind of log:

* an MLPerf benchmark's log (``mlperf=True``) is read as mlperf-logging's parser reads it
  (``compliance_checker/mlp_parser``, the same from ruleset 0.7.0 to 6.1.0): a line holds at most one record, the
  JSON after its last ``:::MLLOG `` token (a carriage return also ends a line, as in the text file mlperf-logging
  opens); the record is malformed where that parser fails on it: not one JSON object, a field of ``key``,
  ``value``, ``metadata`` or ``time_ms`` missing, a ``time_ms`` that is not a number (daybreak also refuses one
  that is not finite, which no clock can read). Anything else is a record, whatever its ``metadata`` holds
  (``"metadata": ""`` in NVIDIA's HugeCTR logs carries no metadata, and is no error) or its ``key`` is (one that is
  not a string matches nothing, as in MLPerf's checker). Its ``eval_accuracy`` is whatever the benchmark's metric is
  (a loss, a log perplexity, an FID, or an object of two mAPs), in the unit its definition gives
  (daybreak.mlperf_benchmarks), never converted; one that is no number stays a record the target cannot be
  compared with (MLPerf's verdict then says so).
* any other log (daybreak's own tasks, a program timed live) is read leniently: every ``:::MLLOG`` record in a line
  wherever it starts, ``value`` and ``metadata`` optional (a metadata that is not an object carries none, as
  above), ``time_ms`` a number or a string of one; an ``eval_accuracy`` must be a number in [0, 100]. With
  ``unit="auto"`` a log whose ``eval_accuracy`` values include one above 1 is read as percent throughout,
  otherwise as fractions.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal, Sequence

from daybreak.metrics import TOP1, Metric
from daybreak.records.mllog import CHECKPOINT_START, CHECKPOINT_STOP, SUBMISSION_FRAMEWORK, C

TOKEN = ":::MLLOG"
_DECODER = json.JSONDecoder()

# Keys with a role in timing: MLPerf's own constants (C), and daybreak's beside them (daybreak.records.mllog: the
# "record" phase interval of `daybreak run`'s logs; checkpoint_start/stop, which other programs log to get their
# checkpoint writes off the DAWNBench clock).
FRAMEWORK_KEYS = ("framework", SUBMISSION_FRAMEWORK)
MODEL_KEYS = ("model", "model_name", "submission_model")
_TIMING_KEYS = {C.INIT_START, C.INIT_STOP, C.RUN_START, C.RUN_STOP, C.EVAL_START, C.EVAL_STOP, C.EVAL_ACCURACY,
                CHECKPOINT_START, CHECKPOINT_STOP, C.EPOCH_START, C.EPOCH_STOP, C.BLOCK_START, C.BLOCK_STOP,
                C.CACHE_CLEAR}

AccuracyUnit = Literal["auto", "fraction", "percent"]
ACCURACY_UNITS = ("auto", "fraction", "percent")


# --- lines -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MllogEvent:
    key: str
    value: Any
    time_ms: float
    event_type: str
    metadata: dict[str, Any]
    namespace: str
    lineno: int  # 1-based line number in the program's output (program.log) or in the log file
    text: str  # the record as found, from the token on: ':::MLLOG {...}'
    wall: float | None = None  # time.time() when daybreak received the line; None when read from a file


@dataclass(frozen=True)
class BadLine:
    lineno: int
    reason: str
    text: str


def parse_line(line: str, lineno: int, wall: float | None = None, *,
               mlperf: bool = False) -> tuple[list[MllogEvent], list[BadLine]]:
    """The ``:::MLLOG {json}`` records of one line of output (the module's docstring: with ``mlperf``, as
    mlperf-logging's parser reads them; otherwise every record, wherever it starts).

    Without ``mlperf``, a record that is not a JSON object with a string ``key`` and a numeric ``time_ms``, has text
    after its JSON, or is an ``eval_accuracy`` whose value is not a number in [0, 100], is reported as a ``BadLine``;
    a ``metadata`` that is not an object carries none, as mlperf-logging's parser allows.
    """
    if mlperf:
        return _parse_mlperf(line, lineno, wall)
    events: list[MllogEvent] = []
    bad: list[BadLine] = []
    pos = line.find(TOKEN)
    while pos != -1:
        start = pos + len(TOKEN)
        j = start
        while j < len(line) and line[j] in " \t":
            j += 1
        try:
            obj, end = _DECODER.raw_decode(line, j)
        except json.JSONDecodeError as e:
            bad.append(BadLine(lineno, f"invalid JSON ({e.msg})", line.strip()))
            pos = line.find(TOKEN, start)
            continue
        nxt = line.find(TOKEN, end)
        trailing = line[end: len(line) if nxt == -1 else nxt]
        text = line[pos:end]
        if trailing.strip():
            bad.append(BadLine(lineno, "text after the JSON record", line.strip()))
        else:
            event, reason = _event(obj, lineno, text, wall, False)
            if event is not None:
                events.append(event)
            else:
                bad.append(BadLine(lineno, reason, line.strip()))
        pos = nxt
    return events, bad


# mlperf-logging's parser: a record is the rest of the line after the line's last "':::MLLOG '" (its regular
# expression ".*:::MLLOG " is greedy), read with json.loads; it needs these fields (a missing one is a KeyError)
MLPERF_TOKEN = TOKEN + " "
MLPERF_FIELDS = ("time_ms", "key", "value", "metadata")
_LINE_ENDS = re.compile(r"\r\n?")


def _parse_mlperf(line: str, lineno: int, wall: float | None) -> tuple[list[MllogEvent], list[BadLine]]:
    events: list[MllogEvent] = []
    bad: list[BadLine] = []
    for segment in _LINE_ENDS.split(line) if "\r" in line else (line,):
        pos = segment.rfind(MLPERF_TOKEN)
        if pos == -1:
            continue
        text = segment[pos:].strip()
        try:
            obj = json.loads(text[len(MLPERF_TOKEN):])
        except json.JSONDecodeError as e:
            reason = "text after the JSON record" if e.msg == "Extra data" else f"invalid JSON ({e.msg})"
            bad.append(BadLine(lineno, reason, segment.strip()))
            continue
        if not isinstance(obj, dict):
            bad.append(BadLine(lineno, "not a JSON object", segment.strip()))
            continue
        missing = [f for f in MLPERF_FIELDS if f not in obj]
        if missing:
            bad.append(BadLine(lineno, f"no {missing[0]!r} field (mlperf-logging's parser needs "
                                       f"{', '.join(MLPERF_FIELDS)} in every record)", segment.strip()))
            continue
        event, reason = _event(obj, lineno, text, wall, True)
        if event is not None:
            events.append(event)
        elif reason:
            bad.append(BadLine(lineno, reason, segment.strip()))
    return events, bad


def parse_log(data: bytes, *, mlperf: bool = False) -> tuple[list[MllogEvent], list[BadLine]]:
    """Every record of a whole log file (``parse_line`` on each line, numbered from 1; the bytes are read as UTF-8,
    an undecodable byte as U+FFFD): what `daybreak time --log` and `daybreak leaderboard import-mlperf` read."""
    events: list[MllogEvent] = []
    bad: list[BadLine] = []
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    token = TOKEN.encode()
    for n, raw in enumerate(lines, start=1):
        if token not in raw:  # most lines of a long log carry no record
            continue
        e, b = parse_line(raw.decode("utf-8", errors="replace"), n, mlperf=mlperf)
        events.extend(e)
        bad.extend(b)
    return events, bad


def as_number(x: Any) -> float | None:
    """A finite number from a JSON value (a number, or a string holding one); None otherwise."""
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, str):
        try:
            v = float(x)
        except ValueError:
            return None
        return v if math.isfinite(v) else None
    return None


def _event(obj: Any, lineno: int, text: str, wall: float | None, mlperf: bool) -> tuple[MllogEvent | None, str]:
    """One record from its JSON object: (the event, "") or (None, why it is malformed); (None, "") for a record of
    an MLPerf log that is no event daybreak reads (a key that is not a string)."""
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        return None, "" if mlperf else "no string 'key'"
    time_ms = as_number(obj.get("time_ms"))
    if time_ms is None:
        return None, f"'time_ms' is not a {'finite ' if mlperf else ''}number ({obj.get('time_ms')!r})"
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}  # mlperf-logging's parser takes any metadata; "" (HugeCTR's header records) carries none
    value = obj.get("value")
    if key == C.EVAL_ACCURACY and mlperf:
        number = _quality_value(value)
        value = value if number is None else number  # no number: kept as logged; MLPerf's verdict says so
    elif key == C.EVAL_ACCURACY:
        v = as_number(value) if not isinstance(value, str) else None
        if v is None or not 0.0 <= v <= 100.0:
            return None, f"eval_accuracy value {value!r} is not a number in [0, 100]"
        value = v
    event_type = obj.get("event_type")
    namespace = obj.get("namespace")
    return MllogEvent(key=key, value=value, time_ms=time_ms,
                      event_type=event_type if isinstance(event_type, str) else C.POINT_IN_TIME,
                      metadata=metadata, namespace=namespace if isinstance(namespace, str) else "",
                      lineno=lineno, text=text, wall=wall), ""


def is_number(value: Any) -> bool:
    """A JSON number that is finite (not a bool, not a string)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _quality_value(value: Any) -> float | dict[str, float] | None:
    """An MLPerf evaluation's value: a finite number, or an object whose values are all finite numbers."""
    if isinstance(value, dict):
        numbers = {str(k): as_number(v) if not isinstance(v, str) else None for k, v in value.items()}
        return numbers if numbers and all(v is not None for v in numbers.values()) else None  # type: ignore[return-value]
    return as_number(value) if not isinstance(value, str) else None


def quality_values(event: MllogEvent, parts: Sequence[str | None]) -> dict[str | None, float]:
    """The values of ``parts`` one eval_accuracy record holds: ``{None: value}`` for a one-metric target; for a
    target of several, the part its metadata ``metric`` names (Stable Diffusion logs FID and CLIP as two records)
    or the parts of an object value (Mask R-CNN's one record of both mAPs)."""
    value = event.value
    if isinstance(value, dict):
        return {p: float(value[p]) for p in parts if p in value and is_number(value[p])}
    if not is_number(value):  # an MLPerf log's eval_accuracy that is no number (kept as logged)
        return {}
    if tuple(parts) == (None,):
        return {None: float(value)}
    named = event.metadata.get("metric")
    return {named: float(value)} if named in parts else {}


# --- accuracy units ----------------------------------------------------------------------------------------
class TargetWatch:
    """Live: does this event reach the target? Uses the same unit rule as ``analyze`` as far as seen so far."""

    def __init__(self, target: float, unit: AccuracyUnit = "auto", metric: Metric = TOP1):
        self.target = target
        self.metric = metric
        self.unit = unit
        self.percent_seen = unit == "percent"
        self.started = False
        self.reached_event: MllogEvent | None = None
        self.last_accuracy: float | None = None
        self.last_epoch: Any = None

    def feed(self, event: MllogEvent) -> bool:
        """True the first time an evaluation after run_start reaches the target."""
        if event.key == C.RUN_START:
            self.started = True
        if event.key != C.EVAL_ACCURACY:
            return False
        if self.unit == "auto" and float(event.value) > 1.0:
            self.percent_seen = True
        accuracy = float(event.value) / 100.0 if self.percent_seen else float(event.value)
        self.last_accuracy = accuracy
        self.last_epoch = event.metadata.get(C.EPOCH_NUM, event.metadata.get(C.SAMPLES_COUNT))
        if self.started and self.reached_event is None and self.metric.reaches(accuracy, self.target):
            self.reached_event = event
            return True
        return False


def log_is_percent(events: Sequence[MllogEvent], unit: AccuracyUnit = "auto") -> bool:
    if unit == "percent":
        return True
    if unit == "fraction":
        return False
    return any(e.key == C.EVAL_ACCURACY and isinstance(e.value, (int, float)) and float(e.value) > 1.0 for e in events)


# --- what the log declares ---------------------------------------------------------------------------------
def _int(x: Any) -> int | None:
    v = as_number(x)
    return int(v) if v is not None and float(v).is_integer() else None


def _count(x: Any) -> int | None:
    """A whole number >= 1 (a batch size); None for anything else (0 or -1: no batch size)."""
    v = _int(x)
    return v if v is not None and v >= 1 else None


@dataclass(frozen=True)
class Declared:
    """What a log declares about its program (``log_info``)."""

    framework: str | None
    model: str | None
    seed: int | None
    global_batch_size: int | None
    hyperparameters: dict[str, Any]  # every other key logged before run_start, first value
    submission: dict[str, Any]  # the submission_* keys, from anywhere in the log


def log_info(events: Sequence[MllogEvent]) -> Declared:
    """Framework, model, seed, batch size and other configuration logged before run_start (first value wins), and
    the ``submission_*`` keys (what the program declares about its system) from anywhere in the log."""
    hp: dict[str, Any] = {}
    submission: dict[str, Any] = {}
    framework = model = None
    configuring = True
    for e in events:
        if e.key == C.RUN_START:
            configuring = False  # configuration ends here; what the program declares about itself does not
        if e.key in _TIMING_KEYS:
            continue
        if e.key.startswith("submission_"):
            submission.setdefault(e.key, e.value)
        if not configuring:
            continue
        if e.key in FRAMEWORK_KEYS and framework is None and isinstance(e.value, str) and e.value.strip():
            framework = e.value.strip()
        elif e.key in MODEL_KEYS and model is None and isinstance(e.value, str) and e.value.strip():
            model = e.value.strip()
        elif not e.key.startswith("submission_"):
            hp.setdefault(e.key, e.value)
    if framework is None and isinstance(submission.get(SUBMISSION_FRAMEWORK), str):
        framework = submission[SUBMISSION_FRAMEWORK].strip() or None
    return Declared(framework=framework, model=model, seed=_int(hp.get(C.SEED)),
                    global_batch_size=_count(hp.get(C.GLOBAL_BATCH_SIZE)), hyperparameters=hp, submission=submission)
