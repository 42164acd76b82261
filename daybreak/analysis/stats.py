"""Pure statistics of time-to-target: no files, no torch. Every analysis module calls these.

Conventions:

* standard deviation is the sample one (``ddof=1``); the coefficient of variation is ``std / mean``;
* the confidence interval of the mean is Student's t (``scipy.stats.t.interval``) with ``n - 1`` degrees of
  freedom and scale ``std / sqrt(n)``; a time's interval is that of its logs, exponentiated (an interval of the
  geometric mean: never negative, as a Student-t interval of seconds can be with few, spread runs);
* the olympic mean (MLPerf's way of scoring several runs) drops the single fastest and the single slowest run and
  averages the rest; it needs at least 3 values;
* runs that did not reach the target have no time-to-target: callers exclude them from these statistics and
  report how many there were (the reached fraction).
"""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence, TypeVar

from daybreak.errors import ConfigError
from daybreak.metrics import TOP1, Metric
from daybreak.records.repeat import CONFIDENCE, EpochStats, TimeStats

if TYPE_CHECKING:
    from daybreak.records.repeat import RepeatScore
    from daybreak.records.significance import TargetSignificance


def _clean(values: Iterable[float | None]) -> list[float]:
    out = [float(v) for v in values if v is not None]
    if any(not math.isfinite(v) for v in out):
        raise ValueError("values must be finite")
    return out


def mean(values: Sequence[float]) -> float | None:
    v = _clean(values)
    return sum(v) / len(v) if v else None


def sample_std(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1); None for fewer than 2 values."""
    v = _clean(values)
    if len(v) < 2:
        return None
    return statistics.stdev(v)


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """std (ddof=1) / mean; None for fewer than 2 values or a zero mean."""
    v = _clean(values)
    s, m = sample_std(v), mean(v)
    if s is None or not m:
        return None
    return s / m


def t_quantile(p: float, df: int) -> float:
    """The p-quantile of Student's t with ``df`` degrees of freedom: in closed form for 1 and 2; beyond, scipy's
    quantile polished by Newton steps on the t distribution's CDF (scipy.special.stdtr, the same in every scipy
    release daybreak allows), because the quantile function itself is not: scipy 1.10 gives t(3) at 0.995 as
    5.84090930 where its own CDF and scipy 1.17 say 5.84090931.

    >>> round(t_quantile(0.975, 1), 4), round(t_quantile(0.975, 2), 4), round(t_quantile(0.995, 3), 8)
    (12.7062, 4.3027, 5.84090931)
    """
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    from scipy import special, stats as sps

    x = float(sps.t.ppf(p, df))
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(3):
        density = math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))
        if density <= 0:
            break
        x -= (float(special.stdtr(df, x)) - p) / density
    return x


def confidence_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Student-t interval of the mean; None for fewer than 2 values."""
    v = _clean(values)
    if len(v) < 2:
        return None
    m, s = mean(v), sample_std(v)
    assert m is not None and s is not None
    if s == 0:
        return (m, m)
    half = t_quantile(0.5 + confidence / 2, len(v) - 1) * s / math.sqrt(len(v))
    return m - half, m + half


def olympic_mean(values: Sequence[float]) -> float | None:
    """Mean after dropping exactly one lowest and one highest value (MLPerf); None for fewer than 3 values."""
    v = sorted(_clean(values))
    if len(v) < 3:
        return None
    kept = v[1:-1]
    return sum(kept) / len(kept)


# --- MLPerf's scoring of a set of runs ------------------------------------------------------------------------------
# MLPerf Training rules, "Benchmark Results" and "Scoring": a result is the olympic mean of N runs (the fastest and
# the slowest dropped); a single non-converging run may be treated as the slowest run and dropped; more than one
# makes the result invalid. A submitter may run M > N runs and score the N consecutive runs closest to the median:
# every window of N consecutive runs is scored so (an invalid window scoring infinity) and the window with the
# median score is the result; an invalid median window invalidates the result. mlperf-logging's result_summarizer
# (_compute_strong_score_standalone, _compute_olympic_average) implements the first part the same way.

MLPERF_SCORED_RUNS = 5  # N when nothing else is said: MLPerf's count for ResNet-50 (and SSD, RetinaNet, ...)
MLPERF_MAX_FAILED = 1  # of a set of MLPerf's usual size (5 or 10 runs): see mlperf_dropped


