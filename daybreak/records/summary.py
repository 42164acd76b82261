"""Human-readable summary of a RunResult (printed at the end of `daybreak run` and by `daybreak show`)."""

from __future__ import annotations

from daybreak.metrics import metric_named
from daybreak.records.run import RunResult
from daybreak.rules import PHASE_LABELS, PHASES, RULE_SETS


def hms(seconds: float | None) -> str:
    """DAWNBench-style h:mm:ss with milliseconds for short runs."""
    if seconds is None:
        return "-"
    whole = int(seconds)
    h, rem = divmod(whole, 3600)
    m, s = divmod(rem, 60)
    frac = seconds - whole
    return f"{h}:{m:02d}:{s:02d}" + (f".{int(frac * 1000):03d}" if seconds < 60 else "")


def pct(fraction: float | None) -> str:
    return "-" if fraction is None else f"{fraction * 100:.2f}%"


def _phase_line(r: RunResult) -> str:
    totals: dict[str, float] = {}
    for p in r.phases:
        totals[p.phase] = totals.get(p.phase, 0.0) + (p.end_s - p.start_s)
    if not totals:  # a record from before the rule sets
        return (f"init {r.init_s or 0:.2f} s, eval {r.eval_s:.2f} s, train {r.train_s:.2f} s, "
                f"total {r.total_s or 0:.2f} s")
    short = {"data_load": "data", "model_init": "model init", "warmup": "warm-up", "train": "train", "eval": "eval",
             "record": "records"}
    parts = [f"{short[k]} {totals[k]:.2f} s" for k in PHASES if k in totals]
    return ", ".join(parts) + f"; total {r.total_s or 0:.2f} s"


def _rule_lines(r: RunResult) -> list[str]:
    """Both rule sets' time-to-target, the headline's first."""
    names = [r.rules] + [n for n in RULE_SETS if n != r.rules]
    lines = []
    for name in names:
        fig = r.clocks.get(name)
        if fig is None:
            continue
        rules = RULE_SETS[name]
        counted = [PHASE_LABELS[p].split(" ")[0] for p in PHASES if rules.inside[p]]
        what = ("from the first touch of the data, never paused" + _init_note(r, name) if rules.contiguous
                else "+".join(counted) + "; no eval, no record writes")
        value = fig.time_to_target_s if r.reached or r.mlperf is not None else None
        shown = f"{hms(value)}  ({value:.3f} s)" if value is not None else f"- (clock at the end {fig.clock_s:.3f} s)"
        mark = "*" if name == r.rules else " "
        lines.append(f"  {mark}{rules.title:<16}{shown}   [{what}]")
    return lines


def _setup_line(r: RunResult) -> str:
    """How the run was set up. A `daybreak time` record knows only what the program's log declares: its device,
    precision and threads are the program's own, so they are not shown as daybreak settings."""
    seed = f"seed {r.seed}" if not r.is_external or "seed" in r.hyperparameters else "seed - (the log has none)"
    batch = f"batch {r.global_batch_size}" if r.global_batch_size is not None else "batch -"
    if r.is_external:
        return f"  setup            an external program (its own device, precision and threads); {seed}, {batch}"
    parts = [f"device {r.device}", f"amp {r.amp}", f"compile {r.compile}"
             + (f" ({r.recompiles_under_clock} recompilations under the clock)"
                if r.recompiles_under_clock is not None else "")]
    if r.threads is not None:  # records from before daybreak recorded it
        parts.append(f"threads {r.threads}")
    steps = f" ({r.steps_per_epoch} steps/epoch)" if r.steps_per_epoch else ""
    return "  setup            " + ", ".join([*parts, seed, batch]) + steps + _performance_line(r)


def _performance_line(r: RunResult) -> str:
    """TF32 and cuDNN autotuning where they apply (CUDA), and the recipe's own network precision."""
    p = r.performance
    parts = []
    if r.device.startswith("cuda"):
        parts.append(f"TF32 {'on' if p.tf32 else 'off'}" + ("" if p.tf32_applies else " (no TF32 cores)"))
        parts.append(f"cudnn.benchmark {'on' if p.cudnn_benchmark else 'off'}")
    if p.native_precision:
        parts.append(f"{p.native_precision} network")
    return "; " + ", ".join(parts) if parts else ""


def _init_note(r: RunResult, name: str) -> str:
    """Under a contiguous rule set, the initialization before its clock (MLPerf: model init and compile/warm-up
    before the first touch of the data)."""
    fig = r.clocks.get(name)
    if fig is None or not r.phases:
        return ""
    first = min(p.start_s for p in r.phases)
    before = fig.start_s - first
    return f"; init before it {before:.2f} s not counted" if before > 0.0005 else ""


def _value(r: RunResult, value: float | None) -> str:
    """An accuracy of the run as its metric defines it: a percent for daybreak's tasks; an MLPerf benchmark's
    metric in its own unit (a loss, a log perplexity, a score)."""
    metric = metric_named(r.metric) if r.mlperf is not None else None
    return metric.format(value) if metric is not None else pct(value)


