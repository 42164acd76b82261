"""The run's status and one-line message from an analysis and the way the program ended (pure: no processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from daybreak.external.mllog_analysis import Analysis
from daybreak.external.mllog_reader import BadLine


# --- verdict -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProgramEnd:
    """How the child ended. ``returncode`` negative = killed by that signal (subprocess convention)."""

    returncode: int | None
    stopped_by_daybreak: bool = False  # --stop-at-target ended it
    interrupted: str | None = None  # daybreak itself was interrupted: why


def _signal_name(n: int) -> str:
    import signal

    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {_signal_name(-returncode)}"
    return f"exited with status {returncode}"


def verdict(a: Analysis, end: ProgramEnd | None, *, bad_lines: Sequence[BadLine] = (),
            where: str = "program.log") -> tuple[str, str | None]:
    """(status, message) for the record. ``end`` None: read from a log file after the fact. Values are shown as
    the target's metric defines them (a percent, a loss, a score)."""
    fmt = a.metric.format
    below = f"{fmt(a.best_accuracy)} {'<' if a.metric.higher_is_better else '>'} {fmt(a.target)}"
    # the exit status of a program that failed on its own (None: it did not)
    crashed = end.returncode if end is not None and not end.stopped_by_daybreak and end.returncode != 0 else None
    parts: list[str] = []
    interrupted = end.interrupted if end is not None else None
    if a.run_start is None:
        status = "interrupted" if interrupted else "failed"
        parts.append(f"the program never logged run_start ({a.events} :::MLLOG record(s) read)")
        if interrupted:
            parts.insert(0, interrupted)
        elif crashed is not None:
            parts.append(f"it {describe_exit(crashed)}")
    elif not a.clock.trusted:
        status = "failed"
        claimed = (f"; it claims the target at {a.target_eval.elapsed_s:.3f} s, not trusted" if a.target_eval
                   else "")
        parts.append(f"{a.clock.reason}{claimed}")
    elif a.reached:
        status = "reached"
        if interrupted:
            parts.append(f"{interrupted} after the target was reached")
        elif crashed is not None:
            parts.append(f"the program {describe_exit(crashed)} after reaching the target")
    elif interrupted:
        status = "interrupted"
        parts.append(f"{interrupted} before the target was reached (best {fmt(a.best_accuracy)})")
    elif crashed is not None:
        status = "failed"
        parts.append(f"the program {describe_exit(crashed)} before reaching the target (best {below})")
    else:
        status = "not_reached"
        if a.mlperf is not None and a.rules == "mlperf":
            parts.append(f"not MLPerf's result: {a.mlperf.reason}")
        elif a.mlperf is not None and a.target_eval is None and a.mlperf.reached:
            parts.append(f"no evaluation before run_stop met the target {a.goal.label if a.goal else ''} (MLPerf's "
                         "verdict, --rules mlperf: reached)")
        elif not a.evaluations:
            parts.append("the program logged no eval_accuracy after run_start")
        elif a.goal is not None and len(a.goal.criteria) > 1:
            parts.append(f"no evaluation met the target {a.goal.label}")
        else:
            parts.append(f"the program ended below the target: best {below}")
        if a.run_stop is None and end is None:
            parts.append("the log has no run_stop (cut off?)")
    if bad_lines:
        first = bad_lines[0]
        parts.append(f"{len(bad_lines)} malformed :::MLLOG record(s) skipped (first at {where} line "
                     f"{first.lineno}: {first.reason})")
    return status, "; ".join(parts) or None
