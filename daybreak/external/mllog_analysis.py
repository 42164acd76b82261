"""Computing time-to-target from an external program's ``:::MLLOG`` events (daybreak.external.mllog_reader).

Pure functions only: ``analyze`` turns the events of a run into a phase timeline, evaluations, every rule
set's clock (daybreak.rules) and a clock check (daybreak.external.mllog_clock).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from daybreak.errors import ConfigError
from daybreak.external.mllog_clock import ClockCheck, Tolerance, check_clock
from daybreak.external.mllog_reader import AccuracyUnit, Declared, MllogEvent, as_number, log_info, log_is_percent
from daybreak.metrics import TOP1, Metric
from daybreak.records.mllog import CHECKPOINT_START, CHECKPOINT_STOP, RECORD_PHASE, C
from daybreak.rules import DEFAULT_RULES, RULE_SETS, ClockReading, Interval, RuleSet, get_rules, read_clock

# Rule sets whose figure for an external program is MLPerf's reported result: from run_start, and, for a run that
# stops with run_stop status success right after its target evaluation, to run_stop (run_stop - run_start), even
# where the init before run_start exceeds the rules' 20 minutes (MLPerf's compliance checker does not check it,
# and published results such as tinycorp's v4.0 ResNet runs have such inits): a warning says so.
MLPERF_RESULT = frozenset({"mlperf"})


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
        s = self.run_stop.metadata.get(C.STATUS)
        return s if isinstance(s, str) else None


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
            launch_ms: float | None = None, launch_wall: float | None = None, metric: Metric = TOP1) -> Analysis:
    """Phase timeline, evaluations, every rule set's clock and everything else the record needs, from the
    events in the order they were logged. ``rules``: the headline rule set (``Evaluation.elapsed_s``,
    ``time_to_target_s``); every rule set is computed. ``launch_ms``: when daybreak started the program, in the
    program's time_ms (live mode), else None; ``launch_wall``: the same instant by daybreak's wall clock.
    ``tolerance`` None skips the wall clock cross-check (``--log``); events without ``wall`` are not checked.
    ``metric``: the task's, which says whether an evaluation reaches ``target`` (``Metric.reaches``).
    """
    try:
        headline = get_rules(rules).name
    except ValueError as e:
        raise ConfigError(str(e)) from None
    percent = log_is_percent(events, unit)
    notes: list[str] = []
    warnings: list[str] = []
    info = log_info(events)

    rs_index = next((i for i, e in enumerate(events) if e.key == C.RUN_START), None)
    run_start = events[rs_index] if rs_index is not None else None
    init_start = next((e for e in events if e.key == C.INIT_START), None)
    init_stop = next((e for e in events if e.key == C.INIT_STOP), None)
    init_s = _init_seconds(init_start, init_stop, run_start)
    times = [e.time_ms for e in events]
    base = dict(target=target, rules=headline, percent=percent, events=len(events), init_s=init_s,
                first_time_ms=min(times, default=None), last_time_ms=max(times, default=None), **vars(info))
    if info.seed is None:
        notes.append("the log has no seed")
    if run_start is None:
        ignored = sum(1 for e in events if e.key == C.EVAL_ACCURACY)
        if ignored:
            notes.append(f"{ignored} eval_accuracy line(s) ignored: no run_start")
        end_ms = max(times, default=launch_ms)
        zero, timeline = _timeline(launch_ms, init_start, init_stop, None, end_ms, [], [], [])
        clocks = _clocks(timeline, zero, end_ms=end_ms, target_eval=None, stop_ms=None, run_start_ms=None,
                         launch_ms=launch_ms, init_start=init_start, evaluations=[], eval_intervals=0)
        return Analysis(run_start=None, run_stop=None, evaluations=[], target_eval=None, train_s=0.0, eval_s=0.0,
                        clock=ClockCheck(checked=False, trusted=True), notes=notes, warnings=warnings,
                        zero_ms=zero, timeline=timeline, clocks=clocks, **base)

    before = sum(1 for e in events[:rs_index] if e.key == C.EVAL_ACCURACY)
    if before:
        notes.append(f"{before} eval_accuracy line(s) before run_start ignored")
    again = next((e for e in events[rs_index + 1:] if e.key == C.RUN_START), None)
    if again is not None:
        notes.append(f"a second run_start (line {again.lineno}) ignored: only the first run is timed")

    # the run: events after run_start up to and including the first run_stop
    run: list[MllogEvent] = []
    run_stop = None
    for e in events[rs_index + 1:]:
        run.append(e)
        if e.key == C.RUN_STOP:
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
        if e.key == C.EVAL_START:
            if open_i is not None:  # never closed: ends at its evaluation's accuracy line, or is empty
                intervals[open_i][1] = intervals[open_i][2]
            intervals.append([e.time_ms, e.time_ms, e.time_ms, None])
            open_i = len(intervals) - 1
        elif e.key == C.EVAL_STOP:
            if open_i is not None:
                intervals[open_i][1] = max(e.time_ms, intervals[open_i][0])
                intervals[open_i][3] = i
                open_i = None
        elif e.key == C.EVAL_ACCURACY:
            if open_i is not None and intervals[open_i][2] == intervals[open_i][0]:
                intervals[open_i][2] = max(e.time_ms, intervals[open_i][0])
            accuracy_events.append((i, open_i))
        elif e.key == CHECKPOINT_START or (e.key == RECORD_PHASE and e.event_type == C.INTERVAL_START):
            open_checkpoint = e.time_ms
        elif (e.key == CHECKPOINT_STOP or (e.key == RECORD_PHASE and e.event_type == C.INTERVAL_END)) \
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
        bs = info.global_batch_size
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
    target_k = next((k for k, ev in enumerate(evaluations) if metric.reaches(ev.accuracy, target)), None)
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
            and str(run_stop.metadata.get(C.STATUS, "")).lower() == C.SUCCESS and run_stop.time_ms >= target_eval.end_ms):
        stop_ms = run_stop.time_ms
    clocks = _clocks(timeline, zero, end_ms=run_end_ms, target_eval=target_eval, stop_ms=stop_ms, run_start_ms=t0,
                     launch_ms=launch_ms, init_start=init_start, evaluations=evaluations, eval_intervals=len(intervals),
                     warnings=warnings)
    if target_eval is not None:  # the target row of the history says the time-to-target of each rule set
        for name, c in clocks.items():
            target_eval.clock_s[name] = c.target_s
        target_eval.elapsed_s = target_eval.clock_s[headline]

    launch = None if launch_ms is None or launch_wall is None else (launch_ms, launch_wall)
    clock = check_clock(run_start, window, tolerance, launch)
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


def _epoch(e: MllogEvent, info: Declared, index: int) -> tuple[float, bool, float | None]:
    md = e.metadata
    samples = as_number(md.get(C.SAMPLES_COUNT))
    epoch = as_number(md.get(C.EPOCH_NUM))
    if epoch is not None:
        return epoch, True, samples
    train_samples = info.hyperparameters.get(C.TRAIN_SAMPLES)
    train_samples = as_number(train_samples)
    if samples is not None and train_samples:
        return samples / train_samples, True, samples
    return float(index), False, samples


def _init_seconds(start: MllogEvent | None, stop: MllogEvent | None, run_start: MllogEvent | None) -> float | None:
    stop = stop or run_start
    if start is None or stop is None or stop.time_ms < start.time_ms:
        return None
    return (stop.time_ms - start.time_ms) / 1000.0
