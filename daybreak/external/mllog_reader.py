"""Reading an external program's MLPerf ``:::MLLOG`` stream and computing time-to-target from it.

Pure functions only (no processes, no files): ``parse_line`` turns one line of program output into events
(or malformed-line reports), ``analyze`` turns the events of a run into a phase timeline, evaluations, every
rule set's clock (daybreak.rules) and a clock check, ``verdict`` turns an analysis plus the way the program
ended into a run status and a one-line message.

The phase timeline, in the program's own clock (``time_ms``), in seconds since the first event of the run
(the program's launch when daybreak started it, else the first ``init_start``, else ``run_start``):

* ``model_init``: launch (live) or ``init_start`` .. ``init_stop`` (or ``run_start``). The program's own
  initialization; for an external program it may include loading data and compiling (an mllog stream does
  not tell them apart).
* ``train``: ``run_start`` .. ``run_stop`` (or the last record of the run), less the intervals below.
* ``eval``: ``eval_start`` .. ``eval_stop`` after ``run_start``. An ``eval_start`` never closed by an
  ``eval_stop`` ends at the next ``eval_accuracy`` (or is empty), so an unclosed interval cannot hide training.
* ``record``: ``checkpoint_start`` .. ``checkpoint_stop``, or a ``record`` INTERVAL_START .. INTERVAL_END pair as
  `daybreak run` writes (daybreak's conventions; mllog has no such keys).

Each rule set reads that timeline with ``daybreak.rules.read_clock``. An evaluation ends at its
``eval_accuracy`` line, or at its ``eval_stop`` when the accuracy is logged inside the interval. Time-to-target
is the clock at the end of the first evaluation at or above the target after ``run_start``; under ``mlperf``,
when the run then stops with ``run_stop`` status success, at ``run_stop``: MLPerf's own result, run_stop -
run_start. MLPerf's figure is always measured from ``run_start``, as MLPerf reports it, even where the init
before it took longer than the 20 minutes the rules allow; a warning then gives the rules' own reading.

* Accuracy values may be fractions or percents: with ``unit="auto"`` a log whose ``eval_accuracy`` values
  include one above 1 is read as percent throughout, otherwise as fractions.
* Clock cross-check (when wall arrival times are known): for every event from ``run_start`` to the end of the
  timing window (the target evaluation, or the end of the run), the program's interval since ``run_start``
  must agree with daybreak's wall clock interval between the arrival of the two lines within the tolerance
  (default 5 % of the wall interval + 2 s); so must ``run_start``'s time since the program's launch, which
  DAWNBench's clock counts. Otherwise the program's timestamps are not trusted.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Sequence

from daybreak.errors import ConfigError
from daybreak.rules import DEFAULT_RULES, RULE_SETS, ClockReading, Interval, RuleSet, get_rules, read_clock

TOKEN = ":::MLLOG"
_DECODER = json.JSONDecoder()

# Keys with a role in timing (mlperf_logging.mllog.constants spells them the same way).
INIT_START, INIT_STOP = "init_start", "init_stop"
RUN_START, RUN_STOP = "run_start", "run_stop"
EVAL_START, EVAL_STOP = "eval_start", "eval_stop"
EVAL_ACCURACY = "eval_accuracy"
EPOCH_NUM, SAMPLES_COUNT, STATUS = "epoch_num", "samples_count", "status"
SUCCESS = "success"
SEED = "seed"
SUBMISSION_PLATFORM = "submission_platform"
# Checkpoint and record writes: not mllog constants; a program that logs them gets them off the DAWNBench clock.
CHECKPOINT_START, CHECKPOINT_STOP = "checkpoint_start", "checkpoint_stop"
RECORD_KEY = "record"  # daybreak run's own logs: key "record" as INTERVAL_START / INTERVAL_END
# Rule sets whose figure for an external program is MLPerf's reported result: from run_start, and, for a run that
# stops with run_stop status success right after its target evaluation, to run_stop (run_stop - run_start), even
# where the init before run_start exceeds the rules' 20 minutes (MLPerf's compliance checker does not check it,
# and published results such as tinycorp's v4.0 ResNet runs have such inits): a warning says so.
MLPERF_RESULT = frozenset({"mlperf"})
FRAMEWORK_KEYS = ("framework", "submission_framework")
MODEL_KEYS = ("model", "model_name", "submission_model")
_TIMING_KEYS = {INIT_START, INIT_STOP, RUN_START, RUN_STOP, EVAL_START, EVAL_STOP, EVAL_ACCURACY,
                CHECKPOINT_START, CHECKPOINT_STOP, "epoch_start", "epoch_stop", "block_start", "block_stop",
                "cache_clear"}

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
    elapsed_s: float  # the headline rule set's clock at end_ms
    eval_s: float  # evaluation time since the previous evaluation
    epoch: float
    epoch_known: bool
    step: int | None
    samples_count: float | None
    lineno: int
    wall: float | None
    clock_s: dict[str, float] = field(default_factory=dict)  # every rule set's clock at end_ms


@dataclass
class RuleClock:
    """One rule set's reading of the run's timeline (seconds since ``Analysis.zero_ms``)."""

    rules: str
    start_s: float  # where the clock starts
    at_s: float  # the instant read: the target instant, else the end of the run
    clock_s: float  # the clock at ``at_s``
    target_s: float | None  # time-to-target as the program claims it (None: no evaluation reached the target)
    excluded_s: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


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
    rules: str  # the headline rule set (Evaluation.elapsed_s, time_to_target_s)
    percent: bool
    events: int
    run_start: MllogEvent | None
    run_stop: MllogEvent | None
    init_s: float | None
    evaluations: list[Evaluation]
    target_eval: Evaluation | None  # first evaluation at or above the target (whether or not trusted)
    train_s: float  # training phase seconds up to the target evaluation (or the end of the run)
    eval_s: float  # evaluation phase seconds up to the same instant
    clock: ClockCheck
    framework: str | None = None
    model: str | None = None
    seed: int | None = None
    global_batch_size: int | None = None
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    submission: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what makes a figure less than it should be
    first_time_ms: float | None = None
    last_time_ms: float | None = None
    zero_ms: float | None = None  # the timeline's origin, in the program's time_ms
    timeline: list[Interval] = field(default_factory=list)
    clocks: dict[str, RuleClock] = field(default_factory=dict)  # every rule set's clock
    eval_intervals: int = 0  # eval_start..eval_stop intervals logged after run_start

    @property
    def target_claimed(self) -> bool:
        return self.target_eval is not None

    @property
    def reached(self) -> bool:
        return self.target_eval is not None and self.clock.trusted

    @property
    def time_to_target_s(self) -> float | None:
        clock = self.clocks.get(self.rules)
        return clock.target_s if self.reached and clock is not None else None

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


def _subtract(intervals: list[tuple[float, float]], merged: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """``intervals`` less the (merged, sorted) ``merged``."""
    out: list[tuple[float, float]] = []
    for s, e in intervals:
        cur = s
        for hs, he in merged:
            if he <= cur or hs >= e:
                continue
            if hs > cur:
                out.append((cur, hs))
            cur = max(cur, he)
        if cur < e:
            out.append((cur, e))
    return out


def _clock_value(seconds: float) -> float:
    """Clock figures to the microsecond: time_ms has millisecond resolution, so run_stop - run_start in
    seconds comes out exactly as MLPerf computes it (no float residue from the timeline's origin)."""
    return round(seconds, 6)


def analyze(events: Sequence[MllogEvent], *, target: float, rules: str = DEFAULT_RULES,
            tolerance: Tolerance | None = None, unit: AccuracyUnit = "auto",
            launch_ms: float | None = None, launch_wall: float | None = None) -> Analysis:
    """Phase timeline, evaluations, every rule set's clock and everything else the record needs, from the
    events in the order they were logged. ``rules``: the headline rule set (``Evaluation.elapsed_s``,
    ``time_to_target_s``); every rule set is computed. ``launch_ms``: when daybreak started the program, in the
    program's time_ms (live mode), else None; ``launch_wall``: the same instant by daybreak's wall clock.
    ``tolerance`` None skips the wall clock cross-check (``--log``); events without ``wall`` are not checked.
    """
    try:
        headline = get_rules(rules).name
    except ValueError as e:
        raise ConfigError(str(e)) from None
    percent = log_is_percent(events, unit)
    notes: list[str] = []
    warnings: list[str] = []
    info = _log_info(events)

    rs_index = next((i for i, e in enumerate(events) if e.key == RUN_START), None)
    run_start = events[rs_index] if rs_index is not None else None
    init_start = next((e for e in events if e.key == INIT_START), None)
    init_stop = next((e for e in events if e.key == INIT_STOP), None)
    init_s = _init_seconds(init_start, init_stop, run_start)
    times = [e.time_ms for e in events]
    base = dict(target=target, rules=headline, percent=percent, events=len(events), init_s=init_s,
                first_time_ms=min(times, default=None), last_time_ms=max(times, default=None), **info)
    if info["seed"] is None:
        notes.append("the log has no seed")
    if run_start is None:
        ignored = sum(1 for e in events if e.key == EVAL_ACCURACY)
        if ignored:
            notes.append(f"{ignored} eval_accuracy line(s) ignored: no run_start")
        end_ms = max(times, default=launch_ms)
        zero, timeline = _timeline(launch_ms, init_start, init_stop, None, end_ms, [], [], [])
        clocks = _clocks(timeline, zero, end_ms=end_ms, target_eval=None, stop_ms=None, run_start_ms=None,
                         launch_ms=launch_ms, init_start=init_start, evaluations=[], eval_intervals=0)
        return Analysis(run_start=None, run_stop=None, evaluations=[], target_eval=None, train_s=0.0, eval_s=0.0,
                        clock=ClockCheck(checked=False, trusted=True), notes=notes, warnings=warnings,
                        zero_ms=zero, timeline=timeline, clocks=clocks, **base)

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
    run_end_ms = max(run_stop.time_ms if run_stop is not None else max((e.time_ms for e in run), default=t0), t0)
    # evaluation intervals in line order: [start_ms, end_ms, tentative_end_ms, index in `run` of its eval_stop]
    intervals: list[list[Any]] = []
    open_i: int | None = None
    accuracy_events: list[tuple[int, int | None]] = []  # (index in `run`, interval open when it was logged)
    checkpoints: list[tuple[float, float]] = []
    open_checkpoint: float | None = None
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
        elif e.key == CHECKPOINT_START or (e.key == RECORD_KEY and e.event_type == "INTERVAL_START"):
            open_checkpoint = e.time_ms
        elif (e.key == CHECKPOINT_STOP or (e.key == RECORD_KEY and e.event_type == "INTERVAL_END")) \
                and open_checkpoint is not None:
            checkpoints.append((open_checkpoint, e.time_ms))
            open_checkpoint = None
    if open_i is not None:
        intervals[open_i][1] = intervals[open_i][2]
    if open_checkpoint is not None:
        notes.append("a checkpoint_start without checkpoint_stop was counted as training")
    merged = _merge([(max(iv[0], t0), min(iv[1], run_end_ms)) for iv in intervals])
    records = _subtract(_merge([(max(s, t0), min(e, run_end_ms)) for s, e in checkpoints]), merged)
    train = _subtract([(t0, run_end_ms)], _merge(merged + records))
    zero, timeline = _timeline(launch_ms, init_start, init_stop, t0, run_end_ms, train, merged, records)

    def seconds(ms: float) -> float:
        return (ms - zero) / 1000.0

    evaluations: list[Evaluation] = []
    window_ends: list[int] = []  # per evaluation: index in `run` of the last event its timing depends on
    prev_cover = 0.0
    backwards: MllogEvent | None = None
    last_end = -math.inf
    for k, (i, owner) in enumerate(accuracy_events, start=1):
        e = run[i]
        end_ms, last_i = e.time_ms, i
        if owner is not None and intervals[owner][1] > end_ms:
            end_ms = intervals[owner][1]
            last_i = max(i, intervals[owner][3] if intervals[owner][3] is not None else i)
        if backwards is None and (end_ms < t0 or end_ms < last_end - 1000.0):
            backwards = e
        last_end = max(last_end, end_ms)
        cover = _covered(merged, end_ms)
        clock_s = {name: _clock_value(_read(rs, timeline, seconds(end_ms), seconds(t0))[0].seconds)
                   for name, rs in RULE_SETS.items()}
        raw = float(e.value)
        epoch, epoch_known, samples = _epoch(e, info, k)
        bs = info["global_batch_size"]
        evaluations.append(Evaluation(
            index=k, accuracy=raw / 100.0 if percent else raw, raw_value=raw, time_ms=e.time_ms, end_ms=end_ms,
            elapsed_s=clock_s[headline], eval_s=max(cover - prev_cover, 0.0) / 1000.0, epoch=epoch,
            epoch_known=epoch_known, step=int(samples // bs) if samples is not None and bs else None,
            samples_count=samples, lineno=e.lineno, wall=e.wall, clock_s=clock_s))
        window_ends.append(last_i)
        prev_cover = max(prev_cover, cover)
    if any(not ev.epoch_known for ev in evaluations):
        notes.append("eval_accuracy without epoch_num (or samples_count with train_samples): epochs are counted "
                     "as evaluations")
    if len(intervals) < len(evaluations):
        warnings.append(
            ("the program logs no eval_start/eval_stop intervals" if not intervals else
             f"only {len(intervals)} eval_start/eval_stop interval(s) for {len(evaluations)} evaluations")
            + ": evaluation time could not be excluded under dawnbench (it counts as training there); log "
              "eval_start and eval_stop around each evaluation")

    # the timing window: through the target evaluation, else the whole run
    target_k = next((k for k, ev in enumerate(evaluations) if ev.accuracy >= target), None)
    target_eval = evaluations[target_k] if target_k is not None else None
    if target_eval is not None:
        window = run[: window_ends[target_k] + 1]
        end_ms = target_eval.end_ms
    else:
        window = run
        end_ms = run_end_ms
    train_s = sum(max(0.0, min(e, end_ms) - s) for s, e in train) / 1000.0
    eval_s = _covered(merged, end_ms) / 1000.0

    # MLPerf's result runs to run_stop when the run stops, successfully, right after its target evaluation
    stop_ms = None
    if (target_eval is not None and target_k == len(evaluations) - 1 and run_stop is not None
            and str(run_stop.metadata.get(STATUS, "")).lower() == SUCCESS and run_stop.time_ms >= target_eval.end_ms):
        stop_ms = run_stop.time_ms
    clocks = _clocks(timeline, zero, end_ms=run_end_ms, target_eval=target_eval, stop_ms=stop_ms, run_start_ms=t0,
                     launch_ms=launch_ms, init_start=init_start, evaluations=evaluations, eval_intervals=len(intervals),
                     warnings=warnings)
    if target_eval is not None:  # the target row of the history says the time-to-target of each rule set
        for name, c in clocks.items():
            target_eval.clock_s[name] = c.target_s
        target_eval.elapsed_s = target_eval.clock_s[headline]

    launch = None if launch_ms is None or launch_wall is None else (launch_ms, launch_wall)
    clock = _check_clock(run_start, window, tolerance, launch)
    if backwards is not None and clock.trusted:
        clock.trusted = False
        clock.reason = (f"the program's timestamps go backwards: eval_accuracy at line {backwards.lineno} is "
                        f"timed before run_start or before an earlier evaluation")
    return Analysis(run_start=run_start, run_stop=run_stop, evaluations=evaluations, target_eval=target_eval,
                    train_s=train_s, eval_s=eval_s, clock=clock, notes=notes, warnings=warnings, zero_ms=zero,
                    timeline=timeline, clocks=clocks, eval_intervals=len(intervals), **base)


def _timeline(launch_ms: float | None, init_start: MllogEvent | None, init_stop: MllogEvent | None,
              run_start_ms: float | None, end_ms: float | None, train: list[tuple[float, float]],
              evals: list[tuple[float, float]], records: list[tuple[float, float]],
              ) -> tuple[float | None, list[Interval]]:
    """(origin in time_ms, phase intervals in seconds since it). The origin: the program's launch when known,
    else the first of init_start and run_start."""
    origins = [t for t in (launch_ms, init_start.time_ms if init_start else None, run_start_ms) if t is not None]
    if launch_ms is not None:
        zero: float | None = launch_ms
    else:
        zero = min(origins) if origins else end_ms
    if zero is None:
        return None, []
    out: list[tuple[str, float, float]] = []
    init_from = launch_ms if launch_ms is not None else (init_start.time_ms if init_start else None)
    if init_from is not None:
        init_to = next((t for t in (init_stop.time_ms if init_stop else None, run_start_ms, end_ms) if t is not None),
                       init_from)
        if run_start_ms is not None:
            init_to = min(init_to, run_start_ms)
        out.append(("model_init", init_from, max(init_to, init_from)))
    out += [("train", s, e) for s, e in train] + [("eval", s, e) for s, e in evals]
    out += [("record", s, e) for s, e in records]
    out.sort(key=lambda x: (x[1], x[2]))
    return zero, [Interval(phase, (s - zero) / 1000.0, (e - zero) / 1000.0) for phase, s, e in out]


def _clocks(timeline: list[Interval], zero: float | None, *, end_ms: float | None, target_eval: Evaluation | None,
            stop_ms: float | None, run_start_ms: float | None, launch_ms: float | None,
            init_start: MllogEvent | None, evaluations: list[Evaluation], eval_intervals: int,
            warnings: list[str] | None = None) -> dict[str, RuleClock]:
    """Every rule set's clock: at the target instant when an evaluation reached the target, else at ``end_ms``."""
    out: dict[str, RuleClock] = {}
    for name, rs in RULE_SETS.items():
        notes: list[str] = []
        at_ms = target_eval.end_ms if target_eval is not None else end_ms
        if name in MLPERF_RESULT and stop_ms is not None:
            at_ms = stop_ms
            notes.append("stops at run_stop (status success) after the target evaluation: MLPerf's result, "
                         "run_stop - run_start")
        elif target_eval is not None:
            notes.append("stops at the end of the first evaluation at or above the target")
        if zero is None or at_ms is None:
            out[name] = RuleClock(rules=name, start_s=0.0, at_s=0.0, clock_s=0.0, target_s=None, notes=notes)
            continue
        run_start_s = None if run_start_ms is None else (run_start_ms - zero) / 1000.0
        reading, by_the_rules = _read(rs, timeline, (at_ms - zero) / 1000.0, run_start_s)
        if not rs.contiguous:
            if launch_ms is not None:
                notes.insert(0, "starts at the program's launch (its start-up and init count)")
            elif init_start is not None:
                notes.insert(0, "starts at init_start (the program's init counts)")
            else:
                notes.insert(0, "starts at run_start: the log has no init_start, so the program's init is not on "
                                "the clock")
            if evaluations and eval_intervals < len(evaluations):
                notes.append("evaluations without eval_start/eval_stop intervals count as training")
        elif run_start_s is not None and abs(reading.start_s - run_start_s) < 1e-9:
            notes.insert(0, "starts at run_start (initialization before it is excluded)")
        notes.extend(reading.notes)
        clock_s = _clock_value(reading.seconds)
        if by_the_rules is not None:
            ruled = _clock_value(by_the_rules.seconds)
            notes.extend(by_the_rules.notes)
            note = (f"the program's initialization before run_start took {run_start_s - timeline[0].start_s:.1f} s, "
                    f"more than the {rs.title} rules allow before the clock ({(rs.max_init_excluded_s or 0) / 60:g} "
                    f"minutes; MLPerf's compliance checker does not check it): the {name} figures are MLPerf's "
                    f"reported result, from run_start; started at the limit, the clock would read {ruled:.3f} s")
            notes.append(note)
            if warnings is not None and note not in warnings:
                warnings.append(note)
        out[name] = RuleClock(
            rules=name, start_s=_clock_value(reading.start_s), at_s=_clock_value(reading.at_s), clock_s=clock_s,
            target_s=clock_s if target_eval is not None else None,
            excluded_s={k: _clock_value(v) for k, v in reading.excluded_s.items()}, notes=notes)
    return out


def _read(rules: RuleSet, timeline: list[Interval], at_s: float,
          run_start_s: float | None) -> tuple[ClockReading, ClockReading | None]:
    """(the reading recorded, the rules' own reading when that differs). MLPerf's result runs from run_start
    (see MLPERF_RESULT); anything else is ``read_clock`` as it is."""
    reading = read_clock(rules, timeline, at_s)
    if rules.name not in MLPERF_RESULT or run_start_s is None or abs(reading.start_s - run_start_s) < 1e-9:
        return reading, None
    reported = replace(reading, start_s=run_start_s, seconds=max(0.0, at_s - run_start_s), notes=())
    return reported, reading


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


def _init_seconds(start: MllogEvent | None, stop: MllogEvent | None, run_start: MllogEvent | None) -> float | None:
    stop = stop or run_start
    if start is None or stop is None or stop.time_ms < start.time_ms:
        return None
    return (stop.time_ms - start.time_ms) / 1000.0


def _log_info(events: Sequence[MllogEvent]) -> dict[str, Any]:
    """Framework, model, seed, batch size and other configuration logged before run_start (first value wins), and
    the ``submission_*`` keys (what the program declares about its system) from anywhere in the log."""
    hp: dict[str, Any] = {}
    submission: dict[str, Any] = {}
    framework = model = None
    configuring = True
    for e in events:
        if e.key == RUN_START:
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
    if framework is None and isinstance(submission.get("submission_framework"), str):
        framework = submission["submission_framework"].strip() or None
    return dict(framework=framework, model=model, seed=_int(hp.get(SEED)),
                global_batch_size=_int(hp.get("global_batch_size")), hyperparameters=hp, submission=submission)


def _check_clock(run_start: MllogEvent, window: Sequence[MllogEvent], tolerance: Tolerance | None,
                 launch: tuple[float, float] | None = None) -> ClockCheck:
    """``launch``: (time_ms, wall) of the program's launch (live mode), so the start-up that a clock starting at
    the launch counts is checked too: run_start's time after the launch by the program's clock and by the wall's."""
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
    if launch is not None:
        program_s = (run_start.time_ms - launch[0]) / 1000.0
        wall_s = run_start.wall - launch[1]
        deviation = abs(program_s - wall_s)
        check.events_checked += 1
        check.max_deviation_s = max(check.max_deviation_s, deviation)
        if deviation - tolerance.allowed(wall_s) > max(worst_excess, 0.0):
            check.trusted = False
            check.worst_lineno, check.worst_key = run_start.lineno, run_start.key
            check.worst_program_s, check.worst_wall_s = program_s, wall_s
            check.reason = (f"the program's timestamps disagree with the wall clock: run_start at line "
                            f"{run_start.lineno} is {program_s:.3f} s after the program's launch by its time_ms but "
                            f"arrived {wall_s:.3f} s after the launch (tolerance {tolerance})")
            return check
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
