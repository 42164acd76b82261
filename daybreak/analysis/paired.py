"""Paired ratios: how much faster (cheaper, more frugal) is a candidate than a baseline, with a confidence interval.

Trials are paired: pair i runs the baseline and the candidate with the same seed, one right after the other on the
same machine, so a slow spell of the machine (a neighbour, thermal throttling, a cold file cache) hits both sides
of a pair alike and cancels in their ratio. Each pair gives a log ratio d = log(candidate / baseline).

**Unreached trials are infinitely slow**, as MLPerf (a non-converging run counts as the slowest) and AlgoPerf (an
unsolved workload has an infinite time) treat them: a pair where only the candidate missed the target has
d = +inf, only the baseline d = -inf. A pair where neither arm reached it has no ratio and is left out (counted);
the reached fractions are compared by Fisher's exact test (daybreak.analysis.stats.fisher_reached). Dropping the
unreached trials instead would flatter the arm that fails more often.

**One test per comparison, and the verdict is that test's.** Two methods, the one used named in
``RatioEstimate.method``; each gives the p-value printed, and the interval is the set of ratios that same test does
not reject, so the verdict ("candidate better" / "candidate worse" when p <= 1 - confidence, "not distinguishable"
otherwise) can never disagree with either:

* every pair reached the target and the log ratios vary: the estimate is the geometric mean of the per-pair ratios
  (exp of the mean d); the test the two-sided paired t-test of the log ratios (H0: ratio 1); its interval the
  Student-t interval of the mean d (n - 1 degrees of freedom), exponentiated. A percentile bootstrap of the same
  geometric mean (seeded, 10,000 resamples) is reported beside it as a check that does not assume normal log
  ratios, but only where the pairs allow enough distinct resamples for its tails (:func:`bootstrap_is_meaningful`);
* some pair has an infinite d, or every d is the same (the t statistic is then 0/0 or x/0: no t-test): rank-based,
  so that infinities are ordinary (largest) values. The test is the exact two-sided Wilcoxon signed-rank test,
  computed here (:func:`signed_rank_p`, from the exact null distribution of the statistic, whatever scipy's
  version): for a shift theta its statistic is T(theta) = #{W > theta} + #{W = theta} / 2 over the n (n + 1) / 2
  Walsh averages W = (d_i + d_j) / 2, i <= j (by Tukey's identity the signed-rank sum of the d - theta; a Walsh
  average equal to theta, a zero or a tie of magnitudes, counts half). The estimate is the Hodges-Lehmann
  estimator (the median of the Walsh averages); the interval the shifts the test does not reject, which are the
  Walsh averages' order statistics [W_(c+1), W_(N-c)] (c: the largest count with P(T <= c) <= (1 - confidence) / 2;
  with too few pairs for any such c the interval is unbounded, [0, inf] as a ratio), each end excluded where the
  test rejects it. An average of +inf and -inf (one failure in each arm) is 0, the limit of two equally large
  opposite log ratios, and counts half at a shift of exactly 0, like any tie: so a ratio of exactly 1 at the end of
  an interval is inside it exactly when the p-value says so.

**Power:** from the spread of the log ratios when every pair reached the target, :func:`pairs_needed` is the number
of pairs a paired t-test at the experiment's confidence needs to detect a given difference (5%, and ``--effect``)
with 80% power, computed from the noncentral t distribution for the observed sd. That sd is itself an estimate
from the pairs so far: the record gives the range of the figure over the sd's own confidence interval (chi-square,
at the same confidence), which is wide after a few pairs. With a censored pair the comparison is rank-based and the
t-test's figure does not apply: none is given, and the record says why.
"""

from __future__ import annotations

import bisect
import functools
import math
import random
from typing import Sequence

from daybreak.analysis.stats import sample_std, t_quantile
from daybreak.records.experiment import MAX_PAIRS, POWER, PairsNeeded, RatioEstimate, format_ratio

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
BOOTSTRAP_MIN_TAIL = 5  # distinct resamples expected in each tail of the percentile interval for it to mean anything
DEFAULT_EFFECT = 0.05  # the difference whose pairs-needed figure every comparison reports
EXACT_RANKS_MAX = 400  # the signed-rank null distribution is computed exactly up to this many pairs

METHOD_T = ("geometric mean of the per-pair ratios; Student-t interval of the mean log ratio; paired t-test "
            "(every pair reached the target)")
METHOD_RANK = ("Hodges-Lehmann estimate of the per-pair log ratios; exact Wilcoxon signed-rank test and the "
               "interval inverted from it (an unreached trial counts as infinitely slow)")
