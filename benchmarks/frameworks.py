"""DLPerf's question on this machine: which framework trains ResNet-50 and BERT-base fastest, with and without its
compiler (torch.compile, XLA; Paddle: CINN) and in bf16 - asked as an experiment, one protocol for every framework.

    python benchmarks/frameworks.py [--out benchmarks/results/frameworks] [--rounds 7] [--threads 1] [--quick]
    DAYBREAK_MXNET_PYTHON=.venv-mxnet/bin/python python benchmarks/frameworks.py ...   # MXNet in its own Python

The protocol (DLPerf's by default: 20 warm-up + 100 timed steps, the median of 7 repeats): every framework,
PyTorch included, runs as a program (`daybreak throughput --protocol program`: PyTorch's reference program is
daybreak's own model and step), each repeat a fresh process with its own warm-up, at --threads threads per process
(1 by default: on a machine shared with other work, more threads per process measure contention), the device and
threads each program reports checked by daybreak, every window's loss and clock checked. The repeats are ROUNDS:
round k runs every configuration once (`daybreak throughput --repeats 1 --out OUT/MODEL/round-k`), the frameworks in
an order rotated each round, so a slow spell of the machine hits every framework alike; an interrupted run resumes
(each round's folder is a resumable sweep).

Then, per model: OUT/MODEL/results.jsonl and results.md (each configuration's rounds merged into one row: the median
of the rounds, min-max, the model FLOPs shared by every framework, the load), and the table printed and written to
OUT/table.md: samples/s, the spread, the ratio to PyTorch eager as a paired ratio over the rounds with its 95%
confidence interval (daybreak.analysis.paired: the geometric mean of the per-round ratios, a Student-t interval),
each framework's own FLOP count beside daybreak's model FLOPs, and how much of the CPUs other processes took. A
table whose rows were measured while other processes took more than 10% of the CPUs says so, and names no
"fastest". Frameworks whose extra is not installed (MXNet: whose interpreter is not there, scripts/mxnet-venv.sh) are
left out with a line saying so.

Time: each configuration x round is a process start, a warm-up (compilation included) and --steps steps. At the
defaults, on a 2-core CPU where a PyTorch ResNet-50 step at 64 px, batch 8, 1 thread takes ~0.7 s, a model's 20
configurations (5 frameworks x 2 precisions x compiler on or off) x 7 rounds take about 3.5 hours.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

REPO = Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "jax", "tensorflow", "paddle", "mxnet")
CONFIDENCE = 0.95

if TYPE_CHECKING:
    from daybreak.records.throughput import ThroughputResult


def merged(rounds: list["ThroughputResult"]) -> "ThroughputResult":
    """One configuration's rows of every round (each one fresh process) as one row of ``len(rounds)`` repeats."""
    from daybreak.records.run import MeasurementContext

    first = rounds[0]
    bad = next((r for r in rounds if r.status != "ok"), None)
    config = first.config.model_copy(update=dict(repeats=len(rounds)))
    if bad is not None:
        return bad.model_copy(update=dict(config=config))
    times = [t for r in rounds for t in r.times_s]
    median = statistics.median(times)
    samples = (first.global_batch_size or 0) * config.steps
    achieved = first.flops_per_step * config.steps / median if first.flops_per_step else None
    contexts = [r.context for r in rounds if r.context is not None]
    busy = [c.busy_fraction for c in contexts if c.busy_fraction is not None]
    context = MeasurementContext(
        load_avg_before=contexts[0].load_avg_before if contexts else None,
        load_avg_after=contexts[-1].load_avg_after if contexts else None,
        own_cpu_s=sum(c.own_cpu_s or 0.0 for c in contexts), other_cpu_s=sum(c.other_cpu_s or 0.0 for c in contexts),
        busy_fraction=max(busy) if busy else None, warnings=[w for c in contexts for w in c.warnings])
    cores = [r.cores_used for r in rounds if r.cores_used is not None]
    return first.model_copy(update=dict(
        config=config, times_s=times, median_time_s=median, min_time_s=min(times), max_time_s=max(times),
        samples_per_s=samples / median, samples_per_s_min=samples / max(times), samples_per_s_max=samples / min(times),
        achieved_flops_per_s=achieved,
        utilization=achieved / first.peak_flops_per_s if achieved and first.peak_flops_per_s else None,
        cores_used=statistics.median(cores) if cores else None, context=context,
        notes=list(dict.fromkeys(n for r in rounds for n in r.notes if not n.startswith("measured on a busy"))),
        command=first.command))


