"""The throughput sweep: expand the grid, run each configuration in a fresh process, record, report.

Every configuration is measured by ``daybreak.sweep.worker`` in its own process (torchrun/DDP for several
devices) and appended to ``results.jsonl`` as soon as it is done, so a sweep that is interrupted resumes where
it stopped: configurations already in the folder are skipped (``force`` re-measures them). ``results.csv``,
``results.md`` and the plots are views of ``results.jsonl``, rewritten from it.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from daybreak.errors import ConfigError
from daybreak.fileio import AppendLog, atomic_write_text
from daybreak.records.throughput import (
    AMP_TO_PRECISION, CSV_FILE, MARKDOWN_FILE, RESULTS_FILE, Attempt, PeakResult, ThroughputConfig, ThroughputResult,
    latest_by_key, load_results, to_csv, to_markdown, with_flags, with_scaling,
)
from daybreak.sweep.launch import LaunchSpec, build_command, run_process, threads_per_process, worker_env

WORKER_MODULE = "daybreak.sweep.worker"
THROUGHPUT_PLOT = "throughput_vs_batch.png"
SPEEDUP_PLOT = "speedup_vs_devices.png"
AMP_ORDER = ("off", "bf16", "fp16")
DEFAULT_PEAK_BUDGET_S = 60.0  # daybreak.sweep.peak.DEFAULT_BUDGET_S (not imported here: it imports torch)


@dataclass
class SweepOptions:
    model: str
    out: Path
    mode: str = "train"
    batch_sizes: list[int] = field(default_factory=lambda: [32])
    amps: list[str] = field(default_factory=lambda: ["off"])
    compiles: list[bool] = field(default_factory=lambda: [False])
    devices: list[int] = field(default_factory=lambda: [1])
    nodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None  # with nodes > 1: HOST:PORT of node 0 (as `daybreak run --rdzv-endpoint`)
    seq_len: int | None = None
    image_size: int | None = None
    data: str | None = None
    data_dir: Path | str | None = None  # with data: the folder holding the task's files (as `daybreak run`)
    allow_custom_data: bool = False  # with data: accept files that do not match the official checksums
    download: bool = True  # with data: download missing files (once, here, before any worker starts)
    channels_last: bool = False
    device: str = "auto"
    warmup: int = 20
    steps: int = 100
    repeats: int = 7
    threads: int | None = None  # per process
    find_max_batch: bool = False
    force: bool = False
    retry_failed: bool = False
    timeout_s: float = 1800.0
    plots: bool = True
    quiet: bool = False
    peak: PeakResult | None = None  # the node's ceilings, instead of the cached/measured ones (tests, offline)
    peak_budget_s: float = DEFAULT_PEAK_BUDGET_S  # seconds for every peak measurement this sweep needs
    log: Callable[[str], None] | None = None


@dataclass
class SweepOutcome:
    rows: list[ThroughputResult]  # this sweep's configurations (measured now or found in the folder)
    measured: int
    skipped: int
    failed: int
    out: Path


def _log_to_stderr(message: str) -> None:
    print(f"daybreak: {message}", file=sys.stderr, flush=True)


def resolve_device(name: str) -> str:
    """'cpu', 'cuda' or 'mps', without creating a CUDA context in this process."""
    import torch

    name = (name or "auto").lower()
    if name == "auto":
        if torch.cuda.is_available():
            return "cuda"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if name.startswith("cuda"):
        if name != "cuda":
            raise ConfigError(f"--device {name}: give `cuda`; the sweep uses devices 0..N-1 "
                              "(restrict them with CUDA_VISIBLE_DEVICES)")
        if not torch.cuda.is_available():
            raise ConfigError(f"--device cuda: CUDA is not available (torch {torch.__version__} sees no GPU)")
        return "cuda"
    if name in ("cpu", "mps"):
        if name == "mps":
            mps = getattr(torch.backends, "mps", None)
            if mps is None or not mps.is_available():
                raise ConfigError("--device mps: Apple MPS is not available on this machine")
        return name
    raise ConfigError(f"--device {name!r}: choose auto, cpu, cuda or mps")


def expand(options: SweepOptions) -> list[ThroughputConfig]:
    """Check the options and list the configurations: devices, then precision, compile, batch size."""
    from daybreak.models import model_names
    from daybreak.sweep.worker import DEFAULT_SEQ_LEN, model_kind

    if options.mode not in ("train", "infer"):
        raise ConfigError(f"--mode {options.mode!r}: choose train or infer")
    if options.model not in model_names():
        raise ConfigError(f"unknown model {options.model!r}; known models: {', '.join(model_names())}")
    kind = model_kind(options.model)
    for name, values in (("--batch-sizes", options.batch_sizes), ("--devices", options.devices)):
        if not values or any(v < 1 for v in values):
            raise ConfigError(f"{name}: give one or more integers >= 1")
    for name, value, low in (("--warmup", options.warmup, 0), ("--steps", options.steps, 1),
                             ("--repeats", options.repeats, 1), ("--nodes", options.nodes, 1)):
        if value < low:
            raise ConfigError(f"{name} {value}: must be >= {low}")
    if not 0 <= options.node_rank < options.nodes:
        raise ConfigError(f"--node-rank {options.node_rank}: must be in 0..{options.nodes - 1}")
    if options.nodes > 1 and not options.rdzv_endpoint:
        raise ConfigError("--nodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address and a free port), "
                          "the same on every node")
    LaunchSpec(nproc_per_node=1, nnodes=options.nodes, node_rank=options.node_rank,
               rdzv_endpoint=options.rdzv_endpoint).validate()  # the HOST:PORT format
    if options.threads is not None and options.threads < 1:
        raise ConfigError(f"--threads {options.threads}: must be >= 1")
    if not options.timeout_s > 0:
        raise ConfigError(f"--timeout {options.timeout_s:g}: must be > 0 seconds")
    if not options.peak_budget_s > 0:
        raise ConfigError(f"--peak-budget {options.peak_budget_s:g}: must be > 0 seconds")
    if not options.data:
        for flag, given in (("--data-dir", options.data_dir is not None),
                            ("--allow-custom-data", options.allow_custom_data),
                            ("--no-download", not options.download)):
            if given:
                raise ConfigError(f"{flag} applies to real data: add --data TASK (digits, mnist, cifar10)")
    bad = [a for a in options.amps if a not in AMP_ORDER]
    if bad or not options.amps:
        raise ConfigError(f"--amp {','.join(bad) or '(empty)'}: choose from off, bf16, fp16")
    seq_len, image_size, data = options.seq_len, options.image_size, options.data
    if kind == "tokens":
        if image_size is not None:
            raise ConfigError(f"--image-size: {options.model} takes token sequences; use --seq-len")
        if data:
            raise ConfigError(f"--data {data}: real data is for image models; {options.model} runs on synthetic tokens")
        seq_len = DEFAULT_SEQ_LEN if seq_len is None else seq_len
        if not 1 <= seq_len <= 512:
            raise ConfigError(f"--seq-len {seq_len}: must be in 1..512 (BERT's positions)")
    else:
        if seq_len is not None:
            raise ConfigError(f"--seq-len: {options.model} takes images; use --image-size")
        if image_size is not None and image_size < 1:
            raise ConfigError(f"--image-size {image_size}: must be >= 1")
        if data:
            from daybreak.sweep.worker import TASK_IMAGES
            from daybreak.tasks import get_task

            get_task(data)  # unknown task: a ConfigError naming the known ones
            if data not in TASK_IMAGES:
                raise ConfigError(f"--data {data}: the sweep feeds tasks whose images fit in memory "
                                  f"({', '.join(TASK_IMAGES)}); leave --data out for synthetic inputs")
    device = resolve_device(options.device)
    if device == "cuda":
        import torch

        available = torch.cuda.device_count()
        if max(options.devices) > available:
            raise ConfigError(f"--devices {max(options.devices)}: this node has {available} GPU(s)")
    if device == "mps" and (max(options.devices) > 1 or options.nodes > 1):
        raise ConfigError("--device mps: one device only (no multi-process backend for MPS)")

    data_dir = str(Path(options.data_dir).expanduser().resolve()) if data and options.data_dir is not None else None
    configs = []
    for devices in sorted(set(options.devices)):
        for amp in sorted(set(options.amps), key=AMP_ORDER.index):
            for compiled in sorted(set(options.compiles)):
                for batch in sorted(set(options.batch_sizes)):
                    configs.append(ThroughputConfig(
                        model=options.model, mode=options.mode, batch_size=batch, amp=amp, compile=compiled,
                        devices=devices, nodes=options.nodes, seq_len=seq_len, image_size=image_size, data=data,
                        data_dir=data_dir, allow_custom_data=options.allow_custom_data and bool(data),
                        download=options.download, channels_last=options.channels_last, device=device,
                        warmup=options.warmup,
                        steps=options.steps, repeats=options.repeats, threads=options.threads,
                        find_max_batch=options.find_max_batch))
    return configs


# --- one configuration --------------------------------------------------------------------------------------

@dataclass
class _Attempt:
    status: str
    error: str | None
    report: object | None  # WorkerReport
    command: list[str]
    seconds: float


def _read_report(result_path: Path):
    """The rank-0 report, else the most telling report another rank left (an OOM first, else the earliest)."""
    from daybreak.sweep.worker import WorkerReport

    def read(path: Path):
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
                 on_progress: Callable[[dict], None] | None) -> _Attempt:
    import json

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
    row.cpu_cores = report.cpu_cores
    row.device_name = report.device_name
    row.optimizer = report.optimizer
    row.input_shape = report.input_shape
    row.init_s = report.init_s
    row.data_official = report.data_official
    row.notes = list(report.data_notes)
    if config.device == "cpu" and report.threads and report.cpu_cores and \
            config.devices * report.threads > report.cpu_cores:
        row.notes.append(f"oversubscribed: {config.devices} process(es) x {report.threads} threads on "
                         f"{report.cpu_cores} cores; they take turns, so samples/s understates what the cores do")
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
            why = peak.unsupported.get(precision) or peak.skipped.get(precision) or "not measured"
            row.notes.append(f"no {precision} ceiling, utilization left empty: {why}")
        if ceiling:
            if config.device != "cpu":  # each process has its own device: the ceilings add up
                row.peak_flops_per_s = ceiling * report.world_size
            elif per_process:  # measured at this row's threads per process: the node's processes add up,
                # as far as the cores go (an oversubscribed node has no more compute than its cores)
                procs = config.devices
                cores = report.cpu_cores or procs * (report.threads or 1)
                share = min(1.0, cores / (procs * (report.threads or 1)))
                row.peak_flops_per_s = ceiling * procs * share * config.nodes
            else:  # a node-level ceiling (a peak supplied by the caller)
                row.peak_flops_per_s = ceiling * config.nodes
            if row.achieved_flops_per_s is not None:
                row.utilization = row.achieved_flops_per_s / row.peak_flops_per_s
    return with_flags(row)


def measure_config(config: ThroughputConfig, options: SweepOptions, peak: Peaks | PeakResult | None, work: Path,
                   logs: Path, on_progress: Callable[[dict], None] | None = None,
                   log: Callable[[str], None] = _log_to_stderr) -> ThroughputResult:
    """Measure one configuration (halving the batch after an OOM with --find-max-batch)."""
    started_at = datetime.now(timezone.utc)
    start = time.perf_counter()
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
    return _result_from(config, attempt, attempts, peak, started_at, time.perf_counter() - start)


# --- peak ---------------------------------------------------------------------------------------------------

def peak_needs(configs: list[ThroughputConfig]) -> dict[int | None, list[str]]:
    """What the utilization of ``configs`` needs measured: on CPU, threads per process -> precisions (each
    configuration's processes run at that many threads); on an accelerator, None -> precisions."""
    needs: dict[int | None, set[str]] = {}
    for c in configs:
        threads = threads_per_process(c.devices, "cpu", c.threads) if c.device == "cpu" else None
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
    if not configs or not configs[0].data:
        return
    from daybreak.tasks import get_task

    c = configs[0]
    task = get_task(c.data)
    data = task.load(Path(c.data_dir) if c.data_dir else None, c.allow_custom_data, c.download)
    if not data.official:
        log(f"{task.name}: custom data ({'; '.join(data.notes) or 'not the official files'}); the results say so")
    del data


# --- views --------------------------------------------------------------------------------------------------

def current_rows(out: Path, log: Callable[[str], None] | None = None) -> list[ThroughputResult]:
    """The latest record of every configuration in ``out``, with speedups filled in."""
    return with_scaling(list(latest_by_key(load_results(out / RESULTS_FILE, warn=log)).values()))


def write_views(out: Path, plots: bool = True, log: Callable[[str], None] | None = None) -> list[Path]:
    rows = current_rows(out, log)
    written = [atomic_write_text(out / CSV_FILE, to_csv(rows)), atomic_write_text(out / MARKDOWN_FILE, to_markdown(rows))]
    if plots:
        written += write_plots(out, rows, log)
    return written


def _group_key(r: ThroughputResult) -> tuple:
    c = r.config
    return (c.model, c.mode, c.device, c.seq_len, c.image_size, c.data, c.channels_last, c.threads)


def _group_title(key: tuple) -> str:
    model, mode, device, seq_len, image_size, data, channels_last, threads = key
    extras = [f"seq {seq_len}" if seq_len else "", f"{image_size}px" if image_size else "", data or "",
              "NHWC" if channels_last else "", f"{threads} thr/proc" if threads else "", device]
    return f"{model} {mode} ({', '.join(e for e in extras if e)})"


def _mark_flagged(ax, points: list[tuple[float, float]]) -> None:
    """A red ring and '(!)' on each point whose row has a flag (a figure above its ceiling: see results.md)."""
    if not points:
        return
    labels = {h.get_label() for h in ax.get_legend_handles_labels()[0]}
    label = None if "flagged (!): above its ceiling, see results.md" in labels else \
        "flagged (!): above its ceiling, see results.md"
    ax.scatter([x for x, _ in points], [y for _, y in points], s=160, facecolors="none", edgecolors="red",
               linewidths=2, zorder=4, label=label)
    for x, y in points:
        ax.annotate("(!)", (x, y), textcoords="offset points", xytext=(6, 6), color="red", fontsize=9,
                    fontweight="bold")


def write_plots(out: Path, rows: list[ThroughputResult], log: Callable[[str], None] | None = None) -> list[Path]:
    """throughput_vs_batch.png always; speedup_vs_devices.png when more than one device count was measured."""
    ok = [r for r in rows if r.status == "ok" and r.samples_per_s]
    if not ok:
        return []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if log:
            log("matplotlib is not installed: no plots (pip install matplotlib)")
        return []

    groups: dict[tuple, list[ThroughputResult]] = {}
    for r in ok:
        groups.setdefault(_group_key(r), []).append(r)
    written = []

    fig, axes = plt.subplots(len(groups), 1, figsize=(7, 4 * len(groups)), squeeze=False)
    for ax, (key, group) in zip(axes[:, 0], groups.items()):
        lines: dict[tuple, list[ThroughputResult]] = {}
        for r in group:
            lines.setdefault((r.config.amp, r.config.compile, r.config.nodes, r.config.devices), []).append(r)
        for (amp, compiled, nodes, devices), points in sorted(lines.items(), key=lambda kv: (
                AMP_ORDER.index(kv[0][0]), kv[0][1], kv[0][2], kv[0][3])):
            points.sort(key=lambda r: r.batch_size)
            label = f"{'fp32' if amp == 'off' else amp}{' compiled' if compiled else ''}, {nodes * devices} dev"
            ax.plot([r.batch_size for r in points], [r.samples_per_s for r in points], marker="o", label=label)
            _mark_flagged(ax, [(r.batch_size, r.samples_per_s) for r in points if r.flags])
        ax.set_xscale("log", base=2)
        ax.set_xlabel("batch size per device")
        ax.set_ylabel("samples/s (median)")
        ax.set_title(_group_title(key))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = out / THROUGHPUT_PLOT
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    scaled = [r for r in ok if r.speedup is not None]
    if len({r.world_size for r in scaled}) > 1:
        sgroups: dict[tuple, list[ThroughputResult]] = {}
        for r in scaled:
            sgroups.setdefault(_group_key(r), []).append(r)
        fig, axes = plt.subplots(len(sgroups), 1, figsize=(7, 4 * len(sgroups)), squeeze=False)
        for ax, (key, group) in zip(axes[:, 0], sgroups.items()):
            lines = {}
            for r in group:
                lines.setdefault((r.config.amp, r.config.compile, r.config.batch_size), []).append(r)
            # perfect scaling on the rows' basis: the device count on GPUs, the ratio of total threads on CPUs
            ideal = sorted({(r.world_size, r.ideal_speedup) for r in group if r.ideal_speedup is not None})
            ideal = sorted(dict([(1, 1.0)] + ideal).items())
            bases = sorted({r.efficiency_basis for r in group if r.efficiency_basis})
            ax.plot([w for w, _ in ideal], [i for _, i in ideal], linestyle="--", color="grey",
                    label=f"ideal ({', '.join(bases) or 'devices'})")
            for (amp, compiled, batch), points in sorted(lines.items(), key=lambda kv: (
                    AMP_ORDER.index(kv[0][0]), kv[0][1], kv[0][2])):
                points.sort(key=lambda r: r.world_size)
                label = f"{'fp32' if amp == 'off' else amp}{' compiled' if compiled else ''}, bs {batch}/device"
                ax.plot([r.world_size for r in points], [r.speedup for r in points], marker="o", label=label)
                _mark_flagged(ax, [(r.world_size, r.speedup) for r in points if r.flags])
            ax.set_xticks(sorted({1, *(r.world_size for r in group)}))
            ax.set_xlabel("devices (processes)")
            ax.set_ylabel("speedup vs 1 device")
            ax.set_title(_group_title(key))
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
        fig.tight_layout()
        path = out / SPEEDUP_PLOT
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    else:
        (out / SPEEDUP_PLOT).unlink(missing_ok=True)
    return written


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
    base_log = options.log or (lambda m: None if options.quiet else _log_to_stderr(m))

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

                def on_progress(state: dict, inner=inner) -> None:
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
        rows = [all_rows.get(c.key(), done_rows.get(c.key())) for c in configs]
        rows = [r for r in rows if r is not None]
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
