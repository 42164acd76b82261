"""Run the installed mlperf-logging compliance checker on a daybreak run's log, as `daybreak check-mllog` runs it:
the round's common rules as mlperf-logging ships them, with daybreak's checker configuration for its own tasks
(daybreak.external.compliance: each task's target, metric, batch size and seed), the configuration kept in
``folder``."""

from __future__ import annotations

from pathlib import Path

from daybreak.external.compliance import check_mllog

RULESET = "6.1.0"


def compliance_messages(log: Path, folder: Path, ruleset: str = RULESET) -> list[str]:
    """Every message the checker has about ``log`` (empty = it passes)."""
    return check_mllog(log, ruleset_option=ruleset, config_dir=folder).messages
