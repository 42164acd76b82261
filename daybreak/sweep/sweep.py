"""The throughput sweep: expand the grid, run each configuration in a fresh process, record, report.

Every configuration is measured by ``daybreak.sweep.worker`` in its own process (torchrun/DDP for several
devices) and appended to ``results.jsonl`` as soon as it is done, so a sweep that is interrupted resumes where
it stopped: configurations already in the folder are skipped (``force`` re-measures them). ``results.csv``,
``results.md`` and the plots are views of ``results.jsonl``, rewritten from it.

Here: the ceilings the sweep needs and the loop over configurations. The grid (options, checks, expansion) is
daybreak.sweep.grid; one configuration in its worker process, daybreak.sweep.attempt; the views,
daybreak.sweep.views.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from daybreak.errors import ConfigError
from daybreak.fileio import AppendLog
from daybreak.records.throughput import (
    AMP_TO_PRECISION, RESULTS_FILE, PeakResult, ThroughputConfig, ThroughputResult, latest_by_key, load_results,
    with_scaling,
)
from daybreak.sweep.attempt import Peaks, log_to_stderr, measure_config
from daybreak.sweep.grid import SweepOptions, expand
from daybreak.sweep.launch import threads_per_process
from daybreak.sweep.views import current_rows, write_views


@dataclass
class SweepOutcome:
    rows: list[ThroughputResult]  # this sweep's configurations (measured now or found in the folder)
    measured: int
    skipped: int
    failed: int
    out: Path


# --- peak ---------------------------------------------------------------------------------------------------

def peak_needs(configs: list[ThroughputConfig]) -> dict[int | None, list[str]]:
    """What the utilization of ``configs`` needs measured: on CPU, threads per process -> precisions (each
    configuration's processes run at that many threads); on an accelerator, None -> precisions."""
    needs: dict[int | None, set[str]] = {}
    for c in configs:
        # a program is one process whatever its devices
        threads = threads_per_process(1 if c.is_program else c.devices, "cpu", c.threads) if c.device == "cpu" \
            else None
        needs.setdefault(threads, set()).add(AMP_TO_PRECISION[c.amp])
    order = ("fp32", "bf16", "fp16")
    return {t: sorted(p, key=order.index) for t, p in needs.items()}


def sweep_peaks(options: SweepOptions, configs: list[ThroughputConfig],
                log: Callable[[str], None]) -> Peaks | PeakResult | None:
    """The ceilings ``configs`` need, from the cache or measured now within ``options.peak_budget_s`` (only the
    precisions and thread counts they use; CUDA in a subprocess, so this process stays clean)."""
    if options.peak is not None:
        return options.peak
    if not configs:
        return None
    from daybreak.sweep.peak import get_peaks, peak_in_subprocess

    needs = peak_needs(configs)
    device = configs[0].device
    if device != "cpu":
        peak = peak_in_subprocess(device, log=log, precisions=tuple(needs[None]), budget_s=options.peak_budget_s)
        return {None: peak} if peak is not None else None
    import torch

    before = torch.get_num_threads()
    try:
        return get_peaks(torch.device("cpu"), needs, budget_s=options.peak_budget_s, log=log)
    except Exception as e:  # noqa: BLE001 - utilization is optional; the sweep goes on without it
        log(f"peak measurement failed ({e}); utilization will be left empty")
        return None
    finally:
        torch.set_num_threads(before)


def check_data(options: SweepOptions, configs: list[ThroughputConfig], log: Callable[[str], None]) -> None:
    """Find (download if allowed) and verify the task's files once, here, so that a missing folder or a
    checksum mismatch is a one-line error before any worker starts, and several ranks never download at once."""
    c = configs[0] if configs else None
    if c is None or not c.data:
        return
    from daybreak.tasks import get_task

    task = get_task(c.data)
    data = task.load(Path(c.data_dir) if c.data_dir else None, c.allow_custom_data, c.download)
    if not data.official:
        log(f"{task.name}: custom data ({'; '.join(data.notes) or 'not the official files'}); the results say so")
    del data


# --- the sweep ----------------------------------------------------------------------------------------------

def _bars_enabled(options: SweepOptions) -> bool:
    return not options.quiet and sys.stderr.isatty()


def _summary(row: ThroughputResult) -> str:
    if row.status != "ok":
        return f"{row.config.label()}: {row.status.upper()}: {row.error}"
    text = (f"{row.config.label()}: {row.samples_per_s:,.1f} samples/s "
            f"(min {row.samples_per_s_min:,.1f}, max {row.samples_per_s_max:,.1f})")
    if row.batch_size != row.config.batch_size:
        text += f" at batch {row.batch_size} (largest that fits)"
    if row.speedup is not None and row.world_size > 1:
        efficiency = row.scaling_efficiency or 0.0
        mark = " (!)" if efficiency > 1 or row.speedup > row.world_size else ""
        text += (f", {row.speedup:.2f}x vs 1 device ({efficiency:.0%} efficiency{mark}, "
                 f"basis {row.efficiency_basis})")
    if row.utilization is not None:
        text += f", {row.utilization:.1%} of {row.peak_precision} peak" + (" (!)" if row.utilization > 1 else "")
    return text


def run_sweep(options: SweepOptions) -> SweepOutcome:
    """Measure every configuration of ``options`` not yet in ``options.out``; rewrite the views."""
    from tqdm import tqdm

    configs = expand(options)
    out = Path(options.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    bars = _bars_enabled(options)
    base_log = options.log or (lambda m: None if options.quiet else log_to_stderr(m))

    def log(message: str) -> None:
        if bars and options.log is None:
            tqdm.write(f"daybreak: {message}", file=sys.stderr)
        else:
            base_log(message)

    records = out / RESULTS_FILE
    known = latest_by_key(load_results(records, warn=log))
    reporting = options.node_rank == 0
    todo, done_rows, skipped = [], {}, 0
    for config in configs:
        previous = known.get(config.key())
        rerun = options.force or (options.retry_failed and previous is not None
                                  and previous.status in ("failed", "timeout"))
        if previous is not None and not rerun:
            log(f"skip {config.label()}: already in {records} ({previous.status}; --force re-measures)")
            done_rows[config.key()] = previous
            skipped += 1
        else:
            todo.append(config)

    check_data(options, todo, log)
    peak = sweep_peaks(options, todo, log) if todo and reporting else None
    # Per node, so that nodes sharing one --out folder never write each other's files.
    work = out / ".work" / f"node{options.node_rank}"
    logs = out / "logs" if options.node_rank == 0 else out / "logs" / f"node{options.node_rank}"
    work.mkdir(parents=True, exist_ok=True)
    measured = failed = 0
    overall = tqdm(total=len(todo), desc="sweep", unit="config", file=sys.stderr, disable=not bars,
                   position=0, dynamic_ncols=True)
    try:
        with AppendLog(records) if reporting else _NoLog() as appender:
            for config in todo:
                inner = tqdm(total=config.warmup + config.steps * config.repeats, desc=config.label(), unit="step",
                             file=sys.stderr, disable=not bars, leave=False, position=1, dynamic_ncols=True)

                def on_progress(state: dict[str, Any], inner: Any = inner) -> None:
                    inner.set_postfix_str(str(state.get("phase", "")), refresh=False)
                    inner.n = int(state.get("done", 0))
                    inner.refresh()

                if not bars:
                    log(f"measuring {config.label()} ...")
                try:
                    row = measure_config(config, options, peak, work, logs, on_progress if bars else None, log)
                finally:
                    inner.close()
                if not reporting:
                    log(f"{config.label()}: done on node {options.node_rank} ({row.status})")
                    overall.update(1)
                    continue
                base = known.get(config.baseline_key()) if config.world_size > 1 else None
                row = with_scaling([row] + ([base] if base is not None else []))[0]
                appender.write_line(row.model_dump_json())
                known[config.key()] = row
                done_rows[config.key()] = row
                measured += 1
                failed += row.status != "ok"
                log(_summary(row))
                for message in row.flags:
                    log(f"  (!) {message}")
                write_views(out, plots=False, log=log)
                overall.update(1)
    finally:
        overall.close()
    if reporting:
        write_views(out, plots=options.plots, log=log)
        all_rows = {r.key(): r for r in current_rows(out)}
        found = [all_rows.get(c.key(), done_rows.get(c.key())) for c in configs]
        rows = [r for r in found if r is not None]
    else:
        rows = []
    return SweepOutcome(rows=rows, measured=measured, skipped=skipped, failed=failed, out=out)


class _NoLog:
    def __enter__(self) -> "_NoLog":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write_line(self, line: str) -> None:  # pragma: no cover - never called on node_rank > 0
        return None
