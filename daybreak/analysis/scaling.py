"""Scaling: speedup and efficiency against the number of devices.

* From throughput sweeps: ThroughputResult rows grouped by their configuration minus the device count
  (``ThroughputConfig.baseline_key``); speedup = samples/s over the group's smallest device count (normally 1).
* From runs at several device counts (``RunResult.world_size``), grouped by task, recipe, target,
  hyperparameters, precision and device type: time-to-target speedup (baseline time / time, mean over the
  reached runs at each count) next to time-per-epoch speedup (training clock per epoch at the last
  evaluation). The DAWNBench analysis found these differ: more devices mean a larger global batch, which can
  need more epochs to reach the same accuracy.

Efficiency = speedup / ideal speedup for both, by one rule (``daybreak.records.throughput.ideal_speedup``): the
device count on accelerators, the ratio of total threads on CPUs (processes there share the cores: two processes
of one thread each on a 2-core machine ideally run as fast as one process of two threads, 1.00x).
"""

from __future__ import annotations

import json
from pathlib import Path

from daybreak.analysis.sources import AnalyzedRun, classify, provenance, runs_in
from daybreak.analysis.stats import mean
from daybreak.errors import ConfigError, RecordError
from daybreak.fileio import atomic_write_text
from daybreak.records.scaling import (
    RunScalingGroup, RunScalingRow, ScalingAnalysis, ThroughputScalingGroup, ThroughputScalingRow,
)
from daybreak.records.throughput import (ConfigKey, EfficiencyBasis, ThroughputResult, ideal_speedup,
                                         scaling_basis)

PLOT_FILE = "scaling.png"
MARKDOWN_FILE = "scaling.md"


def throughput_groups(folder: Path) -> list[ThroughputScalingGroup]:
    from daybreak.records.throughput import RESULTS_FILE, latest_by_key, load_results

    rows = [r for r in latest_by_key(load_results(folder / RESULTS_FILE)).values()
            if r.status == "ok" and r.samples_per_s]
    groups: dict[ConfigKey, list[ThroughputResult]] = {}
    for r in rows:
        groups.setdefault(r.config.baseline_key(), []).append(r)
    out = []
    for members in groups.values():
        members.sort(key=lambda r: r.world_size)
        base = members[0]
        label = base.config.model_copy(update=dict(devices=1, nodes=1)).label().replace(" devices=1", "")
        out.append(ThroughputScalingGroup(
            label=label, source=str(folder), baseline_devices=base.world_size,
            rows=[_throughput_row(r, base) for r in members]))
    return out


def _throughput_row(r: ThroughputResult, base: ThroughputResult) -> ThroughputScalingRow:
    """The sweep's own speedup, efficiency and basis when it recorded them, else the same computed over the
    group's smallest device count (``scaling_basis``: on CPUs the ideal is not the device count)."""
    assert r.samples_per_s is not None and base.samples_per_s is not None  # (the groups hold measured rows)
    efficiency: float | None
    if r.speedup is not None and r.scaling_efficiency is not None:
        speedup, efficiency, basis = r.speedup, r.scaling_efficiency, r.efficiency_basis
    else:
        speedup = r.samples_per_s / base.samples_per_s
        basis, ideal = scaling_basis(r, base)
        efficiency = speedup / ideal if ideal else None
    flags = list(r.flags or [])
    if not flags and efficiency is not None and efficiency > 1.0:  # a row recorded before the sweep flagged
        flags.append(efficiency_flag("scaling efficiency", efficiency, speedup, basis))
    return ThroughputScalingRow(world_size=r.world_size, samples_per_s=r.samples_per_s, speedup=speedup,
                                efficiency=efficiency, efficiency_basis=basis, flags=flags)


def efficiency_flag(what: str, efficiency: float, speedup: float | None, basis: str | None) -> str:
    """Why an efficiency above 100% is not a plain fact."""
    shown = "" if speedup is None else f" (speedup {speedup:.2f}x, basis {basis or 'devices'})"
    return (f"{what} {efficiency:.0%} is above 100%{shown}: the baseline ran below its share (a busy machine, "
            "threads that do not scale, per-process overheads) or, for time to target, fewer epochs were needed - "
            "not a plain scaling figure")


