"""`daybreak repeat`: the same recipe over N seeds, and the stability of its time-to-target.

Each seed is a normal run directory ``OUT/seed-<seed>`` made in this process by
:func:`daybreak.train.runner.run`. ``OUT/summary.json`` (:class:`daybreak.records.repeat.RepeatSummary`) is
rewritten after every run. A run that does not reach the target (or diverges) is recorded and the repeat goes on;
its time is excluded from the time statistics and counted in ``reached_fraction``. A run that crashes is recorded
``failed`` (same treatment); a user error (bad flag, missing data) stops the repeat. Running it again with the same ``--out``
reuses every finished seed directory (reached, not reached, diverged) whose settings match, and runs the others
again (a seed directory left ``running``, ``interrupted`` or ``failed`` is cleared first).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from daybreak.analysis.sources import jsonable, provenance
from daybreak.analysis.stats import epoch_stats, time_stats
from daybreak.errors import ConfigError, DaybreakError, RecordError
from daybreak.records.repeat import RepeatRun, RepeatSummary
from daybreak.records.run import RunResult

if TYPE_CHECKING:
    from daybreak.train.runner import RunConfig

FINISHED = ("reached", "not_reached", "diverged")


def summarize(results: list[tuple[str, RunResult, bool]], *, overrides: dict[str, Any] | None = None,
              inputs: list[str] | None = None, command: list[str] | None = None,
              complete: bool = True) -> RepeatSummary:
    """Summary of runs given as (directory name, record, reused). All runs should share task/recipe/target."""
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
    return RepeatSummary(
        task=first.task, recipe=first.recipe, model=first.model, metric=first.metric, target=first.target,
        hyperparameters=first.hyperparameters, overrides=dict(overrides or {}), seeds=[row.seed for row in rows],
        n_runs=len(rows), n_reached=len(reached), reached_fraction=len(reached) / len(rows),
        time_to_target=time_stats([row.time_to_target_s for row in reached]),
        epochs_to_target=epoch_stats([row.epochs_to_target for row in reached if row.epochs_to_target is not None]),
        complete=complete, runs=rows, provenance=provenance(inputs or [], command),
    )


def summarize_runs(runs: list) -> RepeatSummary:
    """Summary of any loaded runs (``sources.AnalyzedRun``), e.g. a folder of run directories without summary.json."""
    return summarize([(str(r.path), r.result, True) for r in runs], inputs=[str(r.path) for r in runs])


@dataclass
class RepeatOptions:
    """N seeds of one run configuration. ``run`` is the template (task, recipe, overrides, target, device, ...);
    each seed gets a copy with its own ``seed`` and ``out`` (``out/seed-<n>``)."""

    run: "RunConfig"
    out: Path
    runs: int
    seed_start: int = 0
    log: Callable[[str], None] | None = None
    label: str = "repeat"  # prefix of the progress lines (lesion uses the variant name)


def _log(options: RepeatOptions, message: str) -> None:
    (options.log or (lambda m: print(f"daybreak: {m}", file=sys.stderr, flush=True)))(message)


def seed_dir_name(seed: int) -> str:
    return f"seed-{seed}"


def _mismatch(result: RunResult, task: str, recipe: str, hp: dict[str, Any], target: float, seed: int) -> str | None:
    if result.task != task or result.recipe != recipe:
        return f"task/recipe {result.task}/{result.recipe}, not {task}/{recipe}"
    if result.seed != seed:
        return f"seed {result.seed}, not {seed}"
    if abs(result.target - target) > 1e-12:
        return f"target {result.target * 100:.2f}%, not {target * 100:.2f}%"
    ours, theirs = jsonable(hp), jsonable(result.hyperparameters)
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key) != theirs.get(key):
            return f"hyperparameter {key}={theirs.get(key)!r}, not {ours.get(key)!r}"
    return None


def describe(result: RunResult) -> str:
    if result.reached and result.time_to_target_s is not None:
        epochs = f", {result.epochs_to_target:g} epochs" if result.epochs_to_target is not None else ""
        return f"reached {result.target * 100:.2f}% in {result.time_to_target_s:.3f} s{epochs}"
    best = f"best {result.best_accuracy * 100:.2f}%" if result.best_accuracy is not None else "no evaluation"
    why = f": {result.message}" if result.status == "failed" and result.message else ""
    return f"{result.status.replace('_', ' ')} ({best}){why}"


def check_options(options: RepeatOptions) -> tuple[Any, Any, dict[str, Any], float]:
    """Validate everything before any work: (task, recipe, hyperparameters, target)."""
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task
    from daybreak.train.spec import parse_target

    if options.runs < 1:
        raise ConfigError(f"--runs {options.runs}: must be >= 1")
    if options.seed_start < 0:
        raise ConfigError(f"--seed-start {options.seed_start}: must be >= 0")
    task = get_task(options.run.task)
    recipe = get_recipe(options.run.recipe or task.reference_recipe)
    if recipe.task != task.name:
        raise ConfigError(f"recipe {recipe.name} is for task {recipe.task}, not {task.name}")
    hp = recipe.hyperparameters(options.run.overrides)
    target = task.target if options.run.target is None else parse_target(options.run.target)
    if options.out.exists() and not options.out.is_dir():
        raise ConfigError(f"--out {options.out}: exists and is not a directory")
    return task, recipe, hp, target


def _existing(run_dir: Path, task: str, recipe: str, hp: dict[str, Any], target: float, seed: int) -> RunResult | None:
    """A finished, matching run in ``run_dir`` to reuse; None if there is nothing (cleared if unfinished)."""
    if not run_dir.exists():
        return None
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: exists and is not a directory")
    if not any(run_dir.iterdir()):
        return None
    try:
        result = RunResult.load(run_dir)
    except RecordError:
        raise ConfigError(f"{run_dir}: not empty and holds no readable run record; move it away and run again") from None
    why = _mismatch(result, task, recipe, hp, target, seed)
    if why is not None:
        raise ConfigError(f"{run_dir}: an earlier run with other settings ({why}); use another --out")
    if result.status in FINISHED:
        return result
    shutil.rmtree(run_dir)  # a run left running/interrupted/failed: run it again from scratch
    return None


def run_repeat(options: RepeatOptions) -> RepeatSummary:
    """Run (or reuse) every seed, writing summary.json after each; return the final summary."""
    from daybreak.train.runner import run

    task, recipe, hp, target = check_options(options)
    options.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(options.seed_start, options.seed_start + options.runs))
    done: list[tuple[str, RunResult, bool]] = []
    inputs = [str(options.out / seed_dir_name(s)) for s in seeds]

    def write(complete: bool) -> RepeatSummary | None:
        if not done:
            return None
        summary = summarize(done, overrides=options.run.overrides, inputs=inputs, command=options.run.command,
                            complete=complete)
        summary.save(options.out)
        return summary

    n = len(seeds)
    for i, seed in enumerate(seeds, 1):
        name = seed_dir_name(seed)
        run_dir = options.out / name
        previous = _existing(run_dir, task.name, recipe.name, hp, target, seed)
        if previous is not None:
            done.append((name, previous, True))
            _log(options, f"{options.label} [{i}/{n}] seed {seed}: {describe(previous)} (reused {run_dir})")
            write(complete=i == n)
            continue
        config = replace(options.run, task=task.name, recipe=recipe.name, overrides=dict(options.run.overrides),
                         seed=seed, out=run_dir, quiet=True, command=[*options.run.command, f"# seed {seed}"])
        try:
            result = run(config)
        except DaybreakError:
            write(complete=False)
            raise
        except Exception as e:  # noqa: BLE001 - a crash of one run: recorded as failed by the runner; go on
            try:
                result = RunResult.load(run_dir)
            except RecordError:
                raise e from None
            why = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
            _log(options, f"{options.label} [{i}/{n}] seed {seed}: failed: {why}")
            done.append((name, result, False))
            write(complete=i == n)
            continue
        if result.status == "interrupted":
            write(complete=False)
            raise KeyboardInterrupt
        done.append((name, result, False))
        _log(options, f"{options.label} [{i}/{n}] seed {seed}: {describe(result)}")
        write(complete=i == n)
    summary = write(complete=True)
    assert summary is not None
    return summary


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
        f"  {int(t.confidence * 100)}% CI of mean   "
        + ("-" if t.ci_low_s is None else f"[{t.ci_low_s:.3f}, {t.ci_high_s:.3f}] s"),
        f"  olympic mean     {sec(t.olympic_mean_s)}"
        + ("" if t.olympic_mean_s is not None else " (needs >= 3 reached runs)"),
        f"  min/median/max   {sec(t.min_s)} / {sec(t.median_s)} / {sec(t.max_s)}",
        "  epochs to target " + ("-" if e.min is None else f"min {e.min:g}, median {e.median:g}, max {e.max:g} "
                                  f"({', '.join(f'{v:g}' for v in e.values)})"),
    ]
    if s.n_reached < s.n_runs:
        lines.append("  note             unreached runs are excluded from the time statistics")
    return "\n".join(lines)


def _seed_range(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return ",".join(str(s) for s in seeds)
