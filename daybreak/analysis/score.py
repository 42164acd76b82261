"""`daybreak analyze score`: rank submissions (recipes, optimizers, experiment arms or labelled sets of runs) across
tasks by AlgoPerf's benchmark score, the integrated performance profile.

* **Submissions and tasks.** Every run under the paths belongs to one submission and one task. The submission is
  the run's recipe name (``--by recipe``, the default), the optimizer its record names (``--by optimizer``: the
  class, e.g. SGD, AdamW), the arm of the experiment it is a trial of (``--by arm``: experiment.json's arm names,
  e.g. ``daybreak ab``'s --a-name/--b-name) or a label: a path written ``NAME=PATH`` puts every run under it in
  submission NAME, whatever ``--by`` says (``--by label`` requires a label on every path). The task is the run's
  task; when the runs of one task have different targets, each target is a task of its own (``digits@90%``), as
  times to different targets are not comparable.
* **Time.** Each run's time-to-target under one rule set: the runs' headline one (they must agree), or
  ``--rules dawnbench|mlperf`` (every record keeps both clocks). A run that did not reach its target (not reached,
  diverged, failed, interrupted) has no time: infinitely slow.
* **Several runs of a submission on a task** (a repeat directory, an experiment arm, several run directories):
  the submission's time there is the **median** of its runs' times, an unreached run counting as infinitely slow.
  That is AlgoPerf's own rule (the median over its studies, a failed study infinite), and for a repeat where every
  run reached it is the repeat summary's ``median_s``. The task is solved when more than half of the runs reached
  the target. (The leaderboard's olympic mean needs 3 reached runs and has no place for an unreached one, so it is
  not used here.)
* **Score.** For each task r = time / the fastest submission's time; task score = max(0, (r_max - r) /
  (r_max - 1)) with r_max = 4 (AlgoPerf's): 1 for the fastest, 0 at r_max times the fastest or slower, 0 for an
  unsolved task or a task without runs. The score is the mean over every task: in [0, 1], 1 when a submission is
  the fastest everywhere. It equals the area under the submission's performance profile rho(tau) (the fraction of
  tasks with r <= tau) from 1 to r_max, divided by r_max - 1: the plot shows those profiles.
* **Numerics.** ``--numerics exact`` (the default, and what the leaderboard uses) is that integral in closed form.
  ``--numerics official`` computes it as AlgoPerf's own scoring code does (``official_score`` in
  :mod:`daybreak.analysis.stats`): a time above r_max x the fastest infinite, rho sampled at 100 evenly spaced tau
  from 1 to r_max, the trapezoid of those samples / (r_max - 1). The two agree when every ratio is 1, unsolved, past
  r_max or midway between grid points, and differ by at most 1 / 198 = 0.00505 (half a grid step) otherwise, enough
  to order two close submissions differently; score.json keeps both (``score_exact``, ``score_official``), ranks by
  the one asked for, and a note names submissions the other numerics would order differently.

The example of docs/how-to/analyses.md: SGD the fastest on digits and mnist; AdamW at 2.5x SGD's time on digits,
without a run on mnist (unsolved); with the official numerics the same, as 2.5 lies midway between two points of
the grid:

>>> from daybreak.analysis.stats import UNSOLVED, algoperf_score, official_score
>>> algoperf_score([1.0, 1.0]), algoperf_score([2.5, UNSOLVED]), official_score([2.5, UNSOLVED])
(1.0, 0.25, 0.25)

The arithmetic is in :mod:`daybreak.analysis.stats` (``cell_time``, ``performance_ratio``, ``task_score``,
``performance_profile``); this module reads the runs and writes score.json, score.md and score.png.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from daybreak.analysis.sources import AnalyzedRun, provenance, runs_in
from daybreak.analysis.stats import (
    NUMERICS, R_MAX, UNSOLVED, algoperf_score, best_times, cell_time, official_profile, official_ratios,
    official_score, performance_profile, performance_ratio, r_max_option, task_score,
)
from daybreak.errors import ConfigError, RecordError
from daybreak.fileio import atomic_write_text
from daybreak.records.experiment import EXPERIMENT_FILE, Experiment
from daybreak.records.run import EXTERNAL_RECIPE, RunResult
from daybreak.records.score import ScoreAnalysis, ScoreCell, ScoreSubmission
from daybreak.rules import RULE_SETS

BY = ("recipe", "optimizer", "arm", "label")
NUMERICS_WORDS = {"exact": "the integral of the performance profile in closed form",
                  "official": "AlgoPerf's scoring code: the trapezoid of the profile at 100 tau from 1 to r_max"}
PLOT_FILE = "score.png"
MARKDOWN_FILE = "score.md"
MAX_LABEL_CHARS = 80


def split_label(arg: str) -> tuple[str | None, str]:
    """``NAME=PATH`` -> (NAME, PATH); a path that exists as written, or has no ``=``, is a path without a label."""
    if "=" not in arg or Path(arg).exists():
        return None, arg
    name, path = arg.split("=", 1)
    name = name.strip()
    if not name or not path:
        raise ConfigError(f"{arg}: write a labelled path as NAME=PATH")
    if len(name) > MAX_LABEL_CHARS or not name.isprintable():
        raise ConfigError(f"{arg}: a label is at most {MAX_LABEL_CHARS} printable characters")
    return name, path


def time_under(result: RunResult, rules: str, where: Path | str) -> float:
    """The run's time-to-target under ``rules``; ``UNSOLVED`` (inf) when it did not reach its target."""
    if not result.reached:
        return UNSOLVED
    clock = result.clocks.get(rules)
    if clock is not None and clock.time_to_target_s is not None:
        return float(clock.time_to_target_s)
    if result.rules == rules and result.time_to_target_s is not None:  # a record from before the rule sets
        return float(result.time_to_target_s)
    raise RecordError(f"{where}: the run has no {RULE_SETS[rules].title} time-to-target (a record from before "
                      f"daybreak kept every rule set's clock); leave out --rules")


