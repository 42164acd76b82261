"""CLI: `daybreak analyze threshold|roofline|scaling|score`, `evaluate`, `compare`, `report` (experiments: daybreak.experiments.cli)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daybreak.commands_index import help_of
from daybreak.errors import ConfigError
from daybreak.options import HelpFormatter

DEFAULT_ANALYSIS_DIR = Path("analysis")


def _log(message: str) -> None:
    print(f"daybreak: {message}", file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.options import add_flags

    fmt = HelpFormatter

    # --- analyze -----------------------------------------------------------------------------------------------
    p = sub.add_parser("analyze", help=help_of("analyze"),
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
    t.add_argument("--from", dest="start", metavar="X", help="lowest threshold: a fraction (0.94) or a percent with %% "
                                                            "(94%%), read like --target")
    t.add_argument("--to", dest="stop", metavar="X", help="highest threshold, read like --target")
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
    add_flags(r, RunConfig, "roofline")
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

    from daybreak.analysis.score import BY
    from daybreak.analysis.stats import NUMERICS, R_MAX
    from daybreak.rules import RULE_SETS

    c = asub.add_parser(
        "score", formatter_class=fmt,
        help="rank recipes, optimizers or labelled runs across tasks by AlgoPerf's score",
        description="AlgoPerf's benchmark score (the integrated performance profile). Each run belongs to a "
                    "submission (--by) and a task. Per task, a submission's time is the median time-to-target of "
                    "its runs there, an unreached run counting as infinitely slow (so the task is solved when more "
                    "than half of them reached it); r = that time / the fastest submission's time on the task. "
                    "Score = the mean over the tasks of max(0, (r_max - r) / (r_max - 1)): 1 for the fastest, 0 at "
                    "r_max times the fastest or slower, 0 for a task not solved or without runs. In [0, 1]; it "
                    "equals the area under the performance profile (the fraction of tasks with r <= tau, tau from "
                    "1 to r_max) / (r_max - 1). Writes score.json, score.md and score.png (the profiles).",
        epilog="Example: daybreak analyze score sgd=runs/digits-sgd sgd=runs/mnist-sgd adamw=runs/digits-adamw "
               "adamw=runs/mnist-adamw --out analysis/score",
    )
    c.add_argument("paths", nargs="+", metavar="RUNS",
                   help="run, repeat, experiment directories or folders of runs; NAME=PATH puts every run under PATH "
                        "in submission NAME (whatever --by says)")
    c.add_argument("--by", default="recipe", choices=BY,
                   help="what a submission is: the run's recipe name, the optimizer its record names (SGD, AdamW, "
                        "...), its experiment arm (experiment.json), or only the NAME=PATH labels (every path "
                        "labelled)")
    c.add_argument("--rules", metavar="{" + ",".join(RULE_SETS) + "}",
                   help="which of the two clocks every record holds to read (default: the runs' headline rule set; "
                        "they must agree)")
    c.add_argument("--r-max", type=float, default=R_MAX, metavar="R",
                   help="the ratio to the fastest at which a task scores 0 (AlgoPerf's 4)")
    c.add_argument("--numerics", default="exact", choices=NUMERICS,
                   help="exact: the integral in closed form (what the leaderboard uses); official: as AlgoPerf's "
                        "scoring code computes it (the trapezoid of the profile at 100 tau from 1 to r_max; up to "
                        "0.00505 from the exact figure). Both are in score.json; this one ranks")
    c.add_argument("--out", type=Path, default=DEFAULT_ANALYSIS_DIR, help="output directory")
    c.add_argument("--json", action="store_true", help="print score.json")
    c.set_defaults(func=cmd_score)

    # --- evaluate ----------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "evaluate", formatter_class=fmt,
        help=help_of("evaluate"),
        description="Rebuild the run's model from checkpoint.pt, read another data set in the task's format from "
                    "--data-dir with the task's own loader (never downloads) and measure the task's metric on "
                    "its eval split. Without --data-dir: the data the run itself read (result.json's data_source), "
                    "a re-check of the checkpoint. Appends an entry to RUN_DIR/generalization.json with the "
                    "original accuracy and the difference.",
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    add_flags(p, RunConfig, "evaluate")
    p.add_argument("--json", action="store_true", help="print the new entry as JSON")
    p.set_defaults(func=cmd_evaluate)

    # --- compare -----------------------------------------------------------------------------------------------
    p = sub.add_parser(
        "compare", formatter_class=fmt,
        help=help_of("compare"),
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
        help=help_of("report"),
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

def print_table(header: list[str], body: list[list[str]]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)] if body else [len(h) for h in header]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for row in body:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def cmd_threshold(args: argparse.Namespace) -> int:
    from daybreak.analysis.threshold import analyze_threshold, table_rows, write_threshold

    from daybreak.options import Opt, parse_target

    start = Opt("--from", "", parse=parse_target).check(args.start)
    stop = Opt("--to", "", parse=parse_target).check(args.stop)
    a = analyze_threshold(args.paths, start, stop, args.step, command=["daybreak", *args.argv])
    written = write_threshold(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    print_table(*table_rows(a))
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_roofline(args: argparse.Namespace) -> int:
    from daybreak.analysis.roofline import analyze_roofline, table_rows, write_roofline

    from daybreak.config import RunConfig
    from daybreak.options import values_for

    data_dir = values_for(RunConfig, args, "roofline")["data_dir"]
    a = analyze_roofline(args.paths, peak_file=args.peak, measure=not args.no_measure, data_dir=data_dir,
                         command=["daybreak", *args.argv], log=_log)
    written = write_roofline(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    print_table(*table_rows(a))
    print(f"bytes per step are an estimate: {a.bytes_method}")
    for p in a.points:
        for n in p.notes:
            print(f"note ({p.label}): {n}")
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_scaling(args: argparse.Namespace) -> int:
    from daybreak.analysis.scaling import analyze_scaling, flag_lines, runs_table, throughput_table, write_scaling

    a = analyze_scaling(args.paths, command=["daybreak", *args.argv])
    written = write_scaling(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    if a.throughput:
        print_table(*throughput_table(a))
        print()
    if a.runs:
        print_table(*runs_table(a))
    for f in flag_lines(a):
        print(f"(!) {f}")
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from daybreak.analysis.score import analyze_score, table_rows, write_score

    from daybreak.config import parse_rules

    try:
        rules = None if args.rules is None else parse_rules(args.rules)  # RunConfig's reader: the same words
    except ValueError as e:
        raise ConfigError(f"--rules {args.rules}: {e}") from None
    a = analyze_score(args.paths, by=args.by, rules=rules, r_max=args.r_max, command=["daybreak", *args.argv],
                      numerics=args.numerics)
    written = write_score(a, args.out)
    if args.json:
        print(a.model_dump_json(indent=2))
        return 0
    print(f"AlgoPerf score, r_max {a.r_max:g}, {len(a.tasks)} task{'s' if len(a.tasks) != 1 else ''}, "
          f"{a.rules} clock, submissions by {a.by}, {a.numerics} numerics (1 = fastest on every task; see score.md "
          "for the rule)")
    print_table(*table_rows(a))
    for n in a.notes:
        print(f"note: {n}")
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from daybreak.infer.run_data import model_run

    model_run(args.run_dir)  # no run directory, or one without a model: one line before torch is imported
    from daybreak.analysis.generalization import evaluate_run, format_entry
    from daybreak.config import RunConfig
    from daybreak.options import values_for
    from daybreak.records.generalization import GENERALIZATION_FILE

    shared = values_for(RunConfig, args, "evaluate")
    entry = evaluate_run(args.run_dir, shared["data_dir"], allow_custom_data=shared["allow_custom_data"],
                         device=shared["device"], amp=shared["amp"], threads=shared["threads"],
                         command=["daybreak", *args.argv])
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
