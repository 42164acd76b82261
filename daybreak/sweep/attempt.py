"""One configuration of the throughput sweep: run it in a fresh worker process (torchrun/DDP for several devices),
halving the batch after an out-of-memory with --find-max-batch, and turn the worker's report into a row."""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from daybreak.fileio import atomic_write_text
from daybreak.records.throughput import Attempt, PeakResult, Status, ThroughputConfig, ThroughputResult, with_flags
from daybreak.sweep.grid import SweepOptions
from daybreak.sweep.launch import LaunchSpec, build_command, run_process, threads_per_process, worker_env

if TYPE_CHECKING:
    from daybreak.sweep.worker import WorkerReport

WORKER_MODULE = "daybreak.sweep.worker"


def log_to_stderr(message: str) -> None:
    print(f"daybreak: {message}", file=sys.stderr, flush=True)


# --- one configuration --------------------------------------------------------------------------------------

@dataclass
class _Attempt:
    status: Status
    error: str | None
    report: WorkerReport | None
    command: list[str]
    seconds: float


def _read_report(result_path: Path) -> WorkerReport | None:
    """The rank-0 report, else the most telling report another rank left (an OOM first, else the earliest)."""
    from daybreak.sweep.worker import WorkerReport

    def read(path: Path) -> WorkerReport | None:
        try:
            return WorkerReport.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    rank_files = list(result_path.parent.glob(result_path.name + ".rank*"))
    report = read(result_path) if result_path.exists() else None
    failures = [r for r in (read(p) for p in rank_files) if r is not None]
    for p in rank_files:
        p.unlink(missing_ok=True)
    if report is not None and report.status == "ok":
        return report
    if report is not None:
        failures.append(report)
    if not failures:
        return None
    # When one rank runs out of memory its peers fail too (a closed connection, a collective timeout).
    failures.sort(key=lambda r: (r.status != "oom", r.finished_at))
    return failures[0]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:400] if lines else "(no output)"


