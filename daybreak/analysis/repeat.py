"""`daybreak repeat`: the same recipe over N seeds, and the stability of its time-to-target.

The runs are made by daybreak.experiments (every seed a fresh ``daybreak run`` process, in ``OUT/seed-<seed>``);
this module summarizes them: ``OUT/summary.json`` (:class:`daybreak.records.repeat.RepeatSummary`). A run that
does not reach the target (or diverges, or crashes) is excluded from the time statistics and counted in
``reached_fraction``.
"""

from __future__ import annotations

import math
from typing import Any

from daybreak.analysis.sources import AnalyzedRun, provenance
from daybreak.analysis.stats import MLPERF_SCORED_RUNS, epoch_stats, mlperf_score, olympic_score, time_stats
from daybreak.errors import RecordError
from daybreak.metrics import get_metric
from daybreak.records.repeat import CONFIDENCE, RepeatRun, RepeatSummary
from daybreak.records.run import RunResult

FINISHED = ("reached", "not_reached", "diverged")


def summarize(results: list[tuple[str, RunResult, bool]], *, overrides: dict[str, Any] | None = None,
              inputs: list[str] | None = None, command: list[str] | None = None,
              complete: bool = True, confidence: float = CONFIDENCE,
              scored_runs: int = MLPERF_SCORED_RUNS) -> RepeatSummary:
    """Summary of runs given as (directory name, record, reused), in the order they ran. All runs should share
    task/recipe/target. The score follows the runs' clock rules: MLPerf's scoring under mlperf (``scored_runs``:
    its N), the olympic mean of the reached runs otherwise."""
    if not results:
        raise RecordError("no runs to summarize")
    first = results[0][1]
    rows = [RepeatRun(seed=r.seed, run_dir=name, run_id=r.run_id, status=r.status, reached=r.reached,
                      time_to_target_s=r.time_to_target_s if r.reached else None,
                      epochs_to_target=r.epochs_to_target if r.reached else None,
                      final_accuracy=r.final_accuracy, best_accuracy=r.best_accuracy, train_s=r.train_s,
                      device=r.device, reused=reused)
            for name, r, reused in results]
    reached = [row for row in rows if row.reached and row.time_to_target_s is not None]
    in_order = [row.time_to_target_s if row.reached and row.time_to_target_s is not None else math.inf
                for row in rows]
    score = mlperf_score(in_order, scored_runs) if first.rules == "mlperf" else olympic_score(in_order)
    return RepeatSummary(
        task=first.task, recipe=first.recipe, model=first.model, metric=first.metric, target=first.target,
        hyperparameters=first.hyperparameters, overrides=dict(overrides or {}), seeds=[row.seed for row in rows],
        n_runs=len(rows), n_reached=len(reached), reached_fraction=len(reached) / len(rows),
        time_to_target=time_stats([t for row in reached if (t := row.time_to_target_s) is not None], confidence),
        score=score,
        epochs_to_target=epoch_stats([row.epochs_to_target for row in reached if row.epochs_to_target is not None]),
        complete=complete, runs=rows, provenance=provenance(inputs or [], command),
    )


def summarize_runs(runs: list[AnalyzedRun]) -> RepeatSummary:
    """Summary of any loaded runs (``sources.AnalyzedRun``), e.g. a folder of run directories without summary.json."""
    return summarize([(str(r.path), r.result, True) for r in runs], inputs=[str(r.path) for r in runs])


def seed_dir_name(seed: int) -> str:
    return f"seed-{seed}"


def format_repeat(s: RepeatSummary) -> str:
    t = s.time_to_target
    e = s.epochs_to_target

    def sec(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f} s"

    lines = [
        f"{s.task} / {s.recipe}: {s.n_runs} runs (seeds {_seed_range(s.seeds)}), target {s.target * 100:.2f}% {s.metric}",
        f"  reached          {s.n_reached}/{s.n_runs} ({(s.reached_fraction or 0) * 100:.0f}%)",
        f"  time to target   mean {sec(t.mean_s)}, std {sec(t.std_s)}, CV "
        + ("-" if t.cv is None else f"{t.cv * 100:.2f}%"),
        f"  geometric mean   {sec(t.geometric_mean_s)}, {t.confidence * 100:g}% CI "
        + ("-" if t.ci_low_s is None else f"[{t.ci_low_s:.3f}, {t.ci_high_s:.3f}] s (Student t on the log times)"),
        f"  olympic mean     {sec(t.olympic_mean_s)}"
        + ("" if t.olympic_mean_s is not None else " (needs >= 3 reached runs)"),
        f"  min/median/max   {sec(t.min_s)} / {sec(t.median_s)} / {sec(t.max_s)}",
        *_score_lines(s),
        "  epochs to target " + ("-" if e.min is None else f"min {e.min:g}, median {e.median:g}, max {e.max:g} "
                                  f"({', '.join(f'{v:g}' for v in e.values)})"),
    ]
    a = s.accuracy
    if a is not None and a.mean is not None:
        metric = get_metric(s.metric)
        ci = "" if a.ci_low is None else f", {a.confidence * 100:g}% CI [{metric.format(a.ci_low)}, {metric.format(a.ci_high)}]"
        verdict = (f"above the target at p = {a.p_value:.2g} (< {a.alpha:g})" if a.significant and a.p_value is not None
                   else f"NOT significantly above the target (p = {a.p_value:.2g}, needs < {a.alpha:g})"
                   if a.p_value is not None else (a.note or ""))
        lines.append(f"  final accuracy   mean {metric.format(a.mean)}{ci}; {verdict}")
    if s.trials:
        spread = "" if s.cold_start_spread is None else (f"; data load + model init spread {s.cold_start_spread:.2f}x "
                                                         "(max/min over the trials)")
        lines.append(f"  trials           {s.trials}{spread}")
    if s.n_busy:
        lines.append(f"  busy             {s.n_busy} of {s.n_runs} trials ran while the machine was busy (see their "
                     "warnings; --busy exclude|rerun)")
    if s.n_reached < s.n_runs:
        lines.append("  note             unreached runs are excluded from the time statistics")
    return "\n".join(lines)


def _score_lines(s: RepeatSummary) -> list[str]:
    """The score and the rule that made it ('score' under MLPerf's rules; DAWNBench's olympic mean is the line above)."""
    sc = s.score
    if sc is None or not sc.rule.startswith("MLPerf"):
        return []
    seeds = s.seeds[sc.first_run:sc.stop_run]
    value = f"{sc.score_s:.3f} s" if sc.score_s is not None else "none (invalid)" if not sc.valid else "-"
    lines = [f"  MLPerf score     {value} over seeds {_seed_range(seeds)}", f"    rule           {sc.rule}"]
    lines += [f"    note           {n}" for n in sc.notes]
    return lines


def _seed_range(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ",".join(str(s) for s in seeds)