class _Arms:
    """The experiment arm of a run directory, read from experiment.json one or two folders up."""

    def __init__(self) -> None:
        self._experiments: dict[Path, Experiment | None] = {}

    def _experiment(self, folder: Path) -> Experiment | None:
        if folder not in self._experiments:
            file = folder / EXPERIMENT_FILE
            self._experiments[folder] = Experiment.load(folder) if file.is_file() else None
        return self._experiments[folder]

    def where(self, run_dir: Path) -> tuple[Path, str] | None:
        """(the experiment's folder, the arm) of a run that is a trial of an experiment, else None."""
        here = run_dir.resolve()
        for folder in (here.parent, here.parent.parent):
            experiment = self._experiment(folder)
            if experiment is None:
                continue
            for trial in experiment.trials:
                if (folder / trial.run_dir).resolve() == here:
                    return folder, trial.arm
        return None

    def of(self, run_dir: Path) -> str | None:
        found = self.where(run_dir)
        return None if found is None else found[1]


def _submission_of(run: AnalyzedRun, by: str, arms: _Arms, arg: str) -> str:
    if by == "recipe":
        return run.result.recipe
    if by == "optimizer":
        if not run.result.optimizer:
            raise RecordError(f"{run.path}: the record names no optimizer (a run made before daybreak recorded it, "
                              "or a `daybreak time` record); use --by recipe, or label its path NAME=PATH")
        return run.result.optimizer
    if by == "arm":
        arm = arms.of(run.path)
        if arm is None:
            raise RecordError(f"{run.path}: not a trial of an experiment (no {EXPERIMENT_FILE} lists it); "
                              "use --by recipe, or label its path NAME=PATH")
        return arm
    raise ConfigError(f"{arg}: --by label needs every path written NAME=PATH (e.g. adamw={arg})")


