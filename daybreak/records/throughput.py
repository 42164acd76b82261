"""Typed records of `daybreak throughput` (one ThroughputResult per configuration) and `daybreak peak`.

``results.jsonl`` holds one ThroughputResult per line, appended as each configuration is measured; the CSV and
Markdown views (and the plots) are regenerated from it. A configuration is identified by ``ThroughputConfig.key``:
model, mode, per-device batch size (as requested), precision, compile, devices per node, nodes, sequence length,
image size, data, memory layout, device type and --threads (None = the default split of the cores); warm-up,
steps and repeats are not part of it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import datetime
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, Field, ValidationError

from daybreak.measure.system import SystemInfo

Mode = Literal["train", "infer"]
Amp = Literal["off", "bf16", "fp16"]
Status = Literal["ok", "oom", "failed", "timeout"]

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
    channels_last: bool = False
    device: str = "cpu"  # "cpu" or "cuda"
    warmup: int = 20
    steps: int = 100
    repeats: int = 7
    threads: int | None = None  # torch intra-op threads per process; None = cores / processes on CPU
    find_max_batch: bool = False

    @property
    def world_size(self) -> int:
        return self.devices * self.nodes

    def key(self) -> tuple:
        return (self.model, self.mode, self.batch_size, self.amp, self.compile, self.devices, self.nodes,
                self.seq_len, self.image_size, self.data, self.channels_last, self.device, self.threads)

    def baseline_key(self) -> tuple:
        """The key of the same configuration on one device of one node (the speedup's denominator)."""
        return self.model_copy(update=dict(devices=1, nodes=1)).key()

    def label(self) -> str:
        parts = [self.model, self.mode, f"bs={self.batch_size}", f"amp={self.amp}",
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
        head = f"{self.model}-{self.mode}-bs{self.batch_size}-{self.amp}-c{int(self.compile)}-d{self.devices}"
        return f"{head}-n{self.nodes}-{digest}"


class Attempt(BaseModel):
    """One try of --find-max-batch: the per-device batch size and how it ended."""

    batch_size: int
    status: Status
    error: str | None = None


class ThroughputResult(BaseModel):
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

    # derived from the 1-device row of the same configuration
    speedup: float | None = None
    scaling_efficiency: float | None = None  # speedup / world size

    # FLOPs (torch.utils.flop_counter; a multiply-add = 2 FLOPs)
    flops_per_step: int | None = None  # all devices together: per-device count x world size
    flops_per_sample: float | None = None
    achieved_flops_per_s: float | None = None  # flops_per_step x steps / median time
    peak_precision: str | None = None  # fp32 / bf16 / fp16: the matmul peak utilization is relative to
    peak_flops_per_s: float | None = None  # measured peak of all devices used together in that precision
    utilization: float | None = None  # achieved / peak, 0..1
    peak_bandwidth_bytes_per_s: float | None = None  # the measured copy bandwidth (per device)

    # memory
    peak_memory_bytes: int | None = None  # accelerator: torch.cuda.max_memory_allocated, max over ranks
    peak_host_rss_bytes: int | None = None  # ru_maxrss of the worker process, max over ranks

    # how it ran
    backend: str | None = None  # gloo / nccl with several processes
    threads_per_process: int | None = None
    device_name: str | None = None
    optimizer: str | None = None  # train mode: e.g. "SGD(lr=0.001, momentum=0.9, weight_decay=5e-05, fused)"
    input_shape: list[int] = Field(default_factory=list)  # one sample's input shape
    attempts: list[Attempt] = Field(default_factory=list)  # --find-max-batch tries, largest first
    init_s: float | None = None  # worker: build, FLOP count, compile and warm-up
    wall_s: float | None = None  # the whole configuration, process launch included
    system: SystemInfo | None = None
    started_at: datetime | None = None
    command: list[str] = Field(default_factory=list)  # the worker command line

    def key(self) -> tuple:
        return self.config.key()


class PeakResult(BaseModel):
    """The two roofline ceilings of a device: peak matmul FLOP/s per precision and memory copy bandwidth."""

    schema_version: int = 1
    kind: Literal["daybreak.peak"] = "daybreak.peak"
    machine_key: str
    device: str  # "cpu" or "cuda:0"
    device_name: str
    torch: str
    threads: int | None = None  # torch intra-op threads used on CPU
    flops_per_s: dict[str, float] = Field(default_factory=dict)  # precision -> median matmul FLOP/s
    flops_samples: dict[str, list[float]] = Field(default_factory=dict)  # precision -> every repeat
    matmul_size: dict[str, int] = Field(default_factory=dict)  # precision -> n of the n x n x n matmul
    unsupported: dict[str, str] = Field(default_factory=dict)  # precision -> why it was not measured
    bandwidth_bytes_per_s: float | None = None  # (bytes read + bytes written) / time of a large copy, median
    bandwidth_samples: list[float] = Field(default_factory=list)
    copy_bytes: int | None = None  # size of the copied tensor
    measured_at: datetime
    seconds: float | None = None  # how long the measurement took
    system: SystemInfo | None = None

    def peak_for_amp(self, amp: str) -> tuple[str, float | None]:
        precision = AMP_TO_PRECISION.get(amp, amp)
        return precision, self.flops_per_s.get(precision)

    def ridge_point(self, precision: str = "fp32") -> float | None:
        """FLOPs per byte at which the roofline turns from bandwidth- to compute-bound."""
        flops = self.flops_per_s.get(precision)
        if not flops or not self.bandwidth_bytes_per_s:
            return None
        return flops / self.bandwidth_bytes_per_s


# --- results.jsonl ------------------------------------------------------------------------------------------

def load_results(path: str | Path, warn=None) -> list[ThroughputResult]:
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


def latest_by_key(rows: Iterable[ThroughputResult]) -> dict[tuple, ThroughputResult]:
    """The last record of each configuration (a --force re-measurement replaces the earlier one)."""
    out: dict[tuple, ThroughputResult] = {}
    for row in rows:
        out.pop(row.key(), None)
        out[row.key()] = row
    return out


def with_scaling(rows: list[ThroughputResult]) -> list[ThroughputResult]:
    """Fill speedup and scaling efficiency of every ok row from the ok 1-device row of its configuration."""
    ok = {r.key(): r for r in rows if r.status == "ok" and r.samples_per_s}
    out = []
    for row in rows:
        base = ok.get(row.config.baseline_key())
        if row.status == "ok" and row.samples_per_s and base is not None and base.samples_per_s:
            speedup = row.samples_per_s / base.samples_per_s
            row = row.model_copy(update=dict(speedup=speedup, scaling_efficiency=speedup / row.world_size))
        else:
            row = row.model_copy(update=dict(speedup=None, scaling_efficiency=None))
        out.append(row)
    return out


# --- CSV and Markdown views ---------------------------------------------------------------------------------

CSV_COLUMNS = [
    "model", "mode", "device", "amp", "compile", "devices", "nodes", "world_size", "requested_batch_size",
    "batch_size", "global_batch_size", "seq_len", "image_size", "data", "channels_last", "status",
    "samples_per_s", "samples_per_s_min", "samples_per_s_max", "median_time_s", "min_time_s", "max_time_s",
    "steps", "warmup", "repeats", "speedup", "scaling_efficiency", "flops_per_step", "flops_per_sample",
    "achieved_flops_per_s", "peak_precision", "peak_flops_per_s", "utilization", "peak_memory_bytes",
    "peak_host_rss_bytes", "threads_per_process", "backend", "device_name", "error",
]


def _csv_row(r: ThroughputResult) -> dict:
    c = r.config
    return dict(
        model=c.model, mode=c.mode, device=c.device, amp=c.amp, compile=int(c.compile), devices=c.devices,
        nodes=c.nodes, world_size=r.world_size, requested_batch_size=c.batch_size, batch_size=r.batch_size,
        global_batch_size=r.global_batch_size, seq_len=c.seq_len, image_size=c.image_size, data=c.data or "",
        channels_last=int(c.channels_last), status=r.status, samples_per_s=r.samples_per_s,
        samples_per_s_min=r.samples_per_s_min, samples_per_s_max=r.samples_per_s_max,
        median_time_s=r.median_time_s, min_time_s=r.min_time_s, max_time_s=r.max_time_s, steps=c.steps,
        warmup=c.warmup, repeats=c.repeats, speedup=r.speedup, scaling_efficiency=r.scaling_efficiency,
        flops_per_step=r.flops_per_step, flops_per_sample=r.flops_per_sample,
        achieved_flops_per_s=r.achieved_flops_per_s, peak_precision=r.peak_precision,
        peak_flops_per_s=r.peak_flops_per_s, utilization=r.utilization, peak_memory_bytes=r.peak_memory_bytes,
        peak_host_rss_bytes=r.peak_host_rss_bytes, threads_per_process=r.threads_per_process, backend=r.backend,
        device_name=r.device_name, error=r.error or "",
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


def _sort_key(r: ThroughputResult):
    c = r.config
    return (c.model, c.mode, c.device, c.seq_len or 0, c.image_size or 0, c.data or "", c.channels_last,
            c.threads or 0, ["off", "bf16", "fp16"].index(c.amp), c.compile, c.batch_size, c.nodes, c.devices)


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
            "speedup is relative to the same configuration on one device.", ""]

    groups: dict[tuple, list[ThroughputResult]] = {}
    for r in rows:
        c = r.config
        groups.setdefault((c.model, c.mode, c.device, c.seq_len, c.image_size, c.data, c.channels_last, c.threads),
                          []).append(r)
    for (model, mode, device, seq_len, image_size, data, channels_last, threads), group in groups.items():
        extras = [f"seq {seq_len}" if seq_len else "", f"{image_size}px" if image_size else "",
                  f"data {data}" if data else "synthetic data", "channels_last" if channels_last else "",
                  f"{threads} thread{'s' if threads > 1 else ''}/process" if threads else "", device]
        out += [f"## {model} {mode} ({', '.join(e for e in extras if e)})", ""]
        counts = sorted({(r.config.nodes, r.config.devices) for r in group})
        header = ["precision", "compile", "batch/device"] + [
            (f"{n}x{d} devices" if n > 1 else f"{d} device{'s' if d > 1 else ''}") for n, d in counts]
        out.append("| " + " | ".join(header) + " |")
        out.append("|" + "---|" * len(header))
        by_setting: dict[tuple, dict[tuple, ThroughputResult]] = {}
        for r in group:
            c = r.config
            by_setting.setdefault((c.amp, c.compile, c.batch_size), {})[(c.nodes, c.devices)] = r
        for (amp, compiled, batch), cells in by_setting.items():
            line = [AMP_TO_PRECISION[amp] if amp == "off" else f"AMP {amp}", "on" if compiled else "off", str(batch)]
            for count in counts:
                r = cells.get(count)
                if r is None:
                    line.append("")
                elif r.status != "ok":
                    line.append(r.status.upper())
                else:
                    cell = _num(r.samples_per_s)
                    if r.batch_size != r.config.batch_size:
                        cell += f" (bs={r.batch_size})"
                    if r.world_size > 1 and r.speedup is not None:
                        cell += f" ({r.speedup:.2f}x)"
                    line.append(cell)
            out.append("| " + " | ".join(line) + " |")
        out.append("")

    out += ["## All configurations", ""]
    header = ["model", "mode", "precision", "compile", "devices", "batch/device", "global batch", "samples/s",
              "min-max", "speedup", "efficiency", "FLOP/step", "achieved", "utilization", "peak memory", "status"]
    out.append("| " + " | ".join(header) + " |")
    out.append("|" + "---|" * len(header))
    for r in rows:
        c = r.config
        devices = f"{c.nodes}x{c.devices}" if c.nodes > 1 else str(c.devices)
        memory = _bytes(r.peak_memory_bytes) if r.peak_memory_bytes is not None else (
            f"{_bytes(r.peak_host_rss_bytes)} RSS" if r.peak_host_rss_bytes is not None else "-")
        status = r.status if r.status == "ok" else f"{r.status}: {_md_cell((r.error or '')[:120])}"
        out.append("| " + " | ".join([
            c.model, c.mode, AMP_TO_PRECISION[c.amp] if c.amp == "off" else c.amp, "on" if c.compile else "off",
            devices, str(r.batch_size or c.batch_size), str(r.global_batch_size or "-"), _num(r.samples_per_s),
            f"{_num(r.samples_per_s_min)}-{_num(r.samples_per_s_max)}" if r.samples_per_s else "-",
            f"{r.speedup:.2f}x" if r.speedup is not None else "-",
            f"{r.scaling_efficiency:.0%}" if r.scaling_efficiency is not None else "-",
            format_flops(r.flops_per_step) if r.flops_per_step is not None else "-",
            format_flops(r.achieved_flops_per_s, "FLOP/s") if r.achieved_flops_per_s is not None else "-",
            f"{r.utilization:.1%} of {r.peak_precision}" if r.utilization is not None else "-",
            memory, status,
        ]) + " |")
    out.append("")
    return "\n".join(out)


def format_peak(p: PeakResult) -> str:
    from daybreak.measure.flops import format_flops

    lines = [f"{p.device_name} ({p.device}; torch {p.torch}" + (f"; {p.threads} threads" if p.threads else "") + ")",
             f"  cache key {p.machine_key}, measured {p.measured_at:%Y-%m-%d %H:%M}"]
    for precision in ("fp32", "bf16", "fp16"):
        if precision in p.flops_per_s:
            samples = p.flops_samples.get(precision) or [p.flops_per_s[precision]]
            lines.append(f"  {precision:<5} matmul {format_flops(p.flops_per_s[precision], 'FLOP/s'):>14}"
                         f"  (n={p.matmul_size.get(precision)}, {len(samples)} repeats, "
                         f"min {format_flops(min(samples), 'FLOP/s')}, max {format_flops(max(samples), 'FLOP/s')})")
        elif precision in p.unsupported:
            lines.append(f"  {precision:<5} not measured: {p.unsupported[precision]}")
    if p.bandwidth_bytes_per_s:
        lines.append(f"  copy bandwidth {p.bandwidth_bytes_per_s / 1e9:.1f} GB/s (read + write, "
                     f"{(p.copy_bytes or 0) / 2**20:.0f} MiB tensor)")
        ridge = p.ridge_point("fp32")
        if ridge:
            lines.append(f"  fp32 ridge point {ridge:.1f} FLOP/byte")
    return "\n".join(lines)


def load_peak_file(path: str | Path) -> PeakResult | None:
    try:
        return PeakResult.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return None
