"""RepeatSummary: the record of `daybreak repeat` (summary.json in the repeat directory), computed by
daybreak.analysis.repeat; the time statistics in it are computed by daybreak.analysis.stats."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance
from daybreak.records.significance import TargetSignificance

REPEAT_FILE = "summary.json"
CONFIDENCE = 0.95  # of the confidence interval of the mean time-to-target
UNREACHED_POLICY = ("runs that did not reach the target (not_reached, diverged, failed) have no time-to-target: "
                    "they are excluded from the time and epoch statistics and counted in reached_fraction")


class TimeStats(BaseModel):
    """Statistics of the time-to-target of the runs that reached the target (seconds)."""

    n: int  # runs that reached the target (the only ones with a time)
    times_s: list[float] = Field(default_factory=list)  # in run order
    mean_s: float | None = None
    std_s: float | None = None  # sample std, ddof=1
    cv: float | None = None  # std / mean
    confidence: float = CONFIDENCE
    ci_low_s: float | None = None  # Student-t interval of the mean
    ci_high_s: float | None = None
    olympic_mean_s: float | None = None  # fastest and slowest dropped; needs n >= 3
    min_s: float | None = None
    median_s: float | None = None
    max_s: float | None = None


class EpochStats(BaseModel):
    """Epochs-to-target of the runs that reached the target."""

    values: list[float] = Field(default_factory=list)
    min: float | None = None
    median: float | None = None
    max: float | None = None


class RepeatRun(BaseModel):
    seed: int
    run_dir: str  # relative to the repeat directory
    run_id: str
    status: str
    reached: bool
    time_to_target_s: float | None = None
    epochs_to_target: float | None = None
    final_accuracy: float | None = None
    best_accuracy: float | None = None
    train_s: float | None = None
    device: str | None = None
    reused: bool = False  # found finished in the directory, not run by this invocation
    busy: bool = False  # the machine was busy while it ran (its record's context warnings)
    excluded: bool = False  # left out of the statistics (--busy exclude, or replaced by a re-run)
    data_load_s: float | None = None  # cold-start phases: every trial of an experiment pays them alike
    model_init_s: float | None = None


class RepeatSummary(Record):
    FILE = REPEAT_FILE
    WHAT = "repeat"

    schema_version: int = 1
    kind: Literal["daybreak.repeat"] = "daybreak.repeat"
    task: str
    recipe: str
    model: str
    metric: str
    target: float
    hyperparameters: dict[str, Any]
    overrides: dict[str, Any] = Field(default_factory=dict)
    seeds: list[int]
    n_runs: int
    n_reached: int
    reached_fraction: float | None
    time_to_target: TimeStats
    epochs_to_target: EpochStats
    unreached_policy: str = UNREACHED_POLICY
    complete: bool = True  # False while seeds are still to run
    runs: list[RepeatRun]
    accuracy: TargetSignificance | None = None  # mean final accuracy, its CI, and p of "mean > target"
    n_busy: int = 0
    cold_start_spread: float | None = None  # max / min of data_load + model_init over the counted runs
    trials: str | None = None  # how the runs were made: "fresh processes (experiment.json)", or "one process"
    provenance: Provenance
