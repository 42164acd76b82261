"""`daybreak lesion`: the recipe with each named optimization switched off in turn, against the full recipe.

Variants: ``full`` (the recipe with the given ``--set`` overrides) and ``no-<switch>`` for each switch (the same,
plus ``<switch>=False``): the arms of one experiment (daybreak.experiments: every trial a fresh process, the
variants interleaved seed by seed), each a repeat directory ``OUT/<variant>/seed-<n>`` with its summary.json.
``OUT/lesion.json`` tabulates, per variant, its time-to-target against the full recipe's as a paired ratio (the
same seed in both, one right after the other) with its interval and verdict (daybreak.analysis.paired; a ratio
above 1 means switching the optimization off made it slower), and the mean final accuracy. Unreached runs are
excluded from the time statistics and counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daybreak.analysis.sources import provenance
from daybreak.analysis.stats import mean
from daybreak.errors import ConfigError
from daybreak.fileio import atomic_write_text
from daybreak.records.experiment import format_ratio
from daybreak.records.lesion import LesionSummary, LesionVariant
from daybreak.records.repeat import RepeatSummary

PLOT_FILE = "lesion.png"
MARKDOWN_FILE = "lesion.md"
FULL = "full"


def parse_switches(text: str | list[str] | None, recipe: Any) -> list[str]:
    """``"a,b"`` -> ["a", "b"], each checked against ``recipe.switches``; None/"all" -> every switch."""
    if text is None or text == "all" or text == ["all"]:
        names = list(recipe.switches)
    else:
        items = text if isinstance(text, list) else [text]
        names = [n.strip() for item in items for n in item.split(",") if n.strip()]
    out: list[str] = []
    for name in names:
        if name not in recipe.switches:
            known = ", ".join(recipe.switches) or "none"
            raise ConfigError(f"--without {name}: recipe {recipe.name} has no such switch (its switches: {known})")
        if name not in out:
            out.append(name)
    return out


def lesion_variants(recipe: Any, switches: list[str],
                    overrides: dict[str, Any] | None = None) -> list[tuple[str, list[str], dict[str, Any]]]:
    """[(name, switched off, hyperparameter overrides)]: the full recipe first, then one per switch."""
    base = dict(overrides or {})
    out: list[tuple[str, list[str], dict[str, Any]]] = [(FULL, [], base)]
    for s in switches:
        out.append((f"no-{s}", [s], {**base, s: False}))
    return out


def lesion_summary(spec: Any, record: Any, per_arm: dict[str, RepeatSummary], comparisons: dict[str, Any]) -> LesionSummary:
    """lesion.json from an experiment's arms (``per_arm``: each variant's RepeatSummary) and each variant's paired
    comparison with the full recipe (daybreak.experiments.stats.compare)."""
    recipe = spec.recipe_obj()
    full = per_arm[FULL]
    full_time = full.time_to_target.mean_s
    full_acc = mean([r.final_accuracy for r in full.runs if r.final_accuracy is not None])
    rows = []
    for arm in record.arms:
        s = per_arm.get(arm.name)
        if s is None:
            continue
        acc = mean([r.final_accuracy for r in s.runs if r.final_accuracy is not None])
        best = mean([r.best_accuracy for r in s.runs if r.best_accuracy is not None])
        notes = []
        for sw in arm.switched_off:
            if spec.overrides.get(sw) is False or recipe.defaults.get(sw) is False:
                notes.append(f"{sw} is already off in the full recipe (--set or default): this variant is the same")
        c = comparisons.get(arm.name)
        rows.append(LesionVariant(
            name=arm.name, switched_off=list(arm.switched_off), hyperparameters=s.hyperparameters,
            directory=arm.directory, n_runs=s.n_runs, n_reached=s.n_reached, reached_fraction=s.reached_fraction,
            mean_time_to_target_s=s.time_to_target.mean_s, std_time_to_target_s=s.time_to_target.std_s,
            mean_epochs_to_target=mean(s.epochs_to_target.values) if s.epochs_to_target.values else None,
            mean_final_accuracy=acc, mean_best_accuracy=best,
            time_ratio=(s.time_to_target.mean_s / full_time) if s.time_to_target.mean_s is not None and full_time else None,
            final_accuracy_ratio=(acc / full_acc) if acc is not None and full_acc else None,
            final_accuracy_diff=(acc - full_acc) if acc is not None and full_acc is not None else None,
            comparison=None if c is None else c.time, accuracy=s.accuracy, n_busy=s.n_busy, notes=notes,
        ))
    inputs = [str(t.run_dir) for t in record.trials]
    return LesionSummary(task=spec.task, recipe=spec.recipe, target=spec.target, metric=full.metric,
                         switches=[sw for a in record.arms for sw in a.switched_off], runs_per=len(record.seeds),
                         seeds=list(record.seeds), overrides=dict(spec.overrides), variants=rows,
                         confidence=record.confidence, complete=record.complete,
                         provenance=provenance(inputs, record.invocations[-1]))


def table_rows(s: LesionSummary) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "switched off", "reached", "time to target (mean)", "time ratio (paired)",
              f"{s.confidence * 100:g}% CI", "verdict", "epochs", "final accuracy", "accuracy ratio"]

    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else fmt.format(x)

    body = [[v.name, ", ".join(v.switched_off) or "-", f"{v.n_reached}/{v.n_runs}",
             f(v.mean_time_to_target_s, "{:.3f} s"),
             "-" if v.comparison is None or v.comparison.ratio is None else f"{format_ratio(v.comparison.ratio)}x",
             "-" if v.comparison is None or v.comparison.ci_low is None
             else f"{format_ratio(v.comparison.ci_low)}-{format_ratio(v.comparison.ci_high)}",
             "baseline" if v.comparison is None else v.comparison.verdict.replace("candidate", "variant"),
             f(v.mean_epochs_to_target, "{:g}"),
             f(None if v.mean_final_accuracy is None else v.mean_final_accuracy * 100, "{:.2f}%"),
             f(v.final_accuracy_ratio, "{:.4f}")]
            for v in s.variants]
    return header, body


def write_lesion_views(s: LesionSummary, out: Path) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis.tables import markdown_table

    md = [f"# Lesion study: {s.recipe} ({s.task}, target {s.target * 100:.2f}% {s.metric})", "",
          markdown_table(*table_rows(s)), "", s.method + "."]
    for v in s.variants:
        md += [f"Note ({v.name}): {n}" for n in v.notes]
    written = [atomic_write_text(out / MARKDOWN_FILE, "\n".join(md) + "\n")]
    written.append(plots.lesion_plot(s, out / PLOT_FILE))
    return written
