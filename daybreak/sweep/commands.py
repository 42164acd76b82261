"""CLI: `daybreak throughput` (DLPerf-style sweeps) and `daybreak peak` (the device's roofline ceilings)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, cast

from daybreak.commands_index import help_of
from daybreak.errors import ConfigError
from daybreak.options import HelpFormatter

if TYPE_CHECKING:
    from daybreak.records.throughput import Amp, ThroughputResult

EXIT_OK = 0
EXIT_SOME_FAILED = 1  # a configuration failed or timed out (out-of-memory results are not failures)

_TRUE = ("on", "1", "true", "yes")
_FALSE = ("off", "0", "false", "no")


def _int_list(flag: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected comma-separated integers, e.g. 32,64") from None
    if not values:
        raise ConfigError(f"{flag}: give at least one value")
    return values


def _amp_list(text: str) -> list[Amp]:
    values = [v.strip().lower() for v in text.split(",") if v.strip()]
    aliases = {"fp32": "off", "none": "off", "no": "off", "false": "off"}
    values = [aliases.get(v, v) for v in values]
    bad = [v for v in values if v not in ("off", "bf16", "fp16")]
    if bad or not values:
        raise ConfigError(f"--amp {text!r}: choose from off, bf16, fp16 (comma-separated)")
    return cast("list[Amp]", values)  # each one checked above


def _bool_list(text: str) -> list[bool]:
    out = []
    for v in (v.strip().lower() for v in text.split(",") if v.strip()):
        if v in _TRUE:
            out.append(True)
        elif v in _FALSE:
            out.append(False)
        else:
            raise ConfigError(f"--compile {text!r}: choose from off, on (comma-separated)")
    if not out:
        raise ConfigError("--compile: give off, on or off,on")
    return out


def _one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make argparse's own errors (a bad int, a missing --model) one line on stderr and exit 2, like ConfigError,
    instead of the usage text - unless the parser class already does (the CLI's own parser class)."""
    if type(parser).error is not argparse.ArgumentParser.error:
        return parser

    def error(message: str) -> NoReturn:
        print(f"daybreak: error: {parser.prog.split()[-1]}: {message} (see --help)", file=sys.stderr)
        raise SystemExit(2)

    parser.error = error  # type: ignore[method-assign]  # on purpose: this parser's errors on one line
    return parser


def _program(text: str | None) -> list[str] | None:
    import shlex

    if text is None:
        return None
    try:
        return shlex.split(text)
    except ValueError as e:
        raise ConfigError(f"--program {text!r}: {e}") from None