def _task_keys(runs: list[tuple[str, AnalyzedRun]]) -> tuple[dict[Path, str], list[str]]:
    """The task of each run: its name, or NAME@TARGET where a task's runs have several targets; and notes."""
    targets: dict[str, set[float]] = defaultdict(set)
    for _, run in runs:
        targets[run.result.task].add(run.result.target)
    keys, notes = {}, []
    for _, run in runs:
        r = run.result
        keys[run.path] = r.task if len(targets[r.task]) == 1 else f"{r.task}@{r.target * 100:g}%"
    for task, found in sorted(targets.items()):
        if len(found) > 1:
            listed = ", ".join(f"{t * 100:g}%" for t in sorted(found))
            notes.append(f"the runs of {task} have {len(found)} targets ({listed}): each target is scored as a task "
                         "of its own, since times to different targets are not comparable")
    return keys, notes


def _rules_of(runs: list[AnalyzedRun], rules: str | None) -> str:
    if rules is not None:
        if rules not in RULE_SETS:
            raise ConfigError(f"--rules {rules}: choose one of {', '.join(RULE_SETS)}")
        return rules
    headline: dict[str, int] = defaultdict(int)
    for run in runs:
        headline[run.result.rules] += 1
    if len(headline) > 1:
        counts = ", ".join(f"{name}: {n} runs" for name, n in sorted(headline.items()))
        raise ConfigError(f"the runs' headline clocks differ ({counts}): pick one with --rules "
                          f"{'|'.join(RULE_SETS)}")
    return next(iter(headline))


