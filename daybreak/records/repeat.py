"""RepeatSummary: the record of `daybreak repeat` (summary.json in the repeat directory), computed by
daybreak.analysis.repeat; the time statistics in it are computed by daybreak.analysis.stats."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.fields import Count, Fraction, Index, NonNegative, Seconds, Target
from daybreak.records.provenance import Provenance
from daybreak.records.significance import TargetSignificance

REPEAT_FILE = "summary.json"
CONFIDENCE = 0.95  # of the confidence interval of the mean time-to-target
UNREACHED_POLICY = ("runs that did not reach the target (not_reached, diverged, failed) have no time-to-target: "
                    "they are excluded from the time and epoch statistics and counted in reached_fraction")


class TimeStats(BaseModel):
    """Statistics of the time-to-target of the runs that reached the target (seconds)."""

    n: Index  # runs that reached the target (the only ones with a time)
    times_s: list[Seconds] = Field(default_factory=list)  # in run order
    mean_s: Seconds | None = None
    std_s: NonNegative | None = None  # sample std, ddof=1
    cv: NonNegative | None = None  # std / mean
    geometric_mean_s: Seconds | None = None  # exp(mean(log time))
    confidence: Fraction = CONFIDENCE
    ci_low_s: float | None = None  # interval of the geometric mean: Student-t on the log times, exponentiated (older
    ci_high_s: float | None = None  # records: of the arithmetic mean, whose low end could be below 0)
    olympic_mean_s: Seconds | None = None  # fastest and slowest dropped; needs n >= 3
    min_s: Seconds | None = None
    median_s: Seconds | None = None
    max_s: Seconds | None = None


class EpochStats(BaseModel):
    """Epochs-to-target of the runs that reached the target (a `daybreak time` run's epochs are its log's)."""

    values: list[float] = Field(default_factory=list)
    min: float | None = None
    median: float | None = None
    max: float | None = None


class RepeatScore(BaseModel):
    """The set of runs scored as one figure, by the rule of the repeat's clock (daybreak.analysis.stats):
    ``--rules mlperf``: MLPerf's (a non-converging run may be the slowest dropped, two invalidate the set; more runs
    than --scored-runs: the window of that many consecutive runs closest to the median); otherwise DAWNBench's
    olympic mean of the reached runs."""

    rule: str  # the rule in words
    score_s: Seconds | None = None  # None when there is no valid score
    valid: bool
    first_run: Index  # the scored runs: runs[first_run:stop_run], in the order they ran
    stop_run: Index
    n_failed: Index = 0  # non-converging runs among them
    notes: list[str] = Field(default_factory=list)


class RepeatRun(BaseModel):
    seed: int
    run_dir: str  # relative to the repeat directory
    run_id: str
    status: str
    reached: bool
    time_to_target_s: Seconds | None = None
    epochs_to_target: float | None = None  # these three as the run's record says (see EpochRecord)
    final_accuracy: float | None = None
    best_accuracy: float | None = None
    train_s: Seconds | None = None
    device: str | None = None
    reused: bool = False  # found finished in the directory, not run by this invocation
    busy: bool = False  # the machine was busy while it ran (its record's context warnings)
    excluded: bool = False  # left out of the statistics (--busy exclude, or replaced by a re-run)
    data_load_s: Seconds | None = None  # cold-start phases: every trial of an experiment pays them alike
    model_init_s: Seconds | None = None


class RepeatSummary(Record):
    FILE = REPEAT_FILE
    WHAT = "repeat"

    schema_version: Count = 1
    kind: Literal["daybreak.repeat"] = "daybreak.repeat"
    task: str
    recipe: str
    model: str
    metric: str
    target: Target
    hyperparameters: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int]
    n_runs: Count
    n_reached: Index
    reached_fraction: Fraction | None
    time_to_target: TimeStats
    score: RepeatScore | None = None  # the runs scored as one figure (MLPerf's rules under --rules mlperf)
    epochs_to_target: EpochStats
    unreached_policy: str = UNREACHED_POLICY
    complete: bool = True  # False while seeds are still to run
    runs: list[RepeatRun]
    accuracy: TargetSignificance | None = None  # mean final accuracy, its CI, and p of "mean > target"
    n_busy: Index = 0
    cold_start_spread: NonNegative | None = None  # max / min of data_load + model_init over the counted runs
    trials: str | None = None  # how the runs were made: "fresh processes (experiment.json)", or "one process"
    provenance: Provenance
