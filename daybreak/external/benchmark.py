"""What a log is timed against: a daybreak task's target, or an MLPerf benchmark's for its round.

`daybreak time --log FILE` without ``--task`` reads the log's ``submission_benchmark``: ``daybreak_<task>`` (a
`daybreak run`'s own mllog) is that task; the name of an MLPerf Training benchmark is that benchmark, whose metric,
direction, unit and target for the round come from daybreak.mlperf_benchmarks. The round: ``--round``, else a
``training_results_v<round>`` folder in the log's path, else (published logs name no round) every round that has
the benchmark, when MLPerf's verdict on the log is the same under each round's rules (read by the latest's; the
record says so), and otherwise a one-line error asking for ``--round``.

``--task`` names the task for a log that names none (or names a benchmark daybreak does not know); ``--task`` with a
log of another benchmark is a one-line error naming both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from daybreak.errors import ConfigError
from daybreak.external.mllog_analysis import mlperf_verdict, target_fits
from daybreak.external.mllog_reader import BadLine, MllogEvent, log_info
from daybreak.metrics import Metric
from daybreak.mlperf_benchmarks import (
    BENCHMARK_NAMES, ROUND_FOLDER, ROUNDS, Benchmark, Goal, benchmark_of, normalize_round, rounds_of,
)
from daybreak.records.mllog import C
from daybreak.records.run import MLPERF_TASK_PREFIX

DAYBREAK_PREFIX = "daybreak_"  # `daybreak run` logs submission_benchmark "daybreak_<task>" (daybreak.train.recorder)


@dataclass(frozen=True)
class TimedAgainst:
    """The target a log is timed against, and where it came from."""

    task: str  # the record's task: a daybreak task, or "mlperf:<benchmark>"
    goal: Goal
    default_target: float  # the task's default target (a daybreak task's, else the round's)
    benchmark: Benchmark | None = None  # an MLPerf benchmark's log
    round: str | None = None
    round_from: str = ""  # how the round was found
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def metric(self) -> Metric:
        """The record's metric: an MLPerf benchmark's quality measure ("fid+clip"), else the task's."""
        return self.benchmark.quality if self.benchmark is not None else self.goal.headline.metric

    @property
    def target(self) -> float:
        return self.goal.headline.target


def declared_benchmark(events: Sequence[MllogEvent]) -> str | None:
    value = log_info(events).submission.get(C.SUBMISSION_BENCHMARK)
    return value.strip() if isinstance(value, str) and value.strip() else None


def task_of_log(events: Sequence[MllogEvent], task: str | None) -> str | None:
    """The daybreak task a log is of: ``--task``, else the task of its ``daybreak_<task>`` benchmark; None for an
    MLPerf benchmark's log (ConfigError for a log that names neither and no ``--task``, or names another task or
    benchmark than ``--task``)."""
    from daybreak.tasks import TASKS

    name = declared_benchmark(events)
    own = name[len(DAYBREAK_PREFIX):] if name and name.startswith(DAYBREAK_PREFIX) else None
    mlperf = name if name and rounds_of(name) else None
    if task is not None:
        if mlperf is not None:
            raise ConfigError(f"--task {task}, but the log is of MLPerf Training benchmark {mlperf!r} "
                              f"({benchmark_title(mlperf)}): leave out --task to time it by that benchmark's rules")
        if own is not None and own != task:
            raise ConfigError(f"--task {task}, but the log is of daybreak task {own!r} (submission_benchmark "
                              f"{name!r}): leave out --task, or give --task {own}")
        return task
    if mlperf is not None:
        return None
    if own is not None and own in TASKS.names():
        return own
    if name is None:
        raise ConfigError("--task is required: the log names no submission_benchmark (give the daybreak task whose "
                          "target applies, e.g. --task cifar10)")
    raise ConfigError(f"the log's submission_benchmark {name[:60]!r} is neither an MLPerf Training benchmark "
                      f"(known: {', '.join(BENCHMARK_NAMES)}) nor a daybreak task: give --task")


def benchmark_title(name: str) -> str:
    titles = dict.fromkeys(b.title for r in rounds_of(name) if (b := benchmark_of(name, r)) is not None)
    return " / ".join(titles)


def round_in_path(path: Path | None) -> str | None:
    """The round a ``training_results_v<round>`` folder in ``path`` names, if any."""
    if path is None:
        return None
    for part in reversed(Path(path).resolve().parts):
        m = ROUND_FOLDER.search(part)
        if m:
            return normalize_round(m.group(1))
    return None


