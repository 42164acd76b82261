"""Paired ratios: how much faster (cheaper, more frugal) is a candidate than a baseline, with a confidence interval.

Trials are paired: pair i runs the baseline and the candidate with the same seed, one right after the other on the
same machine, so a slow spell of the machine (a neighbour, thermal throttling, a cold file cache) hits both sides
of a pair alike and cancels in their ratio. Each pair gives a log ratio d = log(candidate / baseline).

**Unreached trials are infinitely slow**, as MLPerf (a non-converging run counts as the slowest) and AlgoPerf (an
unsolved workload has an infinite time) treat them: a pair where only the candidate missed the target has
d = +inf, only the baseline d = -inf. A pair where neither arm reached it has no ratio and is left out (counted);
the reached fractions are compared by Fisher's exact test (daybreak.analysis.stats.fisher_reached). Dropping the
unreached trials instead would flatter the arm that fails more often.

Two methods, the one used named in ``RatioEstimate.method``:

* every pair reached (all d finite): the estimate is the geometric mean of the per-pair ratios (exp of the mean
  d); its interval a Student-t interval of the mean d (n - 1 degrees of freedom), exponentiated; its p-value the
  two-sided paired t-test of the log ratios (H0: ratio 1). A percentile bootstrap of the same geometric mean
  (seeded, 10,000 resamples) is reported beside it as a check that does not assume normal log ratios, but only
  where the pairs allow enough distinct resamples for its tails (:func:`bootstrap_is_meaningful`);
* some pair has an infinite d: rank-based, so that infinities are ordinary (largest) values. The estimate is the
  Hodges-Lehmann estimator (the median of the n (n + 1) / 2 Walsh averages (d_i + d_j) / 2, i <= j), its
  interval the distribution-free Wilcoxon signed-rank interval (from the exact null distribution of the
  signed-rank statistic: [W_(c+1), W_(N-c)] with c the largest count whose lower tail is <= (1 - confidence) / 2;
  with too few pairs for any such c the interval is unbounded, [0, inf] as a ratio), its p-value the two-sided
  Wilcoxon signed-rank test. An average of +inf and -inf (one failure in each arm) is 0: the limit of two equally
  large opposite log ratios.

**Power:** from the spread of the finite log ratios, :func:`pairs_needed` is the number of pairs a paired t-test
at the experiment's confidence needs to detect a given difference (5%, and ``--effect``) with 80% power (exact,
from the noncentral t distribution). The verdict says "not distinguishable" whenever the interval contains 1.
"""

from __future__ import annotations

import math
import random
from typing import Sequence

from daybreak.analysis.stats import sample_std
from daybreak.records.experiment import MAX_PAIRS, POWER, PairsNeeded, RatioEstimate, format_ratio

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_MIN_TAIL = 5  # distinct resamples expected in each tail of the percentile interval for it to mean anything
DEFAULT_EFFECT = 0.05  # the difference whose pairs-needed figure every comparison reports
EXACT_RANKS_MAX = 400  # the signed-rank null distribution is computed exactly up to this many pairs

METHOD_T = ("geometric mean of the per-pair ratios; Student-t interval of the mean log ratio; paired t-test "
            "(every pair reached the target)")
METHOD_RANK = ("Hodges-Lehmann estimate of the per-pair log ratios; Wilcoxon signed-rank interval and test "
               "(an unreached trial counts as infinitely slow)")