def analyze_score(paths: Sequence[str | Path], by: str = "recipe", rules: str | None = None,
                  r_max: float = R_MAX, command: list[str] | None = None, numerics: str = "exact") -> ScoreAnalysis:
    """The score of every submission found under ``paths`` (run, repeat, experiment or runs directories, each
    optionally ``NAME=PATH``), ranked by ``numerics``: "exact" (the integral) or "official" (AlgoPerf's code)."""
    if by not in BY:
        raise ConfigError(f"--by {by}: choose one of {', '.join(BY)}")
    if numerics not in NUMERICS:
        raise ConfigError(f"--numerics {numerics}: choose one of {', '.join(NUMERICS)}")
    r_max = r_max_option(r_max)
    if not paths:
        raise RecordError("no runs given")
    arms = _Arms()
    members: list[tuple[str, AnalyzedRun]] = []
    placed: dict[Path, str] = {}
    labelled = 0
    for arg in map(str, paths):
        label, path = split_label(arg)
        labelled += label is not None
        for run in runs_in(path):
            name = label or _submission_of(run, by, arms, arg)
            key = run.path.resolve()
            if key in placed:
                if placed[key] != name:
                    raise ConfigError(f"{run.path}: the same run is in two submissions, {placed[key]!r} and {name!r}")
                continue
            placed[key] = name
            members.append((name, run))
    if not members:
        raise RecordError(f"no runs found in {', '.join(map(str, paths))}")
    if labelled == len(paths):
        by = "label"  # every submission was named on the command line
    rules = _rules_of([run for _, run in members], rules)
    task_of, notes = _task_keys(members)
    tasks = sorted(set(task_of.values()))
    names = sorted({name for name, _ in members})

    runs_of: dict[tuple[str, str], list[AnalyzedRun]] = defaultdict(list)
    for name, run in members:
        runs_of[(name, task_of[run.path])].append(run)
    times: dict[str, dict[str, float]] = {n: {} for n in names}
    run_times: dict[tuple[str, str], list[float]] = {}
    for (name, task), runs in runs_of.items():
        run_times[(name, task)] = [time_under(r.result, rules, r.path) for r in runs]
        times[name][task] = cell_time(run_times[(name, task)])
    best = best_times(times, tasks)
    official = official_ratios(times, tasks, r_max)

    submissions = []
    for name in names:
        cells: list[ScoreCell] = []
        ratios: list[float] = []
        for task in tasks:
            runs, measured = runs_of.get((name, task), []), run_times.get((name, task), [])
            t = times[name].get(task, UNSOLVED)
            ratio = performance_ratio(t, best[task])
            ratios.append(ratio)
            cells.append(ScoreCell(
                task=task, n_runs=len(runs), n_reached=sum(1 for x in measured if math.isfinite(x)),
                times_s=[x if math.isfinite(x) else None for x in measured],
                time_s=t if math.isfinite(t) else None, ratio=ratio if math.isfinite(ratio) else None,
                task_score=task_score(ratio, r_max) if numerics == "exact" else
                official_score([official[name][len(cells)]], r_max), run_dirs=[str(r.path) for r in runs]))
            if runs and math.isinf(t) and any(math.isfinite(x) for x in measured):
                reached = sum(1 for x in measured if math.isfinite(x))
                notes.append(f"{name} on {task}: {reached} of {len(measured)} runs reached the target, not more "
                             "than half: unsolved (the median counts an unreached run as infinitely slow)")
        exact, by_code = algoperf_score(ratios, r_max), official_score(official[name], r_max)
        submissions.append(ScoreSubmission(
            name=name, rank=0, score=exact if numerics == "exact" else by_code,
            tasks_solved=sum(1 for r in ratios if math.isfinite(r)), score_exact=exact, score_official=by_code,
            cells=cells, profile=performance_profile(ratios, r_max) if numerics == "exact" else
            official_profile(official[name], r_max)))
    submissions.sort(key=lambda s: (-s.score, -s.tasks_solved, s.name))
    for rank, s in enumerate(submissions, start=1):
        s.rank = rank
    notes += _notes(submissions, tasks, best, by, members, r_max)
    notes += _numerics_notes(submissions, numerics)
    if by in ("recipe", "optimizer"):
        notes += _merged_arms(runs_of, arms)
    return ScoreAnalysis(
        r_max=r_max, rules=rules, by=by, tasks=tasks, numerics="exact" if numerics == "exact" else "official",
        best_times_s={t: (v if math.isfinite(v) else None) for t, v in best.items()},
        submissions=submissions, notes=notes,
        provenance=provenance(sorted({str(run.path) for _, run in members}), command))


def _notes(submissions: list[ScoreSubmission], tasks: list[str], best: dict[str, float], by: str,
           members: list[tuple[str, AnalyzedRun]], r_max: float) -> list[str]:
    notes = []
    if len(tasks) == 1:
        notes.append(f"one task only ({tasks[0]}): the score is trivial, each submission's task score there "
                     f"(1 for the fastest, (r_max - r) / (r_max - 1) for the others); give runs of several tasks "
                     "for a cross-task ranking")
    elif all(sum(1 for c in s.cells if c.n_runs) <= 1 for s in submissions):
        notes.append("every submission ran on one task only, so each scores at most 1 / number of tasks; a daybreak "
                     "recipe belongs to one task: group runs across tasks with NAME=PATH labels, --by optimizer or "
                     "--by arm")
    if len(submissions) == 1:
        notes.append("one submission: it is the fastest wherever it reached the target, so its score is the fraction "
                     "of tasks it solved")
    for task in tasks:
        if math.isinf(best[task]):
            notes.append(f"nobody solved {task}: every submission scores 0 there")
    missing = [f"{s.name} on {c.task}" for s in submissions for c in s.cells if not c.n_runs]
    if missing:
        notes.append("no runs (scored 0): " + ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else ""))
    if by == "recipe" and any(run.result.recipe == EXTERNAL_RECIPE for _, run in members):
        notes.append("`daybreak time` records all have the recipe 'external': label their paths NAME=PATH to keep "
                     "different programs apart")
    beyond = [f"{s.name} on {c.task} (r {c.ratio:.2f})" for s in submissions for c in s.cells
              if c.ratio is not None and c.ratio >= r_max]
    if beyond:
        notes.append(f"at or beyond r_max = {r_max:g} (scored 0 though solved): " + ", ".join(beyond[:10]))
    return notes


