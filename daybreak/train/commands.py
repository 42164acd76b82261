"""CLI: `daybreak run`, `show`, `tasks`, `recipes`, `instances`."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from daybreak.errors import ConfigError
from daybreak.options import add_rules_argument, resolve_rules

if TYPE_CHECKING:
    from daybreak.train.spec import RunConfig


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="train a reference recipe to the task's target accuracy and record time and cost to reach it",
        description="Train a recipe until its first evaluation at or above the target accuracy; record "
                    "time-to-target under both clock rule sets (DAWNBench v1: data loading + init + training, "
                    "evaluation and record writes excluded; MLPerf: from the first touch of the dataset, nothing "
                    "excluded), cost-to-target and a checkpoint, in a run directory.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("task", nargs="?", default="digits", help="task name (see `daybreak tasks`)")
    p.add_argument("--recipe", help="a recipe name (default: the task's reference recipe; see `daybreak recipes`) or "
                                    "a path to your own recipe file (see examples/recipes/)")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE", default=[],
                   help="override a recipe hyperparameter, e.g. --set epochs=20 (repeatable)")
    p.add_argument("--init-from", type=Path, metavar="DIR",
                   help="start from a local Hugging Face model folder (sets the recipe's init_from; squad_bert_base)")
    p.add_argument("--seed", type="seed", default=0,
                   help="seeds every RNG, 0..2**32-1; the same seed gives the same data order")
    p.add_argument("--target", help="target accuracy: a fraction in (0, 1] (0.97) or a percent with %% (97%%); "
                                    "default: the task's; a non-default target makes the run unofficial")
    p.add_argument("--data-dir", type=Path, help="folder holding the task's files themselves "
                                                 "(default: $DAYBREAK_DATA/<task> or the user cache dir)")
    p.add_argument("--allow-custom-data", action="store_true",
                   help="accept files that do not match the official checksums (run recorded official: false)")
    p.add_argument("--no-download", action="store_true", help="never download; fail if the files are missing")
    p.add_argument("--out", type=Path, help="run directory (default: runs/<task>-<recipe>-<timestamp>)")
    p.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N|mps (auto: CUDA > MPS > CPU)")
    p.add_argument("--amp", default="auto", choices=["auto", "off", "bf16", "fp16"],
                   help="autocast precision (auto: bf16/fp16 on CUDA, off elsewhere)")
    p.add_argument("--compile", nargs="?", const="default", default="off", metavar="MODE",
                   choices=["off", "default", "reduce-overhead", "max-autotune"],
                   help="torch.compile the model: default, reduce-overhead (CUDA graphs) or max-autotune; a bare "
                        "--compile is default. Compiled and warmed up on synthetic tensors before the data is "
                        "touched (model initialization)")
    p.add_argument("--tf32", action=argparse.BooleanOptionalAction, default=True,
                   help="fp32 matmuls and convolutions on TF32 tensor cores (sm_80 and later); recorded")
    p.add_argument("--threads", type=int, help="torch intra-op CPU threads")
    p.add_argument("--eval-every", dest="eval_every_epochs", type=int, default=1, metavar="N",
                   help="evaluate every N epochs")
    p.add_argument("--eval-every-steps", type=int, metavar="N", help="evaluate every N optimizer steps instead")
    add_rules_argument(p)
    p.add_argument("--full-schedule", action="store_true", help="train the whole schedule instead of stopping at the target")
    p.add_argument("--cost-per-hour", type=float, metavar="USD", help="price of the machine per hour")
    p.add_argument("--instance", metavar="NAME", help="take the price from the catalog (see `daybreak instances`)")
    p.add_argument("--price-file", type=Path, metavar="FILE",
                   help="your own price catalog (the JSON schema of `daybreak instances`), searched before ours")
    p.add_argument("--idle-power-seconds", type=float, default=2.0, metavar="S",
                   help="seconds of idle power sampled before the run where energy counters exist (0: skip)")
    p.add_argument("--author", default=None, help="author for the DAWNBench JSON (default: your user name)")
    p.add_argument("--author-email", default="", help="author e-mail for the DAWNBench JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no summary")
    p.add_argument("--json", action="store_true", help="print result.json instead of the summary")
    g = p.add_argument_group("several devices or nodes (launches itself under torchrun; DDP with NCCL on CUDA, gloo on CPU)")
    g.add_argument("--nproc-per-node", type=int, default=1, metavar="N", help="processes (devices) on this node")
    g.add_argument("--nnodes", type=int, default=1, metavar="M", help="number of nodes")
    g.add_argument("--node-rank", type=int, default=0, metavar="R", help="this node's rank, 0..M-1")
    g.add_argument("--rdzv-endpoint", metavar="HOST:PORT", help="rendezvous address (node 0) when M > 1")
    g.add_argument("--dist-timeout", type=float, default=300.0, metavar="S",
                   help="seconds a collective may wait for a slow or dead rank before the run fails")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("show", help="print the summary of a run directory")
    p.add_argument("run_dir", type=Path)
    p.add_argument("--json", action="store_true", help="print result.json")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("tasks", help="list tasks with their targets")
    p.set_defaults(func=cmd_tasks)
    p = sub.add_parser("recipes", help="list recipes with their hyperparameters")
    p.add_argument("name", nargs="?", help="show one recipe's hyperparameters")
    p.set_defaults(func=cmd_recipes)
    p = sub.add_parser("instances", help="list the price catalog used by --instance")
    p.set_defaults(func=cmd_instances)


def run_config_from_args(args: argparse.Namespace) -> "RunConfig":
    """The `daybreak run` flags -> a RunConfig (checked when resolved into a RunSpec)."""
    from daybreak.recipes import get_recipe, parse_overrides
    from daybreak.tasks import get_task
    from daybreak.train.spec import RunConfig, is_recipe_file, load_recipe_file, parse_target

    task = get_task(args.task)
    recipe_arg = args.recipe
    if is_recipe_file(recipe_arg):
        name, _ = load_recipe_file(recipe_arg)  # registers it, so --set is typed by its defaults
        recipe = get_recipe(name)
    else:
        recipe = get_recipe(recipe_arg or task.reference_recipe)
    overrides = parse_overrides(args.overrides, recipe.defaults)
    if args.init_from is not None:
        if "init_from" not in recipe.defaults:
            raise ConfigError(f"--init-from: recipe {recipe.name} has no init_from hyperparameter")
        overrides["init_from"] = str(args.init_from.expanduser().resolve())
    return RunConfig(
        task=task.name, recipe=recipe_arg if is_recipe_file(recipe_arg) else recipe.name, overrides=overrides,
        seed=args.seed, target=None if args.target is None else parse_target(args.target),
        data_dir=args.data_dir, allow_custom_data=args.allow_custom_data, download=not args.no_download,
        out=args.out, device=args.device, amp=args.amp, compile=args.compile, tf32=args.tf32, threads=args.threads,
        eval_every_epochs=args.eval_every_epochs, eval_every_steps=args.eval_every_steps,
        rules=resolve_rules(args), full_schedule=args.full_schedule, cost_per_hour=args.cost_per_hour,
        instance=args.instance, price_file=getattr(args, "price_file", None),
        idle_power_s=getattr(args, "idle_power_seconds", 2.0), quiet=args.quiet,
        author=args.author if args.author is not None else _user(), author_email=args.author_email,
        command=["daybreak", *args.argv], dist_timeout_s=args.dist_timeout,
    )


def cmd_run(args: argparse.Namespace) -> int:
    from daybreak.launch import LaunchSpec
    from daybreak.records.summary import format_summary
    from daybreak.train.distributed import in_torchrun
    from daybreak.train.runner import EXIT_CODES, run
    from daybreak.train.spec import SPEC_ENV, RunSpec, resolve_run_spec

    launch = LaunchSpec(args.nproc_per_node, args.nnodes, args.node_rank, args.rdzv_endpoint).validate()
    worker = in_torchrun()
    if worker and os.environ.get(SPEC_ENV):
        spec = RunSpec.model_validate_json(os.environ[SPEC_ENV])  # the launcher resolved it: no argv parsing
    else:
        spec = resolve_run_spec(run_config_from_args(args), launch.world_size if not worker else None)
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
    elif not args.quiet:
        print(format_summary(result, spec.out or result.run_id))
    if result.status != "reached" and not (worker and args.quiet):
        print(f"daybreak: {result.status}: {result.message}", file=sys.stderr)
    # Under torchrun a non-zero exit means "this worker crashed" to the launcher; the outcome is in result.json.
    return 0 if worker else EXIT_CODES[result.status]


def _launch(args: argparse.Namespace, launch, spec) -> int:
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
    elif not args.quiet:
        print(format_summary(result, str(out)))
    if result.status != "reached":
        print(f"daybreak: {result.status}: {result.message}", file=sys.stderr)
    return EXIT_CODES.get(result.status, EXIT_FAILED)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name is fine
        return ""


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
    from daybreak.recipes import recipe_names, get_recipe
    from daybreak.tasks import TASKS

    rows = []
    for name in TASKS:
        t = TASKS.get(name)
        others = [r for r in recipe_names() if get_recipe(r).task == name and r != t.reference_recipe]
        recipes = ",".join([f"{t.reference_recipe} (reference)", *others])
        target = t.target_label
        rows.append((name, target, recipes, f"{t.eval_split}; files: {t.files}"))
    widths = [max(len(r[i]) for r in rows + [("task", "target", "recipes", "")]) for i in range(3)]
    print(f"{'task':<{widths[0]}}  {'target':<{widths[1]}}  {'recipes':<{widths[2]}}  eval split / files")
    for name, target, recipes, rest in rows:
        print(f"{name:<{widths[0]}}  {target:<{widths[1]}}  {recipes:<{widths[2]}}  {rest}")
    return 0


def cmd_recipes(args: argparse.Namespace) -> int:
    from daybreak.recipes import get_recipe, recipe_names

    if args.name:
        r = get_recipe(args.name)
        print(f"{r.name}: task {r.task}, model {r.model} - {r.summary}")
        print(f"  on N devices: {r.scaling_summary()}; switchable: {', '.join(r.switches) or '-'}")
        print(json.dumps(r.defaults, indent=2))
        return 0
    for name in recipe_names():
        r = get_recipe(name)
        print(f"{name:<10} task {r.task:<8} model {r.model:<16} {r.summary}")
        print(f"{'':<10} on N devices: {r.scaling_summary()}")
    return 0


def cmd_instances(args: argparse.Namespace) -> int:
    from daybreak.pricing import catalog

    print(f"{'name':<24} {'$/hour':>8}  {'price of':<10}  hardware")
    for item in catalog().values():
        print(f"{item.name:<24} {item.usd_per_hour:>8.3f}  {item.price_date:<10}  {item.hardware} ({item.provider} {item.region})")
    return 0


__all__ = ["register", "ConfigError"]
