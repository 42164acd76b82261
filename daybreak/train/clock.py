"""The training clock: accumulates time with the device synchronized, pausing for excluded intervals."""

from __future__ import annotations

import time

import torch

from daybreak.measure.device import synchronize


class TrainingClock:
    """Counts training time only. ``pause()`` at an evaluation, ``resume()`` after it.

    Every read synchronizes the device first, so queued GPU work is charged to the interval that queued it.
    """

    def __init__(self, device: torch.device):
        self.device = device
        self._accumulated_ns = 0
        self._segment_start_ns: int | None = None

    def _now(self) -> int:
        synchronize(self.device)
        return time.perf_counter_ns()

    def start(self) -> None:
        self._segment_start_ns = self._now()

    resume = start

    def pause(self) -> float:
        """Stop counting; returns the total counted so far in seconds."""
        if self._segment_start_ns is not None:
            self._accumulated_ns += self._now() - self._segment_start_ns
            self._segment_start_ns = None
        return self.elapsed_s

    def add(self, seconds: float) -> None:
        """Charge an interval measured elsewhere (e.g. evaluation time under --count-eval)."""
        self._accumulated_ns += int(seconds * 1e9)

    @property
    def elapsed_s(self) -> float:
        running = 0 if self._segment_start_ns is None else time.perf_counter_ns() - self._segment_start_ns
        return (self._accumulated_ns + running) / 1e9


class Stopwatch:
    """Times one interval with the device synchronized at both ends."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds = 0.0

    def __enter__(self) -> "Stopwatch":
        synchronize(self.device)
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        synchronize(self.device)
        self.seconds = (time.perf_counter_ns() - self._t0) / 1e9
