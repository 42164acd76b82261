"""Threshold sensitivity: time-to-target of each run for a range of accuracy thresholds, from its history.

The time to a threshold is ``elapsed_s`` of the first evaluation in the run's history whose accuracy is at or
above it (the training clock, as for the run's own target); None if no evaluation got there. A run that stopped
at its own target has no evaluations above it: use ``daybreak run --full-schedule`` runs to see higher ones.
"""

from __future__ import annotations

import math
from pathlib import Path

from daybreak.analysis.sources import AnalyzedRun, collect_runs, provenance, unique_labels
from daybreak.analysis.stats import mean, threshold_epochs, threshold_grid, threshold_times
from daybreak.errors import ConfigError
from daybreak.fileio import atomic_write_text
from daybreak.metrics import get_metric
from daybreak.records.threshold import ThresholdAnalysis, ThresholdRun

PLOT_FILE = "threshold.png"
MARKDOWN_FILE = "threshold.md"
DEFAULT_BELOW = 4.0  # points below the target
DEFAULT_STEP = 0.5  # points


def analyze_threshold(paths: list[str | Path], start: float | None = None, stop: float | None = None,
                      step: float | None = None, command: list[str] | None = None,
                      runs: list[AnalyzedRun] | None = None) -> ThresholdAnalysis:
    step_pct = DEFAULT_STEP if step is None else step
    if not (math.isfinite(step_pct) and step_pct > 0):  # before any run is read
        raise ConfigError(f"--step {step_pct:g}: must be a number of percentage points > 0")
    runs = runs if runs is not None else collect_runs(paths)
    notes: list[str] = []
    targets = sorted({r.result.target for r in runs})
    target_pct = round(targets[-1] * 100, 6)
    if len(targets) > 1:
        notes.append("the runs have different targets (" + ", ".join(f"{t * 100:.2f}%" for t in targets)
                     + f"); the default range ends at the highest, {target_pct:.2f}%")
    # start/stop: fractions, read by daybreak.options.parse_target like every --target
    stop_pct = round(stop * 100, 6) if stop is not None else target_pct
    start_pct = round(start * 100, 6) if start is not None else max(stop_pct - DEFAULT_BELOW, 0.5)
    try:
        thresholds = threshold_grid(start_pct, stop_pct, step_pct)
    except ValueError as e:  # name what was given, as it would be given (a percent with %)
        if stop_pct < start_pct:
            raise ConfigError(f"the thresholds from {start_pct:g}% to {stop_pct:g}% are an empty range: --from must "
                              "be at most --to") from None
        raise ConfigError(f"--step {step_pct:g}: {e} (from {start_pct:g}% to {stop_pct:g}%)") from None
    if any(t > targets[0] + 1e-12 for t in thresholds) and any(r.result.stop_at_target for r in runs):
        notes.append("thresholds above a run's own target are only reached by runs trained with --full-schedule")
    labels = unique_labels(runs)
    rows = [ThresholdRun(run_dir=str(r.path), run_id=r.result.run_id, label=labels[r.path], task=r.result.task,
                         recipe=r.result.recipe,
                         seed=r.result.seed, target=r.result.target,
                         times_s=threshold_times(r.result.history, thresholds, get_metric(r.result.metric)),
                         epochs=threshold_epochs(r.result.history, thresholds, get_metric(r.result.metric)))
            for r in runs]
    means, counts = [], []
    for i in range(len(thresholds)):
        got = [t for row in rows if (t := row.times_s[i]) is not None]
        means.append(mean(got) if got else None)
        counts.append(len(got))
    return ThresholdAnalysis(thresholds=thresholds, runs=rows, mean_times_s=means, reached_counts=counts,
                             notes=notes, provenance=provenance([str(r.path) for r in runs], command))


def table_rows(a: ThresholdAnalysis) -> tuple[list[str], list[list[str]]]:
    header = ["threshold"] + [r.label or r.run_id for r in a.runs] + ["mean (reached)", "reached"]
    body = []
    for i, t in enumerate(a.thresholds):
        cells = [f"{t * 100:.2f}%"]
        cells += ["-" if r.times_s[i] is None else f"{r.times_s[i]:.3f} s" for r in a.runs]
        cells.append("-" if a.mean_times_s[i] is None else f"{a.mean_times_s[i]:.3f} s")
        cells.append(f"{a.reached_counts[i]}/{len(a.runs)}")
        body.append(cells)
    return header, body


def write_threshold(a: ThresholdAnalysis, out: Path) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis.tables import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    written = [a.save(out)]
    header, body = table_rows(a)
    md = ["# Threshold sensitivity", "", a.method + ".", "", markdown_table(header, body), ""]
    md += [f"Note: {n}" for n in a.notes]
    written.append(atomic_write_text(out / MARKDOWN_FILE, "\n".join(md) + "\n"))
    written.append(plots.threshold_plot(a, out / PLOT_FILE))
    return written
