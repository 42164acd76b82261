"""Views of ``daybreak ab``'s record (ab.json): the terminal summary and ab.md."""

from __future__ import annotations

from pathlib import Path

from daybreak.fileio import atomic_write_text
from daybreak.records.experiment import AbSummary, ArmStats, RatioEstimate, format_ratio

MARKDOWN_FILE = "ab.md"


def _ratio_line(label: str, est: RatioEstimate | None) -> list[str]:
    if est is None:
        return [f"  {label:<17}- (not measured in both arms)"]
    if est.ratio is None:
        return [f"  {label:<17}- (no pair where either arm reached the target)"]
    ci = ("" if est.ci_low is None else
          f"   {est.confidence * 100:g}% CI [{format_ratio(est.ci_low)}, {format_ratio(est.ci_high)}]")
    p = "" if est.p_value is None else f"   p = {est.p_value:.2g}"
    boot = ("" if est.bootstrap_ci_low is None else
            f"   (bootstrap {est.confidence * 100:g}% [{est.bootstrap_ci_low:.3f}, {est.bootstrap_ci_high:.3f}])")
    lines = [f"  {label:<17}{format_ratio(est.ratio)}x{ci}{p}{boot}"]
    pairs = f"{est.n_pairs} pairs"
    if est.n_censored:
        pairs += f", {est.n_censored} with one arm unreached (infinitely slow)"
    if est.n_neither_reached:
        pairs += f"; {est.n_neither_reached} where neither reached left out"
    lines.append(f"  {'':<17}{pairs}: {est.method}")
    for note in (est.interval_note, est.bootstrap_note):
        if note:
            lines.append(f"  {'':<17}{note}")
    return lines


def _arm_line(a: ArmStats, metric_pct: bool) -> str:
    t = a.time_to_target
    median = "-" if t.median_s is None else f"median {t.median_s:.3f} s"
    if t.ci_low_s is not None:
        median += f" (geometric mean {t.geometric_mean_s:.3f} s, {t.confidence * 100:g}% CI [{t.ci_low_s:.3f}, " \
                  f"{t.ci_high_s:.3f}] s)"
    acc = a.accuracy
    if acc is None or acc.mean is None:
        accuracy = "accuracy -"
    else:
        def fmt(x: float) -> str:
            return f"{x * 100:.2f}%" if metric_pct else f"{x:.4f}"

        ci = "" if acc.ci_low is None or acc.ci_high is None else \
            f" ({acc.confidence * 100:g}% CI [{fmt(acc.ci_low)}, {fmt(acc.ci_high)}])"
        above = "above the target" if acc.significant else "not significantly above the target"
        p = "" if acc.p_value is None else f" (p={acc.p_value:.2g})"
        accuracy = f"mean final accuracy {fmt(acc.mean)}{ci}, {above}{p}"
    busy = f", {a.n_busy} busy" if a.n_busy else ""
    excluded = f", {a.n_excluded} excluded" if a.n_excluded else ""
    return (f"  {a.arm:<17}reached {a.n_reached}/{a.n_trials}{busy}{excluded}; time to target {median}; "
            f"{accuracy}")


def format_ab(s: AbSummary) -> str:
    c = s.comparison
    pct = s.metric != "f1"
    lines = [f"daybreak ab: {c.candidate} vs {c.baseline} on {s.task} (target {s.target * 100 if pct else s.target:g}"
             f"{'%' if pct else ''} {s.metric}, {s.rules} clock){'' if s.complete else '  [UNFINISHED]'}"]
    lines += [_arm_line(a, pct) for a in s.arms]
    lines.append(f"  ratio {c.candidate} / {c.baseline} over same-seed pairs (the method below):")
    lines += _ratio_line("time to target", c.time)
    if c.cost is not None:
        lines += _ratio_line("cost to target", c.cost)
    if c.energy is not None:
        lines += _ratio_line("energy to target", c.energy)
    if c.reached_p_value is not None:
        lines.append(f"  reached          Fisher's exact test of the reached fractions: p = {c.reached_p_value:.2g}")
    lines.append(f"  verdict          {c.summary}")
    power = c.time.power_words()
    if power and c.time.verdict != "not distinguishable":  # the verdict says it already when it matters most
        lines.append(f"  power            {power}")
    if s.stop_reason:
        lines.append(f"  stopped          {s.stop_reason}")
    return "\n".join(lines)


def write_ab_views(s: AbSummary, out: Path) -> Path:
    text = "# daybreak ab\n\n```\n" + format_ab(s) + "\n```\n\n" + (
        "Each pair runs the baseline and the candidate with the same seed, one right after the other (the arms' "
        "order alternating from pair to pair), each trial a fresh `daybreak run` process. When every pair reached "
        "the target, the ratio is the geometric mean of the per-pair ratios, its interval a Student-t interval of "
        "the mean log ratio and its p-value the paired t-test of the log ratios (a percentile bootstrap interval is "
        "shown as a check where the pairs allow enough distinct resamples). A trial that did not reach the target "
        "counts as infinitely slow: the ratio is then the Hodges-Lehmann estimate with a Wilcoxon signed-rank "
        "interval and test; the reached fractions are compared by Fisher's exact test. \"Not distinguishable\" "
        "means the interval contains 1; the pairs needed are those a paired t-test at the same confidence needs "
        "for 80% power against the stated difference, given the observed spread of the log ratios.\n")
    return atomic_write_text(out / MARKDOWN_FILE, text)