def _seconds(flag: str, value: float) -> float:
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{flag} {value:g}: must be a number of seconds > 0")
    return float(value)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.executors import ExecutorOptions
    from daybreak.options import add_dataclass_flags, add_flags

    p = sub.add_parser(
        "throughput",
        help=help_of("throughput"),
        description="Measure training or inference throughput (samples/s) of a model for every combination of "
                    "per-device batch size, precision, torch.compile and device count, each in a fresh process "
                    "(torchrun + DDP for several devices). Skips --warmup steps, times --steps steps --repeats "
                    "times with the device synchronized and reports the median; also FLOPs per step, achieved "
                    "FLOP/s, utilization of the measured peak (`daybreak peak`), MFU against the GPU's datasheet "
                    "peak (GPUs of daybreak's catalog), joules per sample from the energy counters where they "
                    "exist, peak memory and the speedup over one device. --frameworks runs the same grid through "
                    "PyTorch, JAX, TensorFlow, Paddle and MXNet reference programs, --program through any program that "
                    "reports with throughput_log: one protocol for all, each repeat a fresh process, the device and "
                    "threads each program reports checked, every window's loss and clock checked, daybreak's model "
                    "FLOPs in every row. Each row records how busy the machine was. Results go to DIR/results.jsonl "
                    "(appended per configuration; re-running skips what is there), results.csv, results.md and plots.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("--model", required=True, help="resnet50, bert_base or a task model (digits_cnn, mnist_cnn, "
                                                  "airbench_net); with --program, the name of what it trains")
    p.add_argument("--frameworks", default="pytorch",
                   help="who trains the model, comma-separated: pytorch (daybreak's models), jax, tensorflow, paddle, "
                        "mxnet (their reference programs, resnet50 and bert_base; pip install 'daybreak[jax]' ...; "
                        "mxnet in its own interpreter: scripts/mxnet-venv.sh, DAYBREAK_MXNET_PYTHON); --compile on "
                        "is their compiler over the whole training step (torch.compile, XLA; Paddle: CINN; MXNet: "
                        "hybridize), off is eager")
    p.add_argument("--program", metavar="CMD",
                   help="time this training program instead (one string, e.g. \"python train.py --fast\"): it is "
                        "launched --repeats times as fresh processes and reports windows of steps with "
                        "throughput_log (the protocol: docs/how-to/compare-frameworks.md)")
    p.add_argument("--protocol", choices=["auto", "worker", "program"], default="auto",
                   help="how PyTorch's repeats are timed: worker (one process, the repeats timed windows after one "
                        "warm-up; DDP, inference, --data, energy) or program (each repeat a fresh process of "
                        "PyTorch's reference program with its own warm-up, as every other framework); auto: "
                        "program as soon as another framework or --program is in the sweep, else worker")
    p.add_argument("--min-window", type=float, default=1.0, metavar="SECONDS",
                   help="program protocol: each window a program reports lasts at least this long, so that "
                        "daybreak's clock can judge it")
    p.add_argument("--mode", choices=["train", "infer"], default="train",
                   help="train: forward+backward+optimizer step; infer: forward only")
    p.add_argument("--batch-sizes", default="32", help="per-device batch sizes, comma-separated")
    p.add_argument("--amp", default="off", help="precisions, comma-separated: off (fp32), bf16, fp16")
    p.add_argument("--compile", default="off", help="the compiler over the whole training step (forward, loss, "
                                                    "backward, optimizer): off, on or off,on; torch.compile for "
                                                    "PyTorch")
    p.add_argument("--devices", default="1", help="devices (processes) per node, comma-separated; on CPU several "
                                                  "processes share the cores (gloo)")
    p.add_argument("--nodes", type=int, default=1, help="nodes; run the same command on each, with its --node-rank")
    p.add_argument("--seq-len", type=int, help="token models: sequence length (default 128)")
    p.add_argument("--image-size", type=int, help="image models: input height = width (default: the model's, "
                                                  "224 for resnet50)")
    p.add_argument("--data", metavar="TASK", help="feed this task's real training data (prepared by its recipe, "
                                                  "kept on the device) instead of synthetic inputs")
    p.add_argument("--channels-last", action="store_true", help="NHWC model and inputs")
    add_flags(p, RunConfig, "throughput")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (compilation happens here)")
    p.add_argument("--steps", type=int, default=100, help="steps per timed repeat")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats; the median is reported")
    p.add_argument("--find-max-batch", action="store_true",
                   help="after an out-of-memory error halve the batch size until it fits; record the largest")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per configuration before it is killed")
    p.add_argument("--peak-budget", type=float, default=60.0, metavar="SECONDS",
                   help="time for the peak measurements utilization needs (only the precisions and threads per "
                        "process this sweep uses, and only what is not cached)")
    p.add_argument("--out", type=Path, help="results folder (default: throughput/MODEL-MODE)")
    p.add_argument("--force", action="store_true", help="re-measure configurations already in the folder")
    p.add_argument("--retry-failed", action="store_true", help="re-measure configurations recorded as failed or "
                                                               "timed out")
    p.add_argument("--no-plots", action="store_true", help="skip the matplotlib plots")
    add_dataclass_flags(p, ExecutorOptions, "where the configurations run (--executor slurm: one job per configuration, "
                                            "each measured on its node)")
    p.add_argument("--json", action="store_true", help="print the sweep's results (one ThroughputResult per "
                                                        "configuration) as a JSON list instead of the table")
    p.set_defaults(func=cmd_throughput)
    _one_line_errors(p)

    p = sub.add_parser(
        "peak",
        help=help_of("peak"),
        description="The two roofline ceilings: square matmuls per precision (n adapted to the measured speed, "
                    "median of repeats) and the bandwidth of a large tensor copy (bytes read + written / time), "
                    "all within --budget seconds. A precision much slower than fp32 (no native support: "
                    "emulated) is recorded as such, not as a ceiling. Cached per machine (and thread count) in "
                    "the user cache dir; `daybreak throughput` uses the cache for utilization.",
        formatter_class=HelpFormatter,
    )
    add_flags(p, RunConfig, "peak")
    p.add_argument("--force", action="store_true", help="re-measure even if cached")
    p.add_argument("--precisions", default="fp32,tf32,bf16,fp16",
                   help="which matmul precisions, comma-separated (tf32: fp32 operands on TF32 tensor cores, sm_80+)")
    p.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                   help="wall time for the whole measurement; sizes and repeats shrink to fit it")
    p.add_argument("--size", type=int, help="largest matmul n (default 2048 on CPU, 8192 on GPU; smaller when "
                                            "the device is slow or the budget tight); implies --force")
    p.add_argument("--repeats", type=int, default=5, help="repeats per measurement; implies --force if changed")
    p.add_argument("--json", action="store_true", help="print the PeakResult JSON")
    p.set_defaults(func=cmd_peak)
    _one_line_errors(p)