def paired_ratio(baseline: Sequence[float | None], candidate: Sequence[float | None], *, confidence: float,
                 quantity: str = "time_to_target_s", lower_is_better: bool = True,
                 effects: Sequence[float] = (DEFAULT_EFFECT,)) -> RatioEstimate:
    """The ratio candidate / baseline over aligned pairs (by position). A value is a positive number, ``math.inf``
    (that trial did not reach the target: infinitely slow / costly) or None (not measured: the pair is left out).
    ``effects``: relative differences (0.05 = 5%) for which the pairs needed are reported."""
    from scipy import stats as sps

    pairs = [(a, b) for a, b in zip(baseline, candidate)
             if a is not None and b is not None and a > 0 and b > 0]
    neither = [(a, b) for a, b in pairs if math.isinf(a) and math.isinf(b)]
    logs = [_log_ratio(a, b) for a, b in pairs if not (math.isinf(a) and math.isinf(b))]
    n = len(logs)
    censored = sum(1 for d in logs if math.isinf(d))
    est = RatioEstimate(quantity=quantity, n_pairs=n, n_censored=censored, n_neither_reached=len(neither),
                        confidence=confidence, method=METHOD_RANK if censored else METHOD_T)
    sd = sample_std([d for d in logs if math.isfinite(d)])  # None for fewer than 2 finite pairs
    if sd is not None:
        est.log_ratio_sd = sd
        est.pairs_needed = [PairsNeeded(effect=e, power=POWER, pairs=pairs_needed(sd, e, confidence)) for e in
                            dict.fromkeys(effects)]
    if n == 0:
        est.verdict = "too few pairs"
        return est
    if censored:
        _rank_method(est, logs, confidence)
    else:
        m = sum(logs) / n
        est.ratio = math.exp(m)
        if sd is None:  # (no pair censored: every log ratio is finite) fewer than 2 pairs
            est.verdict = "too few pairs"
            return est
        if sd == 0:
            est.ci_low = est.ci_high = est.ratio
            est.p_value = 1.0 if m == 0 else 0.0
        else:
            se = sd / math.sqrt(n)
            half = float(sps.t.ppf(0.5 + confidence / 2, n - 1)) * se
            est.ci_low, est.ci_high = math.exp(m - half), math.exp(m + half)
            est.p_value = float(2 * sps.t.sf(abs(m / se), n - 1))
        if bootstrap_is_meaningful(n, confidence):
            est.bootstrap_ci_low, est.bootstrap_ci_high = bootstrap_interval(logs, confidence)
        else:
            est.bootstrap_note = (f"no bootstrap check: {n} pairs have only {distinct_resamples(n):,} distinct "
                                  f"resamples, too few for the tails of a {confidence * 100:g}% interval")
    est.verdict = verdict(est, lower_is_better)
    return est


def _log_ratio(a: float, b: float) -> float:
    if math.isinf(b):
        return math.inf
    if math.isinf(a):
        return -math.inf
    return math.log(b / a)


# --- rank-based: Hodges-Lehmann and the Wilcoxon signed-rank interval ------------------------------------------------

def _split(d: float) -> tuple[int, float]:
    """A log ratio as (infinite part, finite part): +inf -> (1, 0), -inf -> (-1, 0), x -> (0, x)."""
    return (1, 0.0) if d == math.inf else (-1, 0.0) if d == -math.inf else (0, d)


def walsh_averages(logs: Sequence[float]) -> list[float]:
    """Every (d_i + d_j) / 2 for i <= j, sorted; an average with an infinite part is that infinity, and +inf with
    -inf averages to 0 (their infinite parts cancel)."""
    parts = [_split(d) for d in logs]
    out = []
    for i in range(len(parts)):
        for j in range(i, len(parts)):
            k, x = parts[i][0] + parts[j][0], parts[i][1] + parts[j][1]
            out.append(math.inf if k > 0 else -math.inf if k < 0 else x / 2)
    return sorted(out)


def hodges_lehmann(logs: Sequence[float]) -> float:
    """The median of the Walsh averages."""
    w = walsh_averages(logs)
    n = len(w)
    mid = n // 2
    if n % 2:
        return w[mid]
    low, high = w[mid - 1], w[mid]
    if low == high:
        return low
    if math.isinf(low) and math.isinf(high):  # -inf and +inf: their infinite parts cancel
        return 0.0
    return high if math.isinf(high) else low if math.isinf(low) else (low + high) / 2


