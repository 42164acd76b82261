"""CLI: `daybreak run`, `show`, `tasks`, `recipes`, `instances`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daybreak.commands_index import help_of
from daybreak.errors import ConfigError

if TYPE_CHECKING:
    from daybreak.config import RunConfig
    from daybreak.launch import LaunchSpec
    from daybreak.recipes import Recipe
    from daybreak.train.spec import RunSpec


RUN_EXAMPLES = """\
examples:
  daybreak run                                     # digits to 98%, offline
  daybreak run digits --seed 3 --set epochs=20 --set lr=0.05 --full-schedule
  daybreak run digits --target 97% --rules mlperf
  daybreak run digits --nproc-per-node 2           # 2 processes (gloo on CPU, NCCL on GPUs)
  daybreak run --config runs/X/config.toml --out runs/X-again   # run X again, same recipe hash and seed"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.options import HelpFormatter, add_flags

    p = sub.add_parser(
        "run",
        help=help_of("run"),
        description="Train a recipe until its first evaluation at or above the target accuracy; record "
                    "time-to-target under both clock rule sets (DAWNBench v1: data loading + init + training, "
                    "evaluation and record writes excluded; MLPerf: from the first touch of the dataset, nothing "
                    "excluded), cost-to-target and a checkpoint, in a run directory, with the run's resolved "
                    "options in DIR/config.toml. Exit status: 0 reached, 3 below the target, 4 diverged, 5 failed.",
        epilog=RUN_EXAMPLES, formatter_class=HelpFormatter,
    )
    add_flags(p, RunConfig, "run", positional=("task",), config_file=True)
    p.add_argument("--json", action="store_true", help="print result.json instead of the summary")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help=help_of("show"))
    p.add_argument("run_dir", type=Path)
    p.add_argument("--json", action="store_true", help="print result.json")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("tasks", help=help_of("tasks"))
    p.add_argument("--json", action="store_true", help="print the tasks as JSON")
    p.set_defaults(func=cmd_tasks)
    p = sub.add_parser("recipes", help=help_of("recipes"))
    p.add_argument("name", nargs="?", help="show one recipe's hyperparameters")
    p.add_argument("--json", action="store_true", help="print the recipes (or the one named) as JSON")
    p.set_defaults(func=cmd_recipes)
    p = sub.add_parser("instances", help=help_of("instances"))
    add_flags(p, RunConfig, "instances")
    p.add_argument("--json", action="store_true", help="print the catalog as JSON")
    p.set_defaults(func=cmd_instances)


def run_config_from_args(args: argparse.Namespace) -> "RunConfig":
    """The `daybreak run` command line (and its --config file) -> a RunConfig (resolved later into a RunSpec)."""
    from daybreak.config import RunConfig
    from daybreak.options import from_args

    config: RunConfig = from_args(RunConfig, args, "run", extra={"command": ["daybreak", *args.argv]})
    return config


def cmd_run(args: argparse.Namespace) -> int:
    from daybreak.tasks import get_task

    config = run_config_from_args(args)  # a wrong value or an unknown task is one line before torch is imported
    if not config.recipe:  # (a recipe file may register its own task: that waits for the recipe)
        get_task(config.task)
    from daybreak.launch import LaunchSpec
    from daybreak.records.summary import format_summary
    from daybreak.train.distributed import in_torchrun
    from daybreak.train.runner import EXIT_CODES, run
    from daybreak.train.spec import SPEC_ENV, RunSpec, resolve_run_spec

    worker = in_torchrun()
    if worker and os.environ.get(SPEC_ENV):
        spec = RunSpec.model_validate_json(os.environ[SPEC_ENV])  # the launcher resolved it: no argv parsing
    else:
        launch = LaunchSpec(config.nproc_per_node, config.nnodes, config.node_rank, config.rdzv_endpoint).validate()
        spec = resolve_run_spec(config, launch.world_size if not worker else None)
        if launch.multi_process and not worker:
            return _launch(args, launch, spec)
        if spec.out is None and not worker:
            from datetime import datetime, timezone

            from daybreak.train.rundir import default_run_dir

            spec = spec.with_(out=str(default_run_dir(spec.task, spec.recipe, datetime.now(timezone.utc))))
    result = run(spec)
    if worker and os.environ.get("RANK", "0") != "0":
        return 0  # rank 0 reports
    if args.json:
        print(result.model_dump_json(indent=2))
    elif not spec.quiet:
        print(format_summary(result, str(spec.out or result.run_id)))
    if result.status != "reached" and not (worker and spec.quiet):
        print(f"daybreak: {result.status}: {result.message}", file=sys.stderr)
    # Under torchrun a non-zero exit means "this worker crashed" to the launcher; the outcome is in result.json.
    return 0 if worker else EXIT_CODES[result.status]


