"""LesionSummary: the record of `daybreak lesion` (lesion.json in the lesion directory), computed by
daybreak.analysis.lesion."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.experiment import RatioEstimate
from daybreak.records.provenance import Provenance
from daybreak.records.significance import TargetSignificance

LESION_FILE = "lesion.json"


class LesionVariant(BaseModel):
    name: str  # "full" or "no-<switch>"
    switched_off: list[str] = Field(default_factory=list)
    hyperparameters: dict[str, Any]
    directory: str  # relative to the lesion directory
    n_runs: int
    n_reached: int
    reached_fraction: float | None
    mean_time_to_target_s: float | None = None
    std_time_to_target_s: float | None = None
    mean_epochs_to_target: float | None = None
    mean_final_accuracy: float | None = None
    mean_best_accuracy: float | None = None
    time_ratio: float | None = None  # mean time of its reached runs / the full recipe's (unpaired; the table and
    # the plot show ``comparison``, the paired ratio with unreached trials infinitely slow)
    final_accuracy_ratio: float | None = None  # mean final accuracy / the full recipe's
    final_accuracy_diff: float | None = None  # mean final accuracy - the full recipe's (fraction)
    comparison: RatioEstimate | None = None  # paired time ratio variant / full, its interval and verdict
    accuracy: TargetSignificance | None = None  # mean final accuracy vs the target
    n_busy: int = 0
    notes: list[str] = Field(default_factory=list)


class LesionSummary(Record):
    FILE = LESION_FILE
    WHAT = "lesion"

    schema_version: int = 1
    kind: Literal["daybreak.lesion"] = "daybreak.lesion"
    task: str
    recipe: str
    target: float
    metric: str
    switches: list[str]  # switched off, in the order given
    runs_per: int
    seeds: list[int]
    overrides: dict[str, Any] = Field(default_factory=dict)
    variants: list[LesionVariant]
    confidence: float = 0.95
    complete: bool = True
    method: str = ("time ratio (paired) = variant time-to-target / the full recipe's with the same seed, each trial "
                   "a fresh process, variants interleaved: the geometric mean over seeds with a Student-t interval "
                   "of the log ratios when every pair reached the target; otherwise an unreached trial counts as "
                   "infinitely slow and the ratio is the Hodges-Lehmann estimate with a Wilcoxon signed-rank interval "
                   "(each variant's comparison names its method); a switch matters when the interval excludes 1; "
                   "accuracy ratio = variant mean final accuracy / full recipe's; the time statistics of each "
                   "variant count its reached runs only")
    provenance: Provenance
