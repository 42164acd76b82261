"""Plausibility of a daybreak run record (``result.json``): the checks every record passes before it ranks.

A record's figures must agree with one another and with physics; each refusal is one line naming the field:

* **dates** within [2017-01-01, tomorrow] (``started_at``, ``finished_at``, ``price_date``), and finished after
  started;
* **sections present and consistent** (:func:`check_sections`): every evaluation reads the same rule sets' clocks,
  the headline ``rules`` among them, and ``clocks`` holds the figures of exactly those; nodes <= world_size; the
  global batch is the per-device batch x world_size;
* **every number finite and bounded**: clocks and times at most ``MAX_SECONDS`` (1e6 hours), epochs at most 1e6,
  prices at most 1e6 USD/hour, accuracies fractions (a `daybreak time` record's accuracies are the timed program's
  claims, so its record model leaves them to this check), so no derived objective (time x price) can overflow;
* **history consistent with the totals**: ``time_to_target_s`` is the headline clock at the first evaluation
  at or above the record's target (likewise ``epochs_to_target``, ``steps_to_target`` and every rule set's
  ``clocks[...].time_to_target_s``); ``elapsed_s`` is the headline rule set's ``clock_s``; clocks, epochs and
  steps never go back; a record that says it did not reach the target has no evaluation at or above it;
* **the DAWNBench clock agrees with the raw phase intervals**: each evaluation's ``clock_s["dawnbench"]`` is what
  :func:`daybreak.rules.read_clock` reads on the record's own phases at the end of that evaluation, so a history
  rescaled after the run (all times divided by 1000) does not match its phases;
* **not shorter than the wall clock allows**: the ranked time is at most the command's wall time
  (``total_s``, and ``finished_at - started_at``) plus the slack ``daybreak time`` allows between two clocks
  (5 % + 2 s);
* **not absurdly small for the work done** (the lower bound, see below);
* **energy consistent and physical** (daybreak's hardware counters, see :func:`check_energy`): every figure finite,
  non-negative and at most ``MAX_ENERGY_J``; the joules counted up to each evaluation never go back;
  ``joules_to_target`` is what the history says at the first evaluation at or above the target; and the mean power
  over the ranked time is between ``MIN_WATTS`` (50 mW) and ``MAX_WATTS_PER_RANK`` (5 kW) per process: the counters
  a process reads are its GPU and its node's CPU packages and DRAM, which no machine runs below 50 mW or above a
  few kilowatts. A record whose energy fails these is refused like any other inconsistent record.

Prices: a price per hour (``cost_per_hour``, DAWNBench's ``costPerHour``) is either absent (or 0: not priced) or at
least ``min_usd_per_hour()``: a tenth (``PRICE_MARGIN``) of the cheapest instance in daybreak's price catalog
(daybreak.pricing; gcp-e2-standard-2, 2 vCPUs, 0.067 USD/hour), so 0.0067 USD/hour; no real machine rents for less,
and 1e-300 USD/hour would rank first on cost at 1e-301 USD. An inference cost per example must be at least that
price for the time the record's own batch-1 latency says one example takes.

Record shapes a reached daybreak run must have (not a `daybreak time` record of an external program, whose figures
are the program's own): ``steps_to_target``, ``epochs_to_target``, ``steps_per_epoch``, ``per_device_batch_size``
and ``global_batch_size``, and for a task whose data daybreak holds in memory (digits, mnist, cifar10) also
``effective_batch_size`` and ``train_examples``, with ``steps_per_epoch`` the whole global batches in
``train_examples``; every rule of ``clock`` stated; the seed in 0..2**32-1.

The lower bound. The ranked time must be at least ``MIN_CLOCK_S`` (10 ms) and at least ``MIN_STEP_S`` (1 us) per
optimizer step done by the target evaluation. An optimizer step has to fetch a batch and run a forward pass, a
backward pass and a parameter update: at least three dependent device operations, each of which costs at least
a kernel launch and a synchronization, which take microseconds on any current accelerator (and a 1 GHz
processor does only 1,000 cycles in 1 us). DAWNBench's clock also counts loading the dataset and building the
model. Real records sit orders of magnitude above both floors (daybreak's digits recipe: ~60 steps in ~5 s on a
CPU, i.e. ~80 ms per step): the floors only refuse the physically impossible (1e-300 s). A record that is
consistent and merely too good to be true is not refused: it is ``self-reported`` until the host reproduces it.
"""

