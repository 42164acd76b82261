"""`daybreak compare A... -- B...`: does A reach the target faster than B, and is the difference significant?

Each side is one or more repeat directories, folders of runs or run directories. Only runs that reached the
target have a time-to-target: unreached runs (not_reached, diverged, failed, ...) are excluded from the time tests
and counted per side; Fisher's exact test compares the reached fractions. On the times:

* Welch's t-test (unequal variances, two-sided, ``scipy.stats.ttest_ind(equal_var=False)``) decides the verdict:
  A is faster when its mean is lower and p < alpha (and vice versa). Where it is undefined (every time on both
  sides the same) the verdict is "no test": nothing decides, and the summary says so instead of calling a side
  faster from two means;
* the Mann-Whitney U test (two-sided, ``scipy.stats.mannwhitneyu``) is reported beside it as a check that does
  not assume normal times; a disagreement at alpha is noted;
* the effect size is Hedges' g (Cohen's d with the pooled sample std, small-sample corrected) of A minus B:
  negative means A is faster; |g| around 0.2 small, 0.5 medium, 0.8 large.
"""

from __future__ import annotations

from typing import Any

from daybreak.analysis.sources import AnalyzedRun, collect_runs, provenance
from daybreak.analysis.stats import (fisher_reached, hedges_g, mann_whitney, mean, median, sample_std, welch_t)
from daybreak.errors import ConfigError
from daybreak.records.compare import CompareResult, CompareSide

ALPHA = 0.05


def _side(name: str, paths: list[str], runs: list[AnalyzedRun]) -> CompareSide:
    reached = [r for r in runs if r.result.reached and r.result.time_to_target_s is not None]
    times = [t for r in reached if (t := r.result.time_to_target_s) is not None]
    return CompareSide(
        name=name, paths=[str(p) for p in paths], task=runs[0].result.task,
        recipes=sorted({r.result.recipe for r in runs}), target=runs[0].result.target, n_runs=len(runs),
        n_reached=len(reached),
        excluded=[f"{r.path} ({r.result.status})" for r in runs if r not in reached],
        times_s=times, mean_s=mean(times) if times else None, median_s=median(times) if times else None,
        std_s=sample_std(times),
    )


def compare_times(a: list[float], b: list[float], alpha: float = ALPHA) -> dict[str, Any]:
    """The tests on two lists of times; the verdict uses Welch's p."""
    out: dict[str, Any] = dict(welch_t=None, welch_p=None, mannwhitney_u=None, mannwhitney_p=None, hedges_g=None,
                     mean_ratio=None, verdict="not enough runs", notes=[])
    w = welch_t(a, b)
    if w is not None:
        out["welch_t"], out["welch_p"] = w
    mw = mann_whitney(a, b)
    if mw is not None:
        out["mannwhitney_u"], out["mannwhitney_p"] = mw
    out["hedges_g"] = hedges_g(a, b)
    ma, mb = mean(a) if a else None, mean(b) if b else None
    if ma is not None and mb:
        out["mean_ratio"] = ma / mb
    if len(a) < 2 or len(b) < 2:
        out["notes"].append("need at least 2 reached runs on each side for the t-test")
        return out
    assert ma is not None and mb is not None  # (two or more times on each side)
    if out["welch_p"] is None:  # every time on each side the same: t = x / 0, no test
        out["verdict"] = "no test"
        out["notes"].append("both sides have zero variance, so Welch's t-test is undefined and nothing decides; "
                            "collect runs whose times vary")
        return out
    if out["welch_p"] < alpha:
        out["verdict"] = "A faster" if ma < mb else "B faster"
    else:
        out["verdict"] = "no significant difference"
    if out["mannwhitney_p"] is not None and (out["mannwhitney_p"] < alpha) != (out["welch_p"] < alpha):
        out["notes"].append(f"Welch's t-test and Mann-Whitney U disagree at alpha={alpha:g} "
                            "(few runs, or times far from normal): collect more runs")
    return out


