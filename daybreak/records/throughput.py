"""Typed records of `daybreak throughput` (one ThroughputResult per configuration) and `daybreak peak`.

``results.jsonl`` holds one ThroughputResult per line, appended as each configuration is measured; the CSV and
Markdown views (and the plots) are regenerated from it. A configuration is identified by ``ThroughputConfig.key``:
model, mode, per-device batch size (as requested), precision, compile, devices per node, nodes, sequence length,
image size, data, memory layout, device type and --threads (None = the default split of the cores); warm-up,
steps and repeats are not part of it.

Besides utilization of the *measured* peak (``daybreak peak``), a row on a GPU the datasheet catalog knows
(daybreak.measure.datasheet) carries its MFU against the vendor's *datasheet* peak; on a CPU or an unknown GPU that
MFU is empty and the row's notes say why. Energy (joules per sample) comes from the hardware counters read at the
start and end of each timed repeat (daybreak.measure.energy), all ranks together, each physical counter once.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from pathlib import Path
import statistics
from typing import Any, Callable, Iterable, Literal, NamedTuple, Sequence

from pydantic import BaseModel, Field, ValidationError, model_validator

from daybreak.measure.system import SystemInfo
from daybreak.records.base import Versioned
from daybreak.records.run import MeasurementContext

# what identifies a configuration (ThroughputConfig.key): its fields in a fixed order, the framework's after them
ConfigKey = tuple[Any, ...]

Mode = Literal["train", "infer"]
# How a multi-device row's scaling efficiency is computed (speedup / ideal speedup over its 1-device row):
#   devices: accelerators; each process has its own device, so the ideal speedup is the device count.
#   same_total_cores: CPU, default threads; every device count shares the node's cores (1 process x C threads
#       vs D processes x C/D threads), so the ideal speedup is the ratio of total threads (1 per node).
#   same_threads_per_process: CPU with --threads T; the baseline is 1 process with the same T threads, so the
#       ideal speedup is the ratio of total threads (the process count, if the cores suffice).
EfficiencyBasis = Literal["devices", "same_total_cores", "same_threads_per_process"]
Amp = Literal["off", "bf16", "fp16"]
# unsupported: the framework's program cannot run this configuration (JAX without XLA, ...); it says why
Status = Literal["ok", "oom", "failed", "timeout", "unsupported"]
# "pytorch": daybreak's built-in models; "jax", "tensorflow", "paddle": their reference programs
# (daybreak/sweep/frameworks); "program": any program given by --program (its command line in ``program``)
PYTORCH = "pytorch"
# How a configuration's repeats are timed: "worker" (daybreak.sweep.worker: PyTorch only, one process, the repeats
# timed windows after one warm-up; DDP, inference, real data, energy) or "program" (daybreak.sweep.program: every
# repeat a fresh process of a framework's program with its own warm-up, PyTorch's included)
Protocol = Literal["worker", "program"]

RESULTS_FILE = "results.jsonl"
CSV_FILE = "results.csv"
MARKDOWN_FILE = "results.md"

AMP_TO_PRECISION = {"off": "fp32", "bf16": "bf16", "fp16": "fp16"}


class ThroughputConfig(BaseModel):
    """The exact configuration of one measurement. ``batch_size`` is per device (DLPerf's convention)."""

    model: str
    mode: Mode = "train"
    batch_size: int
    amp: Amp = "off"
    compile: bool = False
    devices: int = 1  # devices (processes) per node
    nodes: int = 1
    seq_len: int | None = None  # token models only
    image_size: int | None = None  # image models: None = the model's usual input size
    data: str | None = None  # a task name feeds its real data; None = synthetic inputs
    data_dir: str | None = None  # with data: the folder holding the task's files (None: its default folder)
    allow_custom_data: bool = False  # with data: accept files that do not match the official checksums
    download: bool = True  # with data: download missing files (the sweep does, once, before any worker)
    channels_last: bool = False
    device: str = "cpu"  # "cpu" or "cuda"
    warmup: int = 20
    steps: int = 100
    repeats: int = 7
    threads: int | None = None  # torch intra-op threads per process; None = cores / processes on CPU
    find_max_batch: bool = False
    framework: str = PYTORCH  # who trains the model: daybreak's PyTorch models, or a program (see PYTORCH)
    program: list[str] | None = None  # framework "program": the command line that --program gave
    protocol: Protocol = "worker"  # how the repeats are timed (see Protocol); every framework but PyTorch: program
    min_window_s: float = 1.0  # program protocol: each reported window lasts at least this long (not in the key)

    @property
    def is_program(self) -> bool:
        """Measured through the program protocol (daybreak.sweep.program), not by daybreak's own worker."""
        return self.framework != PYTORCH or self.protocol == "program"

    @property
    def world_size(self) -> int:
        return self.devices * self.nodes

    def key(self) -> ConfigKey:
        """What identifies the configuration. Where the data came from (data_dir, ...) is recorded, not part of
        it: the same task's images in another folder are the same workload."""
        key = (self.model, self.mode, self.batch_size, self.amp, self.compile, self.devices, self.nodes,
               self.seq_len, self.image_size, self.data, self.channels_last, self.device, self.threads)
        # the framework only when it is not PyTorch: the keys (and slugs) of PyTorch records stay what they were
        return key + ((self.framework, tuple(self.program or ())) if self.is_program else ())

    def baseline_key(self) -> ConfigKey:
        """The key of the same configuration on one device of one node (the speedup's denominator)."""
        return self.model_copy(update=dict(devices=1, nodes=1)).key()

    def pytorch_eager_key(self) -> ConfigKey:
        """The key of the same configuration run by daybreak's PyTorch model without torch.compile, under the same
        protocol (the framework comparison's denominator, as DLPerf's tables are relative to a baseline)."""
        return self.model_copy(update=dict(framework=PYTORCH, program=None, compile=False)).key()

    def framework_name(self) -> str:
        """The framework, or for --program ``program`` and the program's file name and arguments (its interpreter
        and folders left out)."""
        if self.framework != "program":
            return self.framework
        parts = [p.replace("\\", "/").rsplit("/", 1)[-1] for p in self.program or []]
        if parts and parts[0].startswith("python"):
            parts = parts[1:]
        return "program " + " ".join(parts)[:60]

    def series(self) -> str:
        """What a group of rows is named by: the framework, and for PyTorch timed as a program "pytorch (program)"
        (its worker rows are another protocol: never one table's cells)."""
        return f"{PYTORCH} (program)" if self.framework == PYTORCH and self.is_program else self.framework_name()

    def label(self) -> str:
        parts = [self.framework_name()] if self.is_program else []
        parts += [self.model, self.mode, f"bs={self.batch_size}", f"amp={self.amp}",
                 f"compile={'on' if self.compile else 'off'}", f"devices={self.devices}"]
        if self.nodes > 1:
            parts.append(f"nodes={self.nodes}")
        if self.seq_len is not None:
            parts.append(f"seq={self.seq_len}")
        if self.image_size is not None:
            parts.append(f"img={self.image_size}")
        if self.data:
            parts.append(f"data={self.data}")
        if self.channels_last:
            parts.append("channels_last")
        if self.threads is not None:
            parts.append(f"threads={self.threads}")
        if self.device != "cpu":
            parts.append(self.device)
        return " ".join(parts)

    def slug(self) -> str:
        """A file-name-safe, unique name for this configuration."""
        import hashlib

        digest = hashlib.sha1(json.dumps(self.key(), default=str).encode()).hexdigest()[:10]
        head = (f"{self.framework}-" if self.is_program else "") + \
            f"{self.model}-{self.mode}-bs{self.batch_size}-{self.amp}-c{int(self.compile)}-d{self.devices}"
        return f"{head}-n{self.nodes}-{digest}"


class Attempt(BaseModel):
    """One try of --find-max-batch: the per-device batch size and how it ended."""

    batch_size: int
    status: Status
    error: str | None = None


class ThroughputResult(Versioned):
    schema_version: int = 1
    kind: Literal["daybreak.throughput"] = "daybreak.throughput"
    config: ThroughputConfig
    status: Status
    error: str | None = None  # one line, for oom/failed/timeout

    # what was measured
    batch_size: int | None = None  # per device; differs from config.batch_size after --find-max-batch
    global_batch_size: int | None = None  # batch_size x world size
    world_size: int = 1
    times_s: list[float] = Field(default_factory=list)  # each repeat: `steps` steps, device synchronized
    median_time_s: float | None = None
    min_time_s: float | None = None
    max_time_s: float | None = None
    samples_per_s: float | None = None  # global batch x steps / median time
    samples_per_s_min: float | None = None  # ... / max time
    samples_per_s_max: float | None = None  # ... / min time

    # derived from the 1-device row of the same configuration (``with_scaling``)
    speedup: float | None = None  # samples/s over the 1-device row's
    ideal_speedup: float | None = None  # what perfect scaling would give on this basis (see efficiency_basis)
    scaling_efficiency: float | None = None  # speedup / ideal_speedup
    efficiency_basis: EfficiencyBasis | None = None

    # FLOPs (torch.utils.flop_counter; a multiply-add = 2 FLOPs): the model's, one figure for every framework
    flops_per_step: int | None = None  # all devices together: per-device count x world size
    flops_source: str | None = None  # "daybreak": its count of daybreak's model; "program": the program's own
    own_flops_per_step: int | None = None  # a program's own count (its framework's cost analysis): a diagnostic
    flops_per_sample: float | None = None
    achieved_flops_per_s: float | None = None  # flops_per_step x steps / median time
    peak_precision: str | None = None  # fp32 / bf16 / fp16: the matmul peak utilization is relative to
    peak_flops_per_s: float | None = None  # measured peak of all devices used together in that precision
    utilization: float | None = None  # achieved / peak, 0..1
    peak_bandwidth_bytes_per_s: float | None = None  # the measured copy bandwidth (per device)
    # against the vendor's datasheet (daybreak.measure.datasheet): recomputed whenever the record is read
    # (``with_flags``); None on a CPU or a GPU the catalog does not know, with the reason in ``notes``
    math_precision: str | None = None  # what the worker says the math ran in: fp32 / tf32 / bf16 / fp16
    mfu_precision: str | None = None  # the datasheet column MFU is against
    datasheet_gpu: str | None = None  # the catalog row matched by device_name
    datasheet_peak_flops_per_s: float | None = None  # all devices used together
    mfu: float | None = None  # achieved_flops_per_s / datasheet_peak_flops_per_s, 0..1

    # energy (daybreak.measure.energy): counters read at the start and end of each timed repeat, right after the
    # device synchronize (and barrier), every rank together with each physical counter once
    energy_j: list[float] = Field(default_factory=list)  # each repeat, the covered kinds (empty: unavailable)
    joules_per_sample: float | None = None  # median over the repeats of joules / samples (global batch x steps)
    mean_power_w: float | None = None  # median over the repeats of joules / seconds
    energy_covers: list[str] = Field(default_factory=list)  # e.g. ["gpu", "cpu_package"]
    energy_unavailable: dict[str, str] = Field(default_factory=dict)  # kind -> why it is not in the total

    # memory
    peak_memory_bytes: int | None = None  # accelerator: torch.cuda.max_memory_allocated, max over ranks
    peak_host_rss_bytes: int | None = None  # ru_maxrss of the worker process, max over ranks

    # how it ran
    backend: str | None = None  # gloo / nccl with several processes
    threads_per_process: int | None = None  # intra-op threads, as the worker or program reports them
    inter_op_threads: int | None = None  # as a program reports them
    cores_used: float | None = None  # a program on a CPU: its CPU time / wall time over the timed steps (median)
    layout: str | None = None  # NCHW / NHWC, as a program says its model trained
    cpu_cores: int | None = None  # cores the processes of a node could run on (its affinity mask)
    data_official: bool | None = None  # with --data: whether the files matched the official checksums
    device_name: str | None = None
    optimizer: str | None = None  # train mode: e.g. "SGD(lr=0.001, momentum=0.9, weight_decay=5e-05, fused)"
    input_shape: list[int] = Field(default_factory=list)  # one sample's input shape
    framework: str | None = None  # what trained the model, as the program (or daybreak's worker) says: "jax"
    framework_version: str | None = None  # e.g. "0.10.2"
    compiler: str | None = None  # "torch.compile", "XLA", "CINN" or "none"
    attempts: list[Attempt] = Field(default_factory=list)  # --find-max-batch tries, largest first
    init_s: float | None = None  # worker: build, FLOP count, compile and warm-up
    wall_s: float | None = None  # the whole configuration, process launch included
    system: SystemInfo | None = None
    # how busy the machine was while the configuration ran (its processes' CPU time is ours, the rest other
    # processes'); a row with context.busy_fraction above BUSY_FRACTION was measured on a busy machine
    context: MeasurementContext | None = None
    started_at: datetime | None = None
    command: list[str] = Field(default_factory=list)  # the worker command line

    # figures that cannot be true (above 100% of a ceiling; a speedup above the device count), each with the
    # reason: recomputed from the fields above whenever the record is read (``with_scaling``), shown with a
    # (!) wherever the figure is printed
    flags: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # context: an emulated precision, oversubscribed cores, data

    def key(self) -> ConfigKey:
        return self.config.key()


# A configuration was measured on a busy machine when other processes took more than this share of the logical
# CPUs while it ran (daybreak.measure.context's rule for runs); its figures are the machine's on that day.
BUSY_FRACTION = 0.10


def is_busy(context: MeasurementContext | None) -> bool:
    return context is not None and context.busy_fraction is not None and context.busy_fraction > BUSY_FRACTION


def busy_text(context: MeasurementContext, cpus: int) -> str:
    """'measured on a busy machine: other processes took 35% of the 2 logical CPUs (load 3.10 before)'."""
    load = f" (load {context.load_avg_before[0]:.2f} before)" if context.load_avg_before else ""
    return (f"measured on a busy machine: other processes took {100 * (context.busy_fraction or 0):.0f}% of the "
            f"{cpus} logical CPUs{load}")


# A precision whose matmuls run this many times slower than fp32 here has no native support (emulated: 20-100x
# slower in practice; native bf16 without AMX runs at about half the fp32 rate): it is not a ceiling.
EMULATED_SLOWDOWN = 8.0


class SlowPrecision(BaseModel):
    """A precision whose matmuls run much slower than fp32 on this device (no native support: emulated, e.g. by
    converting to fp32). Its speed is recorded, but it is not a roofline ceiling: nothing uses it for
    utilization."""

    emulated: bool = True
    flops_per_s: float  # what its matmuls reached (a small n: measuring it at full size would take minutes)
    slowdown_vs_fp32: float  # fp32 FLOP/s / this precision's FLOP/s, both at matmul_size
    matmul_size: int
    note: str  # e.g. "bf16 runs 57x slower than fp32 on this CPU: no native support; not a ceiling"


def slow_precision_note(precision: str, slowdown: float, device_type: str, capability: str | None = None) -> str:
    where = {"cpu": "this CPU", "cuda": "this GPU", "mps": "this GPU (MPS)"}.get(device_type, f"this {device_type}")
    text = f"{precision} runs {slowdown:.0f}x slower than fp32 on {where}: no native support; not a ceiling"
    if capability:
        text += f" (torch CPU capability {capability})"
    return text


class PeakResult(Versioned):
    """The two roofline ceilings of a device: peak matmul FLOP/s per precision and memory copy bandwidth.

    ``flops_per_s`` holds ceilings only. A precision that runs much slower than fp32 (emulated) is in ``emulated``
    instead; one the device cannot run is in ``unsupported``; one the time budget left no room for is in
    ``skipped`` (measured next time it is needed)."""

    schema_version: int = 2  # 2: bounded, adaptive measurement; emulated precisions are not ceilings
    kind: Literal["daybreak.peak"] = "daybreak.peak"
    machine_key: str
    device: str  # "cpu" or "cuda:0"
    device_name: str
    torch: str
    threads: int | None = None  # torch intra-op threads used on CPU
    cpu_capability: str | None = None  # torch.backends.cpu.get_cpu_capability(), e.g. AVX2 / AVX512 (information)
    flops_per_s: dict[str, float] = Field(default_factory=dict)  # precision -> median matmul FLOP/s (ceilings)
    flops_samples: dict[str, list[float]] = Field(default_factory=dict)  # precision -> every repeat
    matmul_size: dict[str, int] = Field(default_factory=dict)  # precision -> n of the n x n x n matmul
    emulated: dict[str, SlowPrecision] = Field(default_factory=dict)  # precision -> measured, not a ceiling
    unsupported: dict[str, str] = Field(default_factory=dict)  # precision -> why it was not measured
    skipped: dict[str, str] = Field(default_factory=dict)  # precision -> not measured: the budget ran out
    # precision (or "bandwidth") -> why its measurement is not a ceiling (repeats too far apart, a busy machine);
    # its samples are kept, it is measured again the next time it is needed
    unreliable: dict[str, str] = Field(default_factory=dict)
    probe_size: dict[str, int] = Field(default_factory=dict)  # precision -> n of the small timing probe
    probe_flops_per_s: dict[str, float] = Field(default_factory=dict)  # precision -> FLOP/s of that probe
    bandwidth_bytes_per_s: float | None = None  # (bytes read + bytes written) / time of a large copy, median
    bandwidth_samples: list[float] = Field(default_factory=list)
    copy_bytes: int | None = None  # size of the copied tensor
    budget_s: float | None = None  # the time budget the measurement ran under
    notes: list[str] = Field(default_factory=list)  # e.g. fewer repeats or a smaller n than asked, for the budget
    measured_at: datetime
    seconds: float | None = None  # how long the measurement took
    system: SystemInfo | None = None

    @model_validator(mode="after")
    def _older_records(self) -> "PeakResult":
        """Schema 1 recorded every precision as a ceiling: a much slower one moves to ``emulated``."""
        if self.schema_version < 2:
            fp32 = self.flops_per_s.get("fp32")
            for precision, flops in list(self.flops_per_s.items()):
                if precision == "fp32" or not fp32 or not flops or fp32 / flops < EMULATED_SLOWDOWN:
                    continue
                slowdown = fp32 / flops
                self.emulated[precision] = SlowPrecision(
                    flops_per_s=flops, slowdown_vs_fp32=slowdown, matmul_size=self.matmul_size.get(precision, 0),
                    note=slow_precision_note(precision, slowdown, self.device.split(":")[0]))
                del self.flops_per_s[precision]
            self.schema_version = 2
        return self

    def has(self, precision: str) -> bool:
        """Whether ``precision`` was dealt with (a ceiling, emulated or unsupported): nothing left to measure."""
        return precision in self.flops_per_s or precision in self.emulated or precision in self.unsupported

    def peak_for_amp(self, amp: str) -> tuple[str, float | None]:
        """(precision, its ceiling); None for a precision that is emulated, unsupported or not measured."""
        precision = AMP_TO_PRECISION.get(amp, amp)
        return precision, self.flops_per_s.get(precision)

    def ridge_point(self, precision: str = "fp32") -> float | None:
        """FLOPs per byte at which the roofline turns from bandwidth- to compute-bound."""
        flops = self.flops_per_s.get(precision)
        if not flops or not self.bandwidth_bytes_per_s:
            return None
        return flops / self.bandwidth_bytes_per_s

    def merged(self, newer: "PeakResult") -> "PeakResult":
        """This result with what ``newer`` measured (the same machine key) added or replaced."""
        out = self.model_copy(deep=True)
        per_precision = ("flops_per_s", "flops_samples", "matmul_size", "emulated", "unsupported", "skipped")
        for precision in set(newer.flops_per_s) | set(newer.emulated) | set(newer.unsupported) | set(newer.unreliable):
            for name in per_precision + ("unreliable",):
                getattr(out, name).pop(precision, None)
        for name in per_precision[:-1] + ("probe_size", "probe_flops_per_s", "unreliable"):
            getattr(out, name).update(getattr(newer, name))
        # a precision the newer measurement had no time for keeps what was there
        out.skipped.update({k: v for k, v in newer.skipped.items() if not out.has(k)})
        if newer.bandwidth_bytes_per_s is not None or "bandwidth" in newer.unreliable:
            out.bandwidth_bytes_per_s = newer.bandwidth_bytes_per_s
            out.bandwidth_samples = list(newer.bandwidth_samples)
            out.copy_bytes = newer.copy_bytes
            if newer.bandwidth_bytes_per_s is not None:
                out.unreliable.pop("bandwidth", None)
        out.notes = [n for n in out.notes if n not in newer.notes] + list(newer.notes)
        out.measured_at = newer.measured_at
        out.seconds = (self.seconds or 0.0) + (newer.seconds or 0.0)
        out.budget_s = newer.budget_s
        out.cpu_capability = newer.cpu_capability or out.cpu_capability
        return out


# --- results.jsonl ------------------------------------------------------------------------------------------

def load_results(path: str | Path, warn: Callable[[str], object] | None = None) -> list[ThroughputResult]:
    """Every record in a results.jsonl, in file order. Unreadable lines (e.g. one cut short by a crash) are
    skipped, with a note to ``warn`` if given."""
    path = Path(path)
    if not path.exists():
        return []
    rows: list[ThroughputResult] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(ThroughputResult.model_validate_json(line))
            except (ValidationError, ValueError) as e:
                if warn:
                    warn(f"{path}:{number}: skipped an unreadable record ({str(e).splitlines()[0]})")
    return rows


def latest_by_key(rows: Iterable[ThroughputResult]) -> dict[ConfigKey, ThroughputResult]:
    """The last record of each configuration (a --force re-measurement replaces the earlier one)."""
    out: dict[ConfigKey, ThroughputResult] = {}
    for row in rows:
        out.pop(row.key(), None)
        out[row.key()] = row
    return out


def ideal_speedup(device_type: str, world: int, base_world: int, threads: int | None, base_threads: int | None, *,
                  cpu_basis: EfficiencyBasis, nodes: int = 1) -> tuple[EfficiencyBasis, float]:
    """(basis, ideal speedup) of ``world`` processes over ``base_world``, for sweep rows and runs alike: the device
    count on accelerators; on CPUs the ratio of total threads (processes x threads per process), since the
    processes share the cores. ``cpu_basis`` says how the threads were chosen; without thread counts (older
    records) ``same_total_cores`` means 1 per node and ``same_threads_per_process`` the process count."""
    if device_type != "cpu":
        return "devices", world / max(1, base_world)
    if not threads or not base_threads:
        return cpu_basis, float(nodes) if cpu_basis == "same_total_cores" else world / max(1, base_world)
    return cpu_basis, (world * threads) / (max(1, base_world) * base_threads)


def scaling_basis(row: ThroughputResult, base: ThroughputResult) -> tuple[EfficiencyBasis, float]:
    """(basis, ideal speedup) of ``row`` over its 1-device row ``base`` (``ideal_speedup``)."""
    return ideal_speedup(row.config.device, row.world_size, base.world_size,
                         row.threads_per_process or row.config.threads, base.threads_per_process or base.config.threads,
                         cpu_basis="same_total_cores" if row.config.threads is None else "same_threads_per_process",
                         nodes=row.config.nodes)


BASIS_TEXT = {
    "devices": "ideal = device count",
    "same_total_cores": "same total cores: ideal = ratio of total threads",
    "same_threads_per_process": "same threads per process: ideal = ratio of total threads",
}


MFU_NOTE = "no MFU against a datasheet peak: "


class DatasheetMfu(NamedTuple):
    value: float | None  # model FLOP/s / datasheet peak of every device used
    precision: str
    peak_flops_per_s: float | None  # the datasheet peak x devices
    gpu: str | None  # the catalog row
    reason: str | None  # why there is no value (starts with MFU_NOTE)


def mfu_precision(amp: str, device_type: str, device_name: str | None, tf32: bool | None) -> str:
    """The datasheet column a configuration's MFU is against: the autocast precision; without autocast on a GPU,
    TF32 where the math was allowed to run in it (``tf32``) and the GPU has TF32 (Ampere and later), else fp32."""
    precision = AMP_TO_PRECISION.get(amp, amp)
    if precision != "fp32" or device_type != "cuda" or not tf32 or not device_name:
        return precision
    from daybreak.measure.datasheet import datasheet_peak

    return "tf32" if datasheet_peak(device_name, "tf32").tflops is not None else "fp32"


def datasheet_mfu(achieved_flops_per_s: float | None, world_size: int, device_type: str, device_name: str | None,
                  precision: str) -> DatasheetMfu:
    """MFU of ``world_size`` devices named ``device_name`` against their datasheet peak; on anything but an NVIDIA
    GPU of the catalog: no value, and the reason."""
    from daybreak.measure.datasheet import mfu

    def none(reason: str) -> DatasheetMfu:
        return DatasheetMfu(None, precision, None, None, MFU_NOTE + reason)

    if device_type != "cuda":
        what = "a CPU" if device_type == "cpu" else f"{device_type}"
        return none(f"the datasheet catalog lists NVIDIA GPUs only and this ran on {what}"
                    + (f" ({device_name})" if device_name else "") + "; utilization of the measured peak applies")
    if not device_name:
        return none("the record does not name its GPU")
    if achieved_flops_per_s is None or not math.isfinite(achieved_flops_per_s) or achieved_flops_per_s < 0:
        return none("no achieved FLOP/s")
    devices = max(int(world_size or 1), 1)
    try:
        m = mfu(achieved_flops_per_s / devices, device_name, precision)
    except ValueError as e:  # an unknown precision name
        return none(str(e))
    if m.value is None:
        return none(m.reason or "no datasheet peak")
    return DatasheetMfu(m.value, m.peak.precision, m.peak.flops_per_s * devices, m.peak.model, None)  # type: ignore[operator]


def with_mfu(row: ThroughputResult) -> ThroughputResult:
    """``row`` with its MFU against the datasheet peak (or, in its notes, why it has none)."""
    notes = [n for n in row.notes if not n.startswith(MFU_NOTE)]
    empty = dict(mfu=None, mfu_precision=None, datasheet_gpu=None, datasheet_peak_flops_per_s=None)
    if row.status != "ok":
        return row.model_copy(update=dict(empty, notes=notes))
    precision = row.math_precision or AMP_TO_PRECISION.get(row.config.amp, row.config.amp)
    d = datasheet_mfu(row.achieved_flops_per_s, row.world_size, row.config.device, row.device_name, precision)
    if d.reason:
        notes.append(d.reason)
        return row.model_copy(update=dict(empty, notes=notes))
    return row.model_copy(update=dict(mfu=d.value, mfu_precision=d.precision, datasheet_gpu=d.gpu,
                                      datasheet_peak_flops_per_s=d.peak_flops_per_s, notes=notes))


def energy_fields(per_repeat_j: Sequence[float | None], times_s: Sequence[float], samples_per_repeat: int,
                  covers: Sequence[str], unavailable: dict[str, str]) -> dict[str, Any]:
    """The energy fields of a row from the joules of each timed repeat (None: not measured): joules per sample
    and mean power are medians over the repeats, like the times."""
    out: dict[str, Any] = dict(energy_j=[], joules_per_sample=None, mean_power_w=None, energy_covers=list(covers),
                     energy_unavailable=dict(unavailable))
    if not per_repeat_j or any(j is None or not math.isfinite(j) or j < 0 for j in per_repeat_j) \
            or samples_per_repeat <= 0:
        out["energy_covers"] = []
        if not out["energy_unavailable"]:
            out["energy_unavailable"] = {"total": "no energy counter read over every timed repeat"}
        return out
    joules = [float(j) for j in per_repeat_j]  # type: ignore[arg-type]
    out["energy_j"] = joules
    out["joules_per_sample"] = statistics.median(j / samples_per_repeat for j in joules)
    powers = [j / t for j, t in zip(joules, times_s) if t > 0]
    out["mean_power_w"] = statistics.median(powers) if powers else None
    return out


def figure_flags(row: ThroughputResult) -> list[str]:
    """Why a figure of ``row`` cannot be taken as a fact: above 100% of its ceiling, or a speedup above the
    number of devices. Empty when everything is plausible."""
    flags = []
    if row.scaling_efficiency is not None and row.scaling_efficiency > 1.0:
        basis = BASIS_TEXT.get(row.efficiency_basis or "", "")
        flags.append(f"scaling efficiency {row.scaling_efficiency:.0%} is above 100% (speedup {row.speedup:.2f}x, "
                     f"ideal {row.ideal_speedup:.2f}x; {basis}): the 1-device baseline ran below its share "
                     "(a busy machine, threads that do not scale, per-process overheads) - not a scaling figure")
    if row.speedup is not None and row.world_size > 1 and row.speedup > row.world_size:
        flags.append(f"speedup {row.speedup:.2f}x is above the {row.world_size} devices used: cannot be true scaling")
    if row.utilization is not None and row.utilization > 1.0:
        flags.append(f"utilization {row.utilization:.0%} of the measured {row.peak_precision} peak is above 100%: "
                     "that peak is not this configuration's ceiling (measured on a busy machine, or at other "
                     "threads) - not a utilization figure")
    if row.mfu is not None and row.mfu > 1.0:
        flags.append(f"MFU {row.mfu:.0%} of the {row.datasheet_gpu} {row.mfu_precision} datasheet peak is above "
                     "100%: the FLOP count, the time or the GPU named is wrong - not a utilization figure")
    return flags


def with_flags(row: ThroughputResult) -> ThroughputResult:
    """``row`` with its MFU against the datasheet (``with_mfu``) and the flags of every impossible figure."""
    row = with_mfu(row)
    return row.model_copy(update=dict(flags=figure_flags(row)))


def with_scaling(rows: list[ThroughputResult]) -> list[ThroughputResult]:
    """Fill speedup, ideal speedup, scaling efficiency and its basis of every ok row from the ok 1-device row of
    its configuration, and the flags of every row."""
    ok = {r.key(): r for r in rows if r.status == "ok" and r.samples_per_s}
    out = []
    for row in rows:
        base = ok.get(row.config.baseline_key())
        if row.status == "ok" and row.samples_per_s and base is not None and base.samples_per_s:
            speedup = row.samples_per_s / base.samples_per_s
            basis, ideal = scaling_basis(row, base)
            row = row.model_copy(update=dict(speedup=speedup, ideal_speedup=ideal, efficiency_basis=basis,
                                             scaling_efficiency=speedup / ideal if ideal else None))
        else:
            row = row.model_copy(update=dict(speedup=None, ideal_speedup=None, scaling_efficiency=None,
                                             efficiency_basis=None))
        out.append(with_flags(row))
    return out


# --- CSV and Markdown views ---------------------------------------------------------------------------------

CSV_COLUMNS = [
    "model", "mode", "device", "amp", "compile", "devices", "nodes", "world_size", "requested_batch_size",
    "batch_size", "global_batch_size", "seq_len", "image_size", "data", "channels_last", "status",
    "samples_per_s", "samples_per_s_min", "samples_per_s_max", "median_time_s", "min_time_s", "max_time_s",
    "steps", "warmup", "repeats", "speedup", "ideal_speedup", "scaling_efficiency", "efficiency_basis",
    "flops_per_step", "flops_per_sample", "achieved_flops_per_s", "peak_precision", "peak_flops_per_s",
    "utilization", "mfu", "mfu_precision", "datasheet_gpu", "datasheet_peak_flops_per_s", "joules_per_sample",
    "mean_power_w", "energy_covers", "peak_memory_bytes", "peak_host_rss_bytes", "threads_per_process", "cpu_cores", "backend",
    "device_name", "error", "flags", "notes", "framework", "framework_version", "compiler",
]


def _csv_row(r: ThroughputResult) -> dict[str, Any]:
    c = r.config
    return dict(
        model=c.model, mode=c.mode, device=c.device, amp=c.amp, compile=int(c.compile), devices=c.devices,
        nodes=c.nodes, world_size=r.world_size, requested_batch_size=c.batch_size, batch_size=r.batch_size,
        global_batch_size=r.global_batch_size, seq_len=c.seq_len, image_size=c.image_size, data=c.data or "",
        channels_last=int(c.channels_last), status=r.status, samples_per_s=r.samples_per_s,
        samples_per_s_min=r.samples_per_s_min, samples_per_s_max=r.samples_per_s_max,
        median_time_s=r.median_time_s, min_time_s=r.min_time_s, max_time_s=r.max_time_s, steps=c.steps,
        warmup=c.warmup, repeats=c.repeats, speedup=r.speedup, ideal_speedup=r.ideal_speedup,
        scaling_efficiency=r.scaling_efficiency, efficiency_basis=r.efficiency_basis or "",
        flops_per_step=r.flops_per_step, flops_per_sample=r.flops_per_sample,
        achieved_flops_per_s=r.achieved_flops_per_s, peak_precision=r.peak_precision,
        peak_flops_per_s=r.peak_flops_per_s, utilization=r.utilization, mfu=r.mfu, mfu_precision=r.mfu_precision,
        datasheet_gpu=r.datasheet_gpu, datasheet_peak_flops_per_s=r.datasheet_peak_flops_per_s,
        joules_per_sample=r.joules_per_sample, mean_power_w=r.mean_power_w, energy_covers="+".join(r.energy_covers),
        peak_memory_bytes=r.peak_memory_bytes,
        peak_host_rss_bytes=r.peak_host_rss_bytes, threads_per_process=r.threads_per_process, cpu_cores=r.cpu_cores,
        backend=r.backend, device_name=r.device_name, error=r.error or "", flags="; ".join(r.flags),
        notes="; ".join(r.notes), framework=r.framework or c.framework_name(), framework_version=r.framework_version,
        compiler=r.compiler,
    )


def to_csv(rows: list[ThroughputResult]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in _csv_row(r).items()})
    return buf.getvalue()


