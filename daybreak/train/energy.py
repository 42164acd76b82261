"""Energy of a run: the hardware counters (daybreak.measure.energy) read at every boundary of the run's timeline,
so joules-to-target follows exactly the stretches each clock rule set counts as time."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from daybreak.measure.energy import (EnergyDelta, EnergyMeter, EnergySnapshot, combine_ranks, delta,
                                     energy_by_phase, energy_for_clock, sample_idle_power, snapshot_at,
                                     torch_gpu_uuid)
from daybreak.rules import Interval, RuleSet
from daybreak.train.distributed import DistContext


class RunEnergy:
    """One meter per process: its own GPU (by UUID) and the node's CPU powercap zones."""

    def __init__(self, device: torch.device, ctx: DistContext):
        gpus: Sequence[int | str] = ()
        if device.type == "cuda":
            uuid = torch_gpu_uuid(device.index if device.index is not None else torch.cuda.current_device())
            gpus = [uuid] if uuid else [device.index or 0]
        self.ctx = ctx
        self.meter = EnergyMeter(gpus=gpus, rank=ctx.rank)
        self.snapshots: list[EnergySnapshot] = []
        self.available = self.meter.available
        self._last_power: tuple[float, float | None] | None = None  # (t, joules) of the last power reading
        self.power_log: Callable[[float, float], None] | None = None  # (t_s, watts) -> mllog power_reading
        self._ahead: EnergySnapshot | None = None  # read by read_ahead, for the next on_boundary

    def unavailable(self) -> dict[str, str]:
        return dict(self.meter.missing)

    def idle_power(self, seconds: float) -> tuple[float | None, float]:
        """Mean watts of the counted kinds over ``seconds`` of doing nothing, before the run."""
        if not self.available or seconds <= 0:
            return None, 0.0
        sample = sample_idle_power(seconds, meter=self.meter)
        return sample.total_w, seconds

    def read_ahead(self) -> None:
        """Read the counters now for the boundary about to be timestamped (Timeline.before_begin): the read is then
        off the phase that starts. The snapshot takes the boundary's instant in ``on_boundary``; the joules between
        the read and that instant (the clock read only, microseconds) count toward the phase that starts."""
        if self.available:
            self._ahead = self.meter.read()

    def on_boundary(self, t_s: float) -> None:
        if not self.available:
            return
        ahead, self._ahead = self._ahead, None
        snap = ahead.model_copy(update={"t_s": t_s}) if ahead is not None else self.meter.read(t_s)
        self.snapshots.append(snap)
        if self.power_log is not None:
            total = _total(snap)
            if self._last_power is not None and total is not None and self._last_power[1] is not None \
                    and t_s > self._last_power[0]:
                self.power_log(t_s, (total - self._last_power[1]) / (t_s - self._last_power[0]))
            self._last_power = (t_s, total)

    def under(self, rules: RuleSet, timeline: Sequence[Interval], at_s: float) -> EnergyDelta | None:
        """Joules counted by ``rules`` up to ``at_s``, summed over every rank (a collective under torchrun:
        every rank calls it). None when no rank has a counter."""
        local: EnergyDelta | None = None
        if self.available and self.snapshots:
            local = energy_for_clock(rules, timeline, self.snapshots, at_s).energy
        parts: list[Any] = [local]
        if self.ctx.enabled:
            import torch.distributed as dist

            parts = [None] * self.ctx.world_size
            dist.all_gather_object(parts, local)
        got = [p for p in parts if p is not None]
        return combine_ranks(got) if got else None

    def per_phase(self, timeline: Sequence[Interval]) -> dict[str, float | None]:
        """This process's counters, per phase (summed over the phase's intervals)."""
        if not self.available or not self.snapshots:
            return {}
        spans = [(i.phase, snapshot_at(self.snapshots, i.start_s), snapshot_at(self.snapshots, i.end_s))
                 for i in timeline]
        return {phase: d.total_j for phase, d in energy_by_phase(spans).items()}

    def close(self) -> None:
        self.meter.close()


def _total(snap: EnergySnapshot) -> float | None:
    """Cumulative joules of the kinds a total counts (GPU, CPU package, DRAM) at one snapshot."""
    d = delta(snap, snap)  # zero-length: gives the kinds; the cumulative values come from the readings
    kinds = set(d.total_covers) or {"gpu", "cpu_package", "dram"}
    values = [r.joules for r in snap.readings if r.kind in kinds]
    known = [v for v in values if v is not None]
    if not values or len(known) < len(values):
        return None
    return float(sum(known))
