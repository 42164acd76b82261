"""`daybreak time`'s options, typed (built by daybreak.external.commands, read by the timer and its recorder). The
options it shares with `daybreak run` (task, target, rules, price, out, author, quiet) are declared once, on
daybreak.config.RunConfig, and arrive here checked."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from daybreak.external.mllog_clock import Tolerance
from daybreak.rules import DEFAULT_RULES, get_rules


@dataclass
class TimeConfig:
    task: str | None  # None: the log's submission_benchmark names it (--log)
    command: list[str] = field(default_factory=list)  # the program and its arguments
    log: Path | None = None  # instead of a command: an existing mllog file
    target: float | None = None  # fraction or percent; default: the task's
    out: Path | None = None
    cost_per_hour: float | None = None
    instance: str | None = None
    price_file: Path | None = None
    stop_at_target: bool = False
    grace_s: float = 10.0
    rules: str = DEFAULT_RULES  # the headline rule set (daybreak.rules); every rule set is recorded
    tolerance: Tolerance = field(default_factory=Tolerance)
    unit: str = "auto"  # accuracy values: auto | fraction | percent
    quiet: bool = False
    author: str | None = None  # default: the log's submission_org, else the user name
    author_email: str = ""
    invocation: list[str] = field(default_factory=list)  # daybreak's own command line (recorded for --log)
    round: str | None = None  # --round: the MLPerf Training round whose rules apply to an MLPerf benchmark's log

    @property
    def rule_set(self) -> str:
        return get_rules(self.rules).name
