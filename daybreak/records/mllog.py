"""MLPerf ``:::MLLOG {json}`` view of a run, written with mlperf-logging's own ``mllog`` encoder.

Each run gets its own ``logging.Logger`` with a handler that appends and flushes every line, so a killed
process leaves only whole lines behind and no global mllog configuration is touched.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any


def _mllog_constants() -> ModuleType:
    """mlperf-logging's event keys, ``mlperf_logging/mllog/constants.py``: the module itself when its package is
    loaded, else loaded from its file and registered under its own name (the package, imported later, finds it
    there: one module either way). Its package's ``__init__`` builds the shared logger, whose encoder imports
    numpy (0.1 s of CPU): a command that only reads logs (`daybreak time --log`, `check-mllog`, `leaderboard
    import-mlperf`) needs the keys alone; a run's ``RunMllog`` imports the logger when it writes."""
    name = "mlperf_logging.mllog.constants"
    if name in sys.modules:
        return sys.modules[name]
    import mlperf_logging

    spec = importlib.util.spec_from_file_location(name, Path(mlperf_logging.__file__).parent / "mllog" / "constants.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:
    from mlperf_logging.mllog import constants as C
else:
    C = _mllog_constants()

MLLOG_FILE = "mllog.log"
# daybreak's own keys beside MLPerf's (``constants`` has none for them); written by daybreak.train.recorder, read by
# daybreak.external (``daybreak time --log`` on a daybreak run's log, and other programs' logs)
RECORD_PHASE = "record"  # checkpoint and record writes, an INTERVAL_START / INTERVAL_END pair (rules.PHASES' name)
SUBMISSION_FRAMEWORK = "submission_framework"
CHECKPOINT_START, CHECKPOINT_STOP = "checkpoint_start", "checkpoint_stop"  # what other programs log around a save
_ids = itertools.count()


class _FlushingFileHandler(logging.FileHandler):
    """Flushes every line to the OS (survives SIGKILL); no fsync, which would put disk latency on the clock.
    While ``held`` is a list, lines go there instead (``RunMllog.hold``)."""

    held: list[logging.LogRecord] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.held is not None:
            self.held.append(record)
            return
        self.write(record)

    def write(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self.flush()


class RunMllog:
    """A per-run mllog file. Methods mirror mllog: ``start``/``end``/``event`` with keys from ``constants``."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._logger = logging.getLogger(f"daybreak.mllog.{os.getpid()}.{next(_ids)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._handler = _FlushingFileHandler(self.path, mode="a", encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._logger.addHandler(self._handler)
        from mlperf_logging.mllog.mllog import MLLogger

        self._mllog = MLLogger(logger=self._logger, default_stack_offset=2)

    def hold(self) -> None:
        """Keep the next lines in memory (with their own timestamps) until ``release``: lets a decision made later
        (the division, after the data check) stand before them in the file, where MLPerf's checker reads it."""
        self._handler.held = []

    def release(self) -> None:
        held = self._handler.held
        if held is None:
            return
        self._handler.held = None
        for record in held:
            self._handler.write(record)

    def release_after(self, key: str, value: Any) -> None:
        """Write one event now, ahead of the held lines, then release them."""
        held = self._handler.held
        self._handler.held = None
        self.event(key, value)
        for record in held or []:
            self._handler.write(record)

    @property
    def holding(self) -> bool:
        return self._handler.held is not None

    def _meta(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        # mllog adds the caller's file/lineno; keep that, add ours.
        return dict(metadata or {})

    def start(self, key: str, value: Any = None, metadata: dict[str, Any] | None = None,
              time_ms: float | None = None) -> None:
        self._mllog.start(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def end(self, key: str, value: Any = None, metadata: dict[str, Any] | None = None,
            time_ms: float | None = None) -> None:
        self._mllog.end(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def event(self, key: str, value: Any = None, metadata: dict[str, Any] | None = None,
              time_ms: float | None = None) -> None:
        self._mllog.event(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()


def _ms(time_ms: float | None) -> float | int:
    """Unix milliseconds. Phase boundaries come from the run's own timeline with microsecond resolution (MLPerf's
    parsers read ``time_ms`` as a float), so the log's intervals reproduce the record's clocks exactly."""
    if time_ms is None:
        return int(time.time() * 1000)
    return int(time_ms) if float(time_ms).is_integer() else round(float(time_ms), 3)


__all__ = ["RunMllog", "MLLOG_FILE", "C", "RECORD_PHASE", "SUBMISSION_FRAMEWORK", "CHECKPOINT_START",
           "CHECKPOINT_STOP"]
