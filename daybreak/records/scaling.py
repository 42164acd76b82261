"""ScalingAnalysis: the record of `daybreak scaling` (scaling.json), computed by daybreak.analysis.scaling."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from daybreak.records.base import Record
from daybreak.records.provenance import Provenance

JSON_FILE = "scaling.json"


class ThroughputScalingRow(BaseModel):
    world_size: int
    samples_per_s: float
    speedup: float | None = None
    efficiency: float | None = None
    efficiency_basis: str | None = None  # the sweep's basis (devices / same_total_cores / same_threads_per_process)
    flags: list[str] = []  # figures that cannot be true, with the reason (never shown as plain facts)


class ThroughputScalingGroup(BaseModel):
    label: str
    source: str
    baseline_devices: int
    rows: list[ThroughputScalingRow]


class RunScalingRow(BaseModel):
    world_size: int
    threads: int | None = None  # torch threads per process (the first run's)
    n_runs: int
    n_reached: int
    global_batch_size: int | None = None
    mean_time_to_target_s: float | None = None  # reached runs only
    mean_epochs_to_target: float | None = None
    mean_time_per_epoch_s: float | None = None  # every run with an evaluation
    tta_speedup: float | None = None
    tta_efficiency: float | None = None
    epoch_speedup: float | None = None
    epoch_efficiency: float | None = None
    ideal_speedup: float | None = None  # what perfect scaling would give (see efficiency_basis)
    efficiency_basis: str | None = None  # devices / same_total_cores / same_threads_per_process, as for sweeps
    run_dirs: list[str] = Field(default_factory=list)
    flags: list[str] = Field(default_factory=list)  # efficiencies above 100%, with the reason (marked (!) in tables)


class RunScalingGroup(BaseModel):
    label: str
    task: str
    recipe: str
    target: float
    baseline_devices: int
    rows: list[RunScalingRow]


class ScalingAnalysis(Record):
    FILE = JSON_FILE
    WHAT = "scaling"

    schema_version: int = 1
    kind: Literal["daybreak.scaling"] = "daybreak.scaling"
    throughput: list[ThroughputScalingGroup] = Field(default_factory=list)
    runs: list[RunScalingGroup] = Field(default_factory=list)
    method: str = ("speedup over the smallest device count measured in each group (1 when there is a 1-device "
                   "row); efficiency = speedup / ideal speedup, the same for sweep rows and runs "
                   "(daybreak.records.throughput.ideal_speedup): the device count on accelerators, the ratio of "
                   "total threads (processes x threads per process) on CPUs, whose processes share the cores; run "
                   "groups: time-to-target speedup uses the mean over reached runs, time-per-epoch speedup the "
                   "training clock per epoch at each run's last evaluation; unreached runs count only for time "
                   "per epoch")
    notes: list[str] = Field(default_factory=list)
    provenance: Provenance
