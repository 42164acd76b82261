"""Clock rule sets as data: which phases of a run are inside the time-to-target clock, and why.

A run records its raw phase intervals on one monotonic timeline (seconds since the command started). A rule set
turns that timeline into a time-to-target. Two rule sets are defined, each phase with the source of its rule:

- ``dawnbench`` (DAWNBench v1): data loading, model initialization, compile/warm-up and training count;
  evaluation and checkpoint/record writes do not. The clock may pause (for the excluded phases).
- ``mlperf`` (MLPerf Training): the clock starts before any part of the system touches the dataset and may not
  be paused; evaluation and record writes inside the run count. Model initialization (construction, compile,
  warm-up) is excluded only when it happens *before* the dataset is first touched, up to 30 minutes (the closed
  division's limit since v2.0; 20 minutes in v0.7; each round's limit is in daybreak.mlperf_benchmarks).

This module is a lower layer: it imports nothing from daybreak, so readers, runners, external timers and the
leaderboard can all apply the same rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

# Phases in the order a run passes through them. "record" = checkpoint and record-file writes.
PHASES = ("data_load", "model_init", "warmup", "train", "eval", "record")
PHASE_LABELS = {
    "data_load": "data loading",
    "model_init": "model initialization",
    "warmup": "compile / warm-up",
    "train": "training",
    "eval": "evaluation",
    "record": "checkpoint and record writes",
}
# Phases that touch the dataset (MLPerf: the clock must already run when the first of these starts).
TOUCHES_DATA = frozenset({"data_load", "train", "eval"})
# Phases that MLPerf calls model initialization (excluded when they precede the first touch of the dataset).
INIT_PHASES = frozenset({"model_init", "warmup"})

DAWNBENCH_RULING = ("DAWNBench organisers, dawn-bench-entries issue 21: \"The time to load the data and initialize "
                    "the model should be included. Checkpointing and calculating validation accuracy doesn't need "
                    "to be included.\"")
MLPERF_RUN_RESULTS = ("MLPerf Training rules, 'Run Results': \"The clock must start before any part of the system "
                      "touches the dataset ... The clock may not be paused during the run.\"")
MLPERF_INIT = ("MLPerf Training rules, 'Run Results' (since v2.0): \"Prior to starting the clock, a system may use a "
               "maximum model initialization time of 30 minutes for Closed division and 4 hours for Open division.\"")
MLPERF_QUALITY = ("MLPerf Training rules, 'Quality measure': \"By default, the time to evaluate the quality is "
                  "included in the wallclock time.\"")


@dataclass(frozen=True)
class RuleSet:
    name: str
    title: str
    inside: Mapping[str, bool]  # phase -> counted (for mlperf: once the clock runs; see ``contiguous``)
    sources: Mapping[str, str]  # phase -> where the rule comes from
    contiguous: bool  # True: once started the clock never pauses (MLPerf)
    max_init_excluded_s: float | None = None  # MLPerf: at most 30 minutes of init before the clock (closed division)
    stop: str = "at the end of the first evaluation at or above the target"

    def table_row(self, phase: str) -> str:
        return "in" if self.inside[phase] else "out"


DAWNBENCH = RuleSet(
    name="dawnbench",
    title="DAWNBench v1",
    inside={"data_load": True, "model_init": True, "warmup": True, "train": True, "eval": False, "record": False},
    sources={
        "data_load": DAWNBENCH_RULING,
        "model_init": DAWNBENCH_RULING,
        "warmup": DAWNBENCH_RULING + " (compiling and warming up the model is part of initializing it)",
        "train": "DAWNBench v1 rules: time to train to the target accuracy",
        "eval": DAWNBENCH_RULING,
        "record": DAWNBENCH_RULING,
    },
    contiguous=False,
)

MLPERF = RuleSet(
    name="mlperf",
    title="MLPerf Training",
    inside={"data_load": True, "model_init": False, "warmup": False, "train": True, "eval": True, "record": True},
    sources={
        "data_load": MLPERF_RUN_RESULTS + " Data starts on durable storage, not in RAM ('Data State at Start of Run').",
        "model_init": MLPERF_INIT + " Only before the dataset is first touched; afterwards the clock runs.",
        "warmup": MLPERF_INIT + " Compilation on non-dataset tensors is model initialization.",
        "train": MLPERF_RUN_RESULTS,
        "eval": MLPERF_QUALITY,
        "record": MLPERF_RUN_RESULTS + " (record writes inside the run are on the clock)",
    },
    contiguous=True,
    max_init_excluded_s=30 * 60.0,
)

RULE_SETS: dict[str, RuleSet] = {r.name: r for r in (DAWNBENCH, MLPERF)}
# The default headline: daybreak's tasks are DAWNBench's tasks, its leaderboard holds DAWNBench's 187 entries,
# and DAWNBench's rule counts everything a user waits for except measuring (eval) and saving (records).
DEFAULT_RULES = "dawnbench"


def get_rules(name: str) -> RuleSet:
    try:
        return RULE_SETS[name]
    except KeyError:
        raise ValueError(f"unknown rule set {name!r}; known: {', '.join(RULE_SETS)}") from None


@dataclass(frozen=True)
class Interval:
    """One phase, [start_s, end_s] in seconds since the command started (one monotonic timer)."""

    phase: str
    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"unknown phase {self.phase!r}; known: {', '.join(PHASES)}")
        if not self.end_s >= self.start_s:
            raise ValueError(f"interval {self.phase} ends ({self.end_s}) before it starts ({self.start_s})")

    def overlap(self, lo: float, hi: float) -> float:
        return max(0.0, min(self.end_s, hi) - max(self.start_s, lo))


@dataclass(frozen=True)
class ClockReading:
    """The clock of one rule set at one instant: where it started, what it excluded, what it reads."""

    rules: str
    start_s: float  # on the run's timeline
    at_s: float  # the instant read (e.g. the end of the evaluation that reached the target)
    seconds: float
    excluded_s: dict[str, float] = field(default_factory=dict)  # phase -> seconds left out before at_s
    notes: tuple[str, ...] = ()


def clock_start(rules: RuleSet, timeline: Sequence[Interval]) -> tuple[float, tuple[str, ...]]:
    """Where ``rules``' clock starts on ``timeline`` (and notes on why).

    Non-contiguous rules (DAWNBench) start at the first counted phase. Contiguous rules (MLPerf) start when the
    dataset is first touched, or earlier when the initialization before it exceeds the allowed maximum.
    """
    if not timeline:
        return 0.0, ()
    first = min(timeline, key=lambda i: i.start_s).start_s
    if not rules.contiguous:
        counted = [i.start_s for i in timeline if rules.inside[i.phase]]
        return (min(counted) if counted else first), ()
    touch = [i.start_s for i in timeline if i.phase in TOUCHES_DATA]
    start = min(touch) if touch else first
    notes: list[str] = []
    late_init = [i for i in timeline if i.phase in INIT_PHASES and i.end_s > start]
    if late_init:
        notes.append(f"{' and '.join(sorted({PHASE_LABELS[i.phase] for i in late_init}))} ran after the dataset was "
                     f"first touched, so the {rules.title} clock, which may not pause, includes them")
    if rules.max_init_excluded_s is not None and start - first > rules.max_init_excluded_s:
        notes.append(f"initialization before the clock took {start - first:.1f} s > the allowed "
                     f"{rules.max_init_excluded_s:.0f} s: the clock starts at the limit")
        start = first + rules.max_init_excluded_s
    return start, tuple(notes)


def clock_segments(rules: RuleSet, timeline: Sequence[Interval], at_s: float) -> list[tuple[float, float]]:
    """The stretches of the timeline ``rules``' clock counts up to ``at_s``: from the clock's start to ``at_s``,
    less the excluded phases (none for a contiguous clock). Time between phases (Python between two steps) counts
    like the phase it separates: it is neither evaluation nor a record write. ``read_clock`` adds up their lengths,
    ``daybreak.measure.energy.energy_for_clock`` the joules over them: one arithmetic for time and energy."""
    start, _ = clock_start(rules, timeline)
    if at_s <= start:
        return []
    segments = [(start, at_s)]
    if rules.contiguous:
        return segments
    for i in sorted((i for i in timeline if not rules.inside[i.phase]), key=lambda i: i.start_s):
        cut: list[tuple[float, float]] = []
        for a, b in segments:
            if i.end_s <= a or i.start_s >= b:
                cut.append((a, b))
                continue
            if i.start_s > a:
                cut.append((a, i.start_s))
            if i.end_s < b:
                cut.append((i.end_s, b))
        segments = cut
    return [(a, b) for a, b in segments if b > a]


def read_clock(rules: RuleSet, timeline: Sequence[Interval], at_s: float) -> ClockReading:
    """The time-to-``at_s`` under ``rules``: the total length of ``clock_segments``, with what each excluded phase
    took out of the clock's span (none for contiguous rules)."""
    start, notes = clock_start(rules, timeline)
    excluded: dict[str, float] = {}
    if not rules.contiguous:
        for i in timeline:
            if not rules.inside[i.phase]:
                gone = i.overlap(start, at_s)
                if gone > 0:
                    excluded[i.phase] = excluded.get(i.phase, 0.0) + gone
    seconds = math.fsum(b - a for a, b in clock_segments(rules, timeline, at_s))
    return ClockReading(rules=rules.name, start_s=start, at_s=at_s, seconds=seconds, excluded_s=excluded,
                        notes=notes)


def read_all(timeline: Sequence[Interval], at_s: float, names: Iterable[str] | None = None) -> dict[str, ClockReading]:
    return {n: read_clock(get_rules(n), timeline, at_s) for n in (names or RULE_SETS)}


def rules_table_markdown() -> str:
    """The table of the clock rules page (docs/concepts/clock-rules.md), its in/out columns: rule set x phase."""
    names = list(RULE_SETS)
    lines = ["| phase | " + " | ".join(RULE_SETS[n].title for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for phase in PHASES:
        lines.append(f"| {PHASE_LABELS[phase]} | " + " | ".join(RULE_SETS[n].table_row(phase) for n in names) + " |")
    return "\n".join(lines)