METHOD_RANK_EQUAL = ("every pair has the same ratio, so the t-test is undefined: exact Wilcoxon signed-rank test "
                     "and the interval inverted from it")


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
    finite = [d for d in logs if math.isfinite(d)]
    sd = sample_std(finite)  # None for fewer than 2 finite pairs
    ranks = censored > 0 or sd == 0
    est = RatioEstimate(quantity=quantity, n_pairs=n, n_censored=censored, n_neither_reached=len(neither),
                        confidence=confidence,
                        method=METHOD_RANK if censored else METHOD_RANK_EQUAL if ranks else METHOD_T)
    if sd is not None:
        if censored:
            est.log_ratio_sd = sd
            est.power_note = (f"no pairs-needed figure: {censored} of {n} pairs have one arm unreached, so the "
                              f"comparison is rank-based; the figure is a paired t-test's, for pairs that all "
                              f"reach the target")
        elif sd == 0:
            est.log_ratio_sd = sd
            est.power_note = ("no pairs-needed figure: every pair has the same ratio, a spread of 0 that no number "
                              "of pairs would estimate so")
        else:
            attach_power(est, sd, len(finite), effects)
    if n == 0:
        est.verdict = "too few pairs"
        return est
    if ranks:
        _rank_method(est, logs, confidence)
    else:
        m = sum(logs) / n
        est.ratio = math.exp(m)
        if sd is None:  # (no pair censored: every log ratio is finite) fewer than 2 pairs
            est.verdict = "too few pairs"
            return est
        se = sd / math.sqrt(n)
        half = t_quantile(0.5 + confidence / 2, n - 1) * se
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


# --- rank-based: Hodges-Lehmann and the exact Wilcoxon signed-rank test ------------------------------------------

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


@functools.lru_cache(maxsize=32)
def _cumulative_counts(n: int) -> tuple[int, ...]:
    out, running = [], 0
    for k in signed_rank_counts(n):
        running += k
        out.append(running)
    return tuple(out)


def signed_rank_lower_tail(n: int, t: float) -> float:
    """P(T+ <= t) under H0 for n pairs (every sign pattern equally likely): exact (integer counts over 2**n) up to
    EXACT_RANKS_MAX pairs, beyond that the normal approximation with continuity correction."""
    total = n * (n + 1) // 2
    k = math.floor(t)
    if k < 0:
        return 0.0
    if k >= total:
        return 1.0
    if n <= EXACT_RANKS_MAX:
        return _cumulative_counts(n)[k] / (1 << n)  # exact integers; one correctly rounded division
    mean = total / 2
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
    return 0.5 * math.erfc(-(k + 0.5 - mean) / sd / math.sqrt(2))


def signed_rank_p(n: int, t: float) -> float:
    """The two-sided p-value of a signed-rank statistic ``t`` (a half counts: see :func:`signed_rank_statistic`)
    for n pairs: 2 x the smaller tail, at most 1 (the null distribution is symmetric about n(n+1)/4)."""
    total = n * (n + 1) // 2
    return min(1.0, 2 * min(signed_rank_lower_tail(n, t), signed_rank_lower_tail(n, total - t)))


def signed_rank_statistic(walsh: Sequence[float], theta: float = 0.0) -> float:
    """T(theta) = #{W > theta} + #{W = theta} / 2 over the sorted Walsh averages: the signed-rank sum of the log
    ratios shifted by theta, a zero or a tie of magnitudes counting half."""
    below_or_at = bisect.bisect_right(walsh, theta)
    below = bisect.bisect_left(walsh, theta)
    return (len(walsh) - below_or_at) + (below_or_at - below) / 2


def signed_rank_critical(n: int, confidence: float) -> int | None:
    """The largest c with P(T+ <= c) <= (1 - confidence) / 2 under H0 (:func:`signed_rank_lower_tail`); None when
    even P(T+ = 0) = 2**-n is above it."""
    tail = (1 - confidence) / 2
    if signed_rank_lower_tail(n, 0) > tail:
        return None
    low, high = 0, n * (n + 1) // 4 + 1  # the tail is below 1/2: c lies below the centre n(n+1)/4
    while high - low > 1:  # P(T+ <= low) <= tail < P(T+ <= high)
        mid = (low + high) // 2
        if signed_rank_lower_tail(n, mid) <= tail:
            low = mid
        else:
            high = mid
    return low


def signed_rank_accepts(walsh: Sequence[float], n: int, theta: float, confidence: float) -> bool:
    """Whether the two-sided signed-rank test at 1 - ``confidence`` keeps the shift ``theta`` (p > 1 - confidence)."""
    return signed_rank_p(n, signed_rank_statistic(walsh, theta)) > 1 - confidence