from __future__ import annotations

import math
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from daybreak.leaderboard.ingest.submission import (
    MAX_ENERGY_J, MAX_QUANTITY, MAX_SECONDS, SubmissionError, check_date, reaches,
)

if TYPE_CHECKING:
    from daybreak.records.run import RunResult

MIN_CLOCK_S = 0.01
MIN_STEP_S = 1e-6
WALL_SLACK_RELATIVE = 0.05
WALL_SLACK_S = 2.0
MAX_STEPS = 10**12
MAX_WORLD_SIZE = 100_000
MIN_WATTS = 0.05
MAX_WATTS_PER_RANK = 5_000.0
PRICE_MARGIN = 10.0  # the price floor is the cheapest catalog instance's price / this
MAX_SEED = 2**32 - 1


@lru_cache(maxsize=1)
def cheapest_instance() -> tuple[str, float]:
    """(name, USD/hour) of the cheapest priced instance in daybreak's shipped catalog."""
    from daybreak.pricing import catalog

    item = min((i for i in catalog().values() if i.usd_per_hour > 0), key=lambda i: i.usd_per_hour)
    return item.name, item.usd_per_hour


def min_usd_per_hour() -> float:
    """The lowest price per hour the leaderboard takes (see the module docstring)."""
    return cheapest_instance()[1] / PRICE_MARGIN


def _floor_text() -> str:
    name, price = cheapest_instance()
    return (f"{min_usd_per_hour():g} USD/hour, a tenth of the cheapest machine in daybreak's price catalog ({name}, "
            f"{price:g} USD/hour): no real machine rents for less")


def check_price(usd_per_hour: float | None, what: str, field: str = "cost_per_hour") -> None:
    """A price per hour: None or 0 (not priced), else at least min_usd_per_hour()."""
    if usd_per_hour is not None and 0 < usd_per_hour < min_usd_per_hour():
        raise SubmissionError(f"{what}: {field} {usd_per_hour:g} is below {_floor_text()}")


def check_price_per_example(usd: float | None, latency_ms: float, what: str, field: str) -> None:
    """An inference cost per example: None or 0 (not priced), else at least the price floor for the time one
    example takes at the record's batch-1 latency."""
    floor = min_usd_per_hour() * latency_ms / 3.6e6
    if usd is not None and 0 < usd < floor:
        raise SubmissionError(f"{what}: {field} {usd:g} USD per example is below {floor:.3g} USD, what "
                              f"{latency_ms:g} ms (its latency) cost at {_floor_text()}")


def check_clock_shape(doc: Any, what: str) -> None:
    """A run record's ``clock`` states every rule of daybreak's clock (a record daybreak writes does, whatever its
    version: the rules were there from the first)."""
    from daybreak.records.run import ClockRules

    clock = doc.get("clock") if isinstance(doc, dict) else None
    if not isinstance(clock, dict):
        raise SubmissionError(f"{what}: clock: required field is missing (the rules the record's clock followed)")
    missing = [name for name in ClockRules.model_fields if name not in clock]
    if missing:
        raise SubmissionError(f"{what}: clock.{missing[0]}: required field is missing (a record states every rule "
                              f"of its clock: {', '.join(ClockRules.model_fields)})")


