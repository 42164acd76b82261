"""CLI: `daybreak repeat`, `daybreak lesion`, `daybreak ab`. Every flag is generated: the run options from
daybreak.config.RunConfig, the experiment's from daybreak.experiments.plan.ExperimentConfig, an arm's from
ArmOptions (taken twice by ab: --a-..., --b-...), the executor's from daybreak.executors."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from daybreak.commands_index import help_of
from daybreak.options import (HelpFormatter, Opt, OptionModel, add_dataclass_flags, add_flags, dataclass_from_args,
                              from_args, parse_assignments, parse_path, parse_text)

if TYPE_CHECKING:
    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig

EXIT_NOT_REACHED = 3
EXIT_FAILED = 5
AB = frozenset({"ab"})

EXPERIMENT_NOTE = (
    " Every trial is a fresh `daybreak run` process (the same cold start, clocks and record as a run of its own), "
    "started by --executor (local subprocesses, one at a time on CPU; or a Slurm job array); arms are interleaved. "
    "DIR holds one run directory per trial, trials/<key>.toml + .log, and experiment.json (the order and every "
    "trial's state); a killed experiment finishes with the same command plus --resume, never re-running a finished "
    "trial. Trials run while the machine was busy are flagged (--busy).")

REPEAT_EXAMPLES = """\
examples:
  daybreak repeat digits --runs 5 --out exp/digits5
  daybreak repeat digits --runs 5 --out exp/digits5 --resume          # after a kill: only unfinished trials
  daybreak repeat --config runs/X/config.toml --runs 10 --out exp/X10  # a run's own options, 10 seeds
  daybreak repeat cifar10 --runs 20 --out /shared/exp/c10 --executor slurm --slurm-partition gpu"""

LESION_EXAMPLES = """\
examples:
  daybreak lesion digits --runs 5 --out exp/lesion-digits
  daybreak lesion cifar10 --without lookahead,tta --runs 10 --out exp/c10-lesion --executor slurm"""

AB_EXAMPLES = """\
examples:
  daybreak ab digits --a-set lr=0.1 --b-set lr=0.2 --runs 5 --out exp/lr
  daybreak ab digits --b-recipe examples/recipes/digits_wide.py --runs 10 --out exp/wide
  daybreak ab digits --runs 5 --until-significant 0.05 --max-runs 40 --out exp/aa   # A/A: the CI must hold 1
  daybreak ab digits --recipe my_recipe.py --a-commit HEAD~1 --b-commit HEAD --runs 10 --out exp/commit
  daybreak ab mnist --a-cmd "python train.py" --b-cmd "python train.py --fast" --runs 5 --out exp/ext"""


class ArmOptions(OptionModel, init=False):
    """What makes one arm of `daybreak ab` differ from the options both arms share."""

    name: Annotated[str | None, Opt(
        "--name", "the arm's name in the output", parse=parse_text, commands=AB, metavar="NAME",
        default_help="baseline / candidate")] = None
    config: Annotated[Path | None, Opt(
        "--config", "a TOML file of run options for this arm (over the shared ones)", parse=parse_path,
        commands=AB, metavar="FILE")] = None
    recipe: Annotated[str | None, Opt(
        "--recipe", "this arm's recipe (a name or a recipe file)", parse=parse_text, commands=AB,
        metavar="NAME|FILE")] = None
    overrides: Annotated[dict[str, Any], Opt(
        "--set", "a hyperparameter of this arm (repeatable)", parse=parse_assignments, commands=AB,
        kind="append")] = {}
    commit: Annotated[str | None, Opt(
        "--commit", "take this arm's recipe file as it was at this git commit (git show COMMIT:FILE)",
        parse=parse_text, commands=AB, metavar="REV")] = None
    cmd: Annotated[str | None, Opt(
        "--cmd", "an external training program for this arm, timed from its MLPerf log like `daybreak time`",
        parse=parse_text, commands=AB, metavar="'PROGRAM ARGS'")] = None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig

    def common(p: argparse.ArgumentParser, command: str) -> None:
        add_flags(p, ExperimentConfig, command)
        add_dataclass_flags(p, ExecutorOptions, "where the trials run")
        p.add_argument("--json", action="store_true", help="print the summary record as JSON")

    p = sub.add_parser(
        "repeat", formatter_class=HelpFormatter, epilog=REPEAT_EXAMPLES,
        help=help_of("repeat"),
        description="Run N seeds of a run configuration and write DIR/summary.json: time-to-target mean, sample "
                    "std, coefficient of variation, the geometric mean with its interval (Student t on the log "
                    "times, at --confidence), the olympic mean (needs >= 3 reached runs; under --rules mlperf "
                    "MLPerf's scoring: one non-converging run may be the slowest dropped, two invalidate the set, "
                    "more runs than --scored-runs are scored by the median window), the fraction that reached the "
                    "target, the mean final accuracy with its interval and whether it is above the target at p < 1 "
                    "- --confidence." + EXPERIMENT_NOTE +
                    " Exit status 0 if a trial reached the target, 3 if none did, 5 if a trial crashed.")
    add_flags(p, RunConfig, "repeat", positional=("task",), config_file=True, title="options of each trial (as for "
              "`daybreak run`)")
    common(p, "repeat")
    p.set_defaults(func=cmd_repeat)

    p = sub.add_parser(
        "lesion", formatter_class=HelpFormatter, epilog=LESION_EXAMPLES,
        help=help_of("lesion"),
        description="Arms: the full recipe and, for each switch in --without (default: all of the recipe's; see "
                    "`daybreak recipes NAME`), the recipe with it off; --runs seeds each, the same seeds in every "
                    "arm. Writes DIR/lesion.json, lesion.md, lesion.png and DIR/<variant>/summary.json: each "
                    "variant's time-to-target / the full recipe's as a paired ratio with its interval and verdict "
                    "(a switch matters when its interval excludes 1)." + EXPERIMENT_NOTE)
    p.add_argument("task", nargs="?", default=argparse.SUPPRESS, metavar="TASK_OR_RECIPE",
                   help="a recipe name or a task (its reference recipe); or --config / --recipe")
    p.add_argument("--without", metavar="A,B,...",
                   help="switches to turn off one at a time (default: every switch; '' runs only the full recipe)")
    add_flags(p, RunConfig, "lesion", config_file=True, title="options of each trial (as for `daybreak run`)")
    common(p, "lesion")
    p.set_defaults(func=cmd_lesion)

    p = sub.add_parser(
        "ab", formatter_class=HelpFormatter, epilog=AB_EXAMPLES,
        help=help_of("ab"),
        description="Baseline (A) vs candidate (B): two recipes, two --set variants, two config files, a recipe "
                    "file at two commits, or two external programs (--a-cmd/--b-cmd, timed from their MLPerf logs "
                    "as `daybreak time` does). Pair i runs A and B with seed S+i, one right after the other, the "
                    "order alternating. Prints the ratio B/A of time-to-target (and of cost and energy where "
                    "measured): when every pair reached the target, the geometric mean over the pairs with a "
                    "Student-t interval of the log ratios and the paired p-value (a bootstrap interval as a check "
                    "where the pairs allow enough distinct resamples); when a trial did not, it counts as infinitely "
                    "slow and the ratio is the Hodges-Lehmann estimate with the exact Wilcoxon signed-rank test "
                    "and the interval inverted from it (the method is named). Also each arm's reached fraction "
                    "(Fisher's exact test) and accuracy, how many pairs the observed spread needs to tell a 5% "
                    "difference (and --effect), with its range over the spread's own interval, and the test's "
                    "verdict: 'not distinguishable' when p > 1 - --confidence, which is exactly when the interval "
                    "contains 1. --until-significant adds pairs until "
                    "the interval is narrow enough or the budget is spent. Writes DIR/ab.json and ab.md."
                    + EXPERIMENT_NOTE)
    add_flags(p, RunConfig, "ab", positional=("task",), config_file=True,
              title="options both arms share (as for `daybreak run`)")
    for arm, title in (("a", "the baseline (A)"), ("b", "the candidate (B)")):
        add_flags(p, ArmOptions, "ab", prefix=arm, title=title)
    common(p, "ab")
    p.set_defaults(func=cmd_ab)


# --- commands ---------------------------------------------------------------------------------------------------------

def _parts(args: argparse.Namespace, command: str, **extra: Any
           ) -> tuple[RunConfig, ExperimentConfig, ExecutorOptions, list[str]]:
    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig

    invocation = ["daybreak", *args.argv]
    run = from_args(RunConfig, args, command, extra={"command": invocation, **extra})
    exp = from_args(ExperimentConfig, args, command, use_file=False)
    return run, exp, dataclass_from_args(ExecutorOptions, args), invocation


def cmd_repeat(args: argparse.Namespace) -> int:
    if getattr(args, "task", None) and not getattr(args, "recipe", None):  # an unknown task: one line, before torch
        from daybreak.tasks import get_task

        get_task(args.task)
    from daybreak.analysis.repeat import format_repeat
    from daybreak.experiments.commands import repeat

    run, exp, executor, invocation = _parts(args, "repeat")
    summary = repeat(run, exp, executor, invocation)
    if summary is None:  # a node other than 0: node 0 records the experiment
        return 0
    assert exp.out is not None  # repeat refuses an experiment without --out
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(format_repeat(summary))
        print(f"  summary          {exp.out / 'summary.json'}")
    if any(r.status == "failed" for r in summary.runs):
        return EXIT_FAILED
    return 0 if summary.n_reached else EXIT_NOT_REACHED


def cmd_lesion(args: argparse.Namespace) -> int:
    from daybreak.analysis.commands import print_table
    from daybreak.analysis.lesion import table_rows
    from daybreak.experiments.commands import lesion
    from daybreak.recipes import RECIPES, get_recipe
    from daybreak.tasks import TASKS, get_task

    extra: dict[str, Any] = {}
    name = getattr(args, "task", None)
    if name is not None:
        if name in RECIPES:
            extra = {"recipe": name, "task": get_recipe(name).task}
        elif name in TASKS:
            extra = {"task": name}
        elif name.endswith(".py"):
            extra = {"recipe": name}
        else:
            get_recipe(name)  # unknown: one line naming the known recipes
    run, exp, executor, invocation = _parts(args, "lesion", **extra)
    if run.recipe is not None and run.recipe in RECIPES:
        run = run.with_(task=get_recipe(run.recipe).task)
    else:
        get_task(run.task)
    summary = lesion(run, args.without, exp, executor, invocation)
    if summary is None:
        return 0
    assert exp.out is not None  # lesion refuses an experiment without --out
    if args.json:
        print(summary.model_dump_json(indent=2))
        return 0
    print_table(*table_rows(summary))
    for v in summary.variants:
        for n in v.notes:
            print(f"note ({v.name}): {n}")
    print(f"wrote {exp.out / 'lesion.json'}, lesion.md, lesion.png")
    return 0


def cmd_ab(args: argparse.Namespace) -> int:
    if getattr(args, "task", None) and not getattr(args, "recipe", None):  # an unknown task: one line, before torch
        from daybreak.tasks import get_task

        get_task(args.task)
    from daybreak.config import RunConfig
    from daybreak.experiments.commands import ab, arm_options, recipe_at_commit
    from daybreak.executors import ExecutorOptions
    from daybreak.experiments.plan import ExperimentConfig
    from daybreak.errors import ConfigError
    from daybreak.options import given, load_toml, merge_values
    from daybreak.records.ab_views import format_ab
    from daybreak.records.experiment import Arm

    from daybreak.executors import check_options

    invocation = ["daybreak", *args.argv]
    exp = from_args(ExperimentConfig, args, "ab", use_file=False)
    executor = dataclass_from_args(ExecutorOptions, args)
    check_options(executor)  # before anything is read from git or written
    shared = merge_values(RunConfig, load_toml(args.config, RunConfig) if getattr(args, "config", None) else {},
                          given(args, RunConfig, "ab"))
    arms, configs = [], []
    files: dict[Path, str] = {}  # recipe files at a commit, written once the experiment is open
    for prefix, default_name in (("a", "baseline"), ("b", "candidate")):
        arm = ArmOptions(**given(args, ArmOptions, "ab", prefix))
        values = merge_values(RunConfig, shared,
                              load_toml(arm.config, RunConfig, f"--{prefix}-config") if arm.config else {})
        if arm.recipe:
            values["recipe"] = arm.recipe
        if arm.overrides:
            values = merge_values(RunConfig, values, {"overrides": arm.overrides})
        if arm.commit:
            if not values.get("recipe") or not str(values["recipe"]).endswith(".py"):
                raise ConfigError(f"--{prefix}-commit takes a recipe file (--recipe FILE.py or --{prefix}-recipe): "
                                  "the file is read as it was at that commit")
            if exp.out is None:
                raise ConfigError("--out DIR is required: the experiment directory")
            path, text = recipe_at_commit(str(values["recipe"]), arm.commit, exp.out, prefix)
            files[path] = text
            values["recipe"] = str(path)
        config = RunConfig(**values, command=invocation)
        configs.append(config)
        arms.append(Arm(name=arm.name or default_name, directory=arm.name or default_name,
                        config=arm_options(config), commit=arm.commit,
                        program=shlex.split(arm.cmd) if arm.cmd else None))
    if configs[0].seed != configs[1].seed:
        raise ConfigError(f"the arms start from different seeds ({configs[0].seed}, {configs[1].seed}): the two "
                          "trials of a pair share one seed (--seed S gives pairs S, S+1, ...)")
    if (arms[0].program is None) != (arms[1].program is None):
        raise ConfigError("give --a-cmd and --b-cmd together (two external programs), or neither")
    if arms[0].name == arms[1].name:
        raise ConfigError(f"both arms are named {arms[0].name!r}: give --a-name and --b-name")
    summary = ab(arms, exp, executor, invocation, first_seed=configs[0].seed, files=files, node=configs[0])
    if summary is not None:
        print(summary.model_dump_json(indent=2) if args.json else format_ab(summary))
    return 0
