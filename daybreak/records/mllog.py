"""MLPerf ``:::MLLOG {json}`` view of a run, written with mlperf-logging's own ``mllog`` encoder.

Each run gets its own ``logging.Logger`` with a handler that appends and flushes every line, so a killed
process leaves only whole lines behind and no global mllog configuration is touched.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from pathlib import Path
from typing import Any

from mlperf_logging.mllog import constants as C
from mlperf_logging.mllog.mllog import MLLogger

MLLOG_FILE = "mllog.log"
_ids = itertools.count()


class _FlushingFileHandler(logging.FileHandler):
    """Flushes every line to the OS (survives SIGKILL); no fsync, which would put disk latency on the clock."""

    def emit(self, record: logging.LogRecord) -> None:
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
        self._mllog = MLLogger(logger=self._logger, default_stack_offset=2)

    def _meta(self, metadata: dict[str, Any] | None) -> dict[str, Any]:
        # mllog adds the caller's file/lineno; keep that, add ours.
        return dict(metadata or {})

    def start(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllog.start(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def end(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllog.end(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def event(self, key: str, value: Any = None, metadata: dict | None = None, time_ms: float | None = None) -> None:
        self._mllog.event(key, value, metadata=self._meta(metadata), time_ms=_ms(time_ms))

    def close(self) -> None:
        self._logger.removeHandler(self._handler)
        self._handler.close()


def _ms(time_ms: float | None) -> int:
    return int(time.time() * 1000) if time_ms is None else int(time_ms)


__all__ = ["RunMllog", "MLLOG_FILE", "C"]
