"""InferenceResult: the typed record of `daybreak infer` (inference.json in the run directory).

Latency is DAWNBench's: every example of the task's eval set classified one at a time (batch 1), mean =
total / N, with the percentiles MLPerf reports (p90 is SingleStream's metric). Cost is latency x price. Energy is
read from the hardware counters (daybreak.measure.energy) at the boundaries of the timed loops, right after the
device synchronize, and given in joules per 10,000 examples; never estimated.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.fileio import atomic_write_text
from daybreak.measure.system import SystemInfo
from daybreak.records.base import Versioned, load_record
from daybreak.records.fields import Count, Fraction, Index, IsoDate, NonNegative, Positive, Seconds, Target

INFERENCE_FILE = "inference.json"

CLOCK_INCLUDED = (
    "per query, from a prepared input tensor (batch 1) in host memory to the predicted label on the host: "
    "host-to-device copy, forward pass (with the recipe's test-time predict if it has one), argmax "
    "(and top-5 when the task reports it), device-to-host copy of the label, device synchronize"
)
CLOCK_EXCLUDED = (
    "reading and decoding the dataset files from disk, the recipe's prepare (normalization/layout, applied once "
    "to the whole eval set on the host before timing), model build and checkpoint load, torch.compile, "
    "warm-up queries, accuracy bookkeeping and the progress bar"
)


class LatencyStats(BaseModel):
    """Per-query latencies of the batch-1 pass, in milliseconds. Percentiles are nearest-rank."""

    n: Count  # timed queries (the whole eval set)
    total_s: Positive  # sum of the per-query latencies
    mean_ms: Positive  # total / n: DAWNBench's latency
    min_ms: NonNegative
    p50_ms: NonNegative
    p90_ms: NonNegative  # MLPerf SingleStream's metric
    p99_ms: NonNegative
    max_ms: NonNegative
    std_ms: NonNegative
    percentile_method: str = "nearest-rank: the smallest latency with at least p% of queries at or below it"


class ThroughputStats(BaseModel):
    """Offline throughput: the whole eval set in batches of ``batch_size``, median of ``repeats`` passes."""

    examples_per_s: Positive  # n_examples / median pass time
    batch_size: Count
    repeats: Count
    warmup_passes: Index
    pass_s: list[Positive]  # wall time of each timed pass
    timed: str = ("full passes over the prepared eval set in host memory: per batch host-to-device copy, forward, "
                  "argmax, labels back to the host; device synchronized at the end of each pass")


class LoadgenScenario(BaseModel):
    scenario: Literal["SingleStream", "Offline"]
    valid: bool | None = None  # LoadGen's own "Result is : VALID"
    queries: Index | None = None  # SingleStream: queries issued; Offline: samples in the one query
    p90_ms: NonNegative | None = None  # LoadGen's 90th percentile latency (SingleStream only)
    mean_ms: NonNegative | None = None  # LoadGen's mean latency (SingleStream only)
    samples_per_s: NonNegative | None = None  # Offline: samples per second; SingleStream: QPS w/ loadgen overhead
    log_dir: str  # relative to the run directory
    summary_file: str = "mlperf_log_summary.txt"


class LoadgenResult(BaseModel):
    version: str | None = None  # mlcommons-loadgen package version
    min_query_count: Index
    min_duration_ms: Index
    single_stream: LoadgenScenario | None = None
    offline: LoadgenScenario | None = None


class EnergyWindow(BaseModel):
    """Energy of one measurement (the batch-1 latency pass, or the timed throughput passes): the counters read
    right after the device synchronize at the start and end of each timed stretch, summed over those stretches
    only (warm-up, progress-bar updates between stretches and everything else outside are left out)."""

    examples: Index  # examples classified in the measured stretches
    seconds: Seconds  # between the counter reads, summed over the stretches (>= timed_s: the loop's bookkeeping)
    timed_s: Seconds  # what the clock timed over the same examples (sum of latencies, or of the timed passes)
    joules: NonNegative | None = None  # the covered kinds together (None: see unavailable)
    joules_per_10k: NonNegative | None = None  # joules / examples x 10,000
    mean_power_w: NonNegative | None = None  # joules / seconds
    per_kind_j: dict[str, NonNegative | None] = Field(default_factory=dict)  # gpu, cpu_package, dram
    per_source_j: dict[str, NonNegative | None] = Field(default_factory=dict)  # each counter ("gpu0", ...)
    joules_per_10k_above_idle: float | None = None  # (joules - idle power x seconds) / examples x 10,000
    unavailable: dict[str, str] = Field(default_factory=dict)  # kind -> why its joules are not in the total
    notes: list[str] = Field(default_factory=list)


class InferenceEnergy(BaseModel):
    """Energy of the inference measurement from hardware counters; ``available`` False: ``unavailable`` says
    why for each kind (gpu, cpu_package, dram). Nothing is estimated."""

    available: bool = False
    covers: list[str] = Field(default_factory=list)  # the kinds in the totals, e.g. ["gpu", "cpu_package"]
    unavailable: dict[str, str] = Field(default_factory=dict)
    latency: EnergyWindow | None = None  # batch 1, every eval example once
    throughput: EnergyWindow | None = None  # the timed offline passes
    idle_power_w: NonNegative | None = None  # mean watts of the covered kinds before the measurement
    idle_seconds: Seconds | None = None
    counters: list[dict[Any, Any]] = Field(default_factory=list)  # what the meter read (EnergyMeter.describe())
    notes: list[str] = Field(default_factory=list)

    @property
    def joules_per_10k(self) -> float | None:
        """The batch-1 figure (DAWNBench's inference is batch 1): what the leaderboard ranks."""
        return self.latency.joules_per_10k if self.latency is not None else None


class InferenceSettings(BaseModel):
    device: str
    amp: str
    compile: bool
    threads: Count  # torch intra-op threads during the measurement
    warmup: Index  # untimed batch-1 queries before the timed pass
    latency_batch_size: Count = 1
    throughput_batch_size: Count | None = None
    throughput_repeats: Index = 0
    backend: Literal["daybreak", "loadgen"] = "daybreak"
    pinned_memory: bool = False  # prepared inputs live in page-locked host memory (CUDA)
    prepared_on: str = "cpu"  # where the recipe's prepare ran before the inputs were put in host memory
    test_time_predict: bool = False  # the recipe's predict (e.g. flip TTA) was used, as in the run's evaluations


class InferenceResult(Versioned):
    schema_version: Count = 1
    kind: Literal["daybreak.inference"] = "daybreak.inference"
    run_id: str
    task: str
    recipe: str
    model: str
    framework: str
    metric: str  # the accuracy the target applies to: "top1", "top5" or "f1"
    checkpoint: str  # file in the run directory
    checkpoint_epoch: NonNegative | None = None
    checkpoint_accuracy: Fraction | None = None  # what the run's evaluation measured for this checkpoint

    n_examples: Count
    latency: LatencyStats
    throughput: ThroughputStats | None = None

    accuracy: Fraction  # fraction, of `metric`, of the very batch-1 predictions that were timed
    top1: Fraction | None = None  # classification tasks
    top5: Fraction | None = None
    metrics: dict[str, float] = Field(default_factory=dict)  # everything measured, e.g. {"f1": .., "exact_match": ..}
    target: Target  # the run's recorded target
    valid: bool  # the accuracy reaches the target (Metric.reaches)
    reason: str | None = None  # why not valid

    cost_per_hour: NonNegative | None = None
    instance: str | None = None
    price_date: IsoDate | None = None  # the price's date, YYYY-MM-DD (daybreak.pricing)
    cost_per_example_usd: NonNegative | None = None  # mean latency (h) x price per hour
    cost_per_10k_usd: NonNegative | None = None  # DAWNBench's "cost to classify 10,000 images"

    settings: InferenceSettings
    clock_included: str = CLOCK_INCLUDED
    clock_excluded: str = CLOCK_EXCLUDED
    timer: str = "time.perf_counter_ns"
    system: SystemInfo
    data_source: str = ""
    data_official: bool = True
    created_at: datetime
    duration_s: Seconds | None = None  # wall time of the whole command
    command: list[str] = Field(default_factory=list)
    loadgen: LoadgenResult | None = None
    energy: InferenceEnergy | None = None  # None: a record made before energy was measured

    def save(self, run_dir: str | Path) -> Path:
        return atomic_write_text(Path(run_dir) / INFERENCE_FILE, self.model_dump_json(indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "InferenceResult":
        """Load from a run directory or an inference.json path, with one-line errors."""
        return load_record(cls, path, file_name=INFERENCE_FILE, kind="daybreak.inference", what="inference",
                           missing_hint=f"run `daybreak infer {path}` first")
