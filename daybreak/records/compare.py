"""CompareResult: the record of `daybreak compare` (A against B, computed by daybreak.analysis.compare)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance


class CompareSide(BaseModel):
    name: str  # "A" or "B"
    paths: list[str]
    task: str
    recipes: list[str]
    target: float
    n_runs: int
    n_reached: int
    excluded: list[str] = Field(default_factory=list)  # run dirs excluded (did not reach), with status
    times_s: list[float]
    mean_s: float | None
    median_s: float | None
    std_s: float | None


class CompareResult(Record):
    WHAT = "compare"  # no FILE: written where --out says

    schema_version: int = 1
    kind: Literal["daybreak.compare"] = "daybreak.compare"
    a: CompareSide
    b: CompareSide
    alpha: float
    welch_t: float | None = None
    welch_p: float | None = None
    mannwhitney_u: float | None = None
    mannwhitney_p: float | None = None
    hedges_g: float | None = None  # A minus B, pooled std, small-sample corrected; negative: A faster
    fisher_reached_p: float | None = None
    mean_ratio: float | None = None  # mean A / mean B
    verdict: Literal["A faster", "B faster", "no significant difference", "not enough runs", "no test"]
    test: str = "Welch's t-test, two-sided, at alpha (Mann-Whitney U reported beside it as a check)"
    summary: str
    effect_size: str = "Hedges' g (Cohen's d with pooled sample std x (1 - 3 / (4 (n_a + n_b) - 9))), A minus B"
    unreached_policy: str = ("runs that did not reach the target are excluded from the time tests and counted "
                             "(n_reached of n_runs); Fisher's exact test compares the reached fractions")
    notes: list[str] = Field(default_factory=list)
    provenance: Provenance
