"""TargetSignificance: did a set of runs reach the target on average, significantly? (daybreak.analysis.stats.
target_significance; the nanoGPT speedrun's rule: the mean final accuracy above the target at p < 0.01)."""

from __future__ import annotations

from pydantic import BaseModel

from daybreak.records.fields import Fraction, Index


class TargetSignificance(BaseModel):
    n: Index
    n_at_or_above_target: Index
    mean: float | None = None
    ci_low: float | None = None  # Student-t interval of the mean final accuracy; None when n < 2
    ci_high: float | None = None
    confidence: Fraction = 0.95
    t_statistic: float | None = None
    p_value: Fraction | None = None  # one-sided, H1: mean > target; None when n < 2 or zero variance
    alpha: Fraction = 0.01
    significant: bool = False  # p < alpha (or, without a p-value, see note)
    note: str | None = None
