"""Paired ratios: how much faster (cheaper, more frugal) is a candidate than a baseline, with a confidence interval.

Trials are paired: pair i runs the baseline and the candidate with the same seed, one right after the other on the
same machine, so a slow spell of the machine (a neighbour, thermal throttling, a cold file cache) hits both sides
of a pair alike and cancels in their ratio. The estimate is the geometric mean of the per-pair ratios
candidate / baseline; its interval is a Student-t interval of the mean log ratio (n - 1 degrees of freedom),
exponentiated, and its p-value the two-sided paired t-test of the log ratios (H0: ratio 1). A percentile
bootstrap of the same geometric mean (seeded, 10,000 resamples) is reported beside it as a check that does not
assume normal log ratios. The verdict says "not distinguishable" whenever the interval contains 1.
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from daybreak.records.experiment import RatioEstimate

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def paired_ratio(baseline: Sequence[float | None], candidate: Sequence[float | None], *, confidence: float,
                 quantity: str = "time_to_target_s", lower_is_better: bool = True) -> RatioEstimate:
    """The ratio candidate/baseline over the pairs where both values exist and are > 0 (pairs are aligned by
    position)."""
    from scipy import stats as sps

    pairs = [(a, b) for a, b in zip(baseline, candidate) if a is not None and b is not None and a > 0 and b > 0]
    n = len(pairs)
    est = RatioEstimate(quantity=quantity, n_pairs=n, confidence=confidence)
    if n == 0:
        est.verdict = "too few pairs"
        return est
    logs = [math.log(b / a) for a, b in pairs]
    m = sum(logs) / n
    est.ratio = math.exp(m)
    if n < 2:
        est.verdict = "too few pairs"
        return est
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    if sd == 0:
        est.ci_low = est.ci_high = est.ratio
        est.p_value = 1.0 if m == 0 else 0.0
    else:
        se = sd / math.sqrt(n)
        half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * se
        est.ci_low, est.ci_high = math.exp(m - half), math.exp(m + half)
        est.p_value = float(2 * sps.t.sf(abs(m / se), n - 1))
    est.bootstrap_ci_low, est.bootstrap_ci_high = bootstrap_interval(logs, confidence)
    est.verdict = verdict(est, lower_is_better)
    return est


def bootstrap_interval(logs: Sequence[float], confidence: float, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile interval of exp(mean log ratio) over resampled pairs."""
    rng = random.Random(seed)
    n = len(logs)
    means = sorted(sum(rng.choice(logs) for _ in range(n)) / n for _ in range(resamples))
    low_i = int(math.floor((1 - confidence) / 2 * (resamples - 1)))
    high_i = int(math.ceil((1 + confidence) / 2 * (resamples - 1)))
    return math.exp(means[low_i]), math.exp(means[high_i])


def verdict(est: RatioEstimate, lower_is_better: bool = True) -> str:
    if est.ci_low is None or est.ci_high is None:
        return "too few pairs"
    if est.ci_low <= 1.0 <= est.ci_high:
        return "not distinguishable"
    better = est.ci_high < 1.0 if lower_is_better else est.ci_low > 1.0
    return "candidate better" if better else "candidate worse"


def relative_width(est: RatioEstimate) -> float | None:
    """The interval's width relative to the ratio (ci_high / ci_low - 1): what --until-significant narrows."""
    if est.ci_low is None or est.ci_high is None or est.ci_low <= 0:
        return None
    return est.ci_high / est.ci_low - 1.0


def describe(est: RatioEstimate, baseline: str, candidate: str, what: str = "time to target") -> str:
    """One line in words: 'candidate takes 0.81x the baseline's time to target (99% CI 0.75-0.88, p=0.0004):
    1.23x faster'."""
    if est.ratio is None:
        return f"{what}: no pair where both arms have a value"
    ci = ("" if est.ci_low is None else
          f" ({est.confidence * 100:g}% CI {est.ci_low:.3f}-{est.ci_high:.3f}"
          + ("" if est.p_value is None else f", p={est.p_value:.2g}") + ")")
    head = f"{candidate} / {baseline} {what}: {est.ratio:.3f}x over {est.n_pairs} pairs{ci}"
    if est.verdict == "not distinguishable":
        return head + ": not distinguishable (the interval contains 1)"
    if est.verdict == "too few pairs":
        return head + ": too few pairs for an interval"
    if est.ratio < 1:
        return head + f": {candidate} is {1 / est.ratio:.2f}x {'faster' if 'time' in what else 'lower'}"
    return head + f": {candidate} is {est.ratio:.2f}x {'slower' if 'time' in what else 'higher'}"