def _numerics_notes(submissions: list[ScoreSubmission], numerics: str) -> list[str]:
    """A note for each pair of neighbours in the ranking that the other numerics would order the other way."""
    other = "official" if numerics == "exact" else "exact"

    def score(s: ScoreSubmission, which: str) -> float:
        value = s.score_exact if which == "exact" else s.score_official
        return 0.0 if value is None else value

    notes = []
    for a, b in zip(submissions, submissions[1:]):
        if score(a, other) < score(b, other):
            notes.append(f"{a.name} ranks above {b.name} by the {numerics} numerics ({score(a, numerics):.4f} vs "
                         f"{score(b, numerics):.4f}) but below it by the {other} ones ({score(a, other):.4f} vs "
                         f"{score(b, other):.4f}): a difference inside the official code's grid error (up to "
                         f"0.00505), not a measured one")
    return notes


def _merged_arms(runs_of: dict[tuple[str, str], list[AnalyzedRun]], arms: _Arms) -> list[str]:
    """A note for each submission whose runs on a task are trials of different arms of one experiment (an ab
    experiment of one recipe, grouped by recipe): its time is the median over both arms."""
    notes = []
    for (name, task), runs in sorted(runs_of.items()):
        found: dict[Path, set[str]] = defaultdict(set)
        for run in runs:
            where = arms.where(run.path)
            if where is not None:
                found[where[0]].add(where[1])
        for folder, names in found.items():
            if len(names) > 1:
                notes.append(f"{name} on {task} merges the arms {', '.join(sorted(names))} of the experiment in "
                             f"{folder}: use --by arm, or label each arm's folder NAME=PATH")
    return notes


# --- views --------------------------------------------------------------------------------------------------------

def _cell_text(c: ScoreCell) -> str:
    if not c.n_runs:
        return "no runs"
    if c.time_s is None or c.ratio is None:
        return f"unsolved ({c.n_reached}/{c.n_runs} reached)"
    median = f", median of {c.n_runs}" if c.n_runs > 1 else ""
    return f"{c.time_s:.3f} s, r {c.ratio:.2f}{median}"


def table_rows(a: ScoreAnalysis) -> tuple[list[str], list[list[str]]]:
    other = "official" if a.numerics == "exact" else "exact"
    header = ["#", "submission", f"score ({a.numerics})", other, "solved"] + [
        f"{t} (best {a.best_times_s[t]:.3f} s)" if a.best_times_s.get(t) is not None else f"{t} (unsolved)"
        for t in a.tasks]
    body = [[str(s.rank), s.name, f"{s.score:.4f}",
             "-" if (alt := s.score_official if other == "official" else s.score_exact) is None else f"{alt:.4f}",
             f"{s.tasks_solved}/{len(a.tasks)}"]
            + [_cell_text(c) for c in s.cells] for s in a.submissions]
    return header, body


def write_score(a: ScoreAnalysis, out: Path) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis.tables import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    written = [a.save(out)]
    md = ["# Cross-task score (AlgoPerf)", "",
          f"r_max = {a.r_max:g}; clock: {RULE_SETS[a.rules].title}; submissions by {a.by}; ranked by the "
          f"{a.numerics} numerics ({NUMERICS_WORDS[a.numerics]}).", "",
          a.method + ".", "", markdown_table(*table_rows(a)), ""]
    md += [f"Note: {n}" for n in a.notes]
    written.append(atomic_write_text(out / MARKDOWN_FILE, "\n".join(md) + "\n"))
    written.append(plots.score_plot(a, out / PLOT_FILE))
    return written
