"""The clock cross-check of an external program: its ``time_ms`` against daybreak's wall clock.

When wall arrival times are known, for every event from ``run_start`` to the end of the timing window (the target
evaluation, or the end of the run), the program's interval since ``run_start`` must agree with daybreak's wall
clock interval between the arrival of the two lines within the tolerance (default 5 % of the wall interval +
2 s); so must ``run_start``'s time since the program's launch, which DAWNBench's clock counts. Otherwise the
program's timestamps are not trusted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Sequence

from daybreak.errors import ConfigError
from daybreak.external.mllog_reader import MllogEvent
from daybreak.records.external import ClockCheckRecord


# --- clock tolerance ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Tolerance:
    """How far a program's interval may differ from the wall clock's: ``relative * wall + absolute_s``."""

    relative: float = 0.05
    absolute_s: float = 2.0

    def allowed(self, wall_s: float) -> float:
        return self.relative * abs(wall_s) + self.absolute_s

    def __str__(self) -> str:
        return f"{self.relative * 100:g}% + {self.absolute_s:g} s"


_TOL_RE = re.compile(r"^\s*(?:(?P<rel>\d+(?:\.\d*)?|\.\d+)\s*%)?\s*\+?\s*(?:(?P<abs>\d+(?:\.\d*)?|\.\d+)\s*s)?\s*$")


def parse_tolerance(text: str) -> Tolerance:
    """'5%+2s' (the default), '10%', '3s', '2.5% + 0.5s'."""
    m = _TOL_RE.match(text or "")
    if not m or (m.group("rel") is None and m.group("abs") is None):
        raise ConfigError(f"--clock-tolerance {text!r}: give a percent and/or seconds, e.g. '5%+2s', '10%' or '3s'")
    return Tolerance(relative=float(m.group("rel") or 0) / 100.0, absolute_s=float(m.group("abs") or 0))


# --- the check ---------------------------------------------------------------------------------------------
# the check's result is the record's own type (one definition of its fields)
ClockCheck = ClockCheckRecord


def check_clock(run_start: MllogEvent, window: Sequence[MllogEvent], tolerance: Tolerance | None,
                 launch: tuple[float, float] | None = None) -> ClockCheck:
    """``launch``: (time_ms, wall) of the program's launch (live mode), so the start-up that a clock starting at
    the launch counts is checked too: run_start's time after the launch by the program's clock and by the wall's."""
    if tolerance is None or run_start.wall is None:
        return ClockCheck(checked=False, trusted=True)
    check = ClockCheck(checked=True, trusted=True, tolerance=str(tolerance))
    worst_excess = -math.inf
    for e in window:
        if e.wall is None:
            continue
        program_s = (e.time_ms - run_start.time_ms) / 1000.0
        wall_s = e.wall - run_start.wall
        deviation = abs(program_s - wall_s)
        check.events_checked += 1
        check.max_deviation_s = max(check.max_deviation_s, deviation)
        excess = deviation - tolerance.allowed(wall_s)
        if excess > worst_excess:
            worst_excess = excess
            check.worst_lineno, check.worst_key = e.lineno, e.key
            check.worst_program_s, check.worst_wall_s = program_s, wall_s
    if launch is not None:
        program_s = (run_start.time_ms - launch[0]) / 1000.0
        wall_s = run_start.wall - launch[1]
        deviation = abs(program_s - wall_s)
        check.events_checked += 1
        check.max_deviation_s = max(check.max_deviation_s, deviation)
        if deviation - tolerance.allowed(wall_s) > max(worst_excess, 0.0):
            check.trusted = False
            check.worst_lineno, check.worst_key = run_start.lineno, run_start.key
            check.worst_program_s, check.worst_wall_s = program_s, wall_s
            check.reason = (f"the program's timestamps disagree with the wall clock: run_start at line "
                            f"{run_start.lineno} is {program_s:.3f} s after the program's launch by its time_ms but "
                            f"arrived {wall_s:.3f} s after the launch (tolerance {tolerance})")
            return check
    if worst_excess > 0:
        check.trusted = False
        check.reason = (f"the program's timestamps disagree with the wall clock: {check.worst_key} at line "
                        f"{check.worst_lineno} is {check.worst_program_s:.3f} s after run_start by its time_ms but "
                        f"arrived {check.worst_wall_s:.3f} s after it (tolerance {tolerance}; a program that does "
                        f"not flush each log line looks like this too)")
    return check