def signed_rank_interval(logs: Sequence[float], confidence: float) -> tuple[float, float, bool, bool]:
    """(low, high, low excluded, high excluded): the shifts theta of the log ratios that the two-sided signed-rank
    test at 1 - ``confidence`` does not reject. Between W_(c+1) and W_(N-c) every shift is kept and outside none
    (Tukey); at those two Walsh averages themselves the statistic counts them half, and the test decides."""
    walsh = walsh_averages(logs)
    n, total = len(logs), len(walsh)
    c = signed_rank_critical(n, confidence)
    if c is None:
        return -math.inf, math.inf, False, False
    low, high = walsh[c], walsh[total - 1 - c]
    low_out = math.isfinite(low) and not signed_rank_accepts(walsh, n, low, confidence)
    high_out = math.isfinite(high) and not signed_rank_accepts(walsh, n, high, confidence)
    return low, high, low_out, high_out


def _rank_method(est: RatioEstimate, logs: list[float], confidence: float) -> None:
    n = len(logs)
    est.ratio = math.exp(hodges_lehmann(logs))
    low, high, low_out, high_out = signed_rank_interval(logs, confidence)
    est.ci_low, est.ci_high = math.exp(low), math.exp(high)
    est.ci_low_excluded, est.ci_high_excluded = low_out, high_out
    if signed_rank_critical(n, confidence) is None:
        est.interval_note = (f"{n} pairs are too few for a {confidence * 100:g}% signed-rank interval: it is "
                             f"unbounded")
    elif low == high and low_out:
        est.interval_note = ("no ratio is kept by the test at this confidence (the Walsh averages are tied at the "
                             "interval's only point); the verdict is the test's p-value")
    else:
        ends = [name for name, value, out in (("lower", low, low_out), ("upper", high, high_out))
                if out and value == 0]
        if ends:
            est.interval_note = (f"the interval's {ends[0]} end, a ratio of exactly 1, is excluded: the signed-rank "
                                 f"test rejects a ratio of 1 (a Walsh average at 0, such as +inf with -inf, counts "
                                 f"half there)")
    est.p_value = signed_rank_p(n, signed_rank_statistic(walsh_averages(logs), 0.0))


# --- power --------------------------------------------------------------------------------------------------------

def power_of(n: int, sd: float, delta: float, confidence: float) -> float:
    """The power of a two-sided paired t-test at level 1 - confidence with ``n`` pairs, when the mean log ratio is
    ``delta`` and its per-pair spread ``sd`` (the noncentral t distribution)."""
    from scipy import stats as sps

    df = n - 1
    t_crit = t_quantile(0.5 + confidence / 2, df)
    nc = delta * math.sqrt(n) / sd
    power = float(sps.nct.sf(t_crit, df, nc) + sps.nct.cdf(-t_crit, df, nc))
    if not math.isfinite(power):  # older scipy's noncentral t gives NaN far in its tails (1.10 with df 1-3)
        power = t_test_power(t_crit, df, nc)
    return min(1.0, max(0.0, power))


def t_test_power(t_crit: float, df: int, nc: float, intervals: int = 4000) -> float:
    """P(|T| > t_crit) for T noncentral t with ``df`` degrees of freedom and noncentrality ``nc``, computed here:
    T = (Z + nc) / (S / sqrt(df)) with S chi-distributed, so the power is the mean over S of
    Phi(nc - t_crit S / sqrt(df)) + Phi(-nc - t_crit S / sqrt(df)) -- Simpson's rule over the chi density (its mode
    +- 15, where all but e**-100 of it lies), normalized by the same rule. Where scipy's own noncentral t fails."""
    mode = math.sqrt(max(df - 1, 0))
    low, high = max(0.0, mode - 15.0), mode + 15.0
    step = (high - low) / intervals
    log_norm = (df / 2 - 1) * math.log(2) + math.lgamma(df / 2)
    scale = t_crit / math.sqrt(df)
    total = mass = 0.0
    for i in range(intervals + 1):
        x = low + i * step
        if x <= 0.0 and df > 1:
            continue  # the density is 0 at 0 (df = 1: it is largest there)
        power_term = (df - 1) * math.log(x) if df > 1 else 0.0
        weight = (1 if i in (0, intervals) else 4 if i % 2 else 2) * math.exp(power_term - x * x / 2 - log_norm)
        tail = 0.5 * math.erfc(-(nc - scale * x) / math.sqrt(2)) + 0.5 * math.erfc((nc + scale * x) / math.sqrt(2))
        total += weight * tail
        mass += weight
    return total / mass if mass > 0 else 0.0


