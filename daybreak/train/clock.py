"""The run's timeline: every phase interval on one monotonic timer, the device synchronized at each boundary.

Time-to-target is not accumulated here: the timeline records raw intervals (``daybreak.rules.PHASES``) and a
rule set (``daybreak.rules``) turns them into a clock reading. The mllog's timestamps come from the same
readings (``epoch_ms``), so the log's own intervals reproduce the record's figures.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterator

import torch

from daybreak.measure.device import synchronize
from daybreak.rules import Interval, RuleSet, read_clock


class Timeline:
    """Phase intervals in seconds since ``origin_ns`` (a ``time.perf_counter_ns`` reading at the command's start).

    ``epoch_ms(t)`` maps a timeline instant to Unix milliseconds (anchored once, so it never jumps with NTP).
    """

    def __init__(self, device: torch.device, origin_ns: int):
        self.device = device
        self.origin_ns = origin_ns
        # one anchor pair read together: Unix time of the origin
        self._unix_origin_ns = time.time_ns() - (time.perf_counter_ns() - origin_ns)
        self.intervals: list[Interval] = []
        self._open: dict[str, float] = {}
        # callables(), run at the start of a phase after the device synchronize and before the clock read: work that
        # belongs to the boundary (an energy counter read) stays off the phase that starts
        self.before_begin: list[Callable[[], object]] = []
        # callables(t_s), run at every phase boundary right after the clock read (at an end: off the phase that
        # ended; at a start: keep them cheap, they are on the phase that starts)
        self.on_boundary: list[Callable[[float], object]] = []

    def now_s(self, sync: bool = True) -> float:
        if sync:
            synchronize(self.device)
        return (time.perf_counter_ns() - self.origin_ns) / 1e9

    def epoch_ms(self, t_s: float) -> float:
        """Unix time in ms of timeline instant ``t_s`` (microsecond resolution)."""
        return round((self._unix_origin_ns + t_s * 1e9) / 1e6, 3)

    def begin(self, phase: str) -> float:
        synchronize(self.device)
        for ahead in self.before_begin:
            ahead()
        t = self.now_s(sync=False)  # (synchronized above; the hooks queue no device work)
        self._open[phase] = t
        for hook in self.on_boundary:
            hook(t)
        return t

    def end(self, phase: str) -> float:
        t = self.now_s()
        start = self._open.pop(phase)
        self.intervals.append(Interval(phase, start, t))
        for hook in self.on_boundary:
            hook(t)
        return t

    def is_open(self, phase: str) -> bool:
        return phase in self._open

    def close_all(self) -> None:
        """End every open phase now (a crash or a signal mid-phase)."""
        for phase in list(self._open):
            self.end(phase)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.begin(name)
        try:
            yield
        finally:
            self.end(name)

    def total(self, phase: str) -> float:
        return sum(i.end_s - i.start_s for i in self.intervals if i.phase == phase)

    def read(self, rules: RuleSet, at_s: float | None = None) -> float:
        """``rules``' clock at ``at_s`` (default: now), counting open phases up to that instant."""
        at = self.now_s(sync=False) if at_s is None else at_s
        live = self.intervals + [Interval(p, s, max(s, at)) for p, s in self._open.items()]
        return read_clock(rules, live, at).seconds
