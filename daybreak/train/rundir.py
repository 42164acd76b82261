"""Where a run is written: the default run directory, and the rule that no run is ever overwritten (except a run
that failed before it started training, which the corrected command may replace)."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

from daybreak.errors import ConfigError
from daybreak.records.run import RunResult


def default_run_dir(task: str, recipe: str, when: datetime) -> Path:
    base = Path("runs") / f"{task}-{recipe}-{when.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def reusable_out_dir(out: Path) -> bool:
    """A run directory that holds only a run that failed before training started (a data or set-up error):
    the same ``--out`` may be used again, and the failed record is replaced."""
    try:
        result = RunResult.load(out)
    except Exception:  # noqa: BLE001 - not a daybreak run: not reusable
        return False
    return result.status == "failed" and not result.history and not any(p.phase == "train" for p in result.phases)


def check_out_dir(out: Path) -> bool:
    """Refuse an ``--out`` that would overwrite a run; returns True when it holds a failed start to replace."""
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: exists and is not a directory")
        if out.exists() and any(out.iterdir()):
            if reusable_out_dir(out):
                return True
            raise ConfigError(f"--out {out}: directory is not empty; choose a new one so no earlier run is "
                              "overwritten")
        parent = out.resolve().parent
        probe = parent
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise ConfigError(f"--out {out}: {probe} is not a directory")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise ConfigError(f"--out {out}: {probe} is not writable")
    except OSError as e:
        raise ConfigError(f"--out {out}: {e.strerror or e}") from None
    return False
