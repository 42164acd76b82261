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
``eval_accuracy`` line, or at its ``eval_stop`` when the accuracy is logged inside the interval; a target of two
metrics (Stable Diffusion's FID and CLIP, logged as two records of one ``samples_count``) is one evaluation once
both are logged. The target is a ``Goal`` (daybreak.mlperf_benchmarks): each criterion in its metric's direction.

Two readings of a log:

* the **DAWNBench reading** (and, for daybreak's own tasks, MLPerf's clock too): the clock at the end of the first
  evaluation that meets the target after ``run_start``, logged before ``run_stop`` and not timed after it (an
  evaluation after the clock stopped, such as Stable Diffusion's offline ones, is not a crossing); for daybreak's
  tasks under ``mlperf``, when the run then stops with ``run_stop`` status success, at ``run_stop``;
* **MLPerf's verdict** on a log of one of its benchmarks (``mlperf_round`` given): reached when ``run_stop``
  says ``success``, the initialization (first ``init_start`` to ``init_stop``) stayed under the round's limit, and
  (closed division) some evaluation in the log met the round's target, as MLPerf's compliance checker requires;
  the time is then run_stop - run_start, MLPerf's own. Aborted, cut off, too long an initialization: not reached,
  whatever an evaluation crossed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from daybreak.errors import ConfigError
from daybreak.external.mllog_clock import ClockCheck, Tolerance, check_clock
from daybreak.external.mllog_reader import (
    AccuracyUnit, BadLine, Declared, MllogEvent, as_number, is_number, log_info, log_is_percent, quality_values,
)
from daybreak.metrics import TOP1, Metric
from daybreak.mlperf_benchmarks import Goal, init_limit
from daybreak.records.mllog import CHECKPOINT_START, CHECKPOINT_STOP, RECORD_PHASE, C
from daybreak.rules import DEFAULT_RULES, RULE_SETS, ClockReading, Interval, RuleSet, get_rules, read_clock

# Rule sets whose figure for an external program is MLPerf's reported result: from run_start, and, for a run that
# stops with run_stop status success right after its target evaluation, to run_stop (run_stop - run_start). For a
# log of daybreak's own tasks it is measured from run_start even where the init before it took longer than the
# rules allow (a warning then gives the rules' own reading); on a log of an MLPerf benchmark such a run is not
# MLPerf's result at all (MLPerf's verdict, below).
MLPERF_RESULT = frozenset({"mlperf"})
DAWNBENCH_READING = "dawnbench"


# --- analysis ----------------------------------------------------------------------------------------------
@dataclass
class Evaluation:
    index: int  # 1-based, among evaluations after run_start
    accuracy: float  # the headline metric's value: a fraction for daybreak's tasks, as logged for MLPerf's
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
    values: dict[str | None, float] = field(default_factory=dict)  # each part of the goal (Stable Diffusion: FID, CLIP)
    after_stop: bool = False  # timed after run_stop (an offline evaluation): not a crossing


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
class MlperfVerdict:
    """MLPerf's own verdict on a log of one of its benchmarks (see the module's docstring)."""

    round: str
    division: str
    reached: bool
    reason: str  # why not reached ("" when reached)
    init_s: float | None  # first init_start to init_stop, as MLPerf's checker measures it
    init_limit_s: float
    init_limit_source: str
    target_met: bool  # some evaluation in the log met the target (the checker's ATLEAST_ONE_CHECK)
    time_s: float | None  # run_stop - run_start when reached


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
    target_eval: Evaluation | None  # first evaluation meeting the target (the DAWNBench reading; trusted or not)
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
    metric: Metric = TOP1  # the headline metric (the goal's first criterion)
    goal: Goal | None = None
    mlperf: MlperfVerdict | None = None  # a log of an MLPerf benchmark: MLPerf's verdict

    @property
    def target_claimed(self) -> bool:
        return self.clocks.get(self.rules) is not None and self.clocks[self.rules].target_s is not None

    @property
    def reached(self) -> bool:
        """Reached under the headline rule set, with timestamps that are trusted."""
        return self.target_claimed and self.clock.trusted

    @property
    def time_to_target_s(self) -> float | None:
        clock = self.clocks.get(self.rules)
        return clock.target_s if self.reached and clock is not None else None

    @property
    def best_accuracy(self) -> float | None:
        return self.metric.best(e.accuracy for e in self.evaluations)

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
            launch_ms: float | None = None, launch_wall: float | None = None, metric: Metric = TOP1,
            goal: Goal | None = None, mlperf_round: str | None = None, malformed: Sequence[BadLine] = ()) -> Analysis:
    """Phase timeline, evaluations, every rule set's clock and everything else the record needs, from the
    events in the order they were logged. ``rules``: the headline rule set (``Evaluation.elapsed_s``,
    ``time_to_target_s``); every rule set is computed. ``launch_ms``: when daybreak started the program, in the
    program's time_ms (live mode), else None; ``launch_wall``: the same instant by daybreak's wall clock.
    ``tolerance`` None skips the wall clock cross-check (``--log``); events without ``wall`` are not checked.
    ``metric`` and ``target``: a daybreak task's, which say whether an evaluation reaches it (``Metric.reaches``);
    ``goal``, an MLPerf benchmark's target for its round (daybreak.mlperf_benchmarks), replaces them, and with
    ``mlperf_round`` the mlperf figure is MLPerf's verdict on the log (``MlperfVerdict``), which ``malformed``
    records (the reader's) make not reached.
    """
    try:
        headline = get_rules(rules).name
    except ValueError as err:
        raise ConfigError(str(err)) from None
    goal = goal or Goal.single(metric, target)
    metric, target = goal.headline.metric, goal.headline.target
    percent = log_is_percent(events, unit) if goal.parts == (None,) else False
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
                first_time_ms=min(times, default=None), last_time_ms=max(times, default=None), metric=metric,
                goal=goal, **vars(info))
    if info.seed is None:
        notes.append("the log has no seed")
    if rs_index is None or run_start is None:
        ignored = sum(1 for e in events if e.key == C.EVAL_ACCURACY)
        if ignored:
            notes.append(f"{ignored} eval_accuracy line(s) ignored: no run_start")
        end_ms = max(times, default=launch_ms)
        zero, timeline = _timeline(launch_ms, init_start, init_stop, None, end_ms, [], [], [])
        clocks = _clocks(timeline, zero, end_ms=end_ms, at={}, run_start_ms=None,
                         launch_ms=launch_ms, init_start=init_start, evaluations=[], eval_intervals=0)
        verdict = None if mlperf_round is None else mlperf_verdict(events, goal, mlperf_round, malformed)
        return Analysis(run_start=None, run_stop=None, evaluations=[], target_eval=None, train_s=0.0, eval_s=0.0,
                        clock=ClockCheck(checked=False, trusted=True), notes=notes, warnings=warnings,
                        zero_ms=zero, timeline=timeline, clocks=clocks, mlperf=verdict, **base)

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
    assert zero is not None  # (run_start is an origin)

    def seconds(ms: float) -> float:
        return (ms - zero) / 1000.0

    evaluations: list[Evaluation] = []
    window_ends: list[int] = []  # per evaluation: index in `run` of the last event its timing depends on
    prev_cover = 0.0
    backwards: MllogEvent | None = None
    last_end = -math.inf
    stop_time_ms = run_stop.time_ms if run_stop is not None else math.inf
    for k, (members, values) in enumerate(_group_evaluations(run, accuracy_events, goal), start=1):
        end_ms, last_i = -math.inf, 0
        for i, owner in members:
            end, last = run[i].time_ms, i
            if owner is not None and intervals[owner][1] > end:
                end = intervals[owner][1]
                last = max(i, intervals[owner][3] if intervals[owner][3] is not None else i)
            end_ms, last_i = max(end_ms, end), max(last_i, last)
        e = run[members[-1][0]]
        if backwards is None and (end_ms < t0 or end_ms < last_end - 1000.0):
            backwards = e
        last_end = max(last_end, end_ms)
        cover = _covered(merged, end_ms)
        clock_s = {name: _clock_value(_read(rs, timeline, seconds(end_ms), seconds(t0))[0].seconds)
                   for name, rs in RULE_SETS.items()}
        raw = values[goal.headline.part]
        epoch, epoch_known, samples = _epoch(e, info, k)
        bs = info.global_batch_size
        step_num = as_number(e.metadata.get(C.STEP_NUM))
        evaluations.append(Evaluation(
            index=k, accuracy=raw / 100.0 if percent else raw, raw_value=raw, time_ms=e.time_ms, end_ms=end_ms,
            elapsed_s=clock_s[headline], eval_s=max(cover - prev_cover, 0.0) / 1000.0, epoch=epoch,
            epoch_known=epoch_known, step=int(samples // bs) if samples is not None and bs else
            (int(step_num) if step_num is not None else None),
            samples_count=samples, lineno=e.lineno, wall=e.wall, clock_s=clock_s,
            values={p: (v / 100.0 if percent else v) for p, v in values.items()},
            after_stop=max(run[i].time_ms for i, _ in members) > stop_time_ms))
        window_ends.append(last_i)
        prev_cover = max(prev_cover, cover)
    offline = sum(1 for ev in evaluations if ev.after_stop)
    if offline:
        notes.append(f"{offline} evaluation(s) timed after run_stop (evaluated offline, as Stable Diffusion's "
                     "checkpoints are): not crossings of the target")
    if any(not ev.epoch_known for ev in evaluations):
        notes.append("eval_accuracy without epoch_num (or samples_count with train_samples): epochs are counted "
                     "as evaluations")
    if len(intervals) < len(evaluations):
        warnings.append(
            ("the program logs no eval_start/eval_stop intervals" if not intervals else
             f"only {len(intervals)} eval_start/eval_stop interval(s) for {len(evaluations)} evaluations")
            + ": evaluation time could not be excluded under dawnbench (it counts as training there); log "
              "eval_start and eval_stop around each evaluation")

    # the DAWNBench reading: the first evaluation meeting the target, before the clock stopped
    target_k = next((k for k, ev in enumerate(evaluations) if not ev.after_stop and goal.met(ev.values)), None)
    verdict = None if mlperf_round is None else mlperf_verdict(events, goal, mlperf_round, malformed)
    if verdict is not None and backwards is not None:
        # MLPerf's verdict reads run_start and run_stop only; evaluations re-logged with earlier timestamps (some
        # submitters' offline evaluations do so) leave no DAWNBench reading to trust
        warnings.append(f"the evaluations' timestamps go backwards (eval_accuracy at line {backwards.lineno} is timed "
                        "before run_start or an earlier evaluation): no DAWNBench reading is taken; MLPerf's verdict "
                        "reads run_start and run_stop only")
        target_k = None
    target_eval: Evaluation | None
    if target_k is not None:
        target_eval = evaluations[target_k]
        window = run[: window_ends[target_k] + 1]
        end_ms = target_eval.end_ms
    else:
        target_eval = None
        window = run
        end_ms = run_end_ms
    train_s = sum(max(0.0, min(e, end_ms) - s) for s, e in train) / 1000.0
    eval_s = _covered(merged, end_ms) / 1000.0

    # where each rule set's clock stops at the target (absent: not reached under it)
    at: dict[str, float] = {}
    at_notes: dict[str, str] = {}
    if target_eval is not None:
        for name in RULE_SETS:
            at[name] = target_eval.end_ms
            at_notes[name] = "stops at the end of the first evaluation meeting the target"
    if verdict is not None:  # MLPerf's own verdict replaces the reading of its clock
        at.pop("mlperf", None)
        at_notes.pop("mlperf", None)
        if verdict.reached and run_stop is not None:  # (a verdict reached has its run_stop)
            at["mlperf"] = run_stop.time_ms
            at_notes["mlperf"] = ("stops at run_stop (status success): MLPerf's result, run_stop - run_start, "
                                  f"under the rules of MLPerf Training {verdict.round}")
    elif (target_eval is not None and target_k == len(evaluations) - 1 and run_stop is not None
            and str(run_stop.metadata.get(C.STATUS, "")).lower() == C.SUCCESS and run_stop.time_ms >= target_eval.end_ms):
        # MLPerf's result runs to run_stop when the run stops, successfully, right after its target evaluation
        at["mlperf"] = run_stop.time_ms
        at_notes["mlperf"] = ("stops at run_stop (status success) after the target evaluation: MLPerf's result, "
                              "run_stop - run_start")
    clocks = _clocks(timeline, zero, end_ms=run_end_ms, at=at, at_notes=at_notes, run_start_ms=t0,
                     launch_ms=launch_ms, init_start=init_start, evaluations=evaluations, eval_intervals=len(intervals),
                     warnings=warnings if verdict is None else None)
    if target_eval is not None:  # the target row of the history says the time-to-target of each rule set
        for name, c in clocks.items():
            if c.target_s is not None:
                target_eval.clock_s[name] = c.target_s
        target_eval.elapsed_s = target_eval.clock_s[headline]

    launch = None if launch_ms is None or launch_wall is None else (launch_ms, launch_wall)
    clock = check_clock(run_start, window, tolerance, launch)
    if backwards is not None and clock.trusted and verdict is None:
        clock.trusted = False
        clock.reason = (f"the program's timestamps go backwards: eval_accuracy at line {backwards.lineno} is "
                        f"timed before run_start or before an earlier evaluation")
    return Analysis(run_start=run_start, run_stop=run_stop, evaluations=evaluations, target_eval=target_eval,
                    train_s=train_s, eval_s=eval_s, clock=clock, notes=notes, warnings=warnings, zero_ms=zero,
                    timeline=timeline, clocks=clocks, eval_intervals=len(intervals), mlperf=verdict, **base)


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


def _clocks(timeline: list[Interval], zero: float | None, *, end_ms: float | None, at: dict[str, float],
            run_start_ms: float | None, launch_ms: float | None, init_start: MllogEvent | None,
            evaluations: list[Evaluation], eval_intervals: int, at_notes: dict[str, str] | None = None,
            warnings: list[str] | None = None) -> dict[str, RuleClock]:
    """Every rule set's clock: at its target instant (``at``) where it reached the target, else at ``end_ms``.
    ``warnings`` None: no warning about an initialization longer than the rules allow (MLPerf's verdict on an
    MLPerf benchmark's log says it instead)."""
    out: dict[str, RuleClock] = {}
    for name, rs in RULE_SETS.items():
        notes: list[str] = [at_notes[name]] if at_notes and name in at_notes else []
        at_ms = at.get(name, end_ms)
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
        if by_the_rules is not None and run_start_s is not None and warnings is not None:
            ruled = _clock_value(by_the_rules.seconds)
            notes.extend(by_the_rules.notes)
            note = (f"the program's initialization before run_start took {run_start_s - timeline[0].start_s:.1f} s, "
                    f"more than the {(rs.max_init_excluded_s or 0) / 60:g} minutes the {rs.title} rules allow before "
                    f"the clock (MLPerf's compliance checker rejects such a run): the {name} figures are measured "
                    f"from run_start, as MLPerf reports a run; started at the limit, the clock would read {ruled:.3f} s")
            notes.append(note)
            if note not in warnings:
                warnings.append(note)
        out[name] = RuleClock(
            rules=name, start_s=_clock_value(reading.start_s), at_s=_clock_value(reading.at_s), clock_s=clock_s,
            target_s=clock_s if name in at else None,
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


# the metadata keys that number an evaluation, in the order a goal of several parts groups its records by when its
# round's key (Goal.aggregate_by) is not there
_EVAL_KEYS = (C.SAMPLES_COUNT, C.EPOCH_NUM, C.STEP_NUM)


def _group_evaluations(run: Sequence[MllogEvent], accuracy_events: list[tuple[int, int | None]],
                       goal: Goal) -> list[tuple[list[tuple[int, int | None]], dict[str | None, float]]]:
    """The evaluations of a run on its timeline: (its eval_accuracy records, the goal's values they hold), in the
    order they complete. A one-metric goal: each record is one evaluation. A goal of several parts: the records of
    one value of the round's key (``goal.aggregate_by``: Stable Diffusion's step_num in v3.1, samples_count from
    v4.0; where a record lacks it, its samples_count, epoch_num or step_num, else consecutive records) make one
    evaluation once every part is there, as MLPerf's checker aggregates Stable Diffusion's FID and CLIP (NVIDIA's
    v3.1 logs every FID before every CLIP); a record holding none of the parts is not an evaluation."""
    out: list[tuple[list[tuple[int, int | None]], dict[str | None, float]]] = []
    pending: dict[Any, tuple[list[tuple[int, int | None]], dict[str | None, float]]] = {}
    keys = (goal.aggregate_by, *_EVAL_KEYS) if goal.aggregate_by else _EVAL_KEYS
    for i, owner in accuracy_events:
        values = quality_values(run[i], goal.parts)
        if not values:
            continue
        md = run[i].metadata
        step = next((md[k] for k in keys if k in md), None)
        key = step if isinstance(step, (int, float)) and not isinstance(step, bool) else None
        members, got = pending.setdefault(key, ([], {}))
        members.append((i, owner))
        got.update(values)
        if all(p in got for p in goal.parts):
            out.append(pending.pop(key))
    return out


def checker_evaluations(events: Sequence[MllogEvent], goal: Goal) -> tuple[list[dict[str | None, float]], str]:
    """The evaluations MLPerf's compliance checker holds against the target (its ATLEAST_ONE_CHECK), each as the
    goal's values, and why it cannot judge the log ("" when it can). Every eval_accuracy record of the log counts,
    wherever it is timed. A goal aggregated by a key (Stable Diffusion): the records that name their ``metric``,
    one evaluation per value of the key, a later record of a part replacing an earlier one (the checker's BEGIN
    block); each must hold every part. Otherwise each record is one evaluation, which must hold every part as a
    number (the checker's test of the target fails on anything else)."""
    out: list[dict[str | None, float]] = []
    parts = " and ".join(str(p) for p in goal.parts)
    key = goal.aggregate_by
    if key is None:
        for e in events:
            if e.key != C.EVAL_ACCURACY:
                continue
            held = quality_values(e, goal.parts)
            if not all(p in held for p in goal.parts):
                return out, (f"eval_accuracy at line {e.lineno} is {_short(e.value)}, which MLPerf's checker cannot "
                             f"compare with the target {goal.label} (its compliance check stops there)")
            out.append(held)
        return out, ""
    aggregated: dict[Any, dict[str, Any]] = {}
    for e in events:
        if e.key != C.EVAL_ACCURACY or "metric" not in e.metadata:
            continue
        step = e.metadata.get(key)
        if key not in e.metadata or not isinstance(step, (str, int, float, bool, type(None))):
            has = f"carries no {key}" if key not in e.metadata else f"has a {key} of {_short(step)}"
            return out, (f"eval_accuracy at line {e.lineno} ({e.metadata['metric']}) {has}, by which MLPerf's "
                         f"checker of this round aggregates {parts} (its compliance check stops there)")
        aggregated.setdefault(step, {})[str(e.metadata["metric"])] = e.value
    for step, got in aggregated.items():
        values: dict[str | None, float] = {p: float(got[p]) for p in goal.parts
                                           if p is not None and p in got and is_number(got[p])}
        missing = [str(p) for p in goal.parts if p not in values]
        if missing:
            return out, (f"the evaluation of {key} {step} has no number for {' and '.join(missing)}: MLPerf's checker "
                         f"requires {parts} in every evaluation it aggregates")
        out.append(values)
    return out, ""


def target_fits(events: Sequence[MllogEvent], goal: Goal) -> bool:
    """Whether a log's evaluations fit ``goal`` (which round a log names none of): some evaluation MLPerf's checker
    judges meets it, and the run stopped at it: no evaluation inside the run (between run_start and run_stop,
    timed by then) came after the first that met it, as an MLPerf run stops at its target (one that went on was
    aiming at a stricter one). Evaluations all made after the clock stopped (Stable Diffusion's offline ones) are
    held to the first condition only."""
    judged, unjudged = checker_evaluations(events, goal)
    if unjudged or not any(goal.met(values) for values in judged):
        return False
    start = next((i for i, e in enumerate(events) if e.key == C.RUN_START), None)
    if start is None:
        return True
    stop = next((e for e in events[start + 1:] if e.key == C.RUN_STOP), None)
    inside = [e for e in events[start + 1:] if e.key == C.EVAL_ACCURACY
              and (stop is None or (e.lineno < stop.lineno and e.time_ms <= stop.time_ms))]
    if goal.aggregate_by is not None:
        return True
    met = [goal.met(quality_values(e, goal.parts)) for e in inside]
    return not any(met) or met.index(True) == len(met) - 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def mlperf_verdict(events: Sequence[MllogEvent], goal: Goal, round_: str,
                   malformed: Sequence[BadLine] = ()) -> MlperfVerdict:
    """MLPerf's verdict on a log of one of its benchmarks under the rules of ``round_`` (the module's docstring):
    what its summarizer counts as a converged run, from the checks that concern time and quality (run_stop's
    status, the initialization limit, the target), and a log that parses (its summarizer drops one with a
    malformed record). The first run_start and the first run_stop after it."""
    start_i = next((i for i, e in enumerate(events) if e.key == C.RUN_START), None)
    run_start = events[start_i] if start_i is not None else None
    run_stop = None if start_i is None else next((e for e in events[start_i + 1:] if e.key == C.RUN_STOP), None)
    division = str(log_info(events).submission.get(C.SUBMISSION_DIVISION) or C.CLOSED).strip().lower()
    limit = init_limit(round_, division)
    stop = next((i for i, e in enumerate(events) if e.key == C.INIT_STOP), None)
    starts = [e.time_ms for e in events[:stop] if e.key == C.INIT_START] if stop is not None else []
    init_ms = events[stop].time_ms - min(starts) if starts and stop is not None else None
    judged, unjudged = checker_evaluations(events, goal)
    target_met = not unjudged and any(goal.met(values) for values in judged)
    status = run_stop.metadata.get(C.STATUS) if run_stop is not None else None
    reason = "the log has no run_start" if run_start is None else ""
    if not reason and malformed:
        reason = (f"its log has {len(malformed)} malformed record(s) (first at line {malformed[0].lineno}: "
                  f"{malformed[0].reason}): MLPerf's summarizer drops a log that does not parse")
    elif not reason and run_stop is None:
        reason = "the log has no run_stop: the run did not finish"
    elif not reason and str(status).lower() != C.SUCCESS:
        reason = f"run_stop status {status!r}, not 'success'"
    elif not reason and run_stop is not None and run_start is not None and run_stop.time_ms <= run_start.time_ms:
        reason = "run_stop is not after run_start"
    elif not reason and init_ms is not None and init_ms >= limit.seconds * 1000.0:
        reason = (f"its initialization took {init_ms / 60000:.1f} minutes (first init_start to init_stop), not less than "
                  f"the {limit.text} MLPerf Training {round_} allows in the {division} division: MLPerf's compliance "
                  "checker rejects the run and its summarizer counts it as not converged")
    elif not reason and unjudged:
        reason = unjudged
    elif not reason and division != C.OPEN and not target_met:
        reason = f"no evaluation in the log met the target {goal.label}"
    reached = not reason
    time_s = _clock_value((run_stop.time_ms - run_start.time_ms) / 1000.0) \
        if reached and run_stop is not None and run_start is not None else None
    return MlperfVerdict(round=round_, division=division, reached=reached, reason=reason,
                         init_s=None if init_ms is None else init_ms / 1000.0,
                         init_limit_s=limit.seconds, init_limit_source=limit.source, target_met=target_met,
                         time_s=time_s)


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
