"""The leaderboard's store: validated entries and reproduction jobs, in SQLite (default) or PostgreSQL, via
SQLAlchemy 2.

The database is ``--db URL``, else ``$DAYBREAK_DB``, else a SQLite file in the user data directory
(``platformdirs.user_data_dir("daybreak")/leaderboard.sqlite``). A bare path is taken as a SQLite file;
``postgresql://`` and ``postgres://`` URLs use the psycopg 3 driver (``postgresql+psycopg://``).

Every entry has the SHA-256 of its normalized content under a unique constraint: storing the same submission
twice (a re-import, two uploads racing each other) keeps one row, and the loser of a race gets the winner's id.
All SQL goes through SQLAlchemy's parameterized statements.

Lists read columns, never documents: the ranking columns (one per objective, the provenance, the multi-run
statistics) are columns of their own, and every list query selects exactly ``LIST_COLUMNS`` with a LIMIT, so a
page of ten rows reads ten short rows however large the stored documents are.

Reproduction jobs are taken under a lease (:class:`Lease`): every take of a job increments its lease number, and a
worker changes the job, or stores its result, only in a transaction that checks it still holds that number (a
fencing token): a worker that stopped, whose job was taken by another as stale, cannot store a second reproduction
when it wakes up. Each entry has at most one active (queued or running) job, by construction: a unique partial
index over the active jobs, on SQLite and on PostgreSQL alike; a request that loses the race to create it is
answered with the job that won.

Schema versions: 1 (daybreak before provenance), 2 (provenance, tie-break date, multi-run statistics,
reproductions, jobs), 3 (energy: joules to target, joules per 10,000 examples and the kinds they cover), 4 (the
structured system: accelerator type and count, CPU, framework name and version, cloud instance; attribution: code
commit and recipe hash; the rule set of the time and an MLPerf entry's round, division and availability), 5 (jobs:
lease numbers, their history and one active job per entry; the accelerator and framework names folded for the
filters). Opening an older database upgrades it in place (new
columns added and filled in from the stored documents, see :meth:`Store._migrate`); a database of a newer version is
refused with a one-line message.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, time, timedelta, timezone
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import (
    Column, ColumnElement, Double, DateTime, Index, Integer, SQLColumnExpression, String, Table, Text, and_, case,
    create_engine, event, extract, func, inspect, or_, select, text, update,
)
from sqlalchemy.engine import CursorResult, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, InstrumentedAttribute, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from daybreak.errors import DaybreakError
from daybreak.leaderboard.ranking.query import BoardQuery
from daybreak.leaderboard.ingest.text_rules import fold, nfc
from daybreak.leaderboard.ingest.submission import (
    MAX_FIELD_CHARS, MAX_SOURCE_CHARS, PROVENANCE_REPRODUCED, PROVENANCE_RUN, PROVENANCE_SELF, PROVENANCES,
    Submission, one_line,
)

DB_ENV = "DAYBREAK_DB"
DB_FILE = "leaderboard.sqlite"
SCHEMA_VERSION = 5
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


class LeaseLost(DaybreakError):
    """A worker's lease on a job is no longer the job's (it was taken again as stale, or finished by another
    worker): nothing the worker does to the job or the leaderboard is stored any more."""


@dataclass(frozen=True)
class Lease:
    """A worker's hold on one job: the job's lease number when the worker took it (a fencing token)."""

    job_id: int
    number: int
    worker: str


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


def _history_line(text: str, when: datetime | None = None) -> str:
    """One line of a job's history: ``2026-01-02T03:04:05Z text``."""
    stamp = (when or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{stamp} {one_line(text, MAX_HISTORY_LINE)}\n"


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, allow_nan=False)


# Text fields whose "" (not stated) is stored as NULL: older rows have NULL there too (the submitter's NULL also
# marks a command-line import, which the v1 migration reads).
EMPTY_AS_NULL = frozenset({"submitter", "energy_covers", "accelerator", "cpu", "framework_name", "framework_version",
                           "cloud_instance", "code_commit", "recipe_sha256", "mlperf_round", "division",
                           "availability"})


def _stored(column: str, value: Any) -> Any:
    """``value`` as the column of that name stores it: text in NFC cut to the column's length, "" as NULL for
    ``EMPTY_AS_NULL``."""
    if isinstance(value, str):
        length = getattr(Entry.__table__.columns[column].type, "length", None)
        value = nfc(value)
        value = value[:length] if length else value
        if value == "" and column in EMPTY_AS_NULL:
            return None
    return value


# Submission fields kept as JSON text: field -> (column, encoder). Every other field has a column of its own name.
STORED_AS_JSON: dict[str, tuple[str, Callable[[Any], str | None]]] = {
    "curve": ("curve_json", lambda points: json.dumps([list(p) for p in points], allow_nan=False)),
    "tsv_columns": ("tsv_columns_json", json.dumps),
    "document": ("document_json", lambda doc: json.dumps(doc, allow_nan=False)),
    "notes": ("notes_json", json.dumps),
    "run_times_s": ("run_times_json", _json_or_none),
}

# What lists read: everything a ranked row or a badge shows, nothing else (no document, curve or notes).
LIST_COLUMNS = (
    "id", "task", "kind", "source_format", "source", "submitter", "model", "hardware", "framework", "author",
    "submitted_at", "ranked_at", "imported_at", "metric", "target", "accuracy", "time_to_target_s", "train_cost_usd",
    "latency_ms", "inference_cost_10k_usd", "cost_per_hour", "epochs_to_target", "provenance", "provenance_detail",
    "runs_n", "runs_reached", "runs_cv", "run_times_json", "reproduction_of", "reproduced_by", "reproduction_ratio",
    "reproduction_status", "train_energy_j", "inference_energy_10k_j", "energy_covers", "accelerator",
    "accelerator_count", "cpu", "framework_name", "framework_version", "cloud_instance", "clock_rules", "mlperf_round",
    "division", "availability",
)
_LIST = [getattr(Entry, c) for c in LIST_COLUMNS]


