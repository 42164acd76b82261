"""Views of ``daybreak ab``'s record (ab.json): the terminal summary and ab.md."""

from __future__ import annotations

from pathlib import Path

from daybreak.fileio import atomic_write_text
from daybreak.records.experiment import AbSummary, ArmStats, RatioEstimate

MARKDOWN_FILE = "ab.md"


def _ratio_line(label: str, est: RatioEstimate | None) -> str:
    if est is None:
        return f"  {label:<17}- (not measured in both arms)"
    if est.ratio is None:
        return f"  {label:<17}- (no pair where both arms reached the target)"
    ci = "" if est.ci_low is None else f"   {est.confidence * 100:g}% CI [{est.ci_low:.3f}, {est.ci_high:.3f}]"
    p = "" if est.p_value is None else f"   p = {est.p_value:.2g}"
    boot = ("" if est.bootstrap_ci_low is None
            else f"   (bootstrap [{est.bootstrap_ci_low:.3f}, {est.bootstrap_ci_high:.3f}])")
    return f"  {label:<17}{est.ratio:.3f}x{ci}{p}{boot}"


def _arm_line(a: ArmStats, metric_pct: bool) -> str:
    t = a.time_to_target
    median = "-" if t.median_s is None else f"median {t.median_s:.3f} s"
    acc = a.accuracy
    if acc is None or acc.mean is None:
        accuracy = "accuracy -"
    else:
        fmt = (lambda x: f"{x * 100:.2f}%") if metric_pct else (lambda x: f"{x:.4f}")
        ci = "" if acc.ci_low is None else f" [{fmt(acc.ci_low)}, {fmt(acc.ci_high)}]"
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
    lines.append(f"  ratio {c.candidate} / {c.baseline} (geometric mean over same-seed pairs):")
    lines.append(_ratio_line("time to target", c.time))
    if c.cost is not None:
        lines.append(_ratio_line("cost to target", c.cost))
    if c.energy is not None:
        lines.append(_ratio_line("energy to target", c.energy))
    if c.reached_p_value is not None:
        lines.append(f"  reached          Fisher's exact test of the reached fractions: p = {c.reached_p_value:.2g}")
    lines.append(f"  verdict          {c.summary}")
    if s.stop_reason:
        lines.append(f"  stopped          {s.stop_reason}")
    return "\n".join(lines)


def write_ab_views(s: AbSummary, out: Path) -> Path:
    text = "# daybreak ab\n\n```\n" + format_ab(s) + "\n```\n\n" + (
        "Each pair runs the baseline and the candidate with the same seed, one right after the other (the arms' "
        "order alternating from pair to pair), each trial a fresh `daybreak run` process. The ratio is the geometric "
        "mean of the per-pair ratios; its interval is a Student-t interval of the mean log ratio, its p-value the "
        "paired t-test of the log ratios; a percentile bootstrap interval is shown as a check. \"Not "
        "distinguishable\" means the interval contains 1.\n")
    return atomic_write_text(out / MARKDOWN_FILE, text)