def pairs_needed(sd: float, effect: float, confidence: float, power: float = POWER) -> int | None:
    """The fewest pairs (>= 2) for which a paired t-test at ``confidence`` detects a ratio of 1 + ``effect`` with
    ``power``, given the per-pair spread ``sd`` of the log ratios; 2 for no spread, None beyond MAX_PAIRS.

    >>> pairs_needed(0.084, 0.05, 0.99), pairs_needed(0.08, 0.05, 0.99), pairs_needed(0.08, 0.05, 0.95)
    (38, 35, 24)
    """
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


def attach_power(est: RatioEstimate, sd: float, n: int, effects: Sequence[float] = (DEFAULT_EFFECT,)) -> None:
    """Give ``est`` the spread ``sd`` of ``n`` finite log ratios, its interval (:func:`sd_interval`) and, for each
    effect, the pairs needed at the sd and at both ends of its interval."""
    est.log_ratio_sd = sd
    est.log_ratio_sd_low, est.log_ratio_sd_high = sd_interval(sd, n, est.confidence)
    est.pairs_needed = [
        PairsNeeded(effect=e, power=POWER, pairs=pairs_needed(sd, e, est.confidence),
                    pairs_low=pairs_needed(est.log_ratio_sd_low, e, est.confidence),
                    pairs_high=pairs_needed(est.log_ratio_sd_high, e, est.confidence))
        for e in dict.fromkeys(effects)]


def sd_interval(sd: float, n: int, confidence: float) -> tuple[float, float]:
    """The ``confidence`` interval of a normal standard deviation estimated as ``sd`` from ``n`` values (n - 1
    degrees of freedom, chi-square): how far the true spread may be from the one the pairs so far show.

    >>> [round(x, 3) for x in sd_interval(0.084, 3, 0.99)]
    [0.036, 1.186]
    """
    from scipy import stats as sps

    df = n - 1
    alpha = 1 - confidence
    return (sd * math.sqrt(df / float(sps.chi2.ppf(1 - alpha / 2, df))),
            sd * math.sqrt(df / float(sps.chi2.ppf(alpha / 2, df))))


# --- the bootstrap check ------------------------------------------------------------------------------------------

def distinct_resamples(n: int) -> int:
    """How many different multisets a bootstrap resample of n pairs can be: C(2n - 1, n).

    >>> distinct_resamples(3), distinct_resamples(7)
    (10, 1716)
    """
    return math.comb(2 * n - 1, n)


def bootstrap_is_meaningful(n: int, confidence: float) -> bool:
    """Whether the percentile bootstrap of n pairs has at least BOOTSTRAP_MIN_TAIL distinct resamples in each tail
    of a ``confidence`` interval (3 pairs have 10 resamples in all: none).

    >>> [n for n in range(2, 10) if bootstrap_is_meaningful(n, 0.99)][0]
    7
    """
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
    """The test's verdict: "not distinguishable" unless p <= 1 - confidence, then which way the estimate lies (the
    interval, inverted from the same test, then lies on the same side of 1); "too few pairs" without a test."""
    if est.p_value is None or est.ratio is None:
        return "too few pairs"
    if est.p_value > 1 - est.confidence:
        return "not distinguishable"
    higher = est.ratio > 1.0 if est.ratio != 1.0 else (est.ci_low is not None and est.ci_low >= 1.0)
    return "candidate worse" if higher == lower_is_better else "candidate better"


def relative_width(est: RatioEstimate) -> float | None:
    """The interval's width relative to the ratio (ci_high / ci_low - 1): what --until-significant narrows."""
    if est.ci_low is None or est.ci_high is None or est.ci_low <= 0 or math.isinf(est.ci_high):
        return None
    return est.ci_high / est.ci_low - 1.0


def describe(est: RatioEstimate, baseline: str, candidate: str, what: str = "time to target") -> str:
    """One line in words; when not distinguishable, how many pairs the observed spread would need.

    >>> print(describe(paired_ratio([10.0, 12.0, 11.0, 10.5], [8.1, 9.9, 8.9, 8.4], confidence=0.95), "A", "B"))
    B / A time to target: 0.811x over 4 pairs (95% CI 0.795-0.828, p=6.2e-05): B is 1.233x faster
    """
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
    if est.ratio == 1:  # the estimate sits on 1 while the test rejects 1 (ties at a ratio of exactly 1)
        side = "better" if est.verdict == "candidate better" else "worse"
        return head + f": the test calls {candidate} {side} though the estimate is 1.000 (see the interval's note)"
    if est.ratio < 1:
        return head + f": {candidate} is {format_ratio(1 / est.ratio)}x {'faster' if 'time' in what else 'lower'}"
    return head + f": {candidate} is {format_ratio(est.ratio)}x {'slower' if 'time' in what else 'higher'}"