def mlperf_target(events: Sequence[MllogEvent], name: str, round_option: str | None,
                  log_path: Path | None, malformed: Sequence[BadLine] = ()) -> TimedAgainst:
    """An MLPerf benchmark's log: its benchmark, round and goal (module docstring)."""
    rounds = rounds_of(name)
    gbs = log_info(events).global_batch_size
    notes: list[str] = []
    if round_option is not None:
        round_ = normalize_round(round_option)
        if round_ is None or round_ not in ROUNDS:
            raise ConfigError(f"--round {round_option!r}: give an MLPerf Training round, one of {', '.join(ROUNDS)}")
        how = "--round"
    elif (round_ := round_in_path(log_path)) is not None:
        how = "the log's folder (training_results_" + round_ + ")"
    else:
        round_, how = _round_by_verdict(events, name, rounds, gbs, malformed)
        if len(rounds) > 1:
            notes.append(f"the log names no round: read by the rules of MLPerf Training {round_}, the latest with "
                         f"{name} ({rounds[0]} to {rounds[-1]}); MLPerf's verdict is the same under each of them "
                         "(--round to choose)")
    bench = benchmark_of(name, round_)
    goal = bench.goal(round_, gbs) if bench is not None else None
    if bench is None or goal is None:
        raise ConfigError(f"MLPerf Training {round_} has no benchmark {name!r} (it ran in "
                          f"{_spans(rounds)}): is the round right?")
    return TimedAgainst(task=MLPERF_TASK_PREFIX + name, goal=goal, default_target=goal.headline.target,
                        benchmark=bench, round=round_, round_from=how, notes=tuple(notes))


def _spans(rounds: Sequence[str]) -> str:
    return rounds[0] if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}"


def _round_goal(name: str, round_: str, gbs: int | None) -> Goal:
    """The goal of benchmark ``name`` in ``round_``, one of the rounds it ran in."""
    bench = benchmark_of(name, round_)
    goal = bench.goal(round_, gbs) if bench is not None else None
    assert goal is not None, (name, round_)  # (a round of rounds_of(name))
    return goal


def _round_by_verdict(events: Sequence[MllogEvent], name: str, rounds: Sequence[str],
                      gbs: int | None, malformed: Sequence[BadLine]) -> tuple[str, str]:
    """The latest round with ``name`` when MLPerf's verdict on the log is the same under every such round's
    rules; otherwise a ConfigError saying how they differ, and which rounds' targets fit the log (``round_hint``)."""
    verdicts = {r: mlperf_verdict(events, _round_goal(name, r, gbs), r, malformed) for r in rounds}
    outcomes: dict[tuple[bool, float | None], list[str]] = {}
    for r, v in verdicts.items():
        outcomes.setdefault((v.reached, v.time_s), []).append(r)
    if len(outcomes) == 1:
        return rounds[-1], f"not given: the latest round with {name}"
    said = "; ".join(f"{round_list(rs)}: " + (f"reached, {key[1]:.3f} s" if key[0] else
                                              f"not reached ({verdicts[rs[0]].reason})")
                     for key, rs in outcomes.items())
    raise ConfigError(f"the log of {name} names no round, and the rounds' rules disagree on it ({said}): "
                      + round_hint(events, name, rounds, gbs))


def fitting_rounds(events: Sequence[MllogEvent], name: str, rounds: Sequence[str], gbs: int | None) -> list[str]:
    """The rounds of ``rounds`` whose target for ``name`` fits the log's evaluations (``target_fits``: met, and
    where the run stopped)."""
    return [r for r in rounds if target_fits(events, _round_goal(name, r, gbs))]


def round_hint(events: Sequence[MllogEvent], name: str, rounds: Sequence[str], gbs: int | None) -> str:
    """'give --round ...', naming only the rounds whose table rows fit the log's benchmark and target, or saying
    that daybreak cannot tell."""
    fitting = fitting_rounds(events, name, rounds, gbs)
    if not fitting:
        return ("give --round: daybreak cannot tell which round's rules apply (no round's target fits where the "
                f"run's evaluations stopped; {name} ran in {round_list(rounds)})")
    labels = list(dict.fromkeys(_round_goal(name, r, gbs).label for r in fitting))
    return (f"give --round {fitting[-1]}" if len(fitting) == 1 else f"give --round, one of {round_list(fitting)}") \
        + f" (the round{'s' if len(fitting) > 1 else ''} whose target, {' or '.join(labels)}, fits where the " \
          "run's evaluations stopped)"


def round_list(rounds: Sequence[str]) -> str:
    """'v0.7 to v1.1', 'v3.1', 'v0.7, v2.0 to v2.1': consecutive rounds of the table as spans."""
    spans: list[list[str]] = []
    for r in rounds:
        if spans and ROUNDS.index(r) == ROUNDS.index(spans[-1][-1]) + 1:
            spans[-1].append(r)
        else:
            spans.append([r])
    return ", ".join(_spans(s) for s in spans)
