"""Every analysis plot: matplotlib with the Agg backend, written as PNG files.

Text from records (run ids, recipe names) goes through :func:`safe` so that a ``$`` cannot start matplotlib
mathtext and a leading ``_`` cannot hide a legend entry.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daybreak.errors import ConfigError

if TYPE_CHECKING:
    from daybreak.analysis.sources import AnalyzedRun

DPI = 110


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install matplotlib") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def safe(text: Any, limit: int = 80) -> str:
    s = str(text).replace("\n", " ").replace("$", r"\$")
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    return " " + s if s.startswith("_") else s


def _save(fig: Any, path: Path) -> Path:
    plt = _plt()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=DPI)
    plt.close(fig)
    tmp.replace(path)
    return path


def _legend(ax: Any, n: int, outside: bool = False) -> None:
    if not 0 < n <= 24 or not ax.get_legend_handles_labels()[0]:  # nothing labelled (e.g. no run reached any)
        return
    if outside:  # beside the axes, so that it never hides a point
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    else:
        ax.legend(fontsize="small")


def curves_plot(runs: list[AnalyzedRun], path: Path, title: str = "accuracy vs training time") -> Path:
    """Accuracy (from each run's history) against the training clock; a dashed line at each target."""
    from daybreak.analysis.sources import unique_labels

    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    targets = set()
    labels = unique_labels(runs)
    for run in runs:
        r = run.result
        if not r.history:
            continue
        ax.plot([h.elapsed_s for h in r.history], [h.accuracy * 100 for h in r.history], marker="o", markersize=3,
                label=safe(f"{labels[run.path]} ({r.recipe}, seed {r.seed})"))
        targets.add(r.target)
    for t in sorted(targets):
        ax.axhline(t * 100, linestyle="--", color="grey", linewidth=1)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(safe(title))
    ax.grid(True, alpha=0.3)
    _legend(ax, len(runs), outside=True)
    return _save(fig, path)


def energy_plot(runs: list[AnalyzedRun], path: Path, title: str = "accuracy vs energy") -> Path:
    """Accuracy (each evaluation of each run's history) against the joules counted up to it under the run's
    headline rule set (``history[].energy_j``); runs without energy are left out (the caller says why)."""
    from daybreak.analysis.sources import unique_labels

    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    targets = set()
    labels = unique_labels(runs)
    shown = 0
    for run in runs:
        r = run.result
        pts = [(joules, h.accuracy * 100) for h in r.history
               if (joules := h.energy_j.get(r.rules)) is not None and math.isfinite(joules)]
        if not pts:
            continue
        covers = "+".join(r.energy.covers) or "?"
        ax.plot(*zip(*pts), marker="o", markersize=3,
                label=safe(f"{labels[run.path]} ({r.recipe}, seed {r.seed}; {covers})"))
        targets.add(r.target)
        shown += 1
    for t in sorted(targets):
        ax.axhline(t * 100, linestyle="--", color="grey", linewidth=1)
    if not shown:
        ax.text(0.5, 0.5, "no run carries energy", transform=ax.transAxes, ha="center")
    rules = sorted({run.result.rules for run in runs})
    ax.set_xlabel(f"energy counted under the {'/'.join(rules)} clock (J)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(safe(title))
    ax.grid(True, alpha=0.3)
    _legend(ax, shown, outside=True)
    return _save(fig, path)


def threshold_plot(a: Any, path: Path) -> Path:
    """Time-to-threshold against the threshold, one line per run and the mean."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [t * 100 for t in a.thresholds]
    for r in a.runs:
        pts = [(x, y) for x, y in zip(xs, r.times_s) if y is not None]
        if pts:
            ax.plot(*zip(*pts), marker="o", markersize=3, alpha=0.6, label=safe(r.label or r.run_id))
    mean_pts = [(x, y) for x, y in zip(xs, a.mean_times_s) if y is not None]
    if mean_pts and len(a.runs) > 1:
        ax.plot(*zip(*mean_pts), color="black", linewidth=2, label="mean (runs that got there)")
    ax.set_xlabel("accuracy threshold (%)")
    ax.set_ylabel("time to threshold (s)")
    ax.set_title("threshold sensitivity")
    ax.grid(True, alpha=0.3)
    _legend(ax, len(a.runs) + 1)
    return _save(fig, path)


def roofline_plot(a: Any, path: Path) -> Path:
    """Log-log roofline: the bandwidth slope and compute ceiling of each device, and the points."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(11, 5.5))
    pts = [p for p in a.points if p.operational_intensity and p.achieved_flops_per_s]
    intensities = [p.operational_intensity for p in pts]
    ceilings = {(p.peak_flops_per_s, p.peak_bandwidth_bytes_per_s, p.precision) for p in a.points
                if p.peak_flops_per_s and p.peak_bandwidth_bytes_per_s}
    ridges = [f / b for f, b, _ in ceilings]
    lo = min(intensities + ridges, default=1.0) / 10
    hi = max(intensities + ridges, default=100.0) * 10
    for flops, bw, precision in sorted(ceilings, key=lambda c: (c[0], c[1])):
        n = 200
        xs = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
        ax.plot(xs, [min(flops, bw * x) for x in xs], linewidth=2,
                label=safe(f"roofline {precision}: {flops / 1e9:.3g} GFLOP/s, {bw / 1e9:.3g} GB/s"))
    for p in pts:
        ax.scatter([p.operational_intensity], [p.achieved_flops_per_s], zorder=3, label=safe(p.label, 60))
    if not pts:
        ax.text(0.5, 0.5, "no point has both FLOPs and an estimate of bytes", transform=ax.transAxes, ha="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("operational intensity (FLOP / byte, estimated)")
    ax.set_ylabel("FLOP/s")
    ax.set_title("roofline")
    ax.grid(True, which="both", alpha=0.3)
    _legend(ax, len(pts) + len(ceilings), outside=True)
    return _save(fig, path)


def scaling_plot(a: Any, path: Path) -> Path:
    """Speedup against devices: throughput groups, and time-to-target next to time-per-epoch for runs."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    top, lines = 1, 0
    for g in a.throughput:
        rows = [r for r in g.rows if r.speedup is not None]
        if rows:
            ax.plot([r.world_size for r in rows], [r.speedup for r in rows], marker="o",
                    label=safe(f"throughput: {g.label}", 70))
            top, lines = max(top, *(r.world_size for r in rows)), lines + 1
    for g in a.runs:
        tta = [r for r in g.rows if r.tta_speedup is not None]
        ep = [r for r in g.rows if r.epoch_speedup is not None]
        if tta:
            ax.plot([r.world_size for r in tta], [r.tta_speedup for r in tta], marker="s",
                    label=safe(f"time-to-target: {g.label}", 70))
            lines += 1
        if ep:
            ax.plot([r.world_size for r in ep], [r.epoch_speedup for r in ep], marker="^", linestyle=":",
                    label=safe(f"time per epoch: {g.label}", 70))
            lines += 1
        top = max([top] + [r.world_size for r in g.rows])
    flagged = [(r.world_size, r.speedup) for g in a.throughput for r in g.rows if r.flags and r.speedup is not None]
    flagged += [(r.world_size, s) for g in a.runs for r in g.rows if r.flags
                for s in (r.tta_speedup, r.epoch_speedup) if s is not None]
    if flagged:  # a figure above its ceiling: a red ring and (!), as the sweep's own plots do
        ax.scatter([x for x, _ in flagged], [y for _, y in flagged], s=160, facecolors="none", edgecolors="red",
                   zorder=4, label="(!) above 100% efficiency")
        for x, y in flagged:
            ax.annotate("(!)", (x, y), textcoords="offset points", xytext=(6, 6), color="red", fontsize=8)
        lines += 1
    ax.plot([1, top], [1, top], linestyle="--", color="grey", label="linear")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("devices")
    ax.set_ylabel("speedup")
    ax.set_title("scaling")
    ax.grid(True, alpha=0.3)
    _legend(ax, lines + 1)
    return _save(fig, path)


def lesion_figure(s: Any) -> Any:
    """The lesion bars as a matplotlib figure: per variant, the paired time ratio to the full recipe that the table
    prints (``comparison.ratio``, its label the table's text) with its interval as the error bar; a variant whose
    ratio is infinite (it missed the target in most pairs: infinitely slow) is a hatched bar to the top labelled
    "not reached", never a finite ratio of its reached runs alone; and the mean final accuracy."""
    from daybreak.records.experiment import format_ratio

    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.5))
    names = [safe(v.name, 30) for v in s.variants]
    rows: list[tuple[float | None, float | None, float | None]] = []  # (ratio, low, high); None: no comparison
    for v in s.variants:
        c = v.comparison
        if v.name == "full" and c is None:
            rows.append((1.0, None, None))
        elif c is None or c.ratio is None:
            rows.append((None, None, None))
        else:
            rows.append((c.ratio, c.ci_low, c.ci_high))
    finite = [x for r in rows for x in r if x is not None and math.isfinite(x)]
    top = max(finite + [1.0]) * 1.25
    heights = [top if r[0] is not None and math.isinf(r[0]) else (r[0] or 0.0) for r in rows]
    colors = ["#4c72b0" if v.name == "full" else "#dd8452" for v in s.variants]
    bars = ax1.bar(names, heights, color=colors)
    for bar, v, (ratio, low, high) in zip(bars, s.variants, rows):
        bar.set_gid(v.name)
        x = bar.get_x() + bar.get_width() / 2
        if ratio is None:
            text = "-"
        elif math.isinf(ratio):
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor("#c44e52")
            text = f"not reached ({v.n_reached}/{v.n_runs})"
        else:
            text = "baseline" if v.name == "full" and v.comparison is None else f"{format_ratio(ratio)}x"
            if low is not None and high is not None:
                shown_high = min(high, top)
                ax1.errorbar([x], [ratio], yerr=[[ratio - low], [shown_high - ratio]], fmt="none", ecolor="black",
                             capsize=4, gid=f"ci-{v.name}")
        ax1.text(x, min(bar.get_height(), top), text, ha="center", va="bottom", fontsize=8, gid=f"label-{v.name}")
    ax1.axhline(1.0, linestyle="--", color="grey")
    ax1.set_ylim(0, top * 1.08)
    ax1.set_ylabel("time to target / full recipe (paired)")
    ax1.set_title(f"paired time ratio, {s.confidence * 100:g}% CI")
    accs = [(v.mean_final_accuracy or 0.0) * 100 for v in s.variants]
    ax2.bar(names, accs, color=["#4c72b0" if v.name == "full" else "#55a868" for v in s.variants])
    ax2.axhline(s.target * 100, linestyle="--", color="grey", label="target")
    low_acc = min([a for a in accs if a > 0] + [s.target * 100])
    ax2.set_ylim(max(0.0, low_acc - 5), 100)
    ax2.set_ylabel("final accuracy (%)")
    ax2.set_title("final accuracy")
    ax2.legend(fontsize="small")
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(safe(f"lesion study: {s.recipe}"))
    return fig


def lesion_plot(s: Any, path: Path) -> Path:
    """lesion.png: :func:`lesion_figure`."""
    return _save(lesion_figure(s), path)


def repeat_plot(summary: Any, path: Path) -> Path:
    """Time-to-target of each seed (unreached marked), with the mean and its confidence interval."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    reached = [(r.seed, r.time_to_target_s) for r in summary.runs if r.reached and r.time_to_target_s is not None]
    missed = [r.seed for r in summary.runs if not (r.reached and r.time_to_target_s is not None)]
    if reached:
        ax.scatter([s for s, _ in reached], [t for _, t in reached], label="reached", zorder=3)
    t = summary.time_to_target
    if t.mean_s is not None:
        ax.axhline(t.mean_s, color="black", label=f"mean {t.mean_s:.3f} s")
    if t.geometric_mean_s is not None:
        ax.axhline(t.geometric_mean_s, color="grey", linestyle="--", label=f"geometric mean {t.geometric_mean_s:.3f} s")
    if t.ci_low_s is not None and t.ci_high_s is not None and math.isfinite(t.ci_low_s):
        ax.axhspan(t.ci_low_s, t.ci_high_s, alpha=0.15, color="grey",
                   label=f"{t.confidence * 100:g}% CI of the geometric mean")
    if t.olympic_mean_s is not None:
        ax.axhline(t.olympic_mean_s, color="tab:orange", linestyle=":", label=f"olympic mean {t.olympic_mean_s:.3f} s")
    if missed:
        y = (t.max_s or 1.0) * 1.05
        ax.scatter(missed, [y] * len(missed), marker="x", color="red", label="not reached", zorder=3)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("seed")
    ax.set_ylabel("time to target (s)")
    ax.set_title(safe(f"{summary.task}/{summary.recipe}: {summary.n_reached}/{summary.n_runs} reached"))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _save(fig, path)


def score_plot(a: Any, path: Path) -> Path:
    """score.png: :func:`score_figure`."""
    return _save(score_figure(a), path)


def score_figure(a: Any) -> Any:
    """AlgoPerf's performance profiles: for each submission, the fraction of tasks it solved within tau times the
    fastest time from tau = 1 to r_max, the score the area under the line drawn / (r_max - 1): a step function for
    the exact numerics, the official code's 100 samples joined by straight lines (its trapezoid) for the official
    ones."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = ("-", "--", "-.", ":")  # equal profiles overlap: the dashes keep each one visible
    official = getattr(a, "numerics", "exact") == "official"
    for i, s in enumerate(a.submissions):
        taus, rhos = [p[0] for p in s.profile], [p[1] for p in s.profile]
        label = safe(f"{s.name} (score {s.score:.3f})", 60)
        if official:  # the official code's samples joined by lines: the area under them is the trapezoid it scores
            ax.plot(taus, rhos, linewidth=2, alpha=0.8, linestyle=styles[i % len(styles)], label=label)
        else:
            ax.step(taus, rhos, where="post", linewidth=2, alpha=0.8, linestyle=styles[i % len(styles)], label=label)
    ax.set_xlim(1.0, a.r_max)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("tau (time / the fastest submission's time on the task)")
    ax.set_ylabel("fraction of tasks with r <= tau")
    ax.set_title(f"performance profiles over {len(a.tasks)} task{'s' if len(a.tasks) != 1 else ''} "
                 f"(r_max = {a.r_max:g})")
    ax.grid(True, alpha=0.3)
    _legend(ax, len(a.submissions), outside=len(a.submissions) > 4)
    return fig
