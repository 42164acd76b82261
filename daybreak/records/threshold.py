"""ThresholdAnalysis: the record of `daybreak threshold` (threshold.json), computed by daybreak.analysis.threshold."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance

JSON_FILE = "threshold.json"


class ThresholdRun(BaseModel):
    run_dir: str
    run_id: str
    label: str = ""  # unique among the analysed runs (run id, or parent/run id)
    task: str
    recipe: str
    seed: int
    target: float
    times_s: list[float | None]  # one per threshold
    epochs: list[float | None]


class ThresholdAnalysis(Record):
    FILE = JSON_FILE
    WHAT = "threshold"

    schema_version: int = 1
    kind: Literal["daybreak.threshold"] = "daybreak.threshold"
    thresholds: list[float]  # fractions
    runs: list[ThresholdRun]
    mean_times_s: list[float | None] = Field(default_factory=list)  # over the runs that got there
    reached_counts: list[int] = Field(default_factory=list)
    method: str = ("time to a threshold = elapsed_s (training clock) of the first history entry with accuracy at "
                   "or above it; None if none; runs that stopped at their target have no entries above it")
    notes: list[str] = Field(default_factory=list)
    provenance: Provenance