def _num(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    if abs(x) < 10:  # slow configurations (e.g. BERT on a CPU): keep three significant digits
        digits = max(digits, 3 - len(str(int(abs(x)))) if abs(x) >= 1 else 3)
    return f"{x:,.{digits}f}"


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _sort_key(r: ThroughputResult) -> tuple[Any, ...]:
    c = r.config
    return (c.model, c.mode, c.device, c.seq_len or 0, c.image_size or 0, c.data or "", c.channels_last,
            c.threads or 0, c.is_program, c.framework_name(), ["off", "bf16", "fp16"].index(c.amp), c.compile,
            c.batch_size, c.nodes, c.devices)


def to_markdown(rows: list[ThroughputResult]) -> str:
    """A DLPerf-style report: per model and mode, throughput (samples/s, median of the repeats) per device count
    with the speedup over one device, then every configuration in detail."""
    from daybreak.measure.flops import format_flops

    rows = sorted(rows, key=_sort_key)
    out = ["# Throughput", ""]
    if not rows:
        return "\n".join(out + ["No configurations measured yet.", ""])
    first = next((r for r in rows if r.system), None)
    if first and first.system:
        out.append(f"Hardware: {first.system.hardware_summary()}; torch {first.system.torch}; "
                   f"Python {first.system.python}.")
    c0 = rows[0].config
    out += [f"Batch size is per device; the global batch is batch x devices. Throughput is the median of "
            f"{c0.repeats} repeats of {c0.steps} steps after {c0.warmup} warm-up steps (device synchronized); "
            "speedup is relative to the same configuration on one device, efficiency = speedup / ideal speedup: "
            "the device count on GPUs; on CPUs, where the processes share the cores, the ratio of total threads "
            "(basis same_total_cores: 1 process x C threads vs D processes x C/D threads, ideal 1 per node; "
            "same_threads_per_process with --threads). Utilization is against the peak `daybreak peak` measured "
            "on this machine; MFU against the vendor's datasheet peak (GPUs of daybreak's catalog only). Energy "
            "per sample is the median over the repeats of the counters' joules (GPU, CPU package, DRAM where "
            "they exist) / samples. A figure marked (!) is above its ceiling and cannot be true; the flags below "
            "each table say why.", ""]

    groups: dict[tuple[str, str, str, int | None, int | None, str | None, bool, int | None, str],
                 list[ThroughputResult]] = {}
    for r in rows:
        c = r.config
        groups.setdefault((c.model, c.mode, c.device, c.seq_len, c.image_size, c.data, c.channels_last, c.threads,
                           c.series()), []).append(r)
    programs = [r for r in rows if r.config.is_program]
    if programs:  # PyTorch's program rows when there are any (one protocol), else its worker rows (said so)
        out += _framework_table(programs if any(r.config.framework == PYTORCH for r in programs) else rows)
    for (model, mode, device, seq_len, image_size, data, channels_last, threads, framework), group in groups.items():
        extras = [framework if framework != PYTORCH else "", f"seq {seq_len}" if seq_len else "",
                  f"{image_size}px" if image_size else "",
                  f"data {data}" if data else "synthetic data", "channels_last" if channels_last else "",
                  f"{threads} thread{'s' if threads > 1 else ''}/process" if threads else "", device]
        out += [f"## {model} {mode} ({', '.join(e for e in extras if e)})", ""]
        counts = sorted({(r.config.nodes, r.config.devices) for r in group})
        header = ["precision", "compile", "batch/device"] + [
            (f"{n}x{d} devices" if n > 1 else f"{d} device{'s' if d > 1 else ''}") for n, d in counts]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        by_setting: dict[tuple[str, bool, int], dict[tuple[int, int], ThroughputResult]] = {}
        for r in group:
            c = r.config
            by_setting.setdefault((c.amp, c.compile, c.batch_size), {})[(c.nodes, c.devices)] = r
        for (amp, compiled, batch), cells in by_setting.items():
            line = [AMP_TO_PRECISION[amp] if amp == "off" else f"AMP {amp}", "on" if compiled else "off", str(batch)]
            for count in counts:
                found = cells.get(count)
                if found is None:
                    line.append("")
                elif found.status != "ok":
                    line.append(found.status.upper())
                else:
                    cell = _num(found.samples_per_s)
                    if found.batch_size != found.config.batch_size:
                        cell += f" (bs={found.batch_size})"
                    if found.world_size > 1 and found.speedup is not None:
                        cell += f" ({found.speedup:.2f}x{' !' if _scaling_flagged(found) else ''})"
                    line.append(cell)
            out.append("| " + " | ".join(line) + " |")
        out.append("")
        out += _flag_lines(group)

    out += ["## All configurations", ""]
    header = ["model", "framework", "mode", "precision", "compile", "devices", "batch/device", "global batch", "samples/s",
              "min-max", "speedup", "efficiency", "basis", "FLOP/step", "achieved", "utilization", "MFU (datasheet)",
              "energy/sample", "peak memory", "status"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for r in rows:
        c = r.config
        devices = f"{c.nodes}x{c.devices}" if c.nodes > 1 else str(c.devices)
        memory = _bytes(r.peak_memory_bytes) if r.peak_memory_bytes is not None else (
            f"{_bytes(r.peak_host_rss_bytes)} RSS" if r.peak_host_rss_bytes is not None else "-")
        status = r.status if r.status == "ok" else f"{r.status}: {_md_cell((r.error or '')[:120])}"
        out.append("| " + " | ".join([
            c.model, _md_cell(_framework_text(r)), c.mode, AMP_TO_PRECISION[c.amp] if c.amp == "off" else c.amp,
            "on" if c.compile else "off",
            devices, str(r.batch_size or c.batch_size), str(r.global_batch_size or "-"), _num(r.samples_per_s),
            f"{_num(r.samples_per_s_min)}-{_num(r.samples_per_s_max)}" if r.samples_per_s else "-",
            (f"{r.speedup:.2f}x" + (" (!)" if _scaling_flagged(r) else "")) if r.speedup is not None else "-",
            (f"{r.scaling_efficiency:.0%}" + (" (!)" if r.scaling_efficiency > 1 else ""))
            if r.scaling_efficiency is not None else "-",
            r.efficiency_basis or "-",
            format_flops(r.flops_per_step) if r.flops_per_step is not None else "-",
            format_flops(r.achieved_flops_per_s, "FLOP/s") if r.achieved_flops_per_s is not None else "-",
            (f"{r.utilization:.1%} of {r.peak_precision}" + (" (!)" if r.utilization > 1 else ""))
            if r.utilization is not None else "-",
            format_mfu(r), format_joules_per_sample(r), memory, status,
        ]) + " |")
    out.append("")
    return "\n".join(out)


def _framework_text(r: ThroughputResult) -> str:
    name = r.framework or r.config.framework_name()
    return f"{name} {r.framework_version}" if r.framework_version else name


def compiler_name(r: ThroughputResult) -> str:
    """What compiled the step: the row's record, else what the configuration asked for."""
    if r.compiler:
        return r.compiler
    if not r.config.compile:
        return "none"
    return {"pytorch": "torch.compile", "jax": "XLA", "tensorflow": "XLA", "paddle": "CINN",
            "mxnet": "hybridize"}.get(r.config.framework, "on")


DLPERF_PROTOCOL = (20, 100, 7)  # warm-up steps, timed steps, repeats (each a fresh process; the median)


def protocol_text(warmup: int, steps: int, repeats: int, fresh_processes: bool = True) -> str:
    """'20 warm-up + 100 timed steps, median of 7 repeats, each a fresh process (DLPerf's protocol)'."""
    text = (f"{warmup} warm-up + {steps} timed steps, median of {repeats} repeats"
            + (", each a fresh process" if fresh_processes else " (timed windows of one process)"))
    if (warmup, steps, repeats) == DLPERF_PROTOCOL:
        return text + " (DLPerf's protocol)"
    return text + " (smaller than DLPerf's 20 + 100 x 7: not DLPerf's protocol)" if (
        warmup < 20 or steps < 100 or repeats < 7) else text


def math_text(r: ThroughputResult) -> str:
    """What the row's matmuls ran in (TF32 named as such), else what its configuration asked for."""
    return r.math_precision or AMP_TO_PRECISION[r.config.amp]


def _framework_table(rows: list[ThroughputResult]) -> list[str]:
    """DLPerf's comparison: samples/s per framework x batch x precision x compiler, relative to daybreak's PyTorch
    model without torch.compile on the same configuration and protocol, with the spread of the repeats, the model
    FLOPs (one figure per model, shape and batch) beside each framework's own count, and how busy the machine was."""
    from daybreak.measure.flops import format_flops

    eager = {r.key(): r for r in rows if r.status == "ok" and r.config.framework == PYTORCH and not r.config.compile}
    protocols = sorted({(r.config.warmup, r.config.steps, r.config.repeats, r.config.is_program) for r in rows})
    said = "; ".join(protocol_text(w, s, n, p) for w, s, n, p in protocols)
    if len({p[3] for p in protocols}) > 1:
        said += ". NOT ONE PROTOCOL: PyTorch's worker rows and the programs' rows are timed differently"
    busy = [r for r in rows if is_busy(r.context)]
    out = ["## Frameworks (DLPerf)", "",
           f"Protocol: {said}. Each framework trains the same model on the same configuration: PyTorch is daybreak's "
           "built-in model, the others their reference programs (or `--program`); min-max is the spread over the "
           "repeats; 'vs PyTorch eager' divides by PyTorch's row without its compiler under the same protocol; model "
           "FLOPs are daybreak's count for the model, shape and batch, the same in every framework's row (own count: "
           "the framework's, a diagnostic); 'others' is the share of the CPUs other processes took while the row "
           "ran.", ""]
    if busy:
        worst = max(r.context.busy_fraction or 0.0 for r in busy if r.context is not None)
        out += [f"**Measured on a busy machine**: other processes took up to {worst:.0%} of the CPUs during "
                f"{len(busy)} of these {len(rows)} rows; the figures are this machine's on that day, not a ranking.",
                ""]
    out += ["| model | framework | compiler | precision | device | threads | batch/device | samples/s | min-max | "
            "vs PyTorch eager | model FLOP/step | own count | others | status |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r.config
        base = eager.get(c.pytorch_eager_key())
        ratio = (f"{r.samples_per_s / base.samples_per_s:.2f}x" if r.status == "ok" and r.samples_per_s and base
                 and base.samples_per_s else "-")
        status = "ok" + (" (!)" if r.flags else "") if r.status == "ok" else \
            f"{r.status}: {_md_cell((r.error or '')[:160])}"
        devices = f"{c.nodes}x{c.devices}" if c.nodes > 1 else str(c.devices)
        own = "-"
        if r.own_flops_per_step and r.flops_per_step and r.flops_source == "daybreak":
            own = f"{format_flops(r.own_flops_per_step)} ({r.own_flops_per_step / r.flops_per_step - 1:+.1%})"
        elif r.own_flops_per_step:
            own = format_flops(r.own_flops_per_step)
        others = f"{r.context.busy_fraction:.0%}" if r.context and r.context.busy_fraction is not None else "-"
        threads = str(r.threads_per_process or c.threads or "-")
        out.append("| " + " | ".join([
            c.model, _md_cell(_framework_text(r)), compiler_name(r), math_text(r), f"{devices} {c.device}", threads,
            str(r.batch_size or c.batch_size), _num(r.samples_per_s),
            f"{_num(r.samples_per_s_min)}-{_num(r.samples_per_s_max)}" if r.samples_per_s else "-", ratio,
            format_flops(r.flops_per_step) if r.flops_per_step else "-", own, others, status,
        ]) + " |")
    return out + [""] + _flag_lines([r for r in rows if r.config.is_program])


def format_mfu(r: ThroughputResult) -> str:
    """``41.2% of A100 SXM bf16`` (with (!) above 100%), or ``-``."""
    if r.mfu is None:
        return "-"
    return f"{r.mfu:.1%} of {r.datasheet_gpu} {r.mfu_precision}" + (" (!)" if r.mfu > 1 else "")


def format_joules_per_sample(r: ThroughputResult) -> str:
    if r.joules_per_sample is None:
        return "-"
    j = r.joules_per_sample
    text = f"{j * 1000:.3g} mJ" if j < 1 else f"{j:.3g} J"
    return text + (f" ({'+'.join(r.energy_covers)})" if r.energy_covers else "")


def _scaling_flagged(r: ThroughputResult) -> bool:
    return (r.scaling_efficiency is not None and r.scaling_efficiency > 1) or (
        r.speedup is not None and r.world_size > 1 and r.speedup > r.world_size)


def _flag_lines(rows: list[ThroughputResult]) -> list[str]:
    """The flags (figures above their ceiling, with the reason) and notes of ``rows``, as Markdown lists."""
    out = []
    flagged = [(r, f) for r in rows for f in r.flags]
    if flagged:
        out += ["Flags (figures marked (!), not facts):", ""]
        out += [f"- (!) {_md_cell(r.config.label())}: {_md_cell(f)}" for r, f in flagged]
        out.append("")
    noted: dict[str, list[ThroughputResult]] = {}
    for r in rows:
        for n in r.notes:
            noted.setdefault(n, []).append(r)
    if noted:
        out += ["Notes:", ""]
        for n, which in noted.items():
            where = (which[0].config.label() if len(which) == 1 else
                     "every configuration above" if len(which) == len(rows) else
                     f"{len(which)} configurations ({', '.join(r.config.label() for r in which[:3])}"
                     + (", ..." if len(which) > 3 else "") + ")")
            out.append(f"- {_md_cell(where)}: {_md_cell(n)}")
        out.append("")
    return out


def format_peak(p: PeakResult) -> str:
    from daybreak.measure.flops import format_flops

    head = f"{p.device_name} ({p.device}; torch {p.torch}" + (
        f"; {p.threads} thread{'s' if p.threads > 1 else ''}" if p.threads else "")
    if p.cpu_capability:
        head += f"; CPU capability {p.cpu_capability}"
    took = f", took {p.seconds:.1f} s" if p.seconds is not None else ""
    budget = f" (budget {p.budget_s:.3g} s)" if p.budget_s else ""
    lines = [head + ")", f"  cache key {p.machine_key}, measured {p.measured_at:%Y-%m-%d %H:%M}{took}{budget}"]
    for precision in ("fp32", "tf32", "bf16", "fp16"):
        if precision in p.flops_per_s:
            samples = p.flops_samples.get(precision) or [p.flops_per_s[precision]]
            lines.append(f"  {precision:<5} matmul {format_flops(p.flops_per_s[precision], 'FLOP/s'):>14}"
                         f"  (n={p.matmul_size.get(precision)}, {len(samples)} repeats, "
                         f"min {format_flops(min(samples), 'FLOP/s')}, max {format_flops(max(samples), 'FLOP/s')})")
        elif precision in p.emulated:
            e = p.emulated[precision]
            lines.append(f"  {precision:<5} EMULATED {format_flops(e.flops_per_s, 'FLOP/s'):>12}  (n={e.matmul_size}): "
                         f"{e.note}")
        elif precision in p.unsupported:
            lines.append(f"  {precision:<5} not measured: {p.unsupported[precision]}")
        elif precision in p.skipped:
            lines.append(f"  {precision:<5} not measured: {p.skipped[precision]} (measured next time)")
        elif precision in p.unreliable:
            lines.append(f"  {precision:<5} NOT A CEILING: {p.unreliable[precision]} (measured again next time)")
    if "bandwidth" in p.unreliable:
        lines.append(f"  copy bandwidth NOT A CEILING: {p.unreliable['bandwidth']} (measured again next time)")
    if p.bandwidth_bytes_per_s:
        lines.append(f"  copy bandwidth {p.bandwidth_bytes_per_s / 1e9:.1f} GB/s (read + write, "
                     f"{(p.copy_bytes or 0) / 2**20:.0f} MiB tensor)")
        ridge = p.ridge_point("fp32")
        if ridge:
            lines.append(f"  fp32 ridge point {ridge:.1f} FLOP/byte")
    lines += [f"  note: {n}" for n in p.notes]
    return "\n".join(lines)


def load_peak_file(path: str | Path) -> PeakResult | None:
    try:
        return PeakResult.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None
