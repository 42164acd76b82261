"""What reproducing a leaderboard entry takes: its recorded configuration checked and turned into
``daybreak run`` commands (daybreak.leaderboard.reproduce.worker runs them).

An entry can be reproduced when it names a daybreak task and recipe: a ``daybreak.run`` record (not one of an
external program timed by ``daybreak time``) or a ``daybreak.repeat`` multi-run entry. Its recorded configuration
is re-run on the host's hardware, each run as ``daybreak run TASK --recipe R --set k=v ... --seed S --rules RULES
--nproc-per-node N --out DIR`` in a child process of its own (its own session: a time limit ends it and all its
children), with the host's official data (never custom data, never a file path from the record: an
``init_from`` hyperparameter is refused). A multi-run entry re-runs every one of its seeds.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daybreak.errors import DaybreakError
from daybreak.leaderboard.ingest.submission import FORMAT_REPEAT, FORMAT_RUN, KIND_TRAIN, SubmissionError
from daybreak.leaderboard.ingest.text_rules import printable
from daybreak.text import one_line

MAX_NPROC = 64  # devices one reproduction may ask for on the host
MAX_TEXT_HP = 200
MAX_NUMBER_HP = 1e6  # a hyperparameter beyond this in magnitude is not run on the host (epochs, workers, ...)


class ReproduceError(DaybreakError):
    """An entry that cannot be reproduced, or a reproduction that failed: one line saying why."""


@dataclass
class RunPlan:
    task: str
    recipe: str
    overrides: dict[str, Any]
    seed: int
    rules: str
    nproc: int = 1
    eval_every_epochs: int | None = 1
    eval_every_steps: int | None = None

    def command(self, out: Path, *, python: str = sys.executable, cost_per_hour: float | None = None) -> list[str]:
        """``daybreak run ...`` for this run (an argument list: no shell ever sees it)."""
        cmd = [python, "-m", "daybreak", "run", self.task, "--recipe", self.recipe, "--seed", str(self.seed),
               "--rules", self.rules, "--out", str(out), "--quiet"]
        for key in sorted(self.overrides):
            cmd += ["--set", f"{key}={_format_value(self.overrides[key])}"]
        if self.eval_every_steps:
            cmd += ["--eval-every-steps", str(self.eval_every_steps)]
        elif self.eval_every_epochs and self.eval_every_epochs != 1:
            cmd += ["--eval-every", str(self.eval_every_epochs)]
        if self.nproc > 1:
            cmd += ["--nproc-per-node", str(self.nproc)]
        if cost_per_hour:
            cmd += ["--cost-per-hour", repr(float(cost_per_hour))]
        return cmd


@dataclass
class Plan:
    entry_id: int
    runs: list[RunPlan]
    multi: bool  # a multi-run entry: the runs are its seeds, scored by the olympic mean

    def describe(self) -> str:
        r = self.runs[0]
        seeds = ", ".join(str(p.seed) for p in self.runs)
        sets = " ".join(f"{k}={_format_value(v)}" for k, v in sorted(r.overrides.items())) or "recipe defaults"
        return (f"{r.task} / {r.recipe} ({sets}), seed{'s' if self.multi else ''} {seeds}, {r.rules} rules, "
                f"{r.nproc} device{'s' if r.nproc > 1 else ''}")


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _overrides(recipe_name: str, task: str, hyperparameters: Any) -> tuple[str, dict[str, Any]]:
    """The recipe (checked against the task) and the hyperparameters that differ from its defaults, each checked
    to be one of the recipe's, of its type, and not a path on the host."""
    from daybreak.errors import ConfigError
    from daybreak.recipes import get_recipe

    try:
        recipe = get_recipe(str(recipe_name))
    except ConfigError:
        raise ReproduceError(f"recipe {one_line(printable(str(recipe_name)), 40)!r} is not one of daybreak's "
                             "recipes") from None
    if recipe.task != task:
        raise ReproduceError(f"recipe {recipe.name} is for task {recipe.task}, not {task}")
    if not isinstance(hyperparameters, dict):
        raise ReproduceError("the record's hyperparameters are not an object")
    out: dict[str, Any] = {}
    for key, value in hyperparameters.items():
        if key not in recipe.defaults:
            raise ReproduceError(f"hyperparameter {one_line(printable(str(key)), 40)!r} is not one of recipe "
                                 f"{recipe.name}'s")
        default = recipe.defaults[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_NUMBER_HP
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= MAX_NUMBER_HP
            value = float(value) if ok else value
        else:
            ok = isinstance(value, str) and len(value) <= MAX_TEXT_HP and value == printable(value)
        if not ok:
            raise ReproduceError(f"hyperparameter {key}={one_line(printable(repr(value)), 40)} is not a "
                                 f"{type(default).__name__} like recipe {recipe.name}'s (within "
                                 f"{MAX_NUMBER_HP:g} for numbers)")
        if key == "init_from" and value:
            raise ReproduceError("the run started from a local model folder (init_from): the host does not read "
                                 "paths named by a submission")
        if value != default:
            out[key] = value
    return recipe.name, out


def _run_plan(task: Any, recipe: Any, hyperparameters: Any, seed: Any, rules: Any, world_size: Any,
              eval_every_epochs: Any, eval_every_steps: Any) -> RunPlan:
    """One run of a plan from the values a stored record holds (any JSON value: each is checked here)."""
    from daybreak.rules import RULE_SETS
    from daybreak.tasks import TASKS

    if task not in TASKS.names():
        raise ReproduceError(f"task {one_line(printable(str(task)), 40)!r} is not one of daybreak's tasks")
    recipe_name, overrides = _overrides(recipe, task, hyperparameters)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise ReproduceError(f"seed {one_line(printable(repr(seed)), 30)} is not in 0..2**32-1")
    if rules not in RULE_SETS:
        raise ReproduceError(f"rule set {one_line(printable(repr(rules)), 30)} is not one of {', '.join(RULE_SETS)}")
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 1 <= world_size <= MAX_NPROC:
        raise ReproduceError(f"the run used {one_line(printable(repr(world_size)), 20)} devices; the host reproduces "
                             f"runs of 1 to {MAX_NPROC}")
    for name, value in (("eval_every_epochs", eval_every_epochs), ("eval_every_steps", eval_every_steps)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 10**9):
            raise ReproduceError(f"{name} {one_line(printable(repr(value)), 20)} is not a positive integer")
    return RunPlan(task, recipe_name, overrides, seed, rules, world_size, eval_every_epochs, eval_every_steps)


def plan_for(entry: Any) -> Plan:
    """What re-running ``entry`` takes, or ReproduceError saying why the host cannot."""
    from daybreak.leaderboard.ingest.runs_import import is_external, load_run

    if entry.kind != KIND_TRAIN:
        raise ReproduceError("only training entries are reproduced")
    if getattr(entry, "reproduction_of", None) is not None:
        raise ReproduceError(f"this entry is the host's own reproduction of entry {entry.reproduction_of}")
    doc = entry.document
    if entry.source_format == FORMAT_RUN:
        try:
            run = load_run(doc, "the record")
        except SubmissionError as e:
            raise ReproduceError(str(e)) from None
        if is_external(run):
            raise ReproduceError("an external program timed by `daybreak time`: it names no daybreak recipe to run")
        plan = _run_plan(run.task, run.recipe, run.hyperparameters, run.seed, run.rules, run.world_size,
                         run.eval_every_epochs, run.eval_every_steps)
        return Plan(entry.id, [plan], multi=False)
    if entry.source_format == FORMAT_REPEAT:
        summary = doc.get("summary") if isinstance(doc, dict) else None
        runs = doc.get("runs") if isinstance(doc, dict) else None
        if not isinstance(summary, dict) or not isinstance(runs, list) or not runs \
                or not all(isinstance(r, dict) for r in runs):
            raise ReproduceError("the multi-run entry's document has no summary and runs")
        plans = [_run_plan(summary.get("task"), summary.get("recipe"), summary.get("hyperparameters"), r.get("seed"),
                           r.get("rules"), r.get("world_size"), r.get("eval_every_epochs"), r.get("eval_every_steps"))
                 for r in runs]
        return Plan(entry.id, plans, multi=True)
    if entry.source_format == "mlperf-training":  # daybreak.leaderboard.mlperf_import.FORMAT_MLPERF
        raise ReproduceError("an MLPerf Training result names no daybreak recipe to run (its code is the "
                             "submitter's, in the round's benchmarks/ folder)")
    raise ReproduceError("a DAWNBench v1 file names no daybreak recipe to run")
