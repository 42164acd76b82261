"""ExternalRecord: what `daybreak time` adds to a run directory (external.json) beside result.json: how the program
ran and ended, the clock cross-check and the malformed ``:::MLLOG`` records (daybreak.external.recorder writes it).

The fields from ``pid`` on describe a live child (``mode: command``) and appear once the program has been started
(``pid``, ``spawned_at_wall``) and once it has ended (the rest); a record made from ``--log FILE`` has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from daybreak.fileio import atomic_write_json
from daybreak.records.base import Record

EXTERNAL_FILE = "external.json"
LIVE_FIELDS = ("pid", "spawned_at_wall", "returncode", "exit", "stopped_by_daybreak", "interrupted", "program_lines")


class ClockCheckRecord(BaseModel):
    """The program's timestamps against daybreak's wall clock (daybreak.external.mllog_clock.ClockCheck)."""

    checked: bool  # wall arrival times were available and compared
    trusted: bool
    tolerance: str | None = None
    events_checked: int = 0
    max_deviation_s: float = 0.0  # largest |program interval - wall interval| seen
    worst_lineno: int | None = None
    worst_key: str | None = None
    worst_program_s: float | None = None
    worst_wall_s: float | None = None
    reason: str | None = None  # why not trusted, one line


class MalformedRecord(BaseModel):
    line: int  # in program.log (live) or in the log file
    reason: str
    text: str  # the line, cut to 500 characters


class ExternalRecord(Record):
    FILE = EXTERNAL_FILE
    WHAT = "external"

    kind: Literal["daybreak.external"] = "daybreak.external"
    schema_version: int = 1
    mode: Literal["command", "log"]
    command: list[str] | None = None  # the program and its arguments (mode command)
    log_file: str | None = None  # mode log
    program_log: str | None = None  # the program's output, in the run directory (mode command)
    stop_at_target: bool
    grace_s: float
    rules: str
    count_eval: bool  # deprecated alias of rules == "mlperf"
    warnings: list[str] = Field(default_factory=list)
    accuracy_unit_option: str
    accuracy_unit: Literal["percent", "fraction"] | None = None  # None until there is an analysis
    clock_check: ClockCheckRecord | None = None
    mllog_records: int = 0
    malformed_records: int = 0
    first_malformed: MalformedRecord | None = None
    run_start_line: int | None = None
    run_stop_status: str | None = None
    submission: dict[str, Any] = Field(default_factory=dict)  # the submission_* keys the program logged
    notes: list[str] = Field(default_factory=list)
    # a live child (see the module's docstring): written only once set
    pid: int | None = None
    spawned_at_wall: float | None = None  # time.time() when the program was started
    returncode: int | None = None
    exit: str | None = None  # "exited with status 0", "was killed by SIGTERM"
    stopped_by_daybreak: bool | None = None  # --stop-at-target ended it
    interrupted: str | None = None  # daybreak itself was interrupted: why
    program_lines: int | None = None

    @classmethod
    def missing_hint(cls, path: Path) -> str:
        return "is this a run directory of `daybreak time`?"

    def to_json(self) -> dict[str, Any]:
        """The file's content: every field, less the live-child fields that were never set."""
        return self.model_dump(exclude={k for k in LIVE_FIELDS if k not in self.model_fields_set})

    def save(self, folder: str | Path, *, durable: bool = True) -> Path:
        return atomic_write_json(Path(folder) / EXTERNAL_FILE, self.to_json(), durable=durable)
