"""The leaderboard's tables (SQLAlchemy 2 declarative models) and the few helpers every part of the store shares.

Entries (daybreak.leaderboard.store.database reads and writes them), reproduction jobs (daybreak.leaderboard.store.
jobs: the queue), the meta table (the schema version, named leases) and the change counters the server's page cache
reads (schema 6).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import DateTime, Double, Index, Integer, String, Table, Text
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from daybreak.errors import DaybreakError
from daybreak.leaderboard.ingest.submission import MAX_FIELD_CHARS, MAX_SOURCE_CHARS, PROVENANCE_SELF, one_line

DB_ENV = "DAYBREAK_DB"
DB_FILE = "leaderboard.sqlite"
SCHEMA_VERSION = 6
MAX_RANKED_VALUE = 1e13  # above every bounded objective (time <= 3.6e9 s, cost <= 1e12 USD, energy <= 1e12 J);
# excludes inf and NaN
ENERGY_COLUMNS = ("train_energy_j", "inference_energy_10k_j")
SYSTEM_COLUMNS = ("accelerator", "accelerator_count", "cpu", "framework_name", "framework_version", "cloud_instance",
                  "code_commit", "recipe_sha256")  # schema 4, filled in from stored documents by _fill_systems
KEY_COLUMNS = {"accelerator_key": "accelerator", "framework_key": "framework_name"}  # schema 5: key -> the named
REBUILD_HINT = ("rebuild it: move the database away and run `daybreak leaderboard import` again on your "
                "submissions")


class StoreError(DaybreakError):
    """The leaderboard database cannot be opened or used."""


class Base(DeclarativeBase):
    pass


class Entry(Base):
    __tablename__ = "daybreak_leaderboard_entries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    content_hash: Mapped[str] = mapped_column(String(64), unique=True, nullable=False)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    task: Mapped[str] = mapped_column(String(32), index=True)
    source_format: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(MAX_SOURCE_CHARS))
    submitter: Mapped[str | None] = mapped_column(String(100), nullable=True)
    model: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS))
    hardware: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS))
    framework: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS))
    author: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS), default="")
    author_email: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS), default="")
    code_url: Mapped[str] = mapped_column(String(MAX_FIELD_CHARS), default="")
    submitted_at: Mapped[datetime] = mapped_column(DateTime, index=True)
    imported_at: Mapped[datetime] = mapped_column(DateTime)
    metric: Mapped[str] = mapped_column(String(16))
    target: Mapped[float] = mapped_column(Double)
    accuracy: Mapped[float] = mapped_column(Double)
    accuracy_unit: Mapped[str] = mapped_column(String(16))
    time_to_target_s: Mapped[float | None] = mapped_column(Double, nullable=True)
    epochs_to_target: Mapped[float | None] = mapped_column(Double, nullable=True)
    cost_per_hour: Mapped[float | None] = mapped_column(Double, nullable=True)
    train_cost_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    latency_ms: Mapped[float | None] = mapped_column(Double, nullable=True)
    cost_per_example_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    inference_cost_10k_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    curve_json: Mapped[str] = mapped_column(Text, default="[]")  # [[hours, accuracy fraction, epoch|null], ...]
    tsv_columns_json: Mapped[str] = mapped_column(Text, default="[]")
    document_json: Mapped[str] = mapped_column(Text)  # the submitted JSON
    notes_json: Mapped[str] = mapped_column(Text, default="[]")
    # --- schema 2 (added to a version-1 table by _migrate, hence nullable at the database level) ------------
    provenance: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True, default=PROVENANCE_SELF)
    provenance_detail: Mapped[str | None] = mapped_column(String(300), nullable=True, default="")
    ranked_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)  # ties: the earlier one first
    runs_n: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runs_reached: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runs_cv: Mapped[float | None] = mapped_column(Double, nullable=True)
    run_times_json: Mapped[str | None] = mapped_column(Text, nullable=True)  # the reached runs' times, seconds
    reproduction_of: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    reproduced_by: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reproduction_ratio: Mapped[float | None] = mapped_column(Double, nullable=True)  # reproduction / original
    reproduction_status: Mapped[str | None] = mapped_column(String(16), nullable=True)  # reproduced|not-reproduced
    # --- schema 3 (added to older tables by _migrate and filled in from the stored documents) ---------------------
    train_energy_j: Mapped[float | None] = mapped_column(Double, nullable=True)  # joules to target (DAWNBench clock)
    inference_energy_10k_j: Mapped[float | None] = mapped_column(Double, nullable=True)  # batch 1, per 10,000
    energy_covers: Mapped[str | None] = mapped_column(String(64), nullable=True)  # e.g. "gpu+cpu_package"
    # --- schema 4 (added to older tables by _migrate; the system columns filled in from the stored documents) ------
    accelerator: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    accelerator_count: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cpu: Mapped[str | None] = mapped_column(String(200), nullable=True)
    framework_name: Mapped[str | None] = mapped_column(String(50), nullable=True, index=True)
    framework_version: Mapped[str | None] = mapped_column(String(50), nullable=True)
    cloud_instance: Mapped[str | None] = mapped_column(String(100), nullable=True)
    code_commit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    recipe_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    clock_rules: Mapped[str | None] = mapped_column(String(16), nullable=True, default="dawnbench")
    mlperf_round: Mapped[str | None] = mapped_column(String(16), nullable=True)
    division: Mapped[str | None] = mapped_column(String(16), nullable=True)
    availability: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # --- schema 5 (added to older tables by _migrate and filled in from the columns above) ------------------------
    # the accelerator and framework names as the board's filters compare them (text_rules.fold: NFKC, case folded,
    # no invisible characters), so that "ＰｙＴｏｒｃｈ", "pytorch" and "PyTorch" are one filter
    accelerator_key: Mapped[str | None] = mapped_column(String(100), nullable=True, index=True)
    framework_key: Mapped[str | None] = mapped_column(String(50), nullable=True, index=True)

    @property
    def curve(self) -> list[list[float | None]]:
        points: list[list[float | None]] = json.loads(self.curve_json or "[]")
        return points

    @property
    def document(self) -> Any:
        return json.loads(self.document_json)

    @property
    def notes(self) -> list[str]:
        notes: list[str] = json.loads(self.notes_json or "[]")
        return notes

    @property
    def tsv_columns(self) -> list[str]:
        columns: list[str] = json.loads(self.tsv_columns_json or "[]")
        return columns

    @property
    def run_times(self) -> list[float]:
        return run_times(self)


Index("ix_daybreak_leaderboard_entries_task_ranked", Entry.task, Entry.ranked_at)


class Job(Base):
    """A reproduction for the worker: queued -> running -> done | failed (with its reason)."""

    __tablename__ = "daybreak_leaderboard_jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entry_id: Mapped[int] = mapped_column(Integer, index=True)
    status: Mapped[str] = mapped_column(String(16), index=True)  # queued, running, done, failed
    reason: Mapped[str] = mapped_column(Text, default="")
    requested_by: Mapped[str] = mapped_column(String(100), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str] = mapped_column(String(200), default="")
    result_entry_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    run_dir: Mapped[str] = mapped_column(String(1000), default="")
    # --- schema 5 (added to older tables by _migrate_jobs) --------------------------------------------------------
    lease: Mapped[int | None] = mapped_column(Integer, nullable=True, default=0)  # +1 at every take
    history: Mapped[str | None] = mapped_column(Text, nullable=True, default="")  # one line per event

    @property
    def history_lines(self) -> list[str]:
        return [line for line in (self.history or "").splitlines() if line]


JOB_ACTIVE = ("queued", "running")
# One active job per entry, by construction (the same partial unique index on SQLite and PostgreSQL).
ACTIVE_JOB_INDEX = Index("uq_daybreak_leaderboard_jobs_active_entry", Job.entry_id, unique=True,
                         sqlite_where=Job.status.in_(JOB_ACTIVE), postgresql_where=Job.status.in_(JOB_ACTIVE))
MAX_HISTORY_LINE = 300


class Meta(Base):
    __tablename__ = "daybreak_leaderboard_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(400), default="")
    updated_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)



class Change(Base):
    """What changed last, and when (schema 6): one row per kind of data the pages show (``entries``, ``jobs``), its
    number raised by every write transaction that changes that kind, in the same transaction. The server's page
    cache (daybreak.leaderboard.web.cache) keeps a rendered page while the numbers it was made from stand, so a
    write by any process (an upload, `leaderboard import`, a worker) is seen by every server."""

    __tablename__ = "daybreak_leaderboard_changes"

    name: Mapped[str] = mapped_column(String(16), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, default=0)
    changed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


CHANGE_KINDS = ("entries", "jobs")


def _history_line(text: str, when: datetime | None = None) -> str:
    """One line of a job's history: ``2026-01-02T03:04:05Z text``."""
    stamp = (when or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp} {one_line(text, MAX_HISTORY_LINE)}\n"



def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)



def _table(model: type[Base]) -> Table:
    """A mapped class's Table (DeclarativeBase declares ``__table__`` as any FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _rowcount(result: object) -> int:
    """Rows an UPDATE changed (Session.execute declares a Result; a DML statement's is a CursorResult)."""
    assert isinstance(result, CursorResult)
    return result.rowcount



def run_times(entry: Any) -> list[float]:
    """A multi-run entry's reached runs' times (seconds), from its ``run_times_json``; [] when it has none."""
    raw = getattr(entry, "run_times_json", None)
    if not raw:
        return []
    try:
        values = json.loads(raw)
    except ValueError:
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