def _launch(args: argparse.Namespace, launch: LaunchSpec, spec: RunSpec) -> int:
    """Run the resolved spec under torchrun (each worker gets it serialized in DAYBREAK_RUN_SPEC, so no rank
    parses the command line again); afterwards report from the run directory rank 0 wrote."""
    import subprocess
    from datetime import datetime, timezone

    from daybreak.launch import torchrun_command
    from daybreak.records.run import RunResult
    from daybreak.records.summary import format_summary
    from daybreak.train.runner import EXIT_CODES, EXIT_FAILED
    from daybreak.train.rundir import check_out_dir, default_run_dir
    from daybreak.train.spec import SPEC_ENV

    out = Path(spec.out) if spec.out else default_run_dir(spec.task, spec.recipe, datetime.now(timezone.utc))
    if launch.node_rank == 0:
        check_out_dir(out)
    spec = spec.with_(out=str(out), quiet=True)
    cmd = torchrun_command(launch, "daybreak", ["run", "--quiet"])
    print(f"daybreak: launching {launch.world_size} processes under torchrun ({launch.nnodes} node(s)); run "
          f"directory {out}", file=sys.stderr)
    code = subprocess.call(cmd, env={**os.environ, SPEC_ENV: spec.model_dump_json()})
    if launch.node_rank != 0:
        return code
    try:
        result = RunResult.load(out)
    except Exception:  # noqa: BLE001 - nothing recorded: the launcher's own exit status is all there is
        print(f"daybreak: failed: torchrun exited with status {code} before rank 0 recorded the run", file=sys.stderr)
        return EXIT_FAILED if code == 0 else code
    if code != 0 and result.status in ("running", "reached", "not_reached"):
        result.status, result.message = "failed", f"a worker process failed (torchrun exit status {code})"
        result.save(out)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif not getattr(args, "quiet", False):
        print(format_summary(result, str(out)))
    if result.status != "reached":
        print(f"daybreak: {result.status}: {result.message}", file=sys.stderr)
    return EXIT_CODES.get(result.status, EXIT_FAILED)


def cmd_show(args: argparse.Namespace) -> int:
    from daybreak.records.run import RunResult
    from daybreak.records.summary import format_summary

    result = RunResult.load(args.run_dir)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(format_summary(result, str(args.run_dir)))
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    from daybreak.recipes import get_recipe, recipe_names
    from daybreak.tasks import TASKS

    items: list[dict[str, Any]] = []
    for name in TASKS:
        t = TASKS.get(name)
        others = [r for r in recipe_names() if get_recipe(r).task == name and r != t.reference_recipe]
        items.append({"name": name, "target": t.target, "metric": t.metric.name, "target_label": t.target_label,
                      "reference_recipe": t.reference_recipe, "other_recipes": others, "eval_split": t.eval_split,
                      "files": t.files, "description": t.description})
    if getattr(args, "json", False):
        print(json.dumps(items, indent=2))
        return 0
    rows = [(i["name"], i["target_label"], ",".join([f"{i['reference_recipe']} (reference)", *i["other_recipes"]]),
             f"{i['eval_split']}; files: {i['files']}") for i in items]
    widths = [max(len(r[i]) for r in rows + [("task", "target", "recipes", "")]) for i in range(3)]
    print(f"{'task':<{widths[0]}}  {'target':<{widths[1]}}  {'recipes':<{widths[2]}}  eval split / files")
    for name, target, recipes, rest in rows:
        print(f"{name:<{widths[0]}}  {target:<{widths[1]}}  {recipes:<{widths[2]}}  {rest}")
    return 0


def _recipe_json(r: Recipe) -> dict[str, Any]:
    return {"name": r.name, "task": r.task, "model": r.model, "summary": r.summary, "hyperparameters": r.defaults,
            "switches": list(r.switches), "on_n_devices": r.scaling_summary()}


def cmd_recipes(args: argparse.Namespace) -> int:
    from daybreak.recipes import get_recipe, recipe_names

    names = [args.name] if args.name else recipe_names()
    recipes = [get_recipe(n) for n in names]
    if getattr(args, "json", False):
        data = [_recipe_json(r) for r in recipes]
        print(json.dumps(data[0] if args.name else data, indent=2))
        return 0
    if args.name:
        r = recipes[0]
        print(f"{r.name}: task {r.task}, model {r.model} - {r.summary}")
        print(f"  on N devices: {r.scaling_summary()}; switchable: {', '.join(r.switches) or '-'}")
        print(json.dumps(r.defaults, indent=2))
        return 0
    for r in recipes:
        print(f"{r.name:<10} task {r.task:<8} model {r.model:<16} {r.summary}")
        print(f"{'':<10} on N devices: {r.scaling_summary()}")
    return 0


def cmd_instances(args: argparse.Namespace) -> int:
    from daybreak.pricing import catalog_note, price_catalog

    from daybreak.config import RunConfig
    from daybreak.options import values_for

    items = price_catalog(values_for(RunConfig, args, "instances")["price_file"])
    if args.json:
        print(json.dumps({"note": catalog_note(), "instances": [i.model_dump() for i in items.values()]}, indent=2))
        return 0
    print(f"{'name':<24} {'$/hour':>8}  {'price of':<10}  hardware")
    for item in items.values():
        print(f"{item.name:<24} {item.usd_per_hour:>8.3f}  {item.price_date:<10}  {item.hardware} "
              f"({item.provider} {item.region})")
        if item.note:
            print(f"{'':<24} {'':>8}  {'':<10}  note: {item.note}")
    print()
    print(f"note: {catalog_note()}")
    return 0


__all__ = ["register", "ConfigError"]
