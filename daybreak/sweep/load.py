"""How busy the machine was while a configuration ran: the load averages and the CPU time other processes took.

``LoadMeter().start()`` before a configuration's processes and ``.stop()`` after the last one has been waited for
give a MeasurementContext (the record `daybreak run` writes). What is ours is counted exactly: this process's CPU
time plus that of every child it has waited for (``os.times``: the children's and their waited descendants'), so
a measured program that has exited is never mistaken for another tenant; the rest of the machine's CPU time
(psutil) is "other". A configuration is measured on a busy machine when others took more than BUSY_FRACTION of
the CPUs; the load average is recorded beside it, not judged (it counts our own previous configurations too).
"""

from __future__ import annotations

import os
import time

from daybreak.measure.context import loadavg, machine_cpu_s
from daybreak.records.run import MeasurementContext
from daybreak.records.throughput import BUSY_FRACTION, busy_text


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def logical_cpus() -> int:
    return os.cpu_count() or 1


class LoadMeter:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.machine0: float | None = None
        self.own0 = 0.0
        self.load_before: list[float] | None = None

    def start(self) -> "LoadMeter":
        self.load_before = loadavg()
        self.t0, self.machine0, self.own0 = time.monotonic(), machine_cpu_s(), _own_cpu_s()
        return self

    def stop(self) -> MeasurementContext:
        wall = max(time.monotonic() - self.t0, 1e-9)
        machine, own = machine_cpu_s(), max(_own_cpu_s() - self.own0, 0.0)
        context = MeasurementContext(load_avg_before=self.load_before, load_avg_after=loadavg(),
                                     own_cpu_s=round(own, 3))
        if machine is not None and self.machine0 is not None:
            other = max(machine - self.machine0 - own, 0.0)
            cpus = logical_cpus()
            context.other_cpu_s = round(other, 3)
            context.busy_fraction = round(min(other / (wall * cpus), 1.0), 4)
            if context.busy_fraction > BUSY_FRACTION:
                context.warnings.append(busy_text(context, cpus))
        return context