def merged_rows(per_round: list[dict[tuple, "ThroughputResult"]]) -> list["ThroughputResult"]:
    """Every configuration of the rounds, its rounds merged (``merged``), in the order they first appear."""
    keys = list(dict.fromkeys(key for rows in per_round for key in rows))
    return [merged([rnd[key] for rnd in per_round if key in rnd]) for key in keys]


def model_table(model: str, shape: str, threads: int, per_round: list[dict[tuple, "ThroughputResult"]]) -> list[str]:
    """One model's table: a row per configuration, the ratio to PyTorch eager paired by round, and "Fastest" only
    when no row was measured on a busy machine and the fastest row is distinguishable from every other."""
    from daybreak.analysis.paired import paired_ratio
    from daybreak.measure.flops import format_flops
    from daybreak.records.throughput import compiler_name, is_busy, math_text, protocol_text
    from daybreak.text import one_line

    rows = sorted(merged_rows(per_round), key=lambda r: (r.config.framework, r.config.amp, r.config.compile))

    def round_speeds(key: tuple) -> list[float | None]:
        return [rnd[key].samples_per_s if key in rnd and rnd[key].status == "ok" else None for rnd in per_round]

    c0 = rows[0].config
    lines = [f"### {model} ({shape}; {protocol_text(c0.warmup, c0.steps, len(per_round))}, the repeats in rounds; "
             f"{threads} thread{'s' if threads > 1 else ''} per process)", "",
             "| framework | compiler | precision | samples/s | min-max | vs PyTorch eager (95% CI, paired by round) | "
             "model FLOP/step | own count | others' CPU | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r.config
        name = f"{c.framework} {r.framework_version}" if r.framework_version else c.framework
        others = f"{r.context.busy_fraction:.0%}" if r.context and r.context.busy_fraction is not None else "-"
        if r.status != "ok":
            lines.append(f"| {name} | {compiler_name(r)} | {math_text(r)} | - | - | - | - | - | {others} | "
                         f"{r.status}: {one_line(r.error or '').replace('|', '/')} |")
            continue
        est = paired_ratio(round_speeds(c.pytorch_eager_key()), round_speeds(r.key()), confidence=CONFIDENCE,
                           quantity="samples_per_s", lower_is_better=False)
        if est.ratio is None:
            ratio = "-"
        elif est.ci_low is None or est.ci_high is None or not math.isfinite(est.ci_high):
            ratio = f"{est.ratio:.2f}x ({est.verdict})"
        else:
            ratio = f"{est.ratio:.2f}x ({est.ci_low:.2f}-{est.ci_high:.2f})"
        own = "-"
        if r.own_flops_per_step and r.flops_per_step:
            own = f"{format_flops(r.own_flops_per_step)} ({r.own_flops_per_step / r.flops_per_step - 1:+.1%})"
        lines.append(f"| {name} | {compiler_name(r)} | {math_text(r)} | {r.samples_per_s:.2f} | "
                     f"{r.samples_per_s_min:.2f}-{r.samples_per_s_max:.2f} | {ratio} | "
                     f"{format_flops(r.flops_per_step) if r.flops_per_step else '-'} | {own} | {others} | ok |")
    ok = [r for r in rows if r.status == "ok"]
    busy = [r for r in rows if is_busy(r.context)]
    loads = [r.context.load_avg_before[0] for r in rows if r.context and r.context.load_avg_before]
    lines.append("")
    if busy:
        worst = max(r.context.busy_fraction or 0.0 for r in busy if r.context is not None)
        load = f" (1-minute load {min(loads):.1f}-{max(loads):.1f} before them)" if loads else ""
        lines.append(f"Measured on a busy machine: other processes took up to {worst:.0%} of the CPUs during "
                     f"{len(busy)} of {len(rows)} rows{load}: no 'fastest', these are this machine's figures on "
                     "that day.")
    elif ok:
        best = max(ok, key=lambda r: r.samples_per_s or 0.0)
        share = max((r.context.busy_fraction or 0.0) for r in rows if r.context) if any(r.context for r in rows) \
            else None
        others = f"; other processes took at most {share:.0%} of the CPUs." if share is not None else "."
        # "fastest" is a claim against every other row: each paired by round, each distinguishable at CONFIDENCE
        tied = [r for r in ok if r is not best and paired_ratio(
            round_speeds(r.key()), round_speeds(best.key()), confidence=CONFIDENCE, quantity="samples_per_s",
            lower_is_better=False).verdict == "not distinguishable"]
        label = f"{best.config.framework} ({compiler_name(best)}, {math_text(best)}), {best.samples_per_s:.2f} samples/s"
        if tied:
            names = ", ".join(f"{r.config.framework} ({compiler_name(r)}, {math_text(r)})" for r in tied)
            lines.append(f"No fastest: the highest median, {label}, is not distinguishable from {names} at "
                         f"{CONFIDENCE:.0%} over {len(per_round)} rounds{others}")
        else:
            lines.append(f"Fastest: {label}, distinguishable from every other row at {CONFIDENCE:.0%} (paired by "
                         f"round){others}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "frameworks")
    p.add_argument("--models", default="resnet50,bert_base")
    p.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--resnet-batch", type=int, default=8)
    p.add_argument("--bert-batch", type=int, default=4)
    p.add_argument("--amp", default="off,bf16")
    p.add_argument("--compile", default="off,on")
    p.add_argument("--threads", type=int, default=1, help="threads per process, every framework")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=7, help="repeats: every configuration once per round")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds per configuration and round")
    p.add_argument("--quick", action="store_true", help="a tiny check that everything runs (not a measurement)")
    args = p.parse_args(argv)
    if args.quick:
        args.image_size, args.seq_len, args.resnet_batch, args.bert_batch = 32, 8, 2, 2
        args.warmup, args.steps, args.rounds = 1, 2, 2
    from daybreak.errors import ConfigError
    from daybreak.sweep.program import check_framework

    frameworks = []
    for f in (f.strip() for f in args.frameworks.split(",") if f.strip()):
        try:
            check_framework(f)  # installed (MXNet: its own interpreter has it), without importing it here
            frameworks.append(f)
        except ConfigError as e:
            print(f"frameworks: {e}: left out", file=sys.stderr)
    if "pytorch" not in frameworks:
        raise SystemExit("frameworks: the table is relative to PyTorch eager: keep pytorch in --frameworks")

    from daybreak.fileio import atomic_write_text
    from daybreak.records.throughput import latest_by_key, load_results
    from daybreak.sweep.views import write_views

    lines = []
    for model in args.models.split(","):
        size = (["--image-size", str(args.image_size), "--batch-sizes", str(args.resnet_batch)] if model == "resnet50"
                else ["--seq-len", str(args.seq_len), "--batch-sizes", str(args.bert_batch)])
        folder = args.out / model
        per_round: list[dict[tuple, ThroughputResult]] = []
        for k in range(args.rounds):
            order = frameworks[k % len(frameworks):] + frameworks[:k % len(frameworks)]
            cmd = [sys.executable, "-m", "daybreak", "throughput", "--model", model, "--frameworks", ",".join(order),
                   "--protocol", "program", *size, "--amp", args.amp, "--compile", args.compile, "--device", "cpu",
                   "--threads", str(args.threads), "--warmup", str(args.warmup), "--steps", str(args.steps),
                   "--repeats", "1", "--timeout", str(args.timeout), "--peak-budget", "20",
                   "--out", str(folder / f"round-{k + 1}"), "--no-plots", "-q"]
            print(f"frameworks: round {k + 1}/{args.rounds}: {' '.join(cmd[2:])}", file=sys.stderr, flush=True)
            subprocess.run(cmd, cwd=REPO, check=False)
            rows = latest_by_key(load_results(folder / f"round-{k + 1}" / "results.jsonl"))
            per_round.append(dict(rows))
        rows = merged_rows(per_round)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "results.jsonl", "".join(r.model_dump_json() + "\n" for r in rows))
        write_views(folder, plots=False)
        shape = f"{args.image_size} px, batch {args.resnet_batch}" if model == "resnet50" else \
            f"sequence {args.seq_len}, batch {args.bert_batch}"
        lines += model_table(model, shape, args.threads, per_round) + [""]
    text = "\n".join(lines)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