def _run_attempt(config: ThroughputConfig, batch: int, options: SweepOptions, work: Path, log_path: Path,
                 on_progress: Callable[[dict[str, Any]], None] | None) -> _Attempt:
    import json

    if config.is_program:  # another framework's program: its own protocol (fresh process per repeat)
        from daybreak.sweep.program import run_attempt

        return _Attempt(*run_attempt(config, batch, options.timeout_s, log_path, on_progress))

    from daybreak.sweep.worker import WorkerSpec

    threads = threads_per_process(config.devices, config.device, config.threads)
    spec_path, result_path, progress_path = work / "spec.json", work / "result.json", work / "progress.json"
    for p in (result_path, progress_path):
        p.unlink(missing_ok=True)
    atomic_write_text(spec_path, WorkerSpec(config=config, batch_size=batch, threads=threads).model_dump_json())
    spec = LaunchSpec(nproc_per_node=config.devices, nnodes=config.nodes, node_rank=options.node_rank,
                      rdzv_endpoint=options.rdzv_endpoint)
    cmd = build_command(WORKER_MODULE, ["--spec", str(spec_path), "--result", str(result_path),
                                        "--progress", str(progress_path)], spec)

    def poll() -> None:
        if on_progress is None:
            return
        try:
            on_progress(json.loads(progress_path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            pass

    outcome = run_process(cmd, env=worker_env(threads), timeout=options.timeout_s, log_path=log_path, poll=poll)
    report = _read_report(result_path)
    if outcome.timed_out:
        return _Attempt("timeout", f"did not finish within --timeout {options.timeout_s:g} s (log: {log_path})",
                        report, cmd, outcome.seconds)
    if report is not None:
        if report.status == "ok" and outcome.returncode != 0:
            return _Attempt("failed", f"worker exited with status {outcome.returncode} after reporting "
                                      f"(log: {log_path})", report, cmd, outcome.seconds)
        return _Attempt(report.status, report.error, report, cmd, outcome.seconds)
    tail = outcome.log_tail
    if outcome.returncode in (-9, 137) or "Signal 9 (SIGKILL)" in tail:
        return _Attempt("oom", "worker killed by SIGKILL (out of host memory?)", None, cmd, outcome.seconds)
    return _Attempt("failed", f"worker exited with status {outcome.returncode} without a result: "
                              f"{_last_line(tail)} (log: {log_path})", None, cmd, outcome.seconds)


# threads per process on CPU (None: an accelerator's per-device ceilings) -> PeakResult
Peaks = dict[int | None, PeakResult]


def _peak_for(config: ThroughputConfig, threads: int | None,
              peaks: Peaks | PeakResult | None) -> tuple[PeakResult | None, bool]:
    """(the PeakResult for this row, whether it is per process/device: measured at the row's ``threads`` on CPU,
    or an accelerator's) or (None, False). A single PeakResult (``SweepOptions.peak``) is the node's ceiling."""
    if isinstance(peaks, PeakResult):
        return peaks, False
    if not peaks:
        return None, False
    if config.device == "cpu" and threads in peaks:
        return peaks[threads], True
    if None in peaks:
        return peaks[None], config.device != "cpu"
    return None, False


def _result_from(config: ThroughputConfig, attempt: _Attempt, attempts: list[Attempt],
                 peaks: Peaks | PeakResult | None, started_at: datetime, wall_s: float) -> ThroughputResult:
    report = attempt.report
    row = ThroughputResult(config=config, status=attempt.status, error=attempt.error, world_size=config.world_size,
                           attempts=attempts if config.find_max_batch else [], started_at=started_at,
                           wall_s=wall_s, command=attempt.command)
    if report is None:
        return row
    from daybreak.measure.system import SystemInfo

    row.batch_size = report.batch_size
    row.global_batch_size = report.global_batch_size
    row.world_size = report.world_size
    row.peak_host_rss_bytes = report.peak_host_rss_bytes
    if report.system:
        row.system = SystemInfo.model_validate(report.system)
    if attempt.status != "ok":
        return row
    times = report.times_s
    median = statistics.median(times)
    samples = report.global_batch_size * config.steps
    row.times_s = times
    row.median_time_s, row.min_time_s, row.max_time_s = median, min(times), max(times)
    row.samples_per_s = samples / median
    row.samples_per_s_min = samples / max(times)
    row.samples_per_s_max = samples / min(times)
    row.peak_memory_bytes = report.peak_memory_bytes
    row.backend = report.backend
    row.threads_per_process = report.threads
    row.inter_op_threads, row.cores_used, row.layout = report.inter_op_threads, report.cores_used, report.layout
    row.cpu_cores = report.cpu_cores
    row.device_name = report.device_name
    row.optimizer = report.optimizer
    row.input_shape = report.input_shape
    row.init_s = report.init_s
    row.data_official = report.data_official
    row.notes = list(report.data_notes) + list(report.notes)
    row.framework, row.framework_version, row.compiler = report.framework, report.framework_version, report.compiler
    for name, value in report.row_fields(config.steps).items():  # math precision, energy of the timed repeats
        setattr(row, name, value)
    if config.device == "cpu" and report.threads and report.cpu_cores and \
            config.devices * report.threads > report.cpu_cores:
        row.notes.append(f"oversubscribed: {config.devices} process(es) x {report.threads} threads on "
                         f"{report.cpu_cores} cores; they take turns, so samples/s understates what the cores do")
    row.flops_source = report.flops_source or "daybreak"  # the worker counts daybreak's model
    if report.own_flops_per_step_per_device is not None:
        row.own_flops_per_step = report.own_flops_per_step_per_device * report.world_size
    if report.flops_per_step_per_device is not None:
        row.flops_per_step = report.flops_per_step_per_device * report.world_size
        row.flops_per_sample = row.flops_per_step / report.global_batch_size
        row.achieved_flops_per_s = row.flops_per_step * config.steps / median
    peak, per_process = _peak_for(config, report.threads, peaks)
    if peak is not None:
        precision, ceiling = peak.peak_for_amp(config.amp)
        row.peak_precision = precision
        row.peak_bandwidth_bytes_per_s = peak.bandwidth_bytes_per_s
        if precision in peak.emulated:
            row.notes.append(f"no {precision} ceiling, utilization left empty: {peak.emulated[precision].note}")
        elif ceiling is None:
            why = (peak.unsupported.get(precision) or peak.unreliable.get(precision) or peak.skipped.get(precision)
                   or "not measured")
            row.notes.append(f"no {precision} ceiling, utilization left empty: {why}")
        if ceiling:
            if config.device != "cpu":  # each process has its own device: the ceilings add up
                row.peak_flops_per_s = ceiling * report.world_size
            elif per_process:  # measured at this row's threads per process: the node's processes add up,
                # as far as the cores go (an oversubscribed node has no more compute than its cores)
                procs = 1 if config.is_program else config.devices  # a program is one process
                cores = report.cpu_cores or procs * (report.threads or 1)
                share = min(1.0, cores / (procs * (report.threads or 1)))
                row.peak_flops_per_s = ceiling * procs * share * config.nodes
            else:  # a node-level ceiling (a peak supplied by the caller)
                row.peak_flops_per_s = ceiling * config.nodes
            if row.achieved_flops_per_s is not None:
                row.utilization = row.achieved_flops_per_s / row.peak_flops_per_s
    return with_flags(row)


def measure_config(config: ThroughputConfig, options: SweepOptions, peak: Peaks | PeakResult | None, work: Path,
                   logs: Path, on_progress: Callable[[dict[str, Any]], None] | None = None,
                   log: Callable[[str], None] = log_to_stderr) -> ThroughputResult:
    """Measure one configuration (halving the batch after an OOM with --find-max-batch)."""
    from daybreak.sweep.load import LoadMeter

    started_at = datetime.now(timezone.utc)
    start = time.perf_counter()
    meter = LoadMeter().start()
    batch = config.batch_size
    attempts: list[Attempt] = []
    while True:
        log_path = logs / (config.slug() + (f"-try-bs{batch}" if batch != config.batch_size else "") + ".log")
        attempt = _run_attempt(config, batch, options, work, log_path, on_progress)
        attempts.append(Attempt(batch_size=batch, status=attempt.status, error=attempt.error))
        if attempt.status == "oom" and config.find_max_batch and batch > 1:
            log(f"{config.label()}: out of memory at batch {batch}; trying {batch // 2}")
            batch //= 2
            continue
        break
    context = meter.stop()
    row = _result_from(config, attempt, attempts, peak, started_at, time.perf_counter() - start)
    row.context = context
    row.notes += context.warnings
    return row
