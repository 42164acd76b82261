"""CLI: `daybreak repeat`, `analyze threshold|roofline|scaling`, `lesion`, `evaluate`, `compare`, `report`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daybreak.errors import ConfigError
from daybreak.options import add_rules_argument

DEFAULT_ANALYSIS_DIR = Path("analysis")


def _log(message: str) -> None:
    print(f"daybreak: {message}", file=sys.stderr, flush=True)


def _run_options(p: argparse.ArgumentParser) -> None:
    """The `daybreak run` options a repeat/lesion passes to each of its runs."""
    g = p.add_argument_group("options of each run (as for `daybreak run`)")
    g.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE", default=[],
                   help="override a recipe hyperparameter (repeatable)")
    g.add_argument("--target", help="target accuracy: a fraction in (0, 1] or a percent with %% (default: the task's)")
    g.add_argument("--seed-start", type="seed", default=0, help="first seed (0..2**32-1); runs use seeds S, S+1, ...")
    g.add_argument("--data-dir", type=Path, help="folder holding the task's files")
    g.add_argument("--allow-custom-data", action="store_true", help="accept files that fail the official checksums")
    g.add_argument("--no-download", action="store_true", help="never download")
    g.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N|mps")
    g.add_argument("--amp", default="auto", choices=["auto", "off", "bf16", "fp16"], help="autocast precision")
    g.add_argument("--compile", action="store_true", help="torch.compile the model (compile time counts as init)")
    g.add_argument("--threads", type=int, help="torch intra-op CPU threads")
    g.add_argument("--eval-every", dest="eval_every_epochs", type=int, default=1, metavar="N",
                   help="evaluate every N epochs")
    g.add_argument("--eval-every-steps", type=int, metavar="N", help="evaluate every N optimizer steps instead")
    add_rules_argument(g)
    g.add_argument("--full-schedule", action="store_true",
                   help="train the whole schedule (needed to see thresholds above the target)")
    g.add_argument("--cost-per-hour", type=float, metavar="USD", help="price of the machine per hour")
    g.add_argument("--instance", metavar="NAME", help="take the price from the catalog")


def _repeat_options(args: argparse.Namespace, task: str, out: Path, runs: int, recipe: str | None):
    from daybreak.analysis.repeat import RepeatOptions
    from daybreak.recipes import get_recipe, parse_overrides
    from daybreak.tasks import get_task
    from daybreak.options import resolve_rules
    from daybreak.train.runner import RunConfig, parse_target

    r = get_recipe(recipe or get_task(task).reference_recipe)
    template = RunConfig(
        task=task, recipe=r.name, overrides=parse_overrides(args.overrides, r.defaults),
        target=None if args.target is None else parse_target(args.target), rules=resolve_rules(args),
        data_dir=args.data_dir, allow_custom_data=args.allow_custom_data, download=not args.no_download,
        device=args.device, amp=args.amp, compile=args.compile, threads=args.threads,
        eval_every_epochs=args.eval_every_epochs, eval_every_steps=args.eval_every_steps,
        full_schedule=args.full_schedule, cost_per_hour=args.cost_per_hour, instance=args.instance,
        command=["daybreak", *args.argv],
    )
    return RepeatOptions(run=template, out=out, runs=runs, seed_start=args.seed_start, log=_log)


def register(sub: argparse._SubParsersAction) -> None:
    fmt = argparse.ArgumentDefaultsHelpFormatter

    # --- repeat ------------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "repeat", formatter_class=fmt,
        help="run a recipe over N seeds and summarize the stability of its time-to-target",
        description="Run N seeds of a recipe (each a normal run directory OUT/seed-<n>, run in this process) and "
                    "write OUT/summary.json: time-to-target mean, sample std, coefficient of variation, 95% "
                    "Student-t confidence interval of the mean, MLPerf-style olympic mean (fastest and slowest "
                    "dropped; needs >= 3 reached runs), the fraction of runs that reached the target and the "
                    "epochs-to-target distribution. Runs that do not reach the target are recorded, excluded from "
                    "the time statistics and counted. Running the same command again reuses finished seed "
                    "directories. Exit status 0 if at least one run reached the target, 3 if none did, 5 if a run "
                    "crashed.",
    )
    p.add_argument("task", help="task name (see `daybreak tasks`)")
    p.add_argument("--recipe", help="recipe (default: the task's reference recipe)")
    p.add_argument("--runs", type=int, required=True, metavar="N", help="number of seeds")
    p.add_argument("--out", type=Path, required=True, help="repeat directory (resumable)")
    _run_options(p)
    p.add_argument("--json", action="store_true", help="print summary.json")
    p.set_defaults(func=cmd_repeat)

    # --- analyze -----------------------------------------------------------------------------------------------
    p = sub.add_parser("analyze", help="analyses of runs and sweeps: threshold, roofline, scaling",
                       description="Analyses after the DAWNBench analysis paper. Each writes JSON, Markdown and a "
                                   "PNG plot into --out and prints a table.")
    asub = p.add_subparsers(dest="analysis", metavar="ANALYSIS")
    p.set_defaults(func=lambda a, _p=p: (_p.print_help(), 2)[1])

    t = asub.add_parser(
        "threshold", formatter_class=fmt,
        help="time-to-target of runs for a range of accuracy thresholds",
        description="For each threshold, the time of the first evaluation in each run's history at or above it "
                    "(training clock; '-' if never). Default range: 4 points below the (highest) target up to it, "
                    "in 0.5-point steps. Runs that stopped at their target have no evaluations above it; "
                    "use `daybreak run --full-schedule` runs for higher thresholds. Writes threshold.json, "
                    "threshold.md and threshold.png.",
    )
    t.add_argument("paths", nargs="+", metavar="RUNS", help="run directories, repeat directories or folders of runs")
    t.add_argument("--from", dest="start", type=float, help="lowest threshold, fraction (0.94) or percent (94)")
    t.add_argument("--to", dest="stop", type=float, help="highest threshold, fraction or percent")
    t.add_argument("--step", type=float, help="step in percentage points (default 0.5)")
    t.add_argument("--out", type=Path, default=DEFAULT_ANALYSIS_DIR, help="output directory")
    t.add_argument("--json", action="store_true", help="print threshold.json")
    t.set_defaults(func=cmd_threshold)

    r = asub.add_parser(
        "roofline", formatter_class=fmt,
        help="place runs or sweep configurations on the device's roofline",
        description="FLOPs per step (counted with torch's FlopCounterMode), an ESTIMATE of bytes per step "
                    "(input + 2 x leaf-module activation bytes + 4 x parameters + 2 x gradients + 2 x optimizer "
                    "state; see roofline.md), achieved FLOP/s (run: FLOPs/step x steps to target / time to target; "
                    "sweep: the recorded figure), operational intensity, the measured peak FLOP/s and copy "
                    "bandwidth (`daybreak peak`'s cache, --peak FILE, or measured now when the run used this "
                    "machine's hardware) and utilization. Writes roofline.json, roofline.md and roofline.png.",
    )
    r.add_argument("paths", nargs="+", metavar="RUN_OR_SWEEP", help="run, repeat or throughput sweep directories")
    r.add_argument("--peak", type=Path, metavar="FILE", help="a PeakResult JSON (`daybreak peak --json > FILE`)")
    r.add_argument("--no-measure", action="store_true",
                   help="never measure the peak here; leave utilization empty when nothing is cached")
    r.add_argument("--data-dir", type=Path, help="the task's files, to rebuild a run's input batch "
                                                 "(default: where the run read them; synthetic shapes otherwise)")
    r.add_argument("--out", type=Path, default=DEFAULT_ANALYSIS_DIR, help="output directory")
    r.add_argument("--json", action="store_true", help="print roofline.json")
    r.set_defaults(func=cmd_roofline)

    s = asub.add_parser(
        "scaling", formatter_class=fmt,
        help="speedup and efficiency against devices, from sweeps or runs",
        description="Throughput sweeps: samples/s speedup and efficiency per configuration against its smallest "
                    "device count. Runs at several device counts (world size): time-to-target speedup next to "
                    "time-per-epoch speedup (they differ when the larger global batch needs more epochs). Writes "
                    "scaling.json, scaling.md and scaling.png.",
    )
    s.add_argument("paths", nargs="+", metavar="SWEEP_OR_RUNS", help="sweep, run or repeat directories")
    s.add_argument("--out", type=Path, default=DEFAULT_ANALYSIS_DIR, help="output directory")
    s.add_argument("--json", action="store_true", help="print scaling.json")
    s.set_defaults(func=cmd_scaling)

    # --- lesion ------------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "lesion", formatter_class=fmt,
        help="run a recipe with each optimization switched off in turn, against the full recipe",
        description="Runs the full recipe and, for each switch named in --without (default: all of the recipe's "
                    "switches; see `daybreak recipes NAME`), the recipe with that switch set to false; --runs-per "
                    "seeds each, as repeat directories OUT/full, OUT/no-<switch>. Writes OUT/lesion.json, "
                    "lesion.md and lesion.png: time-to-target and final accuracy of each variant and their ratio "
                    "to the full recipe's. Resumable like `daybreak repeat`.",
    )
    p.add_argument("recipe", help="recipe name (see `daybreak recipes`)")
    p.add_argument("--without", metavar="A,B,...",
                   help="switches to turn off one at a time (default: every switch; '' runs only the full recipe)")
    p.add_argument("--runs-per", type=int, default=1, metavar="N", help="seeds per variant")
    p.add_argument("--out", type=Path, required=True, help="lesion directory (resumable)")
    _run_options(p)
    p.add_argument("--json", action="store_true", help="print lesion.json")
    p.set_defaults(func=cmd_lesion)

    # --- evaluate ----------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "evaluate", formatter_class=fmt,
        help="evaluate a run's checkpoint on another labelled set (generalization)",
        description="Rebuild the run's model from checkpoint.pt, read another data set in the task's format from "
                    "--data-dir with the task's own loader (never downloads) and measure the task's metric on "
                    "its eval split. Without --data-dir: the data the run itself read (result.json's data_source), "
                    "a re-check of the checkpoint. Appends an entry to RUN_DIR/generalization.json with the "
                    "original accuracy and the difference.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--data-dir", type=Path,
                   help="folder with the other set's files (default: the folder the run read)")
    p.add_argument("--allow-custom-data", action="store_true",
                   help="accept files that do not match the official checksums (needed for any other set; not for "
                        "the run's own folder when the run was made with this flag)")
    p.add_argument("--device", default="auto", help="auto|cpu|cuda|cuda:N|mps")
    p.add_argument("--amp", default="auto", choices=["auto", "off", "bf16", "fp16"], help="autocast precision")
    p.add_argument("--threads", type=int, help="torch intra-op CPU threads")
    p.add_argument("--json", action="store_true", help="print the new entry as JSON")
    p.set_defaults(func=cmd_evaluate)

    # --- compare -----------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "compare", formatter_class=fmt,
        help="is A faster to the target than B? Welch's t-test, Mann-Whitney U, Hedges' g",
        description="Compare the time-to-target of two sets of runs: `daybreak compare [options] A1 A2 -- B1 B2` "
                    "or `daybreak compare --a A1 A2 --b B1 B2` (options before the paths). Each side: repeat "
                    "directories, folders of runs or run directories. Runs that did not reach the target are "
                    "excluded from the time tests and counted (Fisher's exact test on the reached fractions). "
                    "Verdict from Welch's two-sided t-test at --alpha; Mann-Whitney U as a distribution-free "
                    "check; effect size Hedges' g of A minus B (negative: A faster).",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="A... -- B...")
    p.add_argument("--a", nargs="+", metavar="PATH", help="side A")
    p.add_argument("--b", nargs="+", metavar="PATH", help="side B")
    p.add_argument("--alpha", type=float, default=0.05, help="significance level")
    p.add_argument("--out", type=Path, metavar="FILE", help="also write the result as JSON here")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_compare)

    # --- report ------------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "report", formatter_class=fmt,
        help="HTML + Markdown report with every table and plot for runs, repeats, lesions and sweeps",
        description="Write OUT/index.html and OUT/report.md (plots as PNG files beside them): runs table and "
                    "accuracy-vs-time curves, stability summaries of repeat directories, threshold sensitivity, "
                    "lesion tables and bars, scaling of sweeps (and of runs at several device counts), the "
                    "roofline of runs and sweep configurations, the inference record of each run (`daybreak "
                    "infer`: latency percentiles, throughput, cost, re-checked accuracy), generalization results. "
                    "A section that cannot be made says why in one line.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="run, repeat, lesion or sweep directories")
    p.add_argument("--out", type=Path, required=True, help="report directory")
    p.add_argument("--peak", type=Path, metavar="FILE", help="PeakResult JSON for the roofline ceilings")
    p.add_argument("--measure-peak", action="store_true",
                   help="measure the peak now if nothing is cached for this machine (takes a few seconds)")
    p.add_argument("--no-roofline", action="store_true", help="skip the roofline (it rebuilds each model)")
    p.set_defaults(func=cmd_report)


# --- commands ---------------------------------------------------------------------------------------------------

def cmd_repeat(args: argparse.Namespace) -> int:
    from daybreak.analysis.repeat import format_repeat, run_repeat
    from daybreak.tasks import get_task
    from daybreak.train.runner import EXIT_FAILED, EXIT_NOT_REACHED

    task = get_task(args.task)
    options = _repeat_options(args, task.name, args.out, args.runs, args.recipe)
    summary = run_repeat(options)
    if args.json:
        print(summary.model_dump_json(indent=2))
    else:
        print(format_repeat(summary))
        print(f"  summary          {args.out / 'summary.json'}")
    if any(r.status == "failed" for r in summary.runs):
        return EXIT_FAILED
    return 0 if summary.n_reached else EXIT_NOT_REACHED


def _print_table(header: list[str], body: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)] if body else [len(h) for h in header]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for row in body:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def cmd_threshold(args: argparse.Namespace) -> int:
    from daybreak.analysis.threshold import analyze_threshold, table_rows, write_threshold

    a = analyze_threshold(args.paths, args.start, args.stop, args.step, command=["daybreak", *args.argv])
    written = write_threshold(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    _print_table(*table_rows(a))
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from daybreak.analysis.roofline import analyze_roofline, table_rows, write_roofline

    a = analyze_roofline(args.paths, peak_file=args.peak, measure=not args.no_measure, data_dir=args.data_dir,
                         command=["daybreak", *args.argv], log=_log)
    written = write_roofline(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    _print_table(*table_rows(a))
    print(f"bytes per step are an estimate: {a.bytes_method}")
    for p in a.points:
        for n in p.notes:
            print(f"note ({p.label}): {n}")
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    from daybreak.analysis.scaling import analyze_scaling, runs_table, throughput_table, write_scaling

    a = analyze_scaling(args.paths, command=["daybreak", *args.argv])
    written = write_scaling(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    if a.throughput:
        _print_table(*throughput_table(a))
        print()
    if a.runs:
        _print_table(*runs_table(a))
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_lesion(args: argparse.Namespace) -> int:
    from daybreak.analysis.lesion import run_lesion, table_rows
    from daybreak.recipes import get_recipe

    recipe = get_recipe(args.recipe)
    base = _repeat_options(args, recipe.task, args.out, args.runs_per, recipe.name)
    if args.runs_per < 1:
        raise ConfigError(f"--runs-per {args.runs_per}: must be >= 1")
    summary = run_lesion(recipe.name, args.without, base)
    if args.json:
        print(summary.model_dump_json(indent=2))
        return 0
    _print_table(*table_rows(summary))
    for v in summary.variants:
        for n in v.notes:
            print(f"note ({v.name}): {n}")
    print(f"wrote {args.out / 'lesion.json'}, lesion.md, lesion.png")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from daybreak.analysis.generalization import evaluate_run, format_entry
    from daybreak.records.generalization import GENERALIZATION_FILE

    entry = evaluate_run(args.run_dir, args.data_dir, allow_custom_data=args.allow_custom_data, device=args.device,
                         amp=args.amp, threads=args.threads, command=["daybreak", *args.argv])
    if args.json:
        print(entry.model_dump_json(indent=2))
    else:
        print(format_entry(entry))
        print(f"  recorded in      {args.run_dir / GENERALIZATION_FILE}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from daybreak.analysis.compare import analyze_compare, format_compare, split_sides
    from daybreak.fileio import atomic_write_text

    if args.a or args.b:
        if args.paths:
            raise ConfigError("use either --a/--b or A... -- B..., not both")
        if not args.a or not args.b:
            raise ConfigError("give both --a and --b")
        a, b = args.a, args.b
    else:
        if not args.paths:
            raise ConfigError("give two sets of runs: daybreak compare A1 A2 -- B1 B2")
        a, b = split_sides(args.paths, args.argv)
    result = analyze_compare(a, b, alpha=args.alpha, command=["daybreak", *args.argv])
    if args.out:
        atomic_write_text(args.out, result.model_dump_json(indent=2) + "\n")
    print(result.model_dump_json(indent=2) if args.json else format_compare(result))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from daybreak.analysis.report import HTML_FILE, build_report

    written = build_report(args.paths, args.out, peak_file=args.peak, measure_peak=args.measure_peak,
                           roofline=not args.no_roofline, command=["daybreak", *args.argv], log=_log)
    print(f"wrote {args.out / HTML_FILE} and {len(written) - 1} more files in {args.out}")
    return 0
