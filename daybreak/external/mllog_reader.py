"""Reading an external program's MLPerf ``:::MLLOG`` stream and computing time-to-target from it.

Pure functions only (no processes, no files): ``parse_line`` turns one line of program output into events
(or malformed-line reports), ``analyze`` turns the events of a run into evaluations, time-to-target and a
clock check, ``verdict`` turns an analysis plus the way the program ended into a run status and a one-line
message.

The rules, in the program's own clock (``time_ms``):

* The training clock starts at the first ``run_start`` event; ``init_start``..``init_stop`` is init (excluded).
* Evaluation intervals (``eval_start``..``eval_stop``) are excluded unless ``count_eval``: the clock at an
  evaluation is ``time - run_start - (evaluation time after run_start up to then)``. An ``eval_accuracy``
  logged inside its own interval excludes that interval up to the accuracy line; with ``count_eval`` the
  evaluation counts until its ``eval_stop`` when that comes later. An ``eval_start`` never closed by an
  ``eval_stop`` ends at the next ``eval_accuracy`` (or is empty), so an unclosed interval cannot hide training.
* Time-to-target is the clock at the first ``eval_accuracy`` at or above the target after ``run_start``.
* Accuracy values may be fractions or percents: with ``unit="auto"`` a log whose ``eval_accuracy`` values
  include one above 1 is read as percent throughout, otherwise as fractions.
* Clock cross-check (when wall arrival times are known): for every event from ``run_start`` to the end of the
  timing window (the target evaluation, or the end of the run), the program's interval since ``run_start``
  must agree with daybreak's wall clock interval between the arrival of the two lines within the tolerance
  (default 5 % of the wall interval + 2 s). Otherwise the program's timestamps are not trusted.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from daybreak.errors import ConfigError

TOKEN = ":::MLLOG"
_DECODER = json.JSONDecoder()

# Keys with a role in timing (mlperf_logging.mllog.constants spells them the same way).
INIT_START, INIT_STOP = "init_start", "init_stop"
RUN_START, RUN_STOP = "run_start", "run_stop"
EVAL_START, EVAL_STOP = "eval_start", "eval_stop"
EVAL_ACCURACY = "eval_accuracy"
EPOCH_NUM, SAMPLES_COUNT, STATUS = "epoch_num", "samples_count", "status"
FRAMEWORK_KEYS = ("framework", "submission_framework")
MODEL_KEYS = ("model", "model_name", "submission_model")
_TIMING_KEYS = {INIT_START, INIT_STOP, RUN_START, RUN_STOP, EVAL_START, EVAL_STOP, EVAL_ACCURACY,
                "epoch_start", "epoch_stop", "block_start", "block_stop", "cache_clear"}

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


def parse_line(line: str, lineno: int, wall: float | None = None) -> tuple[list[MllogEvent], list[BadLine]]:
    """Every ``:::MLLOG {json}`` record in one line of output, wherever it starts (as mlperf's parser allows).

    A record that is not a JSON object with a string ``key`` and a numeric ``time_ms``, has text after its JSON,
    or is an ``eval_accuracy`` whose value is not a number in [0, 100], is reported as a ``BadLine``.
    """
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
            event, reason = _event(obj, lineno, text, wall)
            if event is not None:
                events.append(event)
            else:
                bad.append(BadLine(lineno, reason, line.strip()))
        pos = nxt
    return events, bad


def _number(x: Any) -> float | None:
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


def _event(obj: Any, lineno: int, text: str, wall: float | None) -> tuple[MllogEvent | None, str]:
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        return None, "no string 'key'"
    time_ms = _number(obj.get("time_ms"))
    if time_ms is None:
        return None, f"'time_ms' is not a number ({obj.get('time_ms')!r})"
    metadata = obj.get("metadata")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        return None, "'metadata' is not an object"
    value = obj.get("value")
    if key == EVAL_ACCURACY:
        v = _number(value) if not isinstance(value, str) else None
        if v is None or not 0.0 <= v <= 100.0:
            return None, f"eval_accuracy value {value!r} is not a number in [0, 100]"
        value = v
    event_type = obj.get("event_type")
    namespace = obj.get("namespace")
    return MllogEvent(key=key, value=value, time_ms=time_ms,
                      event_type=event_type if isinstance(event_type, str) else "POINT_IN_TIME",
                      metadata=metadata, namespace=namespace if isinstance(namespace, str) else "",
                      lineno=lineno, text=text, wall=wall), ""


# --- clock tolerance ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """How far a program's interval may differ from the wall clock's: ``relative * wall + absolute_s``."""

    relative: float = 0.05
    absolute_s: float = 2.0

    def allowed(self, wall_s: float) -> float:
        return self.relative * abs(wall_s) + self.absolute_s

    def __str__(self) -> str:
        return f"{self.relative * 100:g}% + {self.absolute_s:g} s"


_TOL_RE = re.compile(r"^\s*(?:(?P<rel>\d+(?:\.\d*)?|\.\d+)\s*%)?\s*\+?\s*(?:(?P<abs>\d+(?:\.\d*)?|\.\d+)\s*s)?\s*$")


def parse_tolerance(text: str) -> Tolerance:
    """'5%+2s' (the default), '10%', '3s', '2.5% + 0.5s'."""
    m = _TOL_RE.match(text or "")
    if not m or (m.group("rel") is None and m.group("abs") is None):
        raise ConfigError(f"--clock-tolerance {text!r}: give a percent and/or seconds, e.g. '5%+2s', '10%' or '3s'")
    return Tolerance(relative=float(m.group("rel") or 0) / 100.0, absolute_s=float(m.group("abs") or 0))


# --- accuracy units ----------------------------------------------------------------------------------------
class TargetWatch:
    """Live: does this event reach the target? Uses the same unit rule as ``analyze`` as far as seen so far."""

    def __init__(self, target: float, unit: AccuracyUnit = "auto"):
        self.target = target
        self.unit = unit
        self.percent_seen = unit == "percent"
        self.started = False
        self.reached_event: MllogEvent | None = None
        self.last_accuracy: float | None = None
        self.last_epoch: Any = None

    def feed(self, event: MllogEvent) -> bool:
        """True the first time an evaluation after run_start reaches the target."""
        if event.key == RUN_START:
            self.started = True
        if event.key != EVAL_ACCURACY:
            return False
        if self.unit == "auto" and float(event.value) > 1.0:
            self.percent_seen = True
        accuracy = float(event.value) / 100.0 if self.percent_seen else float(event.value)
        self.last_accuracy = accuracy
        self.last_epoch = event.metadata.get(EPOCH_NUM, event.metadata.get(SAMPLES_COUNT))
        if self.started and self.reached_event is None and accuracy >= self.target:
            self.reached_event = event
            return True
        return False


def log_is_percent(events: Sequence[MllogEvent], unit: AccuracyUnit = "auto") -> bool:
    if unit == "percent":
        return True
    if unit == "fraction":
        return False
    return any(e.key == EVAL_ACCURACY and float(e.value) > 1.0 for e in events)


# --- analysis ----------------------------------------------------------------------------------------------
@dataclass
class Evaluation:
    index: int  # 1-based, among evaluations after run_start
    accuracy: float  # fraction
    raw_value: float  # as logged
    time_ms: float  # the eval_accuracy line's timestamp
    end_ms: float  # when the evaluation counts as finished (its eval_stop when that is logged later)
    elapsed_s: float  # training clock at end_ms (see the module rules)
    eval_s: float  # evaluation time since the previous evaluation
    epoch: float
    epoch_known: bool
    step: int | None
    samples_count: float | None
    lineno: int
    wall: float | None


@dataclass
class ClockCheck:
    checked: bool  # wall arrival times were available and compared
    trusted: bool
    tolerance: str | None = None
    events_checked: int = 0
    max_deviation_s: float = 0.0  # largest |program interval - wall interval| seen
    worst_lineno: int | None = None
    worst_key: str | None = None
    worst_program_s: float | None = None
    worst_wall_s: float | None = None
    reason: str | None = None  # why not trusted, one line


@dataclass
class Analysis:
    target: float
    count_eval: bool
    percent: bool
    events: int
    run_start: MllogEvent | None
    run_stop: MllogEvent | None
    init_s: float | None
    evaluations: list[Evaluation]
    target_eval: Evaluation | None  # first evaluation at or above the target (whether or not trusted)
    train_s: float
    eval_s: float
    clock: ClockCheck
    framework: str | None = None
    model: str | None = None
    seed: int | None = None
    global_batch_size: int | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    submission: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    first_time_ms: float | None = None
    last_time_ms: float | None = None

    @property
    def target_claimed(self) -> bool:
        return self.target_eval is not None

    @property
    def reached(self) -> bool:
        return self.target_eval is not None and self.clock.trusted

    @property
    def time_to_target_s(self) -> float | None:
        return self.target_eval.elapsed_s if self.reached else None

    @property
    def best_accuracy(self) -> float | None:
        return max((e.accuracy for e in self.evaluations), default=None)

    @property
    def run_stop_status(self) -> str | None:
        if self.run_stop is None:
            return None
        s = self.run_stop.metadata.get(STATUS)
        return s if isinstance(s, str) else None


def _int(x: Any) -> int | None:
    v = _number(x)
    return int(v) if v is not None and float(v).is_integer() else None


def _merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _covered(merged: list[tuple[float, float]], upto: float) -> float:
    return sum(max(0.0, min(e, upto) - s) for s, e in merged if s < upto)


def analyze(events: Sequence[MllogEvent], *, target: float, count_eval: bool = False,
            tolerance: Tolerance | None = None, unit: AccuracyUnit = "auto") -> Analysis:
    """Time-to-target and everything else the record needs, from the events in the order they were logged.

    ``tolerance`` None skips the wall clock cross-check (``--log``); events without ``wall`` are not checked.
    """
    percent = log_is_percent(events, unit)
    notes: list[str] = []
    info = _log_info(events)

    rs_index = next((i for i, e in enumerate(events) if e.key == RUN_START), None)
    run_start = events[rs_index] if rs_index is not None else None
    init_s = _init_seconds(events, run_start)
    times = [e.time_ms for e in events]
    base = dict(target=target, count_eval=count_eval, percent=percent, events=len(events), init_s=init_s,
                first_time_ms=min(times, default=None), last_time_ms=max(times, default=None), **info)
    if run_start is None:
        ignored = sum(1 for e in events if e.key == EVAL_ACCURACY)
        if ignored:
            notes.append(f"{ignored} eval_accuracy line(s) ignored: no run_start")
        return Analysis(run_start=None, run_stop=None, evaluations=[], target_eval=None, train_s=0.0, eval_s=0.0,
                        clock=ClockCheck(checked=False, trusted=True), notes=notes, **base)

    before = sum(1 for e in events[:rs_index] if e.key == EVAL_ACCURACY)
    if before:
        notes.append(f"{before} eval_accuracy line(s) before run_start ignored")
    again = next((e for e in events[rs_index + 1:] if e.key == RUN_START), None)
    if again is not None:
        notes.append(f"a second run_start (line {again.lineno}) ignored: only the first run is timed")

    # the run: events after run_start up to and including the first run_stop
    run: list[MllogEvent] = []
    run_stop = None
    for e in events[rs_index + 1:]:
        run.append(e)
        if e.key == RUN_STOP:
            run_stop = e
            break
    if run_stop is None:
        notes.append("no run_stop in the log")

    t0 = run_start.time_ms
    # evaluation intervals in line order: [start_ms, end_ms, tentative_end_ms, index in `run` of its eval_stop]
    intervals: list[list[Any]] = []
    open_i: int | None = None
    accuracy_events: list[tuple[int, int | None]] = []  # (index in `run`, interval open when it was logged)
    for i, e in enumerate(run):
        if e.key == EVAL_START:
            if open_i is not None:  # never closed: ends at its evaluation's accuracy line, or is empty
                intervals[open_i][1] = intervals[open_i][2]
            intervals.append([e.time_ms, e.time_ms, e.time_ms, None])
            open_i = len(intervals) - 1
        elif e.key == EVAL_STOP:
            if open_i is not None:
                intervals[open_i][1] = max(e.time_ms, intervals[open_i][0])
                intervals[open_i][3] = i
                open_i = None
        elif e.key == EVAL_ACCURACY:
            if open_i is not None and intervals[open_i][2] == intervals[open_i][0]:
                intervals[open_i][2] = max(e.time_ms, intervals[open_i][0])
            accuracy_events.append((i, open_i))
    if open_i is not None:
        intervals[open_i][1] = intervals[open_i][2]
    merged = _merge([(max(iv[0], t0), iv[1]) for iv in intervals])

    evaluations: list[Evaluation] = []
    window_ends: list[int] = []  # per evaluation: index in `run` of the last event its timing depends on
    prev_cover = 0.0
    backwards: MllogEvent | None = None
    last_elapsed = -math.inf
    for k, (i, owner) in enumerate(accuracy_events, start=1):
        e = run[i]
        end_ms, last_i = e.time_ms, i
        if owner is not None and intervals[owner][1] > end_ms:
            end_ms = intervals[owner][1]
            last_i = max(i, intervals[owner][3] if intervals[owner][3] is not None else i)
        cover = _covered(merged, end_ms)
        elapsed = (end_ms - t0 - (0.0 if count_eval else cover)) / 1000.0
        if backwards is None and (elapsed < 0 or elapsed < last_elapsed - 1.0):
            backwards = e
        last_elapsed = max(last_elapsed, elapsed)
        raw = float(e.value)
        epoch, epoch_known, samples = _epoch(e, info, k)
        bs = info["global_batch_size"]
        evaluations.append(Evaluation(
            index=k, accuracy=raw / 100.0 if percent else raw, raw_value=raw, time_ms=e.time_ms, end_ms=end_ms,
            elapsed_s=max(elapsed, 0.0), eval_s=max(cover - prev_cover, 0.0) / 1000.0, epoch=epoch,
            epoch_known=epoch_known, step=int(samples // bs) if samples is not None and bs else None,
            samples_count=samples, lineno=e.lineno, wall=e.wall))
        window_ends.append(last_i)
        prev_cover = max(prev_cover, cover)
    if any(not ev.epoch_known for ev in evaluations):
        notes.append("eval_accuracy without epoch_num (or samples_count with train_samples): epochs are counted "
                     "as evaluations")

    # the timing window: through the target evaluation, else the whole run
    target_k = next((k for k, ev in enumerate(evaluations) if ev.accuracy >= target), None)
    target_eval = evaluations[target_k] if target_k is not None else None
    if target_eval is not None:
        window = run[: window_ends[target_k] + 1]
        end_ms = target_eval.end_ms
    else:
        window = run
        end_ms = max((e.time_ms for e in run), default=t0)
    cover = _covered(merged, end_ms)
    train_s = max((end_ms - t0 - (0.0 if count_eval else cover)) / 1000.0, 0.0)

    clock = _check_clock(run_start, window, tolerance)
    if backwards is not None and clock.trusted:
        clock.trusted = False
        clock.reason = (f"the program's timestamps go backwards: eval_accuracy at line {backwards.lineno} is "
                        f"timed before run_start or before an earlier evaluation")
    return Analysis(run_start=run_start, run_stop=run_stop, evaluations=evaluations, target_eval=target_eval,
                    train_s=train_s, eval_s=cover / 1000.0, clock=clock, notes=notes, **base)


def _epoch(e: MllogEvent, info: dict[str, Any], index: int) -> tuple[float, bool, float | None]:
    md = e.metadata
    samples = _number(md.get(SAMPLES_COUNT))
    epoch = _number(md.get(EPOCH_NUM))
    if epoch is not None:
        return epoch, True, samples
    train_samples = info["hyperparameters"].get("train_samples")
    train_samples = _number(train_samples)
    if samples is not None and train_samples:
        return samples / train_samples, True, samples
    return float(index), False, samples


def _init_seconds(events: Sequence[MllogEvent], run_start: MllogEvent | None) -> float | None:
    start = next((e for e in events if e.key == INIT_START), None)
    stop = next((e for e in events if e.key == INIT_STOP), None) or run_start
    if start is None or stop is None or stop.time_ms < start.time_ms:
        return None
    return (stop.time_ms - start.time_ms) / 1000.0


def _log_info(events: Sequence[MllogEvent]) -> dict[str, Any]:
    """Framework, model, seed, batch size and other configuration logged before run_start (first value wins)."""
    hp: dict[str, Any] = {}
    submission: dict[str, Any] = {}
    framework = model = None
    for e in events:
        if e.key == RUN_START:
            break
        if e.key in _TIMING_KEYS:
            continue
        if e.key in FRAMEWORK_KEYS and framework is None and isinstance(e.value, str) and e.value.strip():
            framework = e.value.strip()
        elif e.key in MODEL_KEYS and model is None and isinstance(e.value, str) and e.value.strip():
            model = e.value.strip()
        elif e.key.startswith("submission_"):
            submission.setdefault(e.key, e.value)
        else:
            hp.setdefault(e.key, e.value)
    return dict(framework=framework, model=model, seed=_int(hp.get("seed")),
                global_batch_size=_int(hp.get("global_batch_size")), hyperparameters=hp, submission=submission)


def _check_clock(run_start: MllogEvent, window: Sequence[MllogEvent], tolerance: Tolerance | None) -> ClockCheck:
    if tolerance is None or run_start.wall is None:
        return ClockCheck(checked=False, trusted=True)
    check = ClockCheck(checked=True, trusted=True, tolerance=str(tolerance))
    worst_excess = -math.inf
    for e in window:
        if e.wall is None:
            continue
        program_s = (e.time_ms - run_start.time_ms) / 1000.0
        wall_s = e.wall - run_start.wall
        deviation = abs(program_s - wall_s)
        check.events_checked += 1
        check.max_deviation_s = max(check.max_deviation_s, deviation)
        excess = deviation - tolerance.allowed(wall_s)
        if excess > worst_excess:
            worst_excess = excess
            check.worst_lineno, check.worst_key = e.lineno, e.key
            check.worst_program_s, check.worst_wall_s = program_s, wall_s
    if worst_excess > 0:
        check.trusted = False
        check.reason = (f"the program's timestamps disagree with the wall clock: {check.worst_key} at line "
                        f"{check.worst_lineno} is {check.worst_program_s:.3f} s after run_start by its time_ms but "
                        f"arrived {check.worst_wall_s:.3f} s after it (tolerance {tolerance}; a program that does "
                        f"not flush each log line looks like this too)")
    return check


# --- verdict -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProgramEnd:
    """How the child ended. ``returncode`` negative = killed by that signal (subprocess convention)."""

    returncode: int | None
    stopped_by_daybreak: bool = False  # --stop-at-target ended it
    interrupted: str | None = None  # daybreak itself was interrupted: why


def _signal_name(n: int) -> str:
    import signal

    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    return f"exited with status {returncode}"


def verdict(a: Analysis, end: ProgramEnd | None, *, bad_lines: Sequence[BadLine] = (),
            where: str = "program.log") -> tuple[str, str | None]:
    """(status, message) for the record. ``end`` None: read from a log file after the fact."""
    pct = lambda x: "-" if x is None else f"{x * 100:.2f}%"  # noqa: E731
    crashed = end is not None and not end.stopped_by_daybreak and end.returncode not in (0, None)
    parts: list[str] = []
    interrupted = end.interrupted if end is not None else None
    if a.run_start is None:
        status = "interrupted" if interrupted else "failed"
        parts.append(f"the program never logged run_start ({a.events} :::MLLOG record(s) read)")
        if interrupted:
            parts.insert(0, interrupted)
        elif crashed:
            parts.append(f"it {describe_exit(end.returncode)}")
    elif not a.clock.trusted:
        status = "failed"
        claimed = (f"; it claims the target at {a.target_eval.elapsed_s:.3f} s, not trusted" if a.target_eval
                   else "")
        parts.append(f"{a.clock.reason}{claimed}")
    elif a.reached:
        status = "reached"
        if interrupted:
            parts.append(f"{interrupted} after the target was reached")
        elif crashed:
            parts.append(f"the program {describe_exit(end.returncode)} after reaching the target")
    elif interrupted:
        status = "interrupted"
        parts.append(f"{interrupted} before the target was reached (best {pct(a.best_accuracy)})")
    elif crashed:
        status = "failed"
        parts.append(f"the program {describe_exit(end.returncode)} before reaching the target "
                     f"(best {pct(a.best_accuracy)} < {pct(a.target)})")
    else:
        status = "not_reached"
        if not a.evaluations:
            parts.append("the program logged no eval_accuracy after run_start")
        else:
            parts.append(f"the program ended below the target: best {pct(a.best_accuracy)} < {pct(a.target)}")
        if a.run_stop is None and end is None:
            parts.append("the log has no run_stop (cut off?)")
    if bad_lines:
        first = bad_lines[0]
        parts.append(f"{len(bad_lines)} malformed :::MLLOG record(s) skipped (first at {where} line "
                     f"{first.lineno}: {first.reason})")
    return status, "; ".join(parts) or None