def signed_rank_counts(n: int) -> list[int]:
    """counts[t] = how many of the 2**n sign patterns give the signed-rank statistic T+ = t (t = 0 .. n(n+1)/2)."""
    total = n * (n + 1) // 2
    counts = [0] * (total + 1)
    counts[0] = 1
    top = 0
    for rank in range(1, n + 1):
        top += rank
        for t in range(top, rank - 1, -1):
            counts[t] += counts[t - rank]
    return counts


def signed_rank_critical(n: int, confidence: float) -> int | None:
    """The largest c with P(T+ <= c) <= (1 - confidence) / 2 under H0 (exact up to EXACT_RANKS_MAX pairs, a normal
    approximation with continuity correction beyond); None when even P(T+ = 0) = 2**-n is above it."""
    from scipy import stats as sps

    tail = (1 - confidence) / 2
    if n > EXACT_RANKS_MAX:
        mean = n * (n + 1) / 4
        sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        approx = math.floor(mean + float(sps.norm.ppf(tail)) * sd - 0.5)
        return approx if approx >= 0 else None
    counts = signed_rank_counts(n)
    total = 2 ** n
    cumulative = 0
    critical: int | None = None
    for t, k in enumerate(counts):
        cumulative += k
        if cumulative * 1.0 / total > tail:
            break
        critical = t
    return critical


def _rank_method(est: RatioEstimate, logs: list[float], confidence: float) -> None:
    from scipy import stats as sps

    n = len(logs)
    est.ratio = math.exp(hodges_lehmann(logs))
    walsh = walsh_averages(logs)
    c = signed_rank_critical(n, confidence)
    if c is None:
        est.ci_low, est.ci_high = 0.0, math.inf
        est.interval_note = (f"{n} pairs are too few for a {confidence * 100:g}% signed-rank interval: it is "
                             f"unbounded")
    else:
        est.ci_low, est.ci_high = math.exp(walsh[c]), math.exp(walsh[len(walsh) - 1 - c])
    # the signed-rank test: infinities are the largest magnitudes, tied with each other (a stand-in larger than
    # every finite |d| has the same ranks)
    big = 2 * max((abs(d) for d in logs if math.isfinite(d)), default=1.0) + 1.0
    surrogate = [max(-big, min(big, d)) for d in logs]
    if n >= 2 and any(d != 0 for d in surrogate):
        est.p_value = float(sps.wilcoxon(surrogate, zero_method="wilcox", alternative="two-sided").pvalue)


# --- power --------------------------------------------------------------------------------------------------------

def power_of(n: int, sd: float, delta: float, confidence: float) -> float:
    """The power of a two-sided paired t-test at level 1 - confidence with ``n`` pairs, when the mean log ratio is
    ``delta`` and its per-pair spread ``sd`` (the noncentral t distribution)."""
    from scipy import stats as sps

    df = n - 1
    t_crit = float(sps.t.ppf(0.5 + confidence / 2, df))
    nc = delta * math.sqrt(n) / sd
    power = float(sps.nct.sf(t_crit, df, nc) + sps.nct.cdf(-t_crit, df, nc))
    if not math.isfinite(power):  # scipy's noncentral t fails far in its tails: the normal limit is exact there
        power = float(sps.norm.sf(t_crit - nc) + sps.norm.cdf(-t_crit - nc))
    return min(1.0, max(0.0, power))


def pairs_needed(sd: float, effect: float, confidence: float, power: float = POWER) -> int | None:
    """The fewest pairs (>= 2) for which a paired t-test at ``confidence`` detects a ratio of 1 + ``effect`` with
    ``power``, given the per-pair spread ``sd`` of the log ratios; 2 for no spread, None beyond MAX_PAIRS."""
    delta = math.log1p(effect)
    if sd <= 0:
        return 2
    if power_of(MAX_PAIRS, sd, delta, confidence) < power:
        return None
    low, high = 2, MAX_PAIRS  # power grows with n: the smallest n with enough of it, by bisection
    if power_of(low, sd, delta, confidence) >= power:
        return low
    while high - low > 1:
        mid = (low + high) // 2
        if power_of(mid, sd, delta, confidence) >= power:
            high = mid
        else:
            low = mid
    return high