def _target_line(r: RunResult) -> str:
    unofficial = "" if r.official else "   (unofficial: " + "; ".join(r.unofficial_reasons) + ")"
    if r.mlperf is None:
        return f"  target           {pct(r.target)} {r.metric}" + unofficial
    m = r.mlperf
    return (f"  target           {' and '.join(c.label for c in m.criteria)} ({r.metric}): MLPerf Training {m.round} "
            f"{m.benchmark} ({m.title}), {m.division} division" + unofficial)


def _mlperf_lines(r: RunResult) -> list[str]:
    """MLPerf's verdict beside the DAWNBench reading, and where the round's rules come from."""
    m = r.mlperf
    if m is None:
        return []
    init = "-" if m.init_s is None else f"{m.init_s:.1f} s"
    verdict = (f"REACHED, run_stop - run_start {m.time_s:.3f} s" if m.reached and m.time_s is not None
               else f"not reached: {m.reason}")
    dawn = (f"first evaluation meeting the target at {m.dawnbench_time_s:.3f} s" if m.dawnbench_time_s is not None
            else "no evaluation before run_stop met the target")
    return [f"  MLPerf verdict   {verdict} (run_stop status {m.run_stop_status or '-'}; initialization {init}, "
            f"limit {m.init_limit_s / 60:g} minutes)",
            f"  DAWNBench view   {dawn}",
            f"  rules            MLPerf Training {m.round} (round from {m.round_from}): {m.rules_source}"]


def _system_line(r: RunResult) -> str:
    sys_ = r.system
    if getattr(sys_, "source", "measured") == "declared":
        return f"  system           {sys_.hardware_summary()} (declared by the program's log)"
    return f"  system           {sys_.hardware_summary()}; torch {sys_.torch}, python {sys_.python}"


def format_summary(r: RunResult, run_dir: str | None = None) -> str:
    verdict = {
        "reached": "REACHED the target",
        "not_reached": "did NOT reach the target",
        "diverged": "DIVERGED",
        "failed": "FAILED",
        "interrupted": "was INTERRUPTED",
        "running": "is still running (or was killed)",
    }[r.status]
    head_rules = RULE_SETS[r.rules].title if r.rules in RULE_SETS else r.rules
    lines = [
        f"daybreak run {r.run_id}: {r.task} / {r.recipe} {verdict}",
        _target_line(r),
        f"  time to target   {hms(r.time_to_target_s)}" + (f"  ({r.time_to_target_s:.3f} s)" if r.time_to_target_s is not None else "")
        + f"  under {head_rules} rules (*)",
    ]
    lines += _rule_lines(r)
    lines += _mlperf_lines(r)
    lines += [
        f"  epochs to target {r.epochs_to_target:g}" if r.epochs_to_target is not None else "  epochs to target -",
        "  cost to target   " + _cost_line(r),
        f"  accuracy         final {_value(r, r.final_accuracy)}, best {_value(r, r.best_accuracy)}",
        f"  phases           {_phase_line(r)}",
        _setup_line(r),
        _system_line(r),
    ]
    if r.analyzed_on is not None:  # daybreak time --log: the machine that read the log, not the run's
        lines.append(f"  analysed on      {r.analyzed_on.hardware_summary()}; torch {r.analyzed_on.torch} (the run's "
                     "system is what the log declares)")
    e = r.energy
    if e.available:
        per = ", ".join(f"{RULE_SETS[k].title if k in RULE_SETS else k} {v:.1f} J" for k, v in
                        (e.joules_to_target or e.joules_at_end).items() if v is not None)
        idle = f"; idle {e.idle_power_w:.1f} W" if e.idle_power_w is not None else ""
        lines.append(f"  energy           {per or '-'} ({'+'.join(e.covers) or 'no total'}{idle})"
                     + ("" if e.joules_to_target else " (at the last evaluation)"))
    elif e.unavailable:
        lines.append("  energy           unavailable: " + "; ".join(sorted(set(e.unavailable.values())))[:300])
    c = r.context
    if c.load_avg_before is not None or c.busy_fraction is not None:
        load = f"load {c.load_avg_before[0]:.2f} before" if c.load_avg_before else "load -"
        busy = f", others took {100 * c.busy_fraction:.0f}% of the CPUs during the run" if c.busy_fraction is not None else ""
        code = f"; code {c.git_commit[:10]}{' (dirty)' if c.git_dirty else ''}" if c.git_commit else ""
        lines.append(f"  context          {load}{busy}{code}")
    for w in r.warnings:
        lines.append(f"  WARNING          {w}")
    if r.message:
        lines.append(f"  note             {r.message}")
    if run_dir:
        lines.append(f"  run directory    {run_dir}")
    return "\n".join(lines)


def _cost_line(r: RunResult) -> str:
    """The cost, or why there is none: no price given, or a price but no time to target."""
    where = f" ({r.instance}, price of {r.price_date})" if r.instance else ""
    if r.cost_usd is not None:
        return f"${r.cost_usd:.4f} at ${r.cost_per_hour:.3f}/h{where}"
    if r.cost_per_hour is not None:
        return f"- (the target was not reached; price ${r.cost_per_hour:.3f}/h{where})"
    return "- (pass --cost-per-hour or --instance)"