def run_times(entry: Any) -> list[float]:
    raw = getattr(entry, "run_times_json", None)
    if not raw:
        return []
    try:
        values = json.loads(raw)
    except ValueError:
        return []
    return [float(v) for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def now_utc() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def default_db_url() -> str:
    env = os.environ.get(DB_ENV, "").strip()
    if env:
        return env
    from platformdirs import user_data_dir

    from pathlib import Path

    return f"sqlite:///{Path(user_data_dir('daybreak')) / DB_FILE}"


def normalize_url(url: str | None) -> str:
    """``None`` -> the default; a bare path -> SQLite; ``postgresql://`` -> psycopg 3."""
    from pathlib import Path

    url = (url or default_db_url()).strip()
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser().resolve()}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def safe_url(url: str) -> str:
    """The URL with any password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<unparsable database URL>"


def _brief(err: BaseException) -> str:
    orig = getattr(err, "orig", None) or err
    lines = [line for line in str(orig).splitlines() if line.strip()]
    return one_line(lines[0] if lines else type(orig).__name__, 200)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL: readers do not block the writer; NORMAL sync is crash-safe in WAL mode and much faster per commit."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _table(model: type[Base]) -> Table:
    """A mapped class's Table (DeclarativeBase declares ``__table__`` as any FromClause)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _rowcount(result: object) -> int:
    """Rows an UPDATE changed (Session.execute declares a Result; a DML statement's is a CursorResult)."""
    assert isinstance(result, CursorResult)
    return result.rowcount


@dataclass
class Ranked:
    entry: Any  # a list row (LIST_COLUMNS as attributes) or an Entry
    value: float
    rank: int  # among the rows the query kept (smallest value first)


FACETS: dict[str, SQLColumnExpression[Any]] = {  # a board's filter dimension -> what it groups on (BoardQuery's names)
    "accelerator": Entry.accelerator_key, "framework": Entry.framework_key,
    "year": extract("year", Entry.submitted_at), "provenance": Entry.provenance, "rules": Entry.clock_rules,
    "division": Entry.division, "availability": Entry.availability,
}
# a folded group's name
FACET_LABELS: dict[str, SQLColumnExpression[Any]] = {"accelerator": Entry.accelerator,
                                                     "framework": Entry.framework_name}
MAX_FACETS = 200  # values of one dimension a board lists at most


def _filters(query: BoardQuery) -> list[Any]:
    """BoardQuery's filters as SQL conditions (text filters: the whole name, compared folded: case, width and
    compatibility forms aside, text_rules.fold)."""
    out: list[Any] = []
    if query.accelerator:
        out.append(Entry.accelerator_key == fold(query.accelerator))
    if query.framework:
        out.append(Entry.framework_key == fold(query.framework))
    if query.min_count is not None:
        out.append(Entry.accelerator_count >= query.min_count)
    if query.max_count is not None:
        out.append(Entry.accelerator_count <= query.max_count)
    if query.since:
        out.append(Entry.submitted_at >= datetime.combine(query.since, time.min))
    if query.until:
        out.append(Entry.submitted_at <= datetime.combine(query.until, time.max))
    if query.year:
        out += [Entry.submitted_at >= datetime(query.year, 1, 1),
                Entry.submitted_at <= datetime(query.year, 12, 31, 23, 59, 59, 999999)]
    if query.provenance:
        out.append(Entry.provenance.in_(list(query.provenance)))
    if query.rules:
        out.append(func.coalesce(Entry.clock_rules, "dawnbench") == query.rules)
    if query.division:
        out.append(Entry.division == query.division)
    if query.availability:
        out.append(Entry.availability == query.availability)
    return out


def _order_by(c: Any, query: BoardQuery) -> list[Any]:
    """ORDER BY for ``query.sort`` over the ranked subquery's columns ``c``: rows without a value last in either
    order, ties by rank."""
    trust = case({p: i for i, p in enumerate(PROVENANCES)}, value=c.provenance, else_=len(PROVENANCES))
    keys = {
        "rank": [c.board_rank], "model": [func.lower(c.model)], "accelerator": [func.lower(c.accelerator)],
        "count": [c.accelerator_count], "framework": [func.lower(c.framework_name), _text(c.framework_version)],
        "date": [c.submitted_at], "rules": [func.coalesce(c.clock_rules, "dawnbench"), _text(c.mlperf_round),
                                             _text(c.division)],
        "provenance": [trust], "runs": [func.coalesce(c.runs_n, 1)],
    }[query.sort]
    out = [keys[0].is_(None)] if query.sort in ("accelerator", "count", "framework") else []
    out += [k.desc() if query.order == "desc" else k.asc() for k in keys]
    return out + [c.board_rank]


def _text(column: Any) -> Any:
    """A text column whose NULL (not stated) sorts as "" on every database (SQLite puts NULL first, PostgreSQL
    last)."""
    return func.coalesce(column, "")


def _with_provenance(query: BoardQuery | None, provenance: Sequence[str] | None) -> BoardQuery:
    query = query or BoardQuery()
    return query.replace(provenance=tuple(provenance)) if provenance else query


def _row(r: Any) -> SimpleNamespace:
    ns = SimpleNamespace(**dict(r._mapping))
    return ns


def _prov_rank(p: str | None) -> int:
    return PROVENANCES.index(p) if p in PROVENANCES else len(PROVENANCES)