def _time_per_epoch(run: AnalyzedRun) -> float | None:
    """Training time per epoch (the train phase only: no data loading, init or evaluation, whatever the rules)."""
    h = run.result.history
    if not h or h[-1].epoch <= 0:
        return None
    train = sum(p.end_s - p.start_s for p in run.result.phases if p.phase == "train")  # records with phases
    return train / h[-1].epoch if train else h[-1].elapsed_s / h[-1].epoch


def run_groups(runs: list[AnalyzedRun]) -> list[RunScalingGroup]:
    groups: dict[tuple[str, str, float, str, str, str], list[AnalyzedRun]] = {}
    for run in runs:
        r = run.result
        key = (r.task, r.recipe, r.target, json.dumps(r.hyperparameters, sort_keys=True, default=str), r.amp,
               r.device.split(":")[0])
        groups.setdefault(key, []).append(run)
    out = []
    for (task, recipe, target, _hp, amp, dtype), members in groups.items():
        by_world: dict[int, list[AnalyzedRun]] = {}
        for m in members:
            by_world.setdefault(max(m.result.world_size, 1), []).append(m)
        rows = []
        for world in sorted(by_world):
            ms = by_world[world]
            reached = [m.result for m in ms if m.result.reached and m.result.time_to_target_s is not None]
            per_epoch = [t for t in (_time_per_epoch(m) for m in ms) if t is not None]
            rows.append(RunScalingRow(
                world_size=world, threads=ms[0].result.threads, n_runs=len(ms), n_reached=len(reached),
                global_batch_size=ms[0].result.global_batch_size,
                mean_time_to_target_s=mean([t for r in reached if (t := r.time_to_target_s) is not None])
                if reached else None,
                mean_epochs_to_target=mean([r.epochs_to_target for r in reached if r.epochs_to_target is not None])
                if reached else None,
                mean_time_per_epoch_s=mean(per_epoch) if per_epoch else None,
                run_dirs=[str(m.path) for m in ms]))
        base = rows[0]
        for row in rows:
            row.efficiency_basis, row.ideal_speedup = _run_ideal(row, base, dtype)
            # time-to-target speedup next to time-per-epoch speedup: the same computation on two measures
            for measure, speedup_field, efficiency_field in (
                    ("mean_time_to_target_s", "tta_speedup", "tta_efficiency"),
                    ("mean_time_per_epoch_s", "epoch_speedup", "epoch_efficiency")):
                if getattr(base, measure) and getattr(row, measure):
                    speedup = getattr(base, measure) / getattr(row, measure)  # times: smaller is faster
                    setattr(row, speedup_field, speedup)
                    setattr(row, efficiency_field, speedup / row.ideal_speedup if row.ideal_speedup else None)
            for what, efficiency, speedup in (("time-to-target efficiency", row.tta_efficiency, row.tta_speedup),
                                              ("time-per-epoch efficiency", row.epoch_efficiency,
                                               row.epoch_speedup)):
                if efficiency is not None and efficiency > 1.0:
                    row.flags.append(efficiency_flag(what, efficiency, speedup, row.efficiency_basis))
        label = f"{task}/{recipe} to {target * 100:.2f}% ({dtype}, amp {amp})"
        out.append(RunScalingGroup(label=label, task=task, recipe=recipe, target=target,
                                   baseline_devices=base.world_size, rows=rows))
    return out


def _run_ideal(row: RunScalingRow, base: RunScalingRow, device_type: str) -> tuple[EfficiencyBasis, float]:
    """The runs' ideal speedup by the sweeps' rule: on CPUs the ratio of total threads, named same_total_cores when
    the totals are equal (e.g. torchrun's one thread per process against one process on every core)."""
    same_total = bool(row.threads and base.threads and row.world_size * row.threads == base.world_size * base.threads)
    return ideal_speedup(device_type, row.world_size, base.world_size, row.threads, base.threads,
                         cpu_basis="same_total_cores" if same_total else "same_threads_per_process")