def analyze_compare(a_paths: list[str], b_paths: list[str], alpha: float = ALPHA,
                    command: list[str] | None = None) -> CompareResult:
    if not a_paths or not b_paths:
        raise ConfigError("give runs for both sides: daybreak compare A... -- B...  (or --a ... --b ...)")
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha {alpha}: must be between 0 and 1")
    runs_a, runs_b = collect_runs(a_paths, "runs for A"), collect_runs(b_paths, "runs for B")
    overlap = {r.path.resolve() for r in runs_a} & {r.path.resolve() for r in runs_b}
    if overlap:
        raise ConfigError(f"the same run is on both sides: {sorted(overlap)[0]}")
    a, b = _side("A", a_paths, runs_a), _side("B", b_paths, runs_b)
    res = compare_times(a.times_s, b.times_s, alpha)
    notes = list(res.pop("notes"))
    if a.task != b.task or abs(a.target - b.target) > 1e-12:
        notes.insert(0, f"A is {a.task} to {a.target * 100:.2f}%, B is {b.task} to {b.target * 100:.2f}%: "
                        "times to different targets are not comparable")
    for side, runs in (("A", runs_a), ("B", runs_b)):
        targets = {r.result.target for r in runs}
        if len(targets) > 1:
            notes.append(f"side {side} mixes targets " + ", ".join(f"{t * 100:.2f}%" for t in sorted(targets)))
    fisher = fisher_reached(a.n_reached, a.n_runs, b.n_reached, b.n_runs)
    verdict = res["verdict"]
    summary = _summary(a, b, res, alpha)
    return CompareResult(a=a, b=b, alpha=alpha, fisher_reached_p=fisher, summary=summary, notes=notes,
                         provenance=provenance([str(r.path) for r in runs_a + runs_b], command),
                         **{k: v for k, v in res.items() if k != "verdict"}, verdict=verdict)


def _summary(a: CompareSide, b: CompareSide, res: dict[str, Any], alpha: float) -> str:
    v = res["verdict"]
    if v == "not enough runs":
        return (f"not enough reached runs to test (A: {a.n_reached}, B: {b.n_reached}; need >= 2 each)")
    if v == "no test":
        return (f"no test: every run on each side has the same time-to-target (A {a.mean_s:.3f} s, B "
                f"{b.mean_s:.3f} s), so Welch's t-test is undefined and no side is called faster")
    p = res["welch_p"]
    ptext = "-" if p is None else f"{p:.3g}"
    g = res["hedges_g"]
    gtext = "-" if g is None else f"{g:+.2f}"
    if v == "A faster":
        return f"A reaches the target faster than B (Welch p = {ptext} < {alpha:g}; Hedges' g = {gtext})"
    if v == "B faster":
        return f"B reaches the target faster than A (Welch p = {ptext} < {alpha:g}; Hedges' g = {gtext})"
    return f"no significant difference in time-to-target (Welch p = {ptext} >= {alpha:g}; Hedges' g = {gtext})"


def format_compare(c: CompareResult) -> str:
    def s(x: float | None, fmt: str = "{:.3f} s") -> str:
        return "-" if x is None else fmt.format(x)

    lines = [c.summary, ""]
    lines.append(f"{'':<4}{'runs':>6}{'reached':>9}{'mean':>12}{'median':>12}{'std':>12}  recipes / paths")
    for side in (c.a, c.b):
        lines.append(f"{side.name:<4}{side.n_runs:>6}{side.n_reached:>9}{s(side.mean_s):>12}{s(side.median_s):>12}"
                     f"{s(side.std_s):>12}  {','.join(side.recipes)}: {' '.join(side.paths)}")
    lines += [
        "",
        f"test                  {c.test}",
        f"Welch's t-test        t = {s(c.welch_t, '{:.3f}')}, p = {s(c.welch_p, '{:.4g}')} (two-sided)",
        f"Mann-Whitney U        U = {s(c.mannwhitney_u, '{:g}')}, p = {s(c.mannwhitney_p, '{:.4g}')} (two-sided)",
        f"effect size           Hedges' g (A - B) = {s(c.hedges_g, '{:+.3f}')}; "
        f"mean A / mean B = {s(c.mean_ratio, '{:.3f}')}",
        f"reached fractions     A {c.a.n_reached}/{c.a.n_runs}, B {c.b.n_reached}/{c.b.n_runs} "
        f"(Fisher exact p = {s(c.fisher_reached_p, '{:.4g}')}); unreached runs are excluded from the time tests",
    ]
    lines += [f"note: {n}" for n in c.notes]
    return "\n".join(lines)


def split_sides(paths: list[str], argv: list[str]) -> tuple[list[str], list[str]]:
    """Positional ``A... -- B...``: argparse drops the ``--``; everything after it in argv is B."""
    if "--" not in argv:
        raise ConfigError("separate the two sides with --: daybreak compare A1 A2 -- B1 B2 (or use --a/--b)")
    after = argv[argv.index("--") + 1:]
    flags = [a for a in after if a.startswith("-") and len(a) > 1]
    if flags:
        raise ConfigError(f"{flags[0]} after --: every word after -- is a run of side B; put options before the "
                          f"paths (daybreak compare {flags[0]} A1 A2 -- B1 B2)")
    n_b = len(after)
    if n_b == 0 or n_b >= len(paths) + 1:
        raise ConfigError("give runs on both sides of --: daybreak compare A1 A2 -- B1 B2")
    return paths[: len(paths) - n_b], paths[len(paths) - n_b:]
