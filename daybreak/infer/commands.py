"""CLI: `daybreak infer RUN_DIR`: batch-1 latency, offline throughput and cost of a run's checkpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from daybreak.commands_index import help_of
from daybreak.options import HelpFormatter

if TYPE_CHECKING:
    from daybreak.records.inference import InferenceResult


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from daybreak.config import RunConfig
    from daybreak.infer.defaults import DEFAULT_BATCH_SIZE, DEFAULT_REPEATS, DEFAULT_WARMUP
    from daybreak.options import add_flags

    p = sub.add_parser(
        "infer",
        help=help_of("infer"),
        description="DAWNBench's inference metric: classify every example of the task's eval set one at a time "
                    "with the run's checkpoint. Each query is timed from a prepared input tensor in host memory to "
                    "the predicted label on the host (host-to-device copy, forward, argmax, device sync included; "
                    "reading and decoding files from disk excluded). The accuracy of those very predictions must "
                    "meet the run's target, else the result is recorded invalid and the exit status is 3. Writes "
                    "inference.json and dawnbench_inference.json into the run directory.",
        formatter_class=HelpFormatter,
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run directory made by `daybreak run`")
    add_flags(p, RunConfig, "infer")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, metavar="N",
                   help="untimed batch-1 queries before the timed pass")
    p.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, metavar="B",
                   help="batch size of the offline throughput measurement")
    p.add_argument("--throughput-repeats", type=int, default=DEFAULT_REPEATS, metavar="R",
                   help="timed passes over the eval set for throughput (median reported; 0 skips it)")
    p.add_argument("--backend", default="daybreak", choices=["daybreak", "loadgen"],
                   help="loadgen: also run MLCommons LoadGen's SingleStream and Offline scenarios "
                        "(needs daybreak[loadgen]) and store its p90 latency and samples/s")
    p.add_argument("--loadgen-min-queries", type=int, default=1024, metavar="N",
                   help="LoadGen min_query_count (SingleStream queries; samples of the Offline query)")
    p.add_argument("--loadgen-min-duration", type=float, default=0.0, metavar="SECONDS",
                   help="LoadGen min_duration per scenario (MLPerf submissions use 600)")
    p.add_argument("--json", action="store_true", help="print inference.json instead of the summary")
    p.set_defaults(func=cmd_infer)


def cmd_infer(args: argparse.Namespace) -> int:
    from daybreak.config import RunConfig
    from daybreak.infer.config import InferConfig, check_flags
    from daybreak.infer.run_data import model_run
    from daybreak.options import values_for

    shared = values_for(RunConfig, args, "infer")
    quiet = shared.pop("quiet")
    config = InferConfig(
        run_dir=args.run_dir, **shared,
        warmup=args.warmup, batch_size=args.batch_size, throughput_repeats=args.throughput_repeats,
        backend=args.backend, loadgen_min_queries=args.loadgen_min_queries,
        loadgen_min_duration_s=args.loadgen_min_duration, progress=not quiet and sys.stderr.isatty(),
        command=["daybreak", *_argv(args)],
    )
    args.quiet = quiet
    check_flags(config)  # the flags and the run directory are checked before torch is imported
    model_run(config.run_dir)
    from daybreak.infer.latency import EXIT_INVALID, infer

    result = infer(config)
    if args.json:
        print(result.model_dump_json(indent=2))
    elif not args.quiet:
        print(format_inference_summary(result, str(args.run_dir)))
    if not result.valid:
        print(f"daybreak: invalid: {result.reason}", file=sys.stderr)
        return EXIT_INVALID
    return 0


def _argv(args: argparse.Namespace) -> list[str]:
    """The command line as given (``daybreak.cli.main`` keeps it in ``args.argv``; else sys.argv)."""
    argv = getattr(args, "argv", None)
    if argv is None:
        argv = sys.argv[1:]
    return [str(a) for a in argv] if argv and argv[0] == "infer" else ["infer", *map(str, argv)]


def _ms(value: float) -> str:
    return f"{value:.4f}" if value < 1 else f"{value:.3f}" if value < 100 else f"{value:.1f}"


KIND_NAMES = {"gpu": "GPU", "cpu_package": "CPU package", "dram": "DRAM"}


def _joules(j: float) -> str:
    return f"{j:.3g} J" if j < 1000 else f"{j / 1000:.4g} kJ" if j < 1e6 else f"{j / 1e6:.4g} MJ"


def energy_line(r: InferenceResult) -> str:
    """Joules per 10,000 examples of both measurements, or why there are none."""
    e = r.energy
    if e is None:
        return "- (not measured: a record made before daybreak measured energy)"
    parts: list[str] = []
    for name, w in (("batch 1", e.latency), (f"batch {r.throughput.batch_size}" if r.throughput else "offline",
                                              e.throughput)):
        if w is None or w.joules_per_10k is None:
            continue
        extra = [f"{w.mean_power_w:.1f} W"] if w.mean_power_w is not None else []
        if w.joules_per_10k_above_idle is not None:
            extra.append(f"{_joules(w.joules_per_10k_above_idle)} above idle")
        per = " per 10,000 examples" if not parts else ""
        parts.append(f"{_joules(w.joules_per_10k)}{per} at {name}" + (f" ({', '.join(extra)})" if extra else ""))
    if not parts:
        reasons = (e.latency.unavailable if e.latency is not None and e.latency.unavailable else e.unavailable)
        return "unavailable: " + ("; ".join(sorted(set(reasons.values()))) or "no counter")[:300]
    covers = "+".join(KIND_NAMES.get(k, k) for k in e.covers) or "no total"
    idle = f", idle {e.idle_power_w:.1f} W" if e.idle_power_w is not None else ""
    return ", ".join(parts) + f"; {covers}{idle}"


def format_inference_summary(r: InferenceResult, run_dir: str | None = None) -> str:
    verdict = (f"VALID (accuracy {r.accuracy * 100:.2f}% >= target {r.target * 100:.2f}% {r.metric})" if r.valid
               else f"INVALID ({r.reason})")
    s, lat = r.settings, r.latency
    rows = [
        ("examples", f"{r.n_examples:,} ({r.task} eval set, batch 1, after {s.warmup} untimed warm-up queries)"),
        ("data", (r.data_source or "-") + ("" if r.data_official else " (custom data)")),
        ("latency (ms)", f"mean {_ms(lat.mean_ms)}  p50 {_ms(lat.p50_ms)}  p90 {_ms(lat.p90_ms)}  "
                         f"p99 {_ms(lat.p99_ms)}  max {_ms(lat.max_ms)}  min {_ms(lat.min_ms)}"),
        ("accuracy", ", ".join(f"{name} {value * 100:.2f}%" for name, value in (r.metrics or {r.metric: r.accuracy}).items())
                     + (f" (checkpoint's evaluation: {r.checkpoint_accuracy * 100:.2f}%)"
                        if r.checkpoint_accuracy is not None else "")),
    ]
    if r.throughput is not None:
        t = r.throughput
        rows.append(("throughput", f"{t.examples_per_s:,.0f} examples/s at batch {t.batch_size} "
                                   f"(median of {t.repeats} passes over the eval set)"))
    if r.cost_per_example_usd is not None:
        where = f" ({r.instance}, price of {r.price_date})" if r.instance else ""
        rows.append(("cost", f"${r.cost_per_example_usd:.3g} per example, ${r.cost_per_10k_usd:.4g} per 10,000 "
                             f"at ${r.cost_per_hour:.3f}/h{where}"))
    else:
        rows.append(("cost", "- (pass --cost-per-hour or --instance)"))
    rows.append(("energy", energy_line(r)))
    if r.loadgen is not None:
        parts = []
        ss, off = r.loadgen.single_stream, r.loadgen.offline
        if ss is not None:
            parts.append(f"SingleStream p90 {_ms(ss.p90_ms) if ss.p90_ms is not None else '-'} ms "
                         f"({'VALID' if ss.valid else 'INVALID'}, {ss.queries} queries)")
        if off is not None:
            sps = f"{off.samples_per_s:,.0f}" if off.samples_per_s is not None else "-"
            parts.append(f"Offline {sps} samples/s ({'VALID' if off.valid else 'INVALID'}, {off.queries} samples)")
        rows.append(("loadgen", "; ".join(parts) + f"  [logs in {r.run_id}/loadgen/]"))
    rows += [
        ("setup", f"device {s.device}, amp {s.amp}, compile {'on' if s.compile else 'off'}, threads {s.threads}"
                  + (", test-time predict" if s.test_time_predict else "")),
        ("system", f"{r.system.hardware_summary()}; torch {r.system.torch}"),
        ("clock", "host-memory input -> label on host; H2D copy, forward, argmax, sync included; "
                  "disk reads/decoding and prepare excluded"),
    ]
    if run_dir:
        rows.append(("written", f"{run_dir}/inference.json, {run_dir}/dawnbench_inference.json"))
    width = max(len(k) for k, _ in rows)
    lines = [f"daybreak infer {r.run_id}: {r.task} / {r.recipe} {verdict}"]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    return "\n".join(lines)