def cmd_throughput(args: argparse.Namespace) -> int:
    from daybreak.config import RunConfig
    from daybreak.options import values_for
    from daybreak.records.throughput import CSV_FILE, MARKDOWN_FILE, RESULTS_FILE
    from daybreak.sweep.grid import SweepOptions
    from daybreak.sweep.sweep import run_sweep
    from daybreak.sweep.views import SPEEDUP_PLOT, THROUGHPUT_PLOT

    shared = values_for(RunConfig, args, "throughput")
    args.quiet = shared["quiet"]
    options = SweepOptions(
        model=args.model, mode=args.mode, out=args.out or Path("throughput") / f"{args.model}-{args.mode}",
        batch_sizes=_int_list("--batch-sizes", args.batch_sizes), amps=_amp_list(args.amp),
        compiles=_bool_list(args.compile), devices=_int_list("--devices", args.devices), nodes=args.nodes,
        node_rank=shared["node_rank"], rdzv_endpoint=shared["rdzv_endpoint"],
        seq_len=args.seq_len, image_size=args.image_size, data=args.data, data_dir=shared["data_dir"],
        allow_custom_data=shared["allow_custom_data"], download=shared["download"], channels_last=args.channels_last,
        device=shared["device"], warmup=args.warmup, steps=args.steps, repeats=args.repeats, threads=shared["threads"],
        find_max_batch=args.find_max_batch, force=args.force, retry_failed=args.retry_failed,
        timeout_s=_seconds("--timeout", args.timeout), peak_budget_s=_seconds("--peak-budget", args.peak_budget),
        plots=not args.no_plots, quiet=args.quiet,
        frameworks=[f for f in args.frameworks.split(",") if f.strip()], program=_program(args.program),
        protocol=args.protocol, min_window_s=_seconds("--min-window", args.min_window),
    )
    from daybreak.executors import ExecutorOptions, check_options
    from daybreak.options import dataclass_from_args

    executor = dataclass_from_args(ExecutorOptions, args)
    check_options(executor)
    if executor.executor == "local":
        if executor.parallel not in (None, 1):
            raise ConfigError("--parallel: a local sweep measures one configuration at a time (configurations side "
                              "by side would slow each other); use --executor slurm to spread them")
        outcome = run_sweep(options)
    else:
        from daybreak.sweep.attempt import log_to_stderr
        from daybreak.sweep.remote import run_sweep_remote

        outcome = run_sweep_remote(options, executor, list(args.argv),
                                   (lambda m: None) if options.quiet else log_to_stderr)
    if shared["node_rank"] != 0:
        return EXIT_OK
    if args.json:
        print("[" + ",\n".join(row.model_dump_json(indent=2) for row in outcome.rows) + "]")
    elif not args.quiet:
        files = [RESULTS_FILE, CSV_FILE, MARKDOWN_FILE] + [
            f for f in (THROUGHPUT_PLOT, SPEEDUP_PLOT) if (outcome.out / f).exists()]
        print(f"{outcome.measured} measured, {outcome.skipped} already there, {outcome.failed} not ok; "
              f"results in {outcome.out}/: {', '.join(files)}")
        for row in outcome.rows:
            if row.status == "ok":
                extra = ""
                if row.speedup is not None and row.world_size > 1:
                    extra = (f"  {row.speedup:.2f}x ({(row.scaling_efficiency or 0):.0%} efficiency, "
                             f"basis {row.efficiency_basis})")
                print(f"  {row.config.label():<60} {row.samples_per_s:>12,.1f} samples/s{extra}"
                      + ("  (!)" if row.flags else ""))
                figures = _figures(row)
                if figures:
                    print(f"      {figures}")
                for flag in row.flags:
                    print(f"      (!) {flag}")
            else:
                print(f"  {row.config.label():<60} {row.status.upper()}: {row.error}")
    bad = [r for r in outcome.rows if r.status in ("failed", "timeout")]
    return EXIT_SOME_FAILED if bad else EXIT_OK