def check_required(run: "RunResult", what: str) -> None:
    """What a reached daybreak run's record must state (see the module docstring); the seed of any run."""
    if not 0 <= run.seed <= MAX_SEED:
        raise SubmissionError(f"{what}: seed {run.seed} is not in 0..{MAX_SEED} (2**32-1)")
    if not run.reached or run.recipe == "external" or run.device == "external":
        return
    required = ["steps_to_target", "epochs_to_target", "steps_per_epoch", "per_device_batch_size",
                "global_batch_size"]
    in_memory = _in_memory(run.task)
    if in_memory:
        required += ["effective_batch_size", "train_examples"]
    for name in required:
        if getattr(run, name) is None:
            raise SubmissionError(f"{what}: {name}: required field is null (a run that reached its target states it)")
    if in_memory:
        assert run.train_examples is not None and run.effective_batch_size is not None  # required just above
        steps = max(run.train_examples // (run.effective_batch_size * run.world_size), 1)
        if run.steps_per_epoch != steps:
            raise SubmissionError(f"{what}: steps_per_epoch {run.steps_per_epoch} is not the {steps} whole global "
                                  f"batches of {run.effective_batch_size} x {run.world_size} in train_examples "
                                  f"{run.train_examples}")


def _in_memory(task: str) -> bool:
    from daybreak.errors import ConfigError
    from daybreak.tasks import get_task

    try:
        return get_task(task).in_memory
    except ConfigError:
        return False


def close(a: float, b: float, rel: float = 1e-6, abs_tol: float = 1e-5) -> bool:
    return abs(a - b) <= abs_tol + rel * max(abs(a), abs(b))


def _finite(value: float | None, what: str, lo: float = 0.0, hi: float = MAX_SECONDS) -> float | None:
    return None if value is None else _number(value, what, lo, hi)


def _number(value: float, what: str, lo: float = 0.0, hi: float = MAX_SECONDS) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SubmissionError(f"{what} must be a number")
    if not math.isfinite(value):
        raise SubmissionError(f"{what} is not a finite number")
    if not lo <= value <= hi:
        raise SubmissionError(f"{what} {value:g} is out of range ({lo:g} to {hi:g})")
    return float(value)


def check_dates(run: "RunResult", what: str) -> None:
    start = check_date(run.started_at, f"{what}: started_at {run.started_at.date().isoformat()}")
    if run.finished_at is not None:
        end = check_date(run.finished_at, f"{what}: finished_at {run.finished_at.date().isoformat()}")
        if (end - start).total_seconds() < -1.0:
            raise SubmissionError(f"{what}: finished_at is before started_at")
    check_price_date(run.price_date, what)


def check_price_date(price_date: str | None, what: str) -> None:
    """A price's date (YYYY-MM-DD: the record models check the form) within [2017-01-01, tomorrow]."""
    if price_date is not None:
        check_date(datetime.fromisoformat(price_date), f"{what}: price_date {price_date}")


def check_numbers(run: "RunResult", what: str) -> None:
    """Every number of the record that the leaderboard reads: finite and within its bound."""
    for name in ("time_to_target_s", "init_s", "train_s", "eval_s", "total_s"):
        _finite(getattr(run, name), f"{what}: {name}")
    _finite(run.epochs_to_target, f"{what}: epochs_to_target", hi=MAX_QUANTITY)
    _finite(run.steps_to_target, f"{what}: steps_to_target", hi=MAX_STEPS)
    _finite(run.cost_per_hour, f"{what}: cost_per_hour", lo=-MAX_QUANTITY, hi=MAX_QUANTITY)
    _finite(run.cost_usd, f"{what}: cost_usd", lo=-MAX_QUANTITY * MAX_QUANTITY, hi=MAX_QUANTITY * MAX_QUANTITY)
    _finite(run.target, f"{what}: target", hi=1.0)
    _finite(run.world_size, f"{what}: world_size", lo=1, hi=MAX_WORLD_SIZE)
    _finite(run.final_accuracy, f"{what}: final_accuracy", hi=1.0)
    _finite(run.best_accuracy, f"{what}: best_accuracy", hi=1.0)
    for name, fig in run.clocks.items():
        _finite(fig.time_to_target_s, f"{what}: clocks.{name}.time_to_target_s")
        _finite(fig.clock_s, f"{what}: clocks.{name}.clock_s")
        _finite(fig.start_s, f"{what}: clocks.{name}.start_s")
    for i, p in enumerate(run.phases):
        _finite(p.start_s, f"{what}: phases[{i}].start_s")
        _finite(p.end_s, f"{what}: phases[{i}].end_s")
    previous = None
    for i, h in enumerate(run.history):
        _finite(h.epoch, f"{what}: history[{i}].epoch", hi=MAX_QUANTITY)
        _finite(h.step, f"{what}: history[{i}].step", hi=MAX_STEPS)
        _finite(h.elapsed_s, f"{what}: history[{i}].elapsed_s")
        _finite(h.eval_s, f"{what}: history[{i}].eval_s")
        _finite(h.accuracy, f"{what}: history[{i}].accuracy", hi=1.0)
        _finite(h.top1, f"{what}: history[{i}].top1", hi=1.0)
        _finite(h.top5, f"{what}: history[{i}].top5", hi=1.0)
        for name, value in h.clock_s.items():
            _finite(value, f"{what}: history[{i}].clock_s.{name}")
        if previous is not None:
            if h.epoch < previous.epoch:
                raise SubmissionError(f"{what}: history[{i}].epoch {h.epoch:g} is before the previous "
                                      f"evaluation's {previous.epoch:g}")
            if h.step < previous.step:
                raise SubmissionError(f"{what}: history[{i}].step {h.step} is before the previous evaluation's "
                                      f"{previous.step}")
            if h.elapsed_s < previous.elapsed_s:
                raise SubmissionError(f"{what}: history[{i}].elapsed_s goes back in time")
            for name, value in h.clock_s.items():
                if name in previous.clock_s and value < previous.clock_s[name]:
                    raise SubmissionError(f"{what}: history[{i}].clock_s.{name} goes back in time")
        previous = h


def check_totals(run: "RunResult", what: str) -> None:
    """The record's totals are what its own history says."""
    for i, h in enumerate(run.history):
        if run.rules in h.clock_s and not close(h.elapsed_s, h.clock_s[run.rules]):
            raise SubmissionError(f"{what}: history[{i}].elapsed_s {h.elapsed_s:g} s is not the {run.rules} clock "
                                  f"{h.clock_s[run.rules]:g} s the record says it is")
    index = next((i for i, h in enumerate(run.history) if reaches(h.accuracy, run.target)), None)
    if index is None:
        if run.reached or run.time_to_target_s is not None:
            raise SubmissionError(f"{what}: the record says it reached its target but no evaluation in its history "
                                  "is at or above it")
        return
    first = run.history[index]
    if not run.reached:
        raise SubmissionError(f"{what}: history[{index}] is at or above the target but the record says the run "
                              f"did not reach it (status {run.status})")
    if run.time_to_target_s is None or not close(run.time_to_target_s, first.elapsed_s):
        shown = "none" if run.time_to_target_s is None else f"{run.time_to_target_s:g} s"
        raise SubmissionError(f"{what}: time_to_target_s ({shown}) is not the clock at the first evaluation at or "
                              f"above the target (history[{index}]: {first.elapsed_s:g} s)")
    if run.epochs_to_target is not None and not close(run.epochs_to_target, first.epoch):
        raise SubmissionError(f"{what}: epochs_to_target {run.epochs_to_target:g} is not history[{index}].epoch "
                              f"{first.epoch:g}")
    if run.steps_to_target is not None and run.steps_to_target != first.step:
        raise SubmissionError(f"{what}: steps_to_target {run.steps_to_target} is not history[{index}].step "
                              f"{first.step}")
    for name, fig in run.clocks.items():
        if fig.time_to_target_s is None:
            raise SubmissionError(f"{what}: clocks.{name} has no time_to_target_s although the run reached the "
                                  "target")
        if name in first.clock_s and not close(fig.time_to_target_s, first.clock_s[name]):
            raise SubmissionError(f"{what}: clocks.{name}.time_to_target_s {fig.time_to_target_s:g} s is not the "
                                  f"{name} clock at the first evaluation at or above the target "
                                  f"({first.clock_s[name]:g} s)")


def check_sections(run: "RunResult", what: str) -> None:
    """The record's sections agree: the rule sets whose clocks the history read (``history[i].clock_s``) are the
    same at every evaluation, include the headline ``rules``, and each has its figures in ``clocks``; processes and
    batch sizes add up (nodes <= world_size; the global batch is the per-device batch the data source used x
    world_size)."""
    read = [set(h.clock_s) for h in run.history]
    if any(read):
        for i, names in enumerate(read):
            if names != read[0]:
                raise SubmissionError(f"{what}: history[{i}].clock_s reads {', '.join(sorted(names)) or 'no clock'}, "
                                      f"history[0].clock_s {', '.join(sorted(read[0]))}: every evaluation reads "
                                      "every rule set's clock")
        if run.rules not in read[0]:
            raise SubmissionError(f"{what}: rules: the headline rule set {run.rules!r} has no clock in the history "
                                  f"(history[0].clock_s: {', '.join(sorted(read[0]))})")
        missing = sorted(read[0] - set(run.clocks))
        if missing:
            raise SubmissionError(f"{what}: clocks: no figures for {', '.join(missing)} (the history reads their "
                                  "clocks; a record made by daybreak has clocks for every rule set)")
        extra = sorted(set(run.clocks) - read[0])
        if extra:
            raise SubmissionError(f"{what}: clocks.{extra[0]}: no evaluation in the history reads this clock")
    if run.nodes > run.world_size:
        raise SubmissionError(f"{what}: nodes: {run.nodes} nodes but world_size {run.world_size} processes")
    per_device = run.effective_batch_size or run.per_device_batch_size
    if run.global_batch_size is not None and per_device is not None \
            and run.global_batch_size != per_device * run.world_size:
        name = "effective_batch_size" if run.effective_batch_size else "per_device_batch_size"
        raise SubmissionError(f"{what}: global_batch_size {run.global_batch_size} is not {name} {per_device} x "
                              f"world_size {run.world_size}")
    if run.effective_batch_size is not None and run.per_device_batch_size is not None \
            and run.effective_batch_size > run.per_device_batch_size:
        raise SubmissionError(f"{what}: effective_batch_size {run.effective_batch_size} is larger than "
                              f"per_device_batch_size {run.per_device_batch_size} (the data source uses at most it)")


def check_latency(record: dict[str, Any], what: str) -> None:
    """An inference record's batch-1 latencies (validated by InferenceResult) agree with one another: n is the
    record's n_examples, the percentiles go up from min to max, the mean is between them and is total / n."""
    lat = record["latency"]
    if lat["n"] != record["n_examples"]:
        raise SubmissionError(f"{what}: latency.n {lat['n']} is not n_examples {record['n_examples']} (the batch-1 "
                              "pass times every example once)")
    order = ["min_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
    for low, high in zip(order, order[1:]):
        if lat[low] > lat[high] * (1 + 1e-9):
            raise SubmissionError(f"{what}: latency.{low} {lat[low]:g} is above latency.{high} {lat[high]:g}")
    if not lat["min_ms"] * (1 - 1e-9) <= lat["mean_ms"] <= lat["max_ms"] * (1 + 1e-9):
        raise SubmissionError(f"{what}: latency.mean_ms {lat['mean_ms']:g} is not between latency.min_ms and "
                              "latency.max_ms")
    if not close(lat["total_s"], lat["mean_ms"] * lat["n"] / 1000.0, rel=1e-6, abs_tol=1e-9):
        raise SubmissionError(f"{what}: latency.total_s {lat['total_s']:g} is not latency.mean_ms x latency.n "
                              f"({lat['mean_ms'] * lat['n'] / 1000.0:g} s)")


def check_phases(run: "RunResult", what: str) -> None:
    """Each evaluation's DAWNBench clock is what the record's own phase intervals give at the end of it."""
    from daybreak.rules import Interval, get_rules, read_clock

    if not run.history or not all("dawnbench" in h.clock_s for h in run.history):
        return  # a record made before clock rule sets: converted (and noted) by the reader
    if not run.phases:
        raise SubmissionError(f"{what}: phases: the record has clock readings but no phase intervals to check them "
                              "against")
    try:
        timeline = [Interval(p.phase, p.start_s, p.end_s) for p in run.phases]
    except ValueError as e:
        raise SubmissionError(f"{what}: phases: {e}") from None
    evals = sorted((i for i in timeline if i.phase == "eval"), key=lambda i: i.start_s)
    if len(evals) < len(run.history):
        raise SubmissionError(f"{what}: {len(run.history)} evaluations in the history but {len(evals)} evaluation "
                              "intervals in the phases")
    rules = get_rules("dawnbench")
    for i, (h, interval) in enumerate(zip(run.history, evals)):
        expected = read_clock(rules, timeline, interval.end_s).seconds
        if not close(h.clock_s["dawnbench"], expected):
            raise SubmissionError(f"{what}: history[{i}].clock_s.dawnbench {h.clock_s['dawnbench']:g} s does not "
                                  f"match the record's phase intervals ({expected:g} s at the end of evaluation "
                                  f"{i + 1})")


def check_time(run: "RunResult", seconds: float, step: int, what: str) -> None:
    """The ranked time against the wall clock (upper bound) and the work done (lower bound)."""
    floor = max(MIN_CLOCK_S, step * MIN_STEP_S)
    if seconds < floor:
        raise SubmissionError(f"{what}: a time-to-target of {seconds:g} s is impossibly small for {step:,} optimizer "
                              f"steps (at least {MIN_CLOCK_S:g} s and {MIN_STEP_S * 1e6:g} us per step)")
    walls = []
    if run.total_s is not None:
        walls.append(("total_s", run.total_s))
    if run.finished_at is not None:
        walls.append(("finished_at - started_at", (run.finished_at - run.started_at).total_seconds()))
    for name, wall in walls:
        if seconds > wall * (1 + WALL_SLACK_RELATIVE) + WALL_SLACK_S:
            raise SubmissionError(f"{what}: a time-to-target of {seconds:g} s is longer than the run's wall time "
                                  f"({name}: {wall:g} s)")


def check_power(joules: float, seconds: float, processes: int, what: str) -> None:
    """Mean power ``joules / seconds`` between MIN_WATTS and MAX_WATTS_PER_RANK x ``processes``."""
    if seconds <= 0:
        raise SubmissionError(f"{what}: energy over {seconds:g} s cannot be checked")
    watts = joules / seconds
    top = MAX_WATTS_PER_RANK * max(int(processes), 1)
    if watts < MIN_WATTS:
        raise SubmissionError(f"{what}: {joules:g} J over {seconds:g} s is a mean {watts:.3g} W, below the "
                              f"{MIN_WATTS:g} W any measured device draws")
    if watts > top:
        raise SubmissionError(f"{what}: {joules:g} J over {seconds:g} s is a mean {watts:.3g} W, above the "
                              f"{top:g} W {processes} process(es) can draw ({MAX_WATTS_PER_RANK:g} W each)")


def check_energy(run: "RunResult", what: str) -> None:
    """The run's energy record: finite, bounded, monotone along the history and consistent with its totals."""
    e = run.energy
    for group in ("joules_to_target", "joules_at_end", "per_phase_j", "per_source_j"):
        for name, value in getattr(e, group).items():
            _finite(value, f"{what}: energy.{group}.{name}", hi=MAX_ENERGY_J)
    _finite(e.idle_power_w, f"{what}: energy.idle_power_w", hi=MAX_WATTS_PER_RANK * MAX_WORLD_SIZE)
    _finite(e.idle_seconds, f"{what}: energy.idle_seconds")
    previous: dict[str, float] = {}
    for i, h in enumerate(run.history):
        for name, value in h.energy_j.items():
            _finite(value, f"{what}: history[{i}].energy_j.{name}", hi=MAX_ENERGY_J)
            if value is None:
                continue
            if name in previous and value < previous[name] * (1 - 1e-9) - 1e-9:
                raise SubmissionError(f"{what}: history[{i}].energy_j.{name} goes back (fewer joules than the "
                                      "previous evaluation)")
            previous[name] = value
    index = next((i for i, h in enumerate(run.history) if reaches(h.accuracy, run.target)), None)
    if index is None:
        return
    first = run.history[index]
    for name, value in e.joules_to_target.items():
        there = first.energy_j.get(name)
        if value is not None and there is not None and not close(value, there):
            raise SubmissionError(f"{what}: energy.joules_to_target.{name} {value:g} J is not the history's "
                                  f"{first.energy_j[name]:g} J at the first evaluation at or above the target")


def check_inference_energy(record: dict[str, Any], what: str) -> float | None:
    """An inference record's batch-1 energy (its ``energy.latency``) -> joules per 10,000 examples, checked
    against the latency it measured; None when the record carries none."""
    e = record.get("energy")
    if not isinstance(e, dict) or not e.get("available") or not isinstance(e.get("latency"), dict):
        return None
    w = e["latency"]
    per_10k = w.get("joules_per_10k")
    if per_10k is None:
        return None
    per_10k = _number(per_10k, f"{what}: energy.latency.joules_per_10k", hi=MAX_ENERGY_J)
    joules = _finite(w.get("joules"), f"{what}: energy.latency.joules", hi=MAX_ENERGY_J)
    seconds = _finite(w.get("seconds"), f"{what}: energy.latency.seconds")
    timed = _finite(w.get("timed_s"), f"{what}: energy.latency.timed_s")
    examples = w.get("examples")
    if joules is None or seconds is None or timed is None or not isinstance(examples, int) or examples <= 0:
        raise SubmissionError(f"{what}: energy.latency lacks the joules, seconds or examples its figure comes from")
    latency = record.get("latency") or {}
    if examples != record.get("n_examples") or not close(timed, float(latency.get("total_s") or 0.0)):
        raise SubmissionError(f"{what}: energy.latency does not cover the timed batch-1 pass ({examples} examples, "
                              f"{timed:g} s; the pass: {record.get('n_examples')} examples, "
                              f"{latency.get('total_s')} s)")
    if seconds < timed * (1 - 1e-6) or seconds > 2 * timed + 1.0:
        raise SubmissionError(f"{what}: energy.latency.seconds {seconds:g} s is not the timed pass's "
                              f"{timed:g} s plus its loop's bookkeeping")
    if not close(per_10k, joules / examples * 10_000):
        raise SubmissionError(f"{what}: energy.latency.joules_per_10k {per_10k:g} is not joules / examples x 10,000")
    check_power(joules, seconds, 1, f"{what}: energy.latency")
    return per_10k


def check_run(run: "RunResult", what: str) -> None:
    """Everything above that does not depend on the leaderboard's target."""
    check_dates(run, what)
    check_numbers(run, what)
    check_required(run, what)
    check_price(run.cost_per_hour, what)
    check_sections(run, what)
    check_totals(run, what)
    check_phases(run, what)
    check_energy(run, what)
