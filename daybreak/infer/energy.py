"""Energy of `daybreak infer`: the hardware counters (daybreak.measure.energy) read at the boundaries of the timed
loops, right after the device synchronize, and summed over the measured stretches only.

One meter per measurement: the GPU the model runs on (by UUID) and this node's CPU powercap zones. Where nothing
can be read the record says why (``unavailable`` per kind); nothing is estimated.
"""

from __future__ import annotations

from typing import Sequence

import torch

from daybreak.measure.energy import (EnergyDelta, EnergyMeter, EnergySnapshot, delta, sample_idle_power, sum_deltas,
                                     torch_gpu_uuid)
from daybreak.records.inference import EnergyWindow, InferenceEnergy

Windows = list[tuple[EnergySnapshot, EnergySnapshot]]  # (start, end) of each measured stretch


def open_meter(device: torch.device) -> EnergyMeter:
    """The device's GPU (if CUDA) and the node's CPU zones."""
    gpus: Sequence[int | str] = ()
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        uuid = torch_gpu_uuid(index)
        gpus = [uuid] if uuid else [index]
    return EnergyMeter(gpus=gpus)


def start_record(meter: EnergyMeter, idle_s: float) -> tuple[InferenceEnergy, list[str] | None]:
    """What the counters can measure here, and the idle power (``idle_s`` > 0, only where a counter exists) ->
    (the record, the kinds the idle power covers or None)."""
    e = InferenceEnergy(available=meter.available, unavailable=dict(meter.missing),
                        counters=meter.describe()["counters"])
    if not meter.available:
        e.notes.append("no energy counter is readable here: joules are not recorded (see unavailable); "
                       "nothing is estimated")
        return e, None
    covers = None
    if idle_s > 0:
        sample = sample_idle_power(idle_s, meter=meter)
        e.idle_power_w, e.idle_seconds = sample.total_w, idle_s
        if sample.total_w is not None:
            covers = list(sample.total_covers)
    return e, covers


def window(windows: Windows, examples: int, timed_s: float, idle_w: float | None = None,
           idle_covers: Sequence[str] | None = None) -> EnergyWindow | None:
    """Joules of the measured stretches (``windows``) -> the record's figures; None when nothing was read."""
    if not windows:
        return None
    energy: EnergyDelta = sum_deltas(delta(a, b) for a, b in windows)
    w = EnergyWindow(examples=examples, seconds=energy.seconds, timed_s=timed_s, joules=energy.total_j,
                     per_kind_j={k: energy.kind_j(k) for k in ("gpu", "cpu_package", "dram")},
                     per_source_j={s.source: s.joules for s in energy.sources},
                     unavailable=dict(energy.unavailable), notes=list(energy.notes))
    if energy.total_j is not None and examples > 0:
        w.joules_per_10k = energy.total_j / examples * 10_000
        if energy.seconds > 0:
            w.mean_power_w = energy.total_j / energy.seconds
        if idle_w is not None and idle_covers is not None and list(idle_covers) == list(energy.total_covers):
            w.joules_per_10k_above_idle = (energy.total_j - idle_w * energy.seconds) / examples * 10_000
    return w


def finish_record(e: InferenceEnergy, latency: EnergyWindow | None, throughput: EnergyWindow | None) -> InferenceEnergy:
    """The figures of both measurements into the record; ``covers`` from what the batch-1 total holds."""
    e.latency, e.throughput = latency, throughput
    first = latency or throughput
    if first is not None and first.joules is not None:
        e.covers = [k for k in ("gpu", "cpu_package", "dram") if first.per_kind_j.get(k) is not None]
        e.available = True
    elif first is not None:
        e.available = False
        e.unavailable = {**e.unavailable, **first.unavailable}
    return e


__all__ = ["Windows", "finish_record", "open_meter", "start_record", "window"]