def mlperf_dropped(scored_runs: int) -> int:
    """How many runs MLPerf drops at each end of a set of N = ``scored_runs`` (and how many non-converging runs the
    set may hold, each counted as one of the slowest): one for its 5- and 10-run benchmarks, four for UNET3D's 40
    (RULES: "Out of the 40 runs, the 4 fastest and 4 slowest are dropped. There can be maximum of 4 non-converging
    runs"; mlperf-logging's summarizer: max_dropped_scores 4 for unet3d, 1 otherwise). daybreak's --scored-runs N
    keeps that proportion: max(1, N // 10).

    >>> [mlperf_dropped(n) for n in (3, 5, 10, 20, 40)]
    [1, 1, 1, 2, 4]
    """
    return max(1, scored_runs // 10)


def mlperf_olympic(times: Sequence[float], max_failed: int = MLPERF_MAX_FAILED) -> float | None:
    """One set of runs scored as MLPerf does (``times``: seconds, ``math.inf`` for a run that did not reach the
    target): drop the ``max_failed`` fastest runs and as many slowest (a non-converging run, if any, being one of
    the slowest), average the rest. ``math.inf`` (invalid) with more than ``max_failed`` non-converging runs; None
    when nothing is left to average.

    >>> mlperf_olympic([12.0, 10.0, 11.0, 30.0, 9.0]), mlperf_olympic([12.0, 10.0, math.inf, 30.0, 9.0])
    (11.0, 17.333333333333332)
    """
    failed = sum(1 for t in times if math.isinf(t))
    if failed > max_failed:
        return math.inf
    scores = sorted(t for t in times if not math.isinf(t))
    kept = scores[max_failed:len(scores) - (max_failed - failed)]
    return sum(kept) / len(kept) if kept else None


def mlperf_score(times: Sequence[float], scored_runs: int = MLPERF_SCORED_RUNS) -> "RepeatScore":
    """The MLPerf score of runs in the order they ran (``math.inf``: not reached): the olympic rule above on all of
    them when there are at most ``scored_runs``, dropping :func:`mlperf_dropped` runs at each end; with more, the
    window of ``scored_runs`` consecutive runs whose score is the median of all windows' (of an even number of
    windows, the slower of the two middle ones)."""
    runs = list(times)
    failed = sum(1 for t in runs if math.isinf(t))
    dropped = mlperf_dropped(scored_runs)
    each = "fastest and slowest dropped" if dropped == 1 else f"the {dropped} fastest and {dropped} slowest dropped"
    rule = (f"MLPerf: olympic mean of {scored_runs} runs ({each}; up to {dropped} non-converging "
            f"run{'s' if dropped > 1 else ''} may be among the slowest dropped, more make the set invalid)")
    if len(runs) <= scored_runs:
        value = mlperf_olympic(runs, dropped)
        notes = [] if len(runs) == scored_runs else [
            f"{len(runs)} runs: fewer than the {scored_runs} of a complete MLPerf result"]
        return _score(rule, value, 0, len(runs), failed, notes, dropped)
    windows = [(i, mlperf_olympic(runs[i:i + scored_runs], dropped)) for i in range(len(runs) - scored_runs + 1)]
    ordered = sorted(windows, key=lambda w: (math.inf if w[1] is None else w[1], w[0]))
    start, value = ordered[len(ordered) // 2]  # odd: the middle; even: the slower of the two middle ones
    rule += (f"; of {len(runs)} runs, the window of {scored_runs} consecutive runs (in the order they ran) whose "
             f"score is the median of the {len(windows)} windows'")
    window_failed = sum(1 for t in runs[start:start + scored_runs] if math.isinf(t))
    return _score(rule, value, start, start + scored_runs, window_failed, [], dropped)


def _score(rule: str, value: float | None, start: int, stop: int, failed: int, notes: list[str],
           dropped: int = MLPERF_MAX_FAILED) -> "RepeatScore":
    from daybreak.records.repeat import RepeatScore

    valid = value is not None and not math.isinf(value)
    if value is not None and math.isinf(value):
        notes = notes + [f"{failed} non-converging runs: more than {dropped}, the set is invalid"]
    elif value is None:
        notes = notes + [f"fewer than {2 * dropped + 1} runs: nothing is left once the {dropped} fastest and the "
                         f"{dropped} slowest are dropped"]
    elif failed:
        notes = notes + [f"{failed} non-converging run{'s' if failed > 1 else ''} counted as the slowest and dropped"]
    return RepeatScore(rule=rule, score_s=value if valid else None, valid=valid, first_run=start, stop_run=stop,
                       n_failed=failed, notes=notes)


def olympic_score(times: Sequence[float]) -> "RepeatScore":
    """DAWNBench's headline: the olympic mean of the runs that reached the target (the others counted apart)."""
    from daybreak.records.repeat import RepeatScore

    reached = [t for t in times if not math.isinf(t)]
    value = olympic_mean(reached)
    notes = [] if value is not None else ["needs >= 3 reached runs"]
    return RepeatScore(rule="olympic mean of the runs that reached the target (fastest and slowest dropped; "
                            "unreached runs counted in the reached fraction)", score_s=value, valid=value is not None,
                       first_run=0, stop_run=len(times), n_failed=len(times) - len(reached), notes=notes)


def median(values: Sequence[float]) -> float | None:
    v = _clean(values)
    return statistics.median(v) if v else None


def geometric_mean(values: Sequence[float]) -> float | None:
    """exp(mean(log v)) of positive values; None if there are none."""
    v = _clean(values)
    if not v or any(x <= 0 for x in v):
        return None
    return math.exp(sum(math.log(x) for x in v) / len(v))


def log_confidence_interval(values: Sequence[float],
                            confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The Student-t interval of the mean of log(values), exponentiated: an interval of the geometric mean, never
    below 0 (times and ratios are positive and spread multiplicatively); None for fewer than 2 values or a value
    <= 0."""
    v = _clean(values)
    if len(v) < 2 or any(x <= 0 for x in v):
        return None
    ci = confidence_interval([math.log(x) for x in v], confidence)
    assert ci is not None
    return math.exp(ci[0]), math.exp(ci[1])


def time_stats(times: Sequence[float], confidence: float = CONFIDENCE) -> TimeStats:
    v = _clean(times)
    ci = log_confidence_interval(v, confidence)
    return TimeStats(
        n=len(v), times_s=v, mean_s=mean(v), std_s=sample_std(v), cv=coefficient_of_variation(v),
        geometric_mean_s=geometric_mean(v),
        confidence=confidence, ci_low_s=ci[0] if ci else None, ci_high_s=ci[1] if ci else None,
        olympic_mean_s=olympic_mean(v), min_s=min(v) if v else None, median_s=median(v),
        max_s=max(v) if v else None,
    )


def epoch_stats(epochs: Sequence[float]) -> EpochStats:
    v = _clean(epochs)
    return EpochStats(values=v, min=min(v) if v else None, median=median(v), max=max(v) if v else None)


# --- threshold sensitivity -------------------------------------------------------------------------------------

def threshold_grid(start_pct: float, stop_pct: float, step_pct: float) -> list[float]:
    """Thresholds from ``start_pct`` up to ``stop_pct`` inclusive, every ``step_pct`` points, as fractions.

    Computed in percent and rounded to 1e-6 points so that e.g. 98.0 comes out as exactly 0.98 (the same float
    a ``--target 98`` run compares against).
    """
    if not (step_pct > 0 and math.isfinite(step_pct)):
        raise ValueError("step must be > 0")
    if stop_pct < start_pct:
        raise ValueError("the range is empty (from > to)")
    count = int(math.floor((stop_pct - start_pct) / step_pct + 1e-9)) + 1
    if count > 10_000:
        raise ValueError("more than 10,000 thresholds; use a larger step")
    out = [round(start_pct + i * step_pct, 6) / 100.0 for i in range(count)]
    return out


class Evaluated(Protocol):
    """What the threshold functions read of a history entry (an EpochRecord, or anything alike)."""

    @property
    def accuracy(self) -> float: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def epoch(self) -> float: ...


E = TypeVar("E", bound=Evaluated)


def first_at_or_above(history: Sequence[E], threshold: float, metric: Metric = TOP1) -> E | None:
    """The first history entry (anything with ``.accuracy``) whose accuracy reaches ``threshold`` (``metric``'s
    ``reaches``: at or above it for accuracies)."""
    for entry in history:
        if metric.reaches(entry.accuracy, threshold):
            return entry
    return None


def threshold_times(history: Sequence[Evaluated], thresholds: Sequence[float],
                    metric: Metric = TOP1) -> list[float | None]:
    """Time-to-threshold (``elapsed_s`` of the first entry at or above it) for each threshold; None if never."""
    out: list[float | None] = []
    for t in thresholds:
        entry = first_at_or_above(history, t, metric)
        out.append(None if entry is None else float(entry.elapsed_s))
    return out


def threshold_epochs(history: Sequence[Evaluated], thresholds: Sequence[float],
                     metric: Metric = TOP1) -> list[float | None]:
    out: list[float | None] = []
    for t in thresholds:
        entry = first_at_or_above(history, t, metric)
        out.append(None if entry is None else float(entry.epoch))
    return out


# --- comparison ------------------------------------------------------------------------------------------------

def hedges_g(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Hedges' g of ``a`` minus ``b``: Cohen's d with the pooled sample std, times the small-sample correction
    J = 1 - 3 / (4 (n_a + n_b) - 9). Negative: ``a`` is smaller (faster). None if undefined."""
    a, b = _clean(a), _clean(b)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return None
    sa, sb = statistics.variance(a), statistics.variance(b)
    pooled = math.sqrt(((na - 1) * sa + (nb - 1) * sb) / (na + nb - 2))
    if pooled == 0:
        return None
    d = (sum(a) / na - sum(b) / nb) / pooled
    return d * (1 - 3 / (4 * (na + nb) - 9))


def welch_t(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """(t statistic, two-sided p) of Welch's unequal-variance t-test; None with fewer than 2 values a side or no
    variance on either side (no test)."""
    from scipy import stats as sps

    a, b = _clean(a), _clean(b)
    if len(a) < 2 or len(b) < 2:
        return None
    if statistics.variance(a) == 0 and statistics.variance(b) == 0:
        return None  # t = difference / 0: no test (scipy says t = -inf, p = 0)
    res = sps.ttest_ind(a, b, equal_var=False)
    t, p = float(res.statistic), float(res.pvalue)
    if not (math.isfinite(p) and math.isfinite(t)):
        return None
    return t, p


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """(U statistic of ``a``, two-sided p) of the Mann-Whitney U test; None if a side is empty."""
    from scipy import stats as sps

    a, b = _clean(a), _clean(b)
    if not a or not b:
        return None
    ties = len(set(a + b)) < len(a) + len(b)
    method = "asymptotic" if ties or (len(a) > 8 and len(b) > 8) else "exact"  # named, not left to scipy's "auto"
    res = sps.mannwhitneyu(a, b, alternative="two-sided", method=method)
    return float(res.statistic), float(res.pvalue)


def fisher_reached(reached_a: int, n_a: int, reached_b: int, n_b: int) -> float | None:
    """Two-sided p of Fisher's exact test on the reached / not reached counts of two groups."""
    from scipy import stats as sps

    if n_a < 1 or n_b < 1:
        return None
    res = sps.fisher_exact([[reached_a, n_a - reached_a], [reached_b, n_b - reached_b]])
    return float(res.pvalue) if hasattr(res, "pvalue") else float(res[1])


# --- roofline ---------------------------------------------------------------------------------------------------

def operational_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte of memory traffic."""
    if nbytes <= 0:
        raise ValueError("bytes must be > 0")
    return flops / nbytes


def attainable_flops(peak_flops: float, bandwidth: float, intensity: float) -> float:
    """The roofline: min(peak FLOP/s, bandwidth (bytes/s) x intensity (FLOP/byte))."""
    return min(peak_flops, bandwidth * intensity)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity at which the roofline turns from memory- to compute-bound."""
    return peak_flops / bandwidth


def target_significance(final_accuracies: list[float], target: float, *, alpha: float = 0.01,
                        confidence: float = 0.95) -> "TargetSignificance":
    """Is the mean final accuracy above the target? A one-sided one-sample t-test (H1: mean > target) at ``alpha``
    (the nanoGPT speedrun accepts records at p < 0.01) and the Student-t interval of the mean."""
    from scipy import stats as sps

    from daybreak.records.significance import TargetSignificance

    v = _clean(final_accuracies)
    at = sum(1 for x in v if x >= target)
    m = mean(v)
    if len(v) < 2:
        return TargetSignificance(n=len(v), n_at_or_above_target=at, mean=m, confidence=confidence, alpha=alpha,
                                  significant=False, note="fewer than 2 runs: no test")
    s = sample_std(v)
    ci = confidence_interval(v, confidence)
    if not s:
        above = m is not None and m > target
        return TargetSignificance(n=len(v), n_at_or_above_target=at, mean=m, ci_low=ci[0] if ci else m,
                                  ci_high=ci[1] if ci else m, confidence=confidence, alpha=alpha, significant=above,
                                  note="every run has the same accuracy: decided by comparing the mean")
    res = sps.ttest_1samp(v, target, alternative="greater")
    p = float(res.pvalue)
    note = None
    if ci and (ci[0] < 0.0 or ci[1] > 1.0):  # an accuracy is a fraction: the t-interval may not leave [0, 1]
        ci, note = (max(ci[0], 0.0), min(ci[1], 1.0)), "interval clipped to the accuracy's range [0, 1]"
    return TargetSignificance(n=len(v), n_at_or_above_target=at, mean=m, ci_low=ci[0] if ci else None,
                              ci_high=ci[1] if ci else None, confidence=confidence, t_statistic=float(res.statistic),
                              p_value=p, alpha=alpha, significant=p < alpha, note=note)


# --- cross-task score (AlgoPerf) ---------------------------------------------------------------------------------
# AlgoPerf's benchmark score, from the performance profiles of Dolan and More (2002): for each task, a submission's
# performance ratio r = its time / the fastest submission's time (r >= 1; infinite when it never reached the
# target); its profile rho(tau) = the fraction of tasks with r <= tau; its score = the area under rho from 1 to
# r_max, divided by r_max - 1. The area of one task's step 1[r <= tau] over [1, r_max] is max(0, r_max - r), so the
# score is exactly the mean over the tasks of max(0, (r_max - r) / (r_max - 1)): computed here in closed form (the
# AlgoPerf code integrates the profile numerically on a grid of tau, which approximates the same number).

R_MAX = 4.0  # AlgoPerf's upper limit: more than 4x the fastest time earns nothing on that task
UNSOLVED = math.inf  # the time of a run, or a submission on a task, that did not reach the target


def check_r_max(r_max: float) -> float:
    """``r_max`` as a float; ValueError unless it is a finite number > 1."""
    value = float(r_max)
    if not (math.isfinite(value) and value > 1):
        raise ValueError("must be a finite number > 1")
    return value


def r_max_option(r_max: float) -> float:
    """``check_r_max`` for a command's or an API's ``--r-max``: a one-line ConfigError naming the option."""
    try:
        return check_r_max(r_max)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"--r-max {r_max}: {e}") from None


def cell_time(times: Sequence[float]) -> float:
    """One submission's time on one task from its runs there: the median, an unreached run (``UNSOLVED``, inf)
    counting as infinitely slow, as AlgoPerf takes the median over its studies; inf (unsolved) unless more than
    half of the runs reached the target (with an even count, when either middle run did not)."""
    if not times:
        return UNSOLVED
    if any(math.isnan(t) or t < 0 for t in times):
        raise ValueError("times must be >= 0 (inf for a run that did not reach the target)")
    ordered = sorted(times)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    low, high = ordered[n // 2 - 1], ordered[n // 2]
    return UNSOLVED if math.isinf(high) else (low + high) / 2


def best_times(times: dict[str, dict[str, float]], tasks: Sequence[str]) -> dict[str, float]:
    """The fastest finite time on each task over the submissions (``times[submission][task]``, a missing task
    counting as unsolved); inf where nobody solved the task."""
    return {t: min((row.get(t, UNSOLVED) for row in times.values()), default=UNSOLVED) for t in tasks}


def performance_ratio(time_s: float, best_s: float) -> float:
    """time / the fastest time on the task; inf when unsolved (or nobody solved it); 1 for the fastest."""
    if math.isinf(time_s) or math.isinf(best_s):
        return UNSOLVED
    if best_s <= 0:  # a zero time: only another zero time ties with it
        return 1.0 if time_s <= 0 else UNSOLVED
    return time_s / best_s


def task_score(ratio: float, r_max: float = R_MAX) -> float:
    """One task's share of the score: max(0, (r_max - r) / (r_max - 1)); 0 for an unsolved task (r = inf)."""
    if math.isinf(ratio):
        return 0.0
    return max(0.0, (r_max - ratio) / (r_max - 1))


def algoperf_score(ratios: Sequence[float], r_max: float = R_MAX) -> float:
    """The mean task score over the tasks (one ratio per task, inf for unsolved ones)."""
    if not ratios:
        raise ValueError("no tasks")
    return sum(task_score(r, r_max) for r in ratios) / len(ratios)


def performance_profile(ratios: Sequence[float], r_max: float = R_MAX) -> list[tuple[float, float]]:
    """rho(tau), the fraction of tasks with r <= tau, at tau = 1, at every ratio in (1, r_max] and at r_max:
    a right-continuous step function (constant from each tau to the next)."""
    if not ratios:
        raise ValueError("no tasks")
    n = len(ratios)
    taus = sorted({1.0, r_max, *(r for r in ratios if 1.0 < r <= r_max)})
    return [(tau, sum(1 for r in ratios if r <= tau) / n) for tau in taus]


# --- AlgoPerf's score as its own code computes it ----------------------------------------------------------------
# algorithmic-efficiency's scoring/score_submissions.py calls performance_profile.compute_performance_profiles with
# min_tau 1, max_tau 4, num_points 100 and a linear scale, then compute_leaderboard_score: per task, a time above
# 4 x the fastest becomes infinite (compared in seconds, before dividing), r = time / the fastest time; rho(tau) =
# the fraction of tasks with r <= tau at the 100 points of numpy.linspace(1, 4, 100); the score = numpy.trapz of
# rho over those points / (4 - 1). The trapezoid of a step function is not its integral: a task's share differs from
# the exact (r_max - r) / (r_max - 1) by up to half a grid step, 1 / (2 x 99) = 0.00505, so the two numerics can
# order two close submissions differently. Written here from a reading of that code (no code copied).

ALGOPERF_POINTS = 100  # score_submissions.py: num_points=100
NUMERICS = ("exact", "official")


def official_tau_grid(r_max: float = R_MAX, points: int = ALGOPERF_POINTS) -> list[float]:
    """numpy.linspace(1, r_max, points) as numpy computes it: 1 + i x step with step = (r_max - 1) / (points - 1),
    the last point r_max itself.

    >>> g = official_tau_grid(); len(g), g[0], g[1], g[-1]
    (100, 1.0, 1.0303030303030303, 4.0)
    """
    step = (r_max - 1.0) / (points - 1)
    return [i * step + 1.0 for i in range(points - 1)] + [r_max]


def official_ratios(times: dict[str, dict[str, float]], tasks: Sequence[str],
                    r_max: float = R_MAX) -> dict[str, list[float]]:
    """Each submission's ratio on each task (``times[submission][task]``, a missing task unsolved) as the official
    code makes them: a time above r_max x the task's fastest is infinite, the comparison made in seconds before the
    division; then time / the fastest."""
    best = best_times(times, tasks)
    out: dict[str, list[float]] = {}
    for name, row in times.items():
        ratios = []
        for task in tasks:
            t, b = row.get(task, UNSOLVED), best[task]
            ratios.append(UNSOLVED if math.isinf(t) or math.isinf(b) or t > r_max * b else performance_ratio(t, b))
        out[name] = ratios
    return out


def official_profile(ratios: Sequence[float], r_max: float = R_MAX,
                     points: int = ALGOPERF_POINTS) -> list[tuple[float, float]]:
    """rho at each point of the official tau grid: the fraction of tasks with r <= tau."""
    if not ratios:
        raise ValueError("no tasks")
    n = len(ratios)
    return [(tau, sum(1 for r in ratios if r <= tau) / n) for tau in official_tau_grid(r_max, points)]


def trapezoid(profile: Sequence[tuple[float, float]]) -> float:
    """The trapezoidal rule over (x, y) points, as numpy.trapz: the sum of (x1 - x0) (y1 + y0) / 2."""
    return sum((x1 - x0) * (y1 + y0) / 2.0 for (x0, y0), (x1, y1) in zip(profile, profile[1:]))


def official_score(ratios: Sequence[float], r_max: float = R_MAX, points: int = ALGOPERF_POINTS) -> float:
    """AlgoPerf's score as its code computes it: the trapezoid of :func:`official_profile` over the grid, divided
    by the grid's span (``ratios`` from :func:`official_ratios`). One task at r = 2.5 (midway between two grid
    points) scores 0.5 as the exact integral does; at r = 2, a grid point, 0.6717 where the exact integral gives
    0.6667 (half a grid step more: 1 / 198); at r = 4 exactly 0.00505 where the integral gives 0; the fastest 1.

    >>> official_score([2.5]), round(official_score([2.0]), 4), official_score([1.0]), algoperf_score([2.0])
    (0.5, 0.6717, 1.0, 0.6666666666666666)
    >>> round(official_score([4.0]), 5), algoperf_score([4.0]), round(1 / 198, 5)
    (0.00505, 0.0, 0.00505)
    """
    profile = official_profile(ratios, r_max, points)
    return trapezoid(profile) / (profile[-1][0] - profile[0][0])