def _figures(row: ThroughputResult) -> str:
    """Utilization of the measured peak next to MFU against the datasheet peak, and energy per sample."""
    from daybreak.records.throughput import MFU_NOTE, format_joules_per_sample, format_mfu

    parts = []
    if row.utilization is not None:
        parts.append(f"utilization {row.utilization:.1%} of the measured {row.peak_precision} peak"
                     + (" (!)" if row.utilization > 1 else ""))
    if row.mfu is not None:
        parts.append(f"MFU {format_mfu(row)} datasheet peak")
    else:
        why = next((n[len(MFU_NOTE):] for n in row.notes if n.startswith(MFU_NOTE)), None)
        if why:
            parts.append(f"no datasheet MFU ({why.split(';')[0]})")
    if row.joules_per_sample is not None:
        parts.append(f"{format_joules_per_sample(row)} per sample, {row.mean_power_w:.1f} W"
                     if row.mean_power_w is not None else f"{format_joules_per_sample(row)} per sample")
    elif row.energy_unavailable:
        parts.append("energy unavailable (see results.jsonl)")
    return "; ".join(parts)


def cmd_peak(args: argparse.Namespace) -> int:
    from daybreak.config import RunConfig
    from daybreak.options import values_for

    shared = values_for(RunConfig, args, "peak")  # the flags are checked before torch is imported
    args.device, args.threads = shared["device"], shared["threads"]
    budget = _seconds("--budget", args.budget)
    if args.repeats < 1:
        raise ConfigError(f"--repeats {args.repeats}: must be >= 1")
    if args.size is not None and args.size < 16:
        raise ConfigError(f"--size {args.size}: must be >= 16")
    import torch

    from daybreak.measure.device import select_device, set_threads
    from daybreak.sweep.peak import check_precisions, get_peak
    from daybreak.records.throughput import format_peak

    precisions = check_precisions(args.precisions.split(","))
    device = select_device(args.device)
    set_threads(args.threads)
    force = args.force or args.size is not None or args.repeats != 5
    kwargs = dict(repeats=args.repeats)
    if args.size is not None:
        kwargs["size"] = args.size

    def log(message: str) -> None:
        if not args.json:
            print(message, file=sys.stderr, flush=True)

    result = get_peak(device, force=force, log=log, precisions=precisions, budget_s=budget, **kwargs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(result.model_dump_json(indent=2) if args.json else format_peak(result))
    return EXIT_OK