# --- the bootstrap check ------------------------------------------------------------------------------------------

def distinct_resamples(n: int) -> int:
    """How many different multisets a bootstrap resample of n pairs can be: C(2n - 1, n)."""
    return math.comb(2 * n - 1, n)


def bootstrap_is_meaningful(n: int, confidence: float) -> bool:
    """Whether the percentile bootstrap of n pairs has at least BOOTSTRAP_MIN_TAIL distinct resamples in each tail
    of a ``confidence`` interval (3 pairs have 10 resamples in all: none)."""
    return distinct_resamples(n) * (1 - confidence) / 2 >= BOOTSTRAP_MIN_TAIL


def bootstrap_interval(logs: Sequence[float], confidence: float, resamples: int = BOOTSTRAP_RESAMPLES,
                       seed: int = BOOTSTRAP_SEED) -> tuple[float, float]:
    """Percentile interval of exp(mean log ratio) over resampled pairs."""
    rng = random.Random(seed)
    n = len(logs)
    means = sorted(sum(rng.choice(logs) for _ in range(n)) / n for _ in range(resamples))
    low_i = int(math.floor((1 - confidence) / 2 * (resamples - 1)))
    high_i = int(math.ceil((1 + confidence) / 2 * (resamples - 1)))
    return math.exp(means[low_i]), math.exp(means[high_i])


# --- words --------------------------------------------------------------------------------------------------------

def verdict(est: RatioEstimate, lower_is_better: bool = True) -> str:
    if est.ci_low is None or est.ci_high is None:
        return "too few pairs"
    if est.ci_low <= 1.0 <= est.ci_high:
        return "not distinguishable"
    better = est.ci_high < 1.0 if lower_is_better else est.ci_low > 1.0
    return "candidate better" if better else "candidate worse"


def relative_width(est: RatioEstimate) -> float | None:
    """The interval's width relative to the ratio (ci_high / ci_low - 1): what --until-significant narrows."""
    if est.ci_low is None or est.ci_high is None or est.ci_low <= 0 or math.isinf(est.ci_high):
        return None
    return est.ci_high / est.ci_low - 1.0


def describe(est: RatioEstimate, baseline: str, candidate: str, what: str = "time to target") -> str:
    """One line in words: 'candidate / baseline time to target: 0.810x over 8 pairs (99% CI 0.750-0.880, p=0.0004):
    candidate is 1.23x faster'; when not distinguishable, how many pairs the observed spread would need."""
    if est.ratio is None:
        return f"{what}: no pair where either arm has a value"
    ci = ("" if est.ci_low is None else
          f" ({est.confidence * 100:g}% CI {format_ratio(est.ci_low)}-{format_ratio(est.ci_high)}"
          + ("" if est.p_value is None else f", p={est.p_value:.2g}") + ")")
    unreached = f", {est.n_censored} with one arm unreached (infinitely slow)" if est.n_censored else ""
    head = f"{candidate} / {baseline} {what}: {format_ratio(est.ratio)}x over {est.n_pairs} pairs{unreached}{ci}"
    if est.verdict == "not distinguishable":
        power = est.power_words()
        return head + ": not distinguishable (the interval contains 1)" + (f"; {power}" if power else "")
    if est.verdict == "too few pairs":
        return head + ": too few pairs for an interval"
    if est.ratio == 0 or math.isinf(est.ratio):
        fails = baseline if est.ratio == 0 else candidate
        return head + f": {fails} missed the target in most pairs"
    if est.ratio < 1:
        return head + f": {candidate} is {format_ratio(1 / est.ratio)}x {'faster' if 'time' in what else 'lower'}"
    return head + f": {candidate} is {format_ratio(est.ratio)}x {'slower' if 'time' in what else 'higher'}"