class Store:
    """The leaderboard database. ``create=True`` (import, serve) makes what is missing: the SQLite file's folder,
    the file, the tables. ``create=False`` (the commands that only read or add to an existing leaderboard: show,
    export, score, reproduce, worker) opens a database that already holds a leaderboard and creates nothing: a
    missing SQLite file, or a database without the leaderboard's tables, is a one-line StoreError naming it (a
    mistyped ``--db`` path must not leave an empty leaderboard behind). Either way an older schema is upgraded in
    place."""

    def __init__(self, url: str | None = None, *, create: bool = True):
        from pathlib import Path

        self.url = normalize_url(url)
        self.display_url = safe_url(self.url)
        self.migrated: list[str] = []  # what opening the database upgraded (one line each)
        try:
            parsed = make_url(self.url)
        except (ArgumentError, ValueError):
            raise StoreError(f"not a database URL: {self.display_url}") from None
        kwargs: dict[str, Any] = {"future": True}
        if parsed.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
            database = parsed.database or ""
            if database in ("", ":memory:"):
                kwargs["poolclass"] = StaticPool
            elif not create and not Path(database).expanduser().is_file():
                raise StoreError(f"{Path(database).expanduser()}: no leaderboard database there (nothing was "
                                 f"created); check --db or ${DB_ENV}, or make one with `daybreak leaderboard import`")
            else:
                try:
                    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreError(f"cannot create the folder for {self.display_url}: {e.strerror or e}") from None
        elif parsed.get_backend_name() == "postgresql":
            kwargs["pool_pre_ping"] = True
            kwargs["connect_args"] = {"connect_timeout": 5}  # an unreachable server fails fast (503), not hangs
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except (ArgumentError, ImportError, SQLAlchemyError) as e:
            raise StoreError(f"cannot use database {self.display_url}: {_brief(e)}") from None
        if not create:
            self._require_leaderboard()
        if parsed.get_backend_name() == "sqlite" and "poolclass" not in kwargs:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        try:
            self._migrate()
        except StoreError:
            raise
        except SQLAlchemyError as e:
            raise StoreError(f"cannot open database {self.display_url}: {_brief(e)}") from None

    def _require_leaderboard(self) -> None:
        """``create=False``: the database must hold the entries table. Checked before anything writes (and before
        the SQLite pragmas: WAL mode would change a file that is not a leaderboard)."""
        try:
            found = inspect(self.engine).has_table(Entry.__tablename__)
        except SQLAlchemyError as e:
            raise StoreError(f"cannot open database {self.display_url}: {_brief(e)}") from None
        finally:
            self.engine.dispose()  # the connection that looked opened without the pragmas
        if not found:
            raise StoreError(f"{self.display_url} holds no daybreak leaderboard (nothing was created); check --db or "
                             f"${DB_ENV}, or make one with `daybreak leaderboard import`")

    def _unavailable(self, action: str, err: BaseException) -> StoreError:
        return StoreError(f"cannot {action} {self.display_url}: {_brief(err)}")

    @contextmanager
    def _reading(self) -> Iterator[Session]:
        """A session for reads; any database failure is one StoreError ("cannot read URL: why")."""
        try:
            with self._sessions() as session:
                yield session
        except SQLAlchemyError as e:
            raise self._unavailable("read", e) from None

    @contextmanager
    def _writing(self, *, let: tuple[type[BaseException], ...] = ()) -> Iterator[Session]:
        """A session in one transaction (committed on leaving, rolled back on an error); any database failure is
        one StoreError ("cannot write to URL: why"), except the classes in ``let``, which the caller handles."""
        try:
            with self._sessions() as session, session.begin():
                yield session
        except let:
            raise
        except SQLAlchemyError as e:
            raise self._unavailable("write to", e) from None

    # -- schema --------------------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Create the tables, or bring an older database to the current version in place:

        * add the new entry columns (all nullable) and their indexes;
        * from version 1: provenance: entries imported from the command line (no submitter) from a daybreak run
          directory (``daybreak.run``/``daybreak.inference`` records not made by ``daybreak time``) become
          ``daybreak-run``; everything else (DAWNBench files, uploads) ``self-reported``; tie-break date: the
          submission's own date for command-line imports, the time the server received it for uploads; an
          objective value that is not a finite number in range (``inf`` stored by daybreak versions before the
          bounds) is cleared: that entry is not ranked on that objective any more;
        * from version 1 or 2: energy: every stored daybreak run and inference record is read again with today's
          reader (:mod:`daybreak.leaderboard.ingest.runs_import`, plausibility checks included) and its energy figure
          stored; a record without energy, or whose energy is not plausible, stays off the energy objectives
          (multi-run entries stored before version 3 kept no per-run energy: they stay off too).
        """
        insp = inspect(self.engine)
        table = Entry.__tablename__
        had_jobs = insp.has_table(Job.__tablename__)
        if insp.has_table(Meta.__tablename__):
            with self.engine.connect() as conn:
                stored = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
            if stored is not None and stored.isdigit() and int(stored) > SCHEMA_VERSION:
                raise StoreError(f"{self.display_url} holds leaderboard schema v{stored}, newer than this daybreak's "
                                 f"v{SCHEMA_VERSION}: upgrade daybreak (or {REBUILD_HINT})")
        if insp.has_table(table):
            have = {c["name"] for c in insp.get_columns(table)}
            missing = [c for c in _table(Entry).columns if c.name not in have]
            if missing:
                try:
                    self._add_columns(missing)
                except SQLAlchemyError as e:
                    raise StoreError(f"{self.display_url} has the schema of an older daybreak (v1) and could not be "
                                     f"upgraded ({_brief(e)}); {REBUILD_HINT}") from None
        Base.metadata.create_all(self.engine)
        if had_jobs:
            try:
                self._migrate_jobs()
            except SQLAlchemyError as e:
                raise StoreError(f"{self.display_url}: the jobs table could not be upgraded to schema v5 "
                                 f"({_brief(e)}); {REBUILD_HINT}") from None
        try:
            with self.engine.begin() as conn:
                if conn.execute(select(Meta.key).where(Meta.key == "schema_version")).scalar() is None:
                    conn.execute(_table(Meta).insert().values(key="schema_version", value=str(SCHEMA_VERSION),
                                                                updated_at=now_utc()))
                else:
                    conn.execute(update(Meta).where(Meta.key == "schema_version", Meta.value != str(SCHEMA_VERSION))
                                 .values(value=str(SCHEMA_VERSION), updated_at=now_utc()))
        except IntegrityError:
            pass  # another process wrote it first

    def _migrate_jobs(self) -> None:
        """Schema 5 on a jobs table made before it: the lease and history columns (a job's lease number starts at
        its number of takes so far), then the unique index over active jobs; where an entry has several active jobs
        (select-then-insert let concurrent requests make them), the oldest stays and the others are marked failed."""
        dialect = self.engine.dialect
        quote = dialect.identifier_preparer.quote
        table = Job.__tablename__
        added: list[str] = []
        with self.engine.begin() as conn:
            have = {c["name"] for c in inspect(conn).get_columns(table)}
            for column in (Job.__table__.c.lease, Job.__table__.c.history):
                if column.name not in have:
                    conn.execute(text(f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column.name)} "
                                      f"{column.type.compile(dialect)}"))
                    added.append(column.name)
            if added:
                conn.execute(update(Job).where(Job.lease.is_(None)).values(lease=Job.attempts))
                conn.execute(update(Job).where(Job.history.is_(None)).values(history=""))
            indexes = {i["name"] for i in inspect(conn).get_indexes(table)}
            duplicates = 0
            if ACTIVE_JOB_INDEX.name not in indexes:
                active = conn.execute(select(Job.id, Job.entry_id).where(Job.status.in_(JOB_ACTIVE))
                                      .order_by(Job.entry_id, Job.id)).all()
                kept: dict[int, int] = {}
                for job_id, entry_id in active:
                    if entry_id not in kept:
                        kept[entry_id] = job_id
                        continue
                    duplicates += 1
                    conn.execute(update(Job).where(Job.id == job_id).values(
                        status="failed", finished_at=now_utc(),
                        reason=f"a second active job of entry {entry_id}: job {kept[entry_id]} is its job"))
        ACTIVE_JOB_INDEX.create(self.engine, checkfirst=True)
        if added or duplicates:
            self.migrated.append("upgraded the jobs table to schema v5 (lease numbers and their history, one active "
                                 "job per entry" + (f"; {duplicates} duplicate active job(s) marked failed"
                                                    if duplicates else "") + ")")

    def _add_columns(self, missing: list[Column[Any]]) -> None:
        table = Entry.__tablename__
        dialect = self.engine.dialect
        quote = dialect.identifier_preparer.quote
        names = {c.name for c in missing}
        from_v1 = "provenance" in names
        from_version = 1 if from_v1 else 2 if names & set(ENERGY_COLUMNS) else 3 if names & set(SYSTEM_COLUMNS) else 4
        with self.engine.begin() as conn:
            have = {c["name"] for c in inspect(conn).get_columns(table)}
            for column in missing:
                if column.name in have:
                    continue  # another process upgraded it meanwhile
                conn.execute(text(f"ALTER TABLE {quote(table)} ADD COLUMN {quote(column.name)} "
                                  f"{column.type.compile(dialect)}"))
            if from_v1:
                self._from_v1(conn)
            if names & set(ENERGY_COLUMNS):
                self._fill_energy(conn)
            if names & set(SYSTEM_COLUMNS):
                self._fill_systems(conn)
            if names & (set(SYSTEM_COLUMNS) | set(KEY_COLUMNS)):
                self._fill_keys(conn)
        added = {c.name for c in missing}
        for index in _table(Entry).indexes:
            if {c.name for c in index.columns} & added:
                index.create(self.engine, checkfirst=True)
        parts = (["provenance, tie-break date, multi-run statistics, reproductions"] if from_v1 else []) + (
            ["energy"] if names & set(ENERGY_COLUMNS) else []) + (
            ["structured systems, attribution, rule set"] if names & set(SYSTEM_COLUMNS) else []) + (
            ["folded names for the filters"] if names & set(KEY_COLUMNS) else [])
        self.migrated.append(f"upgraded the leaderboard database from schema v{from_version} to "
                             f"v{SCHEMA_VERSION} (added {len(missing)} columns: {', '.join(parts) or 'other'})")

    @staticmethod
    def _fill_systems(conn: Any) -> None:
        """Schema 4: the structured system and the attribution of every stored entry, read from its stored
        document with today's readers (daybreak.leaderboard.ingest.systems.stored_columns); every entry stored before
        schema 4 was timed under DAWNBench's clock (daybreak runs and DAWNBench files)."""
        from daybreak.leaderboard.ingest.systems import stored_columns

        conn.execute(update(Entry).where(Entry.clock_rules.is_(None)).values(clock_rules="dawnbench"))
        last = 0
        while True:  # 100 documents at a time: bounded memory however large the table
            rows = conn.execute(select(Entry.id, Entry.source_format, Entry.hardware, Entry.framework,
                                       Entry.document_json).where(Entry.id > last).order_by(Entry.id)
                                .limit(100)).all()
            if not rows:
                return
            for entry_id, source_format, hardware, framework, document in rows:
                last = entry_id
                try:
                    values = stored_columns(source_format, json.loads(document), hardware or "", framework or "")
                except Exception:  # noqa: BLE001 - one odd stored document must not stop the upgrade
                    continue  # the entry keeps its other columns; its system is shown as the submitted text
                values = {k: _stored(k, v) for k, v in values.items() if k in SYSTEM_COLUMNS}
                if values:
                    conn.execute(update(Entry).where(Entry.id == entry_id).values(**values))

    @staticmethod
    def _fill_keys(conn: Any) -> None:
        """Schema 5: the folded accelerator and framework names of every stored entry (text_rules.fold)."""
        last = 0
        while True:  # 500 rows at a time
            rows = conn.execute(select(Entry.id, Entry.accelerator, Entry.framework_name).where(Entry.id > last)
                                .order_by(Entry.id).limit(500)).all()
            if not rows:
                return
            for entry_id, accelerator, framework in rows:
                last = entry_id
                conn.execute(update(Entry).where(Entry.id == entry_id).values(
                    accelerator_key=_stored("accelerator_key", fold(accelerator)) or None,
                    framework_key=_stored("framework_key", fold(framework)) or None))

    @staticmethod
    def _fill_energy(conn: Any) -> None:
        """Energy figures of the stored daybreak records (schema 3), read with today's reader."""
        from daybreak.leaderboard.ingest.runs_import import parse_inference, parse_run
        from daybreak.leaderboard.ingest.submission import FORMAT_INFERENCE, FORMAT_RUN

        last = 0
        while True:  # 100 documents at a time: bounded memory however large the table
            rows = conn.execute(select(Entry.id, Entry.source_format, Entry.source, Entry.document_json)
                                .where(Entry.id > last, Entry.source_format.in_((FORMAT_RUN, FORMAT_INFERENCE)))
                                .order_by(Entry.id).limit(100)).all()
            if not rows:
                return
            for entry_id, source_format, source, document in rows:
                last = entry_id
                try:
                    doc = json.loads(document)
                    if source_format == FORMAT_RUN:
                        sub = parse_run(doc, source=source or "stored", allow_unreached=True)
                        values = {"train_energy_j": sub.train_energy_j}
                    else:
                        sub = parse_inference(doc, source=source or "stored")
                        values = {"inference_energy_10k_j": sub.inference_energy_10k_j}
                except Exception:  # noqa: BLE001 - one odd stored document must not stop the upgrade
                    continue  # not readable any more: no energy figure, the entry keeps its other columns
                if any(v is not None for v in values.values()):
                    conn.execute(update(Entry).where(Entry.id == entry_id).values(
                        energy_covers=sub.energy_covers[:64] or None, **values))

    @staticmethod
    def _from_v1(conn: Any) -> None:
        from daybreak.leaderboard.ingest.runs_import import EXTERNAL_DETAIL

        conn.execute(update(Entry).where(Entry.provenance.is_(None))
                     .values(provenance=PROVENANCE_SELF, provenance_detail=""))
        conn.execute(update(Entry).where(Entry.ranked_at.is_(None), Entry.submitter.is_(None))
                     .values(ranked_at=Entry.submitted_at))
        conn.execute(update(Entry).where(Entry.ranked_at.is_(None)).values(ranked_at=Entry.imported_at))
        for name in ("time_to_target_s", "train_cost_usd", "latency_ms", "inference_cost_10k_usd",
                     "cost_per_hour", "cost_per_example_usd", "epochs_to_target"):
            col = getattr(Entry, name)
            conn.execute(update(Entry).where(or_(col > MAX_RANKED_VALUE, col < 0)).values({name: None}))
        rows = conn.execute(select(Entry.id, Entry.document_json).where(
            Entry.submitter.is_(None), Entry.source_format.in_(("daybreak.run", "daybreak.inference")))).all()
        for entry_id, document in rows:
            try:
                doc = json.loads(document)
            except ValueError:
                continue
            external = isinstance(doc, dict) and "external" in (doc.get("recipe"), doc.get("device"))
            conn.execute(update(Entry).where(Entry.id == entry_id).values(
                provenance=PROVENANCE_SELF if external else PROVENANCE_RUN,
                provenance_detail=EXTERNAL_DETAIL if external else ""))

    # -- writing -------------------------------------------------------------------------------------------

    def _entry(self, sub: Submission) -> Entry:
        """The row for ``sub``: every Submission field goes to the column of its name (text cut to the column's
        length, "" stored as NULL for ``EMPTY_AS_NULL``), the structured ones as JSON (``STORED_AS_JSON``);
        tests/test_leaderboard_store.py checks that every field of Submission has its column."""
        values: dict[str, Any] = {}
        for f in fields(Submission):
            value = getattr(sub, f.name)
            if f.name in STORED_AS_JSON:
                column, encode = STORED_AS_JSON[f.name]
                values[column] = encode(value)
                continue
            values[f.name] = _stored(f.name, value)
        values["imported_at"] = now_utc()
        values["ranked_at"] = sub.ranked_at or sub.submitted_at
        for key, named in KEY_COLUMNS.items():
            values[key] = _stored(key, fold(values.get(named))) or None
        return Entry(**values)

    def add(self, sub: Submission) -> tuple[int, bool]:
        """Store one validated submission in its own transaction -> (entry id, created). Same content twice: one
        row. The same content from a more trusted source (the host importing a run directory that was uploaded
        before) raises the stored row's provenance; it is never lowered."""
        if not sub.content_hash:
            raise ValueError("submission has no content hash (call finish())")
        sub.check_numbers()
        existing = self.find_hash(sub.content_hash)
        if existing is not None:
            self._raise_provenance(existing, sub)
            return existing, False
        entry = self._entry(sub)
        try:
            with self._writing(let=(IntegrityError,)) as session:
                session.add(entry)
            return entry.id, True
        except IntegrityError:
            # another writer stored the same content between our look-up and our insert
            existing = self.find_hash(sub.content_hash)
            if existing is None:
                raise StoreError(f"cannot write to {self.display_url}: the entry broke a constraint of the table")
            self._raise_provenance(existing, sub)
            return existing, False

    def _raise_provenance(self, entry_id: int, sub: Submission) -> None:
        if sub.provenance == PROVENANCE_SELF:
            return
        with self._writing() as session:
            current = session.scalar(select(Entry.provenance).where(Entry.id == entry_id))
            if _prov_rank(sub.provenance) < _prov_rank(current):
                session.execute(update(Entry).where(Entry.id == entry_id).values(
                    provenance=sub.provenance, provenance_detail=sub.provenance_detail[:300],
                    ranked_at=sub.ranked_at or sub.submitted_at))

    def add_reproduction(self, original_id: int, sub: Submission, lease: Lease | None = None,
                         describe: Callable[[int], str] | None = None, run_dir: str = "") -> int:
        """Store a host reproduction of ``original_id`` as its own row linked to it, and mark the original
        reproduced (with the ratio of times) when the reproduction reached the target -> the new row's id.

        ``lease``: the worker's job, finished ``done`` (reason ``describe(new id)``) in the same transaction, which
        stores nothing unless the lease is still the job's (LeaseLost)."""
        sub.provenance = PROVENANCE_REPRODUCED
        sub.reproduction_of = original_id
        sub.check_numbers()
        with self._writing() as session:
            original = session.get(Entry, original_id)
            if original is None:
                raise StoreError(f"entry {original_id} is gone")
            existing = session.scalar(select(Entry.id).where(Entry.content_hash == sub.content_hash))
            if existing is not None:
                if lease is not None:
                    self._finish(session, lease, "done", describe(existing) if describe else "", existing, run_dir)
                return existing
            entry = self._entry(sub)
            session.add(entry)
            session.flush()
            if sub.time_to_target_s is not None:
                original.provenance = PROVENANCE_REPRODUCED
                original.reproduced_by = entry.id
                original.reproduction_status = "reproduced"
                if original.time_to_target_s:
                    original.reproduction_ratio = sub.time_to_target_s / original.time_to_target_s
                original.provenance_detail = (f"reproduced by the host as entry {entry.id}" +
                                              (f"; was: {original.provenance_detail}"
                                               if original.provenance_detail else ""))[:300]
                entry.reproduction_ratio = original.reproduction_ratio
            elif original.reproduction_status != "reproduced":
                original.reproduction_status = "not-reproduced"
            entry.provenance_detail = f"the host's reproduction of entry {original_id}"
            if lease is not None:
                session.flush()
                self._finish(session, lease, "done", describe(entry.id) if describe else "", entry.id, run_dir)
        return entry.id

    def mark_not_reproduced(self, entry_id: int, lease: Lease | None = None, reason: str = "",
                            run_dir: str = "") -> None:
        """A reproduction that did not reach the target (and stored no row): the original says so, unless an
        earlier reproduction did reach it. ``lease``: the worker's job, finished ``done`` with ``reason`` in the
        same transaction (nothing is written unless the lease is still the job's)."""
        with self._writing() as session:
            session.execute(update(Entry).where(Entry.id == entry_id, or_(
                Entry.reproduction_status.is_(None), Entry.reproduction_status != "reproduced"))
                .values(reproduction_status="not-reproduced"))
            if lease is not None:
                self._finish(session, lease, "done", reason, None, run_dir)

    # -- reading -------------------------------------------------------------------------------------------

    def find_hash(self, content_hash: str) -> int | None:
        with self._reading() as session:
            return session.scalar(select(Entry.id).where(Entry.content_hash == content_hash))

    def get(self, entry_id: int) -> Entry | None:
        """One whole entry (its document included)."""
        with self._reading() as session:
            return session.get(Entry, entry_id)

    def count(self, task: str | None = None) -> int:
        with self._reading() as session:
            q = select(func.count(Entry.id))
            if task is not None:
                q = q.where(Entry.task == task)
            return int(session.scalar(q) or 0)

    def entries(self, task: str | None = None) -> list[Entry]:
        """Every whole entry (documents included): for tests and small databases; lists use ``ranked``."""
        with self._reading() as session:
            q = select(Entry).order_by(Entry.id)
            if task is not None:
                q = q.where(Entry.task == task)
            return list(session.scalars(q))

    def iter_entries(self, batch: int = 100) -> Iterator[Entry]:
        """Every whole entry in id order, ``batch`` rows per query (bounded memory, one pass)."""
        last = 0
        while True:
            with self._reading() as session:
                rows = list(session.scalars(select(Entry).where(Entry.id > last).order_by(Entry.id).limit(batch)))
            if not rows:
                return
            yield from rows
            last = rows[-1].id

    def _ranked_filter(self, task: str, column: str, query: BoardQuery | None
                       ) -> tuple[InstrumentedAttribute[Any], ColumnElement[bool]]:
        attr: InstrumentedAttribute[Any] = getattr(Entry, column)
        conditions = [Entry.task == task, attr.is_not(None), attr >= 0, attr <= MAX_RANKED_VALUE]
        return attr, and_(*conditions, *_filters(query or BoardQuery()))

    def ranked(self, task: str, column: str, limit: int | None = None, offset: int = 0,
               provenance: Sequence[str] | None = None, query: BoardQuery | None = None) -> list[Ranked]:
        """Rows of ``task`` with a value in ``column`` that pass ``query``'s filters (LIST_COLUMNS only), each with
        its rank among them (the smallest value first; ties: the earlier submission (``ranked_at``), then the entry
        stored first), in ``query``'s order (default: by rank)."""
        query = _with_provenance(query, provenance)
        attr, where = self._ranked_filter(task, column, query)
        rank = func.row_number().over(order_by=(attr.asc(), Entry.ranked_at.asc(), Entry.id.asc()))
        rows = select(*_LIST, rank.label("board_rank")).where(where).subquery()
        q = select(rows).order_by(*_order_by(rows.c, query))
        if limit is not None:
            q = q.limit(limit)
        if offset:
            q = q.offset(offset)
        with self._reading() as session:
            return [Ranked(e, getattr(e, column), e.board_rank) for e in map(_row, session.execute(q))]

    def count_ranked(self, task: str, column: str, provenance: Sequence[str] | None = None,
                     query: BoardQuery | None = None) -> int:
        _attr, where = self._ranked_filter(task, column, _with_provenance(query, provenance))
        with self._reading() as session:
            return int(session.scalar(select(func.count(Entry.id)).where(where)) or 0)

    def facets(self, task: str, column: str, dimension: str) -> list[tuple[Any, int]]:
        """(value, rows) of one filter dimension (a key of FACETS) over the rows of ``task`` ranked on ``column``,
        unfiltered, by value."""
        key = FACETS[dimension]
        label = FACET_LABELS.get(dimension, key)
        _attr, where = self._ranked_filter(task, column, None)
        q = select(func.min(label), func.count(Entry.id)).where(where, key.is_not(None)).group_by(key).order_by(key)
        with self._reading() as session:
            rows = session.execute(q.limit(MAX_FACETS)).all()
        return [(int(v) if dimension == "year" else v, int(n)) for v, n in rows if v != ""]

    def rank_of(self, entry: Any, column: str, provenance: Sequence[str] | None = None) -> tuple[int, int] | None:
        """(rank, total) of ``entry`` on ``column`` by two COUNT queries; None if it is not ranked there."""
        value = getattr(entry, column, None)
        if value is None or not (math.isfinite(value) and 0 <= value <= MAX_RANKED_VALUE):
            return None
        attr, where = self._ranked_filter(entry.task, column, _with_provenance(None, provenance))
        when = entry.ranked_at or entry.submitted_at
        before = or_(attr < value, and_(attr == value, or_(Entry.ranked_at < when,
                                                            and_(Entry.ranked_at == when, Entry.id < entry.id))))
        with self._reading() as session:
            ahead = int(session.scalar(select(func.count(Entry.id)).where(where, before)) or 0)
            total = int(session.scalar(select(func.count(Entry.id)).where(where)) or 0)
        return ahead + 1, total

    def list_rows(self, ids: Sequence[int]) -> list[SimpleNamespace]:
        if not ids:
            return []
        with self._reading() as session:
            return [_row(r) for r in session.execute(select(*_LIST).where(Entry.id.in_(list(ids)))
                                                     .order_by(Entry.id))]

    def reproductions_of(self, entry_id: int) -> list[SimpleNamespace]:
        with self._reading() as session:
            return [_row(r) for r in session.execute(select(*_LIST).where(Entry.reproduction_of == entry_id)
                                                     .order_by(Entry.id))]

    def all_reproductions(self) -> dict[int, list[SimpleNamespace]]:
        """original id -> its reproduction rows (one query; for the static export)."""
        out: dict[int, list[SimpleNamespace]] = {}
        with self._reading() as session:
            for r in session.execute(select(*_LIST).where(Entry.reproduction_of.is_not(None)).order_by(Entry.id)):
                row = _row(r)
                out.setdefault(row.reproduction_of, []).append(row)
        return out

    def iter_ids(self) -> Iterator[int]:
        with self._reading() as session:
            yield from session.scalars(select(Entry.id).order_by(Entry.id))

    # -- reproduction jobs -----------------------------------------------------------------------------------

    def enqueue(self, entry_id: int, requested_by: str = "") -> tuple[Job, bool]:
        """Queue a reproduction of ``entry_id`` -> (job, created); an active job of the entry is returned as is.
        Concurrent callers make one job: the unique index over active jobs refuses every insert but one, and the
        others read the job that won."""
        for _ in range(10):
            with self._reading() as session:
                active = session.scalar(select(Job).where(Job.entry_id == entry_id, Job.status.in_(JOB_ACTIVE))
                                        .order_by(Job.id).limit(1))
            if active is not None:
                return active, False
            job = Job(entry_id=entry_id, status="queued", reason="", requested_by=requested_by[:100],
                      created_at=now_utc(), attempts=0, worker="", run_dir="", lease=0,
                      history=_history_line(f"queued by {requested_by or 'an unnamed requester'}"))
            try:
                with self._writing(let=(IntegrityError,)) as session:
                    session.add(job)
                return job, True
            except IntegrityError:
                continue  # another request queued it between our look-up and our insert: read theirs
        raise StoreError(f"cannot write to {self.display_url}: the job of entry {entry_id} kept changing")

    def get_job(self, job_id: int) -> Job | None:
        with self._reading() as session:
            return session.get(Job, job_id)

    def jobs(self, entry_id: int | None = None, status: str | None = None, limit: int = 100) -> list[Job]:
        with self._reading() as session:
            q = select(Job).order_by(Job.id.desc()).limit(limit)
            if entry_id is not None:
                q = q.where(Job.entry_id == entry_id)
            if status is not None:
                q = q.where(Job.status == status)
            return list(session.scalars(q))

    def claim_job(self, worker: str) -> Job | None:
        """The oldest queued job, marked running for ``worker`` under a new lease number (an atomic
        compare-and-set: two workers never take the same job, and every take has its own number) -> the job (its
        ``lease`` is the worker's), or None when nothing is queued."""
        for _ in range(20):
            with self._writing() as session:
                job_id = session.scalar(select(Job.id).where(Job.status == "queued").order_by(Job.id).limit(1))
                if job_id is None:
                    return None
                now = now_utc()
                number = func.coalesce(Job.lease, 0) + 1
                done = session.execute(update(Job).where(Job.id == job_id, Job.status == "queued").values(
                    status="running", started_at=now, heartbeat_at=now, worker=worker[:200],
                    attempts=Job.attempts + 1, lease=number,
                    history=func.coalesce(Job.history, "") + _history_line(f"taken by {worker}", now)))
                if _rowcount(done) == 1:
                    job = session.get(Job, job_id)
                    session.refresh(job)
                    return job
        return None

    def lease_of(self, job: Job) -> Lease:
        return Lease(job.id, int(job.lease or 0), job.worker)

    def _holds(self, lease: Lease) -> Any:
        """The SQL condition that ``lease`` is still the job's: the same lease number, the job still running."""
        return and_(Job.id == lease.job_id, Job.lease == lease.number, Job.status == "running")

    def heartbeat(self, lease: Lease) -> bool:
        """Renew ``lease`` -> False when it is not the job's any more (taken again as stale, or finished)."""
        with self._writing() as session:
            done = session.execute(update(Job).where(self._holds(lease)).values(heartbeat_at=now_utc()))
            return _rowcount(done) == 1

    def why_lost(self, lease: Lease) -> str:
        """What became of a lost lease's job, for the worker's record: "job 3 is now lease 2, running for W"."""
        job = self.get_job(lease.job_id)
        if job is None:
            return f"job {lease.job_id} is gone"
        holder = f" for {job.worker}" if job.worker and job.worker != lease.worker else ""
        return (f"job {job.id} is now lease {job.lease}, {job.status}{holder}"
                + (" (taken again as stale: no heartbeat from this worker)" if (job.lease or 0) > lease.number else ""))

    def note_job(self, job_id: int, line: str) -> None:
        """Append one line to a job's history (whoever holds it: the line only records what happened)."""
        with self._writing() as session:
            session.execute(update(Job).where(Job.id == job_id).values(
                history=func.coalesce(Job.history, "") + _history_line(line)))

    def finish_job(self, lease: Lease, status: str, reason: str = "", result_entry_id: int | None = None,
                   run_dir: str = "") -> None:
        """End the job held by ``lease`` (``done`` or ``failed``, with the reason); LeaseLost if it is not."""
        with self._writing() as session:
            self._finish(session, lease, status, reason, result_entry_id, run_dir)

    def requeue(self, lease: Lease, reason: str) -> bool:
        """Give the job held by ``lease`` back to the queue (its worker is stopping) -> False if it was not held."""
        with self._writing() as session:
            return _rowcount(session.execute(update(Job).where(self._holds(lease)).values(
                status="queued", reason=one_line(reason, 1000),
                history=func.coalesce(Job.history, "") + _history_line(f"lease {lease.number}: {reason}"))
            )) == 1

    def _finish(self, session: Any, lease: Lease, status: str, reason: str, result_entry_id: int | None,
                run_dir: str = "") -> None:
        """Inside a write transaction: the job's end, only while ``lease`` holds it (else LeaseLost, and the
        caller's transaction is rolled back with everything else it wrote)."""
        line = f"lease {lease.number}: {status}" + (f": {reason}" if reason else "")
        done = session.execute(update(Job).where(self._holds(lease)).values(
            status=status, reason=one_line(reason, 1000), result_entry_id=result_entry_id, finished_at=now_utc(),
            run_dir=one_line(run_dir, 1000), history=func.coalesce(Job.history, "") + _history_line(line)))
        if done.rowcount != 1:
            raise LeaseLost(f"job {lease.job_id}: lease {lease.number} is not the job's any more")

    def requeue_stale(self, stale_after_s: float, max_attempts: int) -> list[tuple[int, str]]:
        """Running jobs whose worker stopped (no heartbeat for ``stale_after_s``): queued again, or failed after
        ``max_attempts`` -> [(job id, new status)]. The stopped worker's lease number stays behind: the next take
        gets a higher one, and the stopped worker, if it wakes up, finds its number is not the job's."""
        limit = now_utc() - timedelta(seconds=stale_after_s)
        out = []
        with self._writing() as session:
            stale = list(session.scalars(select(Job).where(Job.status == "running", or_(
                Job.heartbeat_at.is_(None), Job.heartbeat_at < limit))))
            for job in stale:
                beat = "no heartbeat" if job.heartbeat_at is None else \
                    f"no heartbeat for {(now_utc() - job.heartbeat_at).total_seconds():.0f} s"
                if job.attempts >= max_attempts:
                    job.status, job.finished_at = "failed", now_utc()
                    job.reason = (f"the worker stopped during this job {job.attempts} times (last: "
                                  f"{job.worker}); not retried")
                else:
                    job.status, job.reason = "queued", f"requeued: worker {job.worker} stopped during the job"
                job.history = (job.history or "") + _history_line(
                    f"lease {job.lease}: {beat} from {job.worker}: {job.status}")
                out.append((job.id, job.status))
        return out

    def acquire_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """A named lease in the meta table (compare-and-set): one worker runs reproductions at a time on the
        host. Held until released or not renewed for ``ttl_s``; the holder renews it by acquiring it again."""
        key = f"lease:{name}"[:64]
        now = now_utc()
        try:
            with self._writing(let=(IntegrityError,)) as session:
                if session.get(Meta, key) is None:
                    session.add(Meta(key=key, value="", updated_at=now - timedelta(seconds=ttl_s + 1)))
        except IntegrityError:
            pass  # another worker created it first
        with self._writing() as session:
            done = session.execute(update(Meta).where(Meta.key == key, or_(
                Meta.value == holder, Meta.value == "", Meta.updated_at < now - timedelta(seconds=ttl_s)))
                .values(value=holder[:400], updated_at=now))
            return _rowcount(done) == 1

    def release_lease(self, name: str, holder: str) -> None:
        key = f"lease:{name}"[:64]
        with self._writing() as session:
            session.execute(update(Meta).where(Meta.key == key, Meta.value == holder).values(value=""))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
