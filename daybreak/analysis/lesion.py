"""`daybreak lesion`: the recipe with each named optimization switched off in turn, against the full recipe.

Variants: ``full`` (the recipe with the given ``--set`` overrides) and ``no-<switch>`` for each switch (the same,
plus ``<switch>=False``). Each variant is a repeat directory ``OUT/<variant>/seed-<n>`` (``--runs-per`` seeds,
the same seeds for every variant), made and resumed exactly like ``daybreak repeat``. ``OUT/lesion.json``
tabulates, per variant, the mean time-to-target over its reached runs and the mean final/best accuracy, and
their ratios to the full recipe's (variant / full; a time ratio above 1 means switching the optimization off
made it slower). Unreached runs are excluded from the time means and counted.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from daybreak.analysis.repeat import RepeatOptions, run_repeat
from daybreak.analysis.sources import provenance
from daybreak.analysis.stats import mean
from daybreak.errors import ConfigError
from daybreak.fileio import atomic_write_text
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
    out = [(FULL, [], base)]
    for s in switches:
        out.append((f"no-{s}", [s], {**base, s: False}))
    return out


def run_lesion(recipe_name: str, switches_text: str | list[str] | None, base: RepeatOptions) -> LesionSummary:
    """Run (or resume) every variant; write lesion.json; return it. ``base.run.task``/``recipe`` are overwritten."""
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task
    from daybreak.train.spec import parse_target

    recipe = get_recipe(recipe_name)
    task = get_task(recipe.task)
    switches = parse_switches(switches_text, recipe)
    recipe.hyperparameters(base.run.overrides)  # unknown --set keys fail before any work
    target = task.target if base.run.target is None else parse_target(base.run.target)
    if base.runs < 1:
        raise ConfigError(f"--runs-per {base.runs}: must be >= 1")
    out = base.out
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    variants = lesion_variants(recipe, switches, base.run.overrides)
    summaries: list[tuple[str, list[str], RepeatSummary]] = []
    for name, off, overrides in variants:
        options = replace(base, run=replace(base.run, task=task.name, recipe=recipe.name, overrides=overrides),
                          out=out / name, label=name)
        summaries.append((name, off, run_repeat(options)))

    full = summaries[0][2]
    full_time = full.time_to_target.mean_s
    full_acc = mean([r.final_accuracy for r in full.runs if r.final_accuracy is not None])
    rows = []
    for name, off, s in summaries:
        acc = mean([r.final_accuracy for r in s.runs if r.final_accuracy is not None])
        best = mean([r.best_accuracy for r in s.runs if r.best_accuracy is not None])
        notes = []
        for sw in off:
            if base.run.overrides.get(sw) is False or recipe.defaults.get(sw) is False:
                notes.append(f"{sw} is already off in the full recipe (--set or default): this variant is the same")
        row = LesionVariant(
            name=name, switched_off=off, hyperparameters=s.hyperparameters, directory=name, n_runs=s.n_runs,
            n_reached=s.n_reached, reached_fraction=s.reached_fraction, mean_time_to_target_s=s.time_to_target.mean_s,
            std_time_to_target_s=s.time_to_target.std_s,
            mean_epochs_to_target=mean(s.epochs_to_target.values) if s.epochs_to_target.values else None,
            mean_final_accuracy=acc, mean_best_accuracy=best,
            time_ratio=(s.time_to_target.mean_s / full_time) if s.time_to_target.mean_s is not None and full_time else None,
            final_accuracy_ratio=(acc / full_acc) if acc is not None and full_acc else None,
            final_accuracy_diff=(acc - full_acc) if acc is not None and full_acc is not None else None,
            notes=notes,
        )
        rows.append(row)
    seeds = list(range(base.seed_start, base.seed_start + base.runs))
    inputs = [str(out / name / f"seed-{s}") for name, _, _ in variants for s in seeds]
    summary = LesionSummary(task=task.name, recipe=recipe.name, target=target, metric=task.metric.name, switches=switches,
                            runs_per=base.runs, seeds=seeds, overrides=dict(base.run.overrides), variants=rows,
                            provenance=provenance(inputs, base.run.command))
    summary.save(out)
    write_lesion_views(summary, out)
    return summary


def table_rows(s: LesionSummary) -> tuple[list[str], list[list[str]]]:
    header = ["variant", "switched off", "reached", "time to target (mean)", "time ratio", "epochs",
              "final accuracy", "accuracy ratio", "best accuracy"]

    def f(x: float | None, fmt: str) -> str:
        return "-" if x is None else fmt.format(x)

    body = [[v.name, ", ".join(v.switched_off) or "-", f"{v.n_reached}/{v.n_runs}",
             f(v.mean_time_to_target_s, "{:.3f} s"), f(v.time_ratio, "{:.2f}x"), f(v.mean_epochs_to_target, "{:g}"),
             f(None if v.mean_final_accuracy is None else v.mean_final_accuracy * 100, "{:.2f}%"),
             f(v.final_accuracy_ratio, "{:.4f}"),
             f(None if v.mean_best_accuracy is None else v.mean_best_accuracy * 100, "{:.2f}%")]
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
