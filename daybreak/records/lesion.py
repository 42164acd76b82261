"""LesionSummary: the record of `daybreak lesion` (lesion.json in the lesion directory), computed by
daybreak.analysis.lesion."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance

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
    time_ratio: float | None = None  # mean time-to-target / the full recipe's
    final_accuracy_ratio: float | None = None  # mean final accuracy / the full recipe's
    final_accuracy_diff: float | None = None  # mean final accuracy - the full recipe's (fraction)
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
    method: str = ("time ratio = variant mean time-to-target (reached runs) / full recipe's; accuracy ratio = "
                   "variant mean final accuracy / full recipe's; unreached runs are excluded from time means and "
                   "counted in reached_fraction")
    provenance: Provenance
