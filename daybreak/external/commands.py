"""CLI: `daybreak time` - time any program's training run from its MLPerf log stream; `daybreak check-mllog` - MLPerf's
compliance checker on a run's mllog."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from daybreak.commands_index import help_of
from daybreak.errors import ConfigError

if TYPE_CHECKING:
    from daybreak.records.run import RunResult

DESCRIPTION = """\
Run PROGRAM as a child process and time it to the target accuracy from the MLPerf `:::MLLOG` records it
prints (on stdout or stderr, anywhere in a line). Its records make a phase timeline: init_start..init_stop is
the program's init (model_init; it may include loading data), run_start..run_stop is training less
eval_start..eval_stop (eval) and checkpoint_start..checkpoint_stop (record). Both rule sets read it and both
figures are recorded; --rules picks the headline:
  dawnbench  from the program's launch (--log: init_start) to the end of the first evaluation at or above
             the target, evaluation and checkpoint intervals excluded (a program that logs no eval intervals
             gets a warning: its evaluation counts as training)
  mlperf     from run_start, nothing excluded, to run_stop when the run stops with status success right after
             its target evaluation (MLPerf's own result, run_stop - run_start), else to the end of the first
             evaluation at or above the target
The program's time_ms timestamps are cross-checked against daybreak's wall clock: a run whose timestamps
disagree by more than --clock-tolerance is recorded as failed. Its output passes through and is kept in
DIR/program.log; the record is the same run directory as `daybreak run` (result.json, dawnbench.json,
dawnbench.tsv, mllog.log) plus external.json. With --log FILE the record is computed from an existing mllog
file instead (no wall clock cross-check; the run is then unofficial); the run's system is then what the log
declares (submission_platform, ...), and the machine that analysed it is recorded as analyzed_on.

A log of an MLPerf Training benchmark (its submission_benchmark: resnet, bert, llama2_70b_lora, gpt3,
stable_diffusion, ...) needs no --task: its metric, direction, unit and target for the round (--round, else the
log's training_results_v<round> folder) come from daybreak's table of MLPerf's rules, and --rules mlperf gives
MLPerf's own verdict: reached when run_stop says success, the initialization stayed under the round's limit and
(closed division) an evaluation met the target; the time is then run_stop - run_start. The DAWNBench reading (the
first evaluation meeting the target before run_stop) is recorded beside it. A daybreak run's own mllog names its
task (daybreak_<task>).

Exit status: 0 reached, 3 not reached, 5 failed (crash, no run_start, untrusted timestamps), 130 interrupted,
2 usage errors."""

EPILOG = """\
examples:
  daybreak time --task digits -- python train.py --epochs 20
  daybreak time --task cifar10 --stop-at-target --instance aws-p3.2xlarge -- ./run_and_time.sh
  daybreak time --task mnist --target 98% --log results/mllog.txt
  daybreak time --rules mlperf --log training_results_v5.0/ASUSTeK/results/ESC_N8_E11_n2/llama2_70b_lora/result_3.txt
  daybreak time --rules mlperf --round v4.0 --log result_0.txt
  daybreak check-mllog runs/digits-external-20250101-120000"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.mlperf_benchmarks import rounds_text
    from daybreak.options import add_flags

    p = sub.add_parser(
        "time",
        help=help_of("time"),
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    add_flags(p, RunConfig, "time")
    p.add_argument("--stop-at-target", action="store_true",
                   help="end the program (SIGTERM to its process group, SIGKILL after --grace-s) once it reaches "
                        "the target")
    p.add_argument("--grace-s", type=float, default=10.0, metavar="S",
                   help="seconds between SIGTERM and SIGKILL when ending the program (default: 10)")
    p.add_argument("--clock-tolerance", default="5%+2s", metavar="TOL",
                   help="how far the program's timestamp intervals may differ from the wall clock's: percent of "
                        "the wall interval plus seconds, e.g. '5%%+2s' (the default), '10%%', '3s'")
    p.add_argument("--accuracy-unit", default="auto", choices=["auto", "fraction", "percent"],
                   help="a daybreak task's eval_accuracy values (default: auto, which reads a log as percent when any "
                        "value is above 1); an MLPerf benchmark's unit is its definition's")
    p.add_argument("--round", metavar="vX.Y",
                   help=f"with --log of an MLPerf benchmark: the MLPerf Training round whose rules apply "
                        f"({rounds_text()}; default: the log's training_results_v<round> folder, else every round with "
                        "the benchmark when they agree on the log)")
    p.add_argument("--log", type=Path, metavar="FILE",
                   help="compute the record from an existing mllog file instead of running a program")
    p.add_argument("--json", action="store_true", help="print result.json instead of the summary")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS ...]",
                   help="the program to run and its arguments, after --")
    p.set_defaults(func=cmd_time)

    c = sub.add_parser(
        "check-mllog",
        help=help_of("check-mllog"),
        description=CHECK_DESCRIPTION, formatter_class=_Formatter)
    c.add_argument("path", type=Path, metavar="RUN_OR_LOG", help="a run directory (its mllog.log) or an mllog file")
    c.add_argument("--round", metavar="vX.Y",
                   help=f"an MLPerf benchmark's log: the round whose rules apply ({rounds_text()}; default: the "
                        "log's training_results_v<round> folder, else the latest whose target fits the log)")
    c.add_argument("--ruleset", metavar="X.Y.Z",
                   help="the mlperf-logging training ruleset to check against (default: the round's; daybreak's "
                        "tasks: the newest the installed mlperf-logging has)")
    c.add_argument("--write-config", type=Path, metavar="DIR",
                   help="keep daybreak's checker configuration in DIR, for `python -m mlperf_logging."
                        "compliance_checker --config DIR/common.yaml LOG`")
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    c.set_defaults(func=cmd_check_mllog)


CHECK_DESCRIPTION = """\
Run mlperf-logging's compliance checker (the one MLPerf's result summarizer runs on every result file) on an mllog.
A log of an MLPerf Training benchmark is checked by its round's own configuration (--round, else the log's
training_results_v<round> folder, else the latest round with the benchmark whose target fits the log). A `daybreak
run`'s mllog names a daybreak task (submission_benchmark daybreak_<task>), which MLPerf's configs refuse: daybreak
writes a checker configuration for its tasks (the round's common rules; the task's target, metric, batch size and
seed from the task registry) and runs the same checker with it. Exit status: 0 the log passes, 1 it does not, 2
usage errors."""


def cmd_check_mllog(args: argparse.Namespace) -> int:
    import json

    from daybreak.external.compliance import check_mllog

    result = check_mllog(args.path, round_option=args.round, ruleset_option=args.ruleset,
                         config_dir=args.write_config)
    if args.json:
        print(json.dumps({"log": str(result.log), "benchmark": result.benchmark, "ruleset": result.ruleset,
                          "config": result.config, "passed": result.passed, "messages": result.messages,
                          "notes": result.notes}, indent=2))
    else:
        verdict = "PASSES" if result.passed else f"FAILS ({len(result.messages)} message(s))"
        print(f"{result.log}: {result.benchmark} {verdict} mlperf-logging's compliance checker, ruleset "
              f"{result.ruleset}, config: {result.config}")
        for message in result.messages:
            print(f"  {message}")
        for note in result.notes:
            print(f"  note: {note}")
        if args.write_config is not None:
            print(f"  the same check: python -m mlperf_logging.compliance_checker --usage training --ruleset "
                  f"{result.ruleset} --config {args.write_config.resolve() / 'common.yaml'} {result.log}")
    return 0 if result.passed else 1


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def cmd_time(args: argparse.Namespace) -> int:
    from daybreak.config import RunConfig
    from daybreak.external.mllog_clock import parse_tolerance
    from daybreak.options import values_for
    from daybreak.external.config import TimeConfig
    from daybreak.external.timer import time_command, time_log
    from daybreak.records.run import EXIT_CODES

    command = list(args.program)
    if command and command[0] == "--":
        command = command[1:]
    if args.log is not None and command:
        raise ConfigError("give either a program after -- or --log FILE, not both")
    if args.log is None and not command:
        raise ConfigError("give the program to time after --, e.g. `daybreak time --task digits -- python "
                          "train.py`, or --log FILE")
    if args.log is not None and args.stop_at_target:
        raise ConfigError("--stop-at-target needs a program to stop; it does not apply to --log")
    if args.log is None and not hasattr(args, "task"):
        raise ConfigError("--task is required: the task whose target applies (see `daybreak tasks`); with --log FILE "
                          "the log's submission_benchmark names it")
    shared = values_for(RunConfig, args, "time")
    shared["task"] = getattr(args, "task", None)  # None: the log's submission_benchmark names it
    config = TimeConfig(
        **shared, command=command, log=args.log, stop_at_target=args.stop_at_target, round=args.round,
        grace_s=args.grace_s, tolerance=parse_tolerance(args.clock_tolerance), unit=args.accuracy_unit,
        invocation=["daybreak", *getattr(args, "argv", sys.argv[1:])] if args.log is not None else [],
    )
    result = time_log(config) if args.log is not None else time_command(config)
    for warning in result.warnings:
        print(f"daybreak: warning: {warning}", file=sys.stderr)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif not config.quiet:
        print(summary(result, config.out))
    if result.status != "reached":
        print(f"daybreak: {result.status}: {result.message}", file=sys.stderr)
    return EXIT_CODES[result.status]


def summary(result: RunResult, run_dir: Path | None) -> str:
    from daybreak.errors import RecordError
    from daybreak.external.recorder import PROGRAM_LOG
    from daybreak.records.external import ExternalRecord
    from daybreak.records.summary import format_summary

    text = format_summary(result, str(run_dir) if run_dir else None)
    extra: list[str] = []
    try:
        ext = ExternalRecord.load(run_dir) if run_dir else None
    except RecordError:
        ext = None
    clock = ext.clock_check if ext is not None else None
    if ext is not None and ext.mode == "log":
        extra.append("  clock check      not done: timestamps read from a log file (--log)")
    elif clock is not None and clock.checked:
        state = "ok" if clock.trusted else "FAILED"
        extra.append(f"  clock check      {state}: program vs wall clock, max deviation "
                     f"{clock.max_deviation_s:.3f} s over {clock.events_checked} record(s), "
                     f"tolerance {clock.tolerance}")
    if ext is not None:
        bad = ext.malformed_records
        extra.append(f"  mllog records    {ext.mllog_records} read" + (f", {bad} malformed" if bad else "")
                     + (f"; program {ext.exit}" if ext.exit else "")
                     + (" (ended by --stop-at-target)" if ext.stopped_by_daybreak else ""))
        if ext.program_log and run_dir:
            extra.append(f"  program output   {Path(run_dir) / PROGRAM_LOG}")
    return text + ("\n" + "\n".join(extra) if extra else "")


__all__ = ["register", "cmd_time", "cmd_check_mllog", "summary"]
