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
    """(status, message) for the record. ``end`` None: read from a log file after the fact."""
    pct = lambda x: "-" if x is None else f"{x * 100:.2f}%"  # noqa: E731
    crashed = end is not None and not end.stopped_by_daybreak and end.returncode not in (0, None)
    parts: list[str] = []
    interrupted = end.interrupted if end is not None else None
    if a.run_start is None:
        status = "interrupted" if interrupted else "failed"
        parts.append(f"the program never logged run_start ({a.events} :::MLLOG record(s) read)")
        if interrupted:
            parts.insert(0, interrupted)
        elif crashed:
            parts.append(f"it {describe_exit(end.returncode)}")
    elif not a.clock.trusted:
        status = "failed"
        claimed = (f"; it claims the target at {a.target_eval.elapsed_s:.3f} s, not trusted" if a.target_eval
                   else "")
        parts.append(f"{a.clock.reason}{claimed}")
    elif a.reached:
        status = "reached"
        if interrupted:
            parts.append(f"{interrupted} after the target was reached")
        elif crashed:
            parts.append(f"the program {describe_exit(end.returncode)} after reaching the target")
    elif interrupted:
        status = "interrupted"
        parts.append(f"{interrupted} before the target was reached (best {pct(a.best_accuracy)})")
    elif crashed:
        status = "failed"
        parts.append(f"the program {describe_exit(end.returncode)} before reaching the target "
                     f"(best {pct(a.best_accuracy)} < {pct(a.target)})")
    else:
        status = "not_reached"
        if not a.evaluations:
            parts.append("the program logged no eval_accuracy after run_start")
        else:
            parts.append(f"the program ended below the target: best {pct(a.best_accuracy)} < {pct(a.target)}")
        if a.run_stop is None and end is None:
            parts.append("the log has no run_stop (cut off?)")
    if bad_lines:
        first = bad_lines[0]
        parts.append(f"{len(bad_lines)} malformed :::MLLOG record(s) skipped (first at {where} line "
                     f"{first.lineno}: {first.reason})")
    return status, "; ".join(parts) or None