def analyze_scaling(paths: list[str | Path], command: list[str] | None = None,
                    runs: list[AnalyzedRun] | None = None) -> ScalingAnalysis:
    if not paths and not runs:
        raise ConfigError("give throughput sweep directories or run directories")
    throughput: list[ThroughputScalingGroup] = []
    collected: list[AnalyzedRun] = list(runs or [])
    inputs: list[str] = []
    for p in paths:
        kind, folder = classify(p)
        inputs.append(str(folder))
        if kind == "sweep":
            throughput += throughput_groups(folder)
        else:
            collected += runs_in(folder)
    seen, unique = set(), []
    for r in collected:
        if r.path.resolve() not in seen:
            seen.add(r.path.resolve())
            unique.append(r)
    groups = run_groups(unique) if unique else []
    notes = []
    if throughput and not any(len(g.rows) > 1 for g in throughput):
        notes.append("the sweeps measured one device count per configuration: no speedup to show")
    if groups and not any(len(g.rows) > 1 for g in groups):
        notes.append("all runs of a group used the same number of devices: run the recipe at several "
                     "--nproc-per-node counts to see time-to-target speedup")
    if not throughput and not groups:
        raise RecordError("no successfully measured sweep rows and no runs found")
    return ScalingAnalysis(throughput=throughput, runs=groups, notes=notes, provenance=provenance(inputs, command))


def _x(v: float | None, fmt: str = "{:.2f}x") -> str:
    return "-" if v is None else fmt.format(v)


def throughput_table(a: ScalingAnalysis) -> tuple[list[str], list[list[str]]]:
    header = ["configuration", "devices", "samples/s", "speedup", "efficiency", "basis"]
    body = [[g.label, str(r.world_size), f"{r.samples_per_s:,.1f}", _x(r.speedup) + (" (!)" if r.flags else ""),
             _x(r.efficiency, "{:.0%}") + (" (!)" if r.flags else ""), r.efficiency_basis or "devices"]
            for g in a.throughput for r in g.rows]
    return header, body


def _over(efficiency: float | None) -> str:
    """An efficiency, marked (!) above 100% (its row's flags say why)."""
    return _x(efficiency, "{:.0%}") + (" (!)" if efficiency is not None and efficiency > 1.0 else "")


def flag_lines(a: ScalingAnalysis) -> list[str]:
    """Every flag of the analysis, once: printed under the tables and listed in scaling.md."""
    rows = [r for g in a.throughput for r in g.rows] + [r for g in a.runs for r in g.rows]
    return list(dict.fromkeys(f for r in rows for f in r.flags))


def runs_table(a: ScalingAnalysis) -> tuple[list[str], list[list[str]]]:
    header = ["group", "devices", "global batch", "runs (reached)", "time to target", "epochs", "time/epoch",
              "TTA speedup", "TTA efficiency", "epoch speedup", "epoch efficiency", "ideal", "basis"]
    body = [[g.label, str(r.world_size), str(r.global_batch_size or "-"), f"{r.n_runs} ({r.n_reached})",
             _x(r.mean_time_to_target_s, "{:.3f} s"), _x(r.mean_epochs_to_target, "{:g}"),
             _x(r.mean_time_per_epoch_s, "{:.3f} s"), _x(r.tta_speedup), _over(r.tta_efficiency),
             _x(r.epoch_speedup), _over(r.epoch_efficiency), _x(r.ideal_speedup), r.efficiency_basis or "-"]
            for g in a.runs for r in g.rows]
    return header, body


def write_scaling(a: ScalingAnalysis, out: Path) -> list[Path]:
    from daybreak.analysis import plots
    from daybreak.analysis.tables import markdown_table

    out.mkdir(parents=True, exist_ok=True)
    written = [a.save(out)]
    md = ["# Scaling", "", a.method + ".", ""]
    if a.throughput:
        md += ["## Throughput", "", markdown_table(*throughput_table(a)), ""]
    if a.runs:
        md += ["## Time to target vs time per epoch", "", markdown_table(*runs_table(a)), ""]
    md += [f"(!) {f}" for f in flag_lines(a)]
    md += [f"Note: {n}" for n in a.notes]
    written.append(atomic_write_text(out / MARKDOWN_FILE, "\n".join(md) + "\n"))
    written.append(plots.scaling_plot(a, out / PLOT_FILE))
    return written
