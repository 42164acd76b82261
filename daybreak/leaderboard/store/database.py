"""The leaderboard's store: validated entries and reproduction jobs, in SQLite (default) or PostgreSQL, via
SQLAlchemy 2. The tables are daybreak.leaderboard.store.schema; the job queue daybreak.leaderboard.store.jobs.

The database is ``--db URL``, else ``$DAYBREAK_DB``, else a SQLite file in the user data directory
(``platformdirs.user_data_dir("daybreak")/leaderboard.sqlite``). A bare path is taken as a SQLite file;
``postgresql://`` and ``postgres://`` URLs use the psycopg 3 driver (``postgresql+psycopg://``).

Every entry has the SHA-256 of its normalized content under a unique constraint: storing the same submission
twice (a re-import, two uploads racing each other) keeps one row, and the loser of a race gets the winner's id.
All SQL goes through SQLAlchemy's parameterized statements.

Lists read columns, never documents: the ranking columns (one per objective, the provenance, the multi-run
statistics) are columns of their own, and every list query selects exactly ``LIST_COLUMNS`` with a LIMIT, so a
page of ten rows reads ten short rows however large the stored documents are.

Every write transaction that changes what the pages show raises a change counter in the same transaction
(schema.Change: ``entries``, ``jobs``); :meth:`Store.changes` reads them in one query, so that a server's page
cache can tell whether anything changed since it rendered a page, whichever process wrote.

No one waits forever on a lock: a statement that waits longer than ``lock_timeout_s`` for one (SQLite's busy
timeout; PostgreSQL's ``lock_timeout``) fails with a StoreError (a 503 on the server, a retry for the worker), and
PostgreSQL ends a session left idle inside a transaction for ``idle_in_transaction_s`` (a process stopped between
two statements of a transaction), releasing its locks. SQLite has no such timeout: a process stopped inside a write
transaction holds the write lock until it continues or exits (readers are not held: WAL).

Schema versions: 1 (daybreak before provenance), 2 (provenance, tie-break date, multi-run statistics,
reproductions, jobs), 3 (energy: joules to target, joules per 10,000 examples and the kinds they cover), 4 (the
structured system: accelerator type and count, CPU, framework name and version, cloud instance; attribution: code
commit and recipe hash; the rule set of the time and an MLPerf entry's round, division and availability), 5 (jobs:
lease numbers, their history and one active job per entry; the accelerator and framework names folded for the
filters), 6 (the change counters). Opening an older database upgrades it in place (new columns added and filled in
from the stored documents, see :meth:`Store._migrate`); a database of a newer version is refused with a one-line
message.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime, time
from types import SimpleNamespace
from typing import Any, Callable, Iterator, Sequence

from sqlalchemy import (
    Column, ColumnElement, SQLColumnExpression, and_, case, create_engine, event, extract, func, inspect, or_, select,
    text, update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SQLAlchemyError
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker
from sqlalchemy.pool import StaticPool

from daybreak.leaderboard.ranking.query import BoardQuery
from daybreak.leaderboard.ingest.text_rules import fold, nfc
from daybreak.leaderboard.ingest.submission import (
    PROVENANCE_REPRODUCED, PROVENANCE_RUN, PROVENANCE_SELF, PROVENANCES, Submission, one_line,
)
from daybreak.leaderboard.store.jobs import JobQueue, Lease, LeaseLost
from daybreak.leaderboard.store.schema import (
    ACTIVE_JOB_INDEX, CHANGE_KINDS, DB_ENV, DB_FILE, ENERGY_COLUMNS, JOB_ACTIVE, KEY_COLUMNS, MAX_RANKED_VALUE,
    REBUILD_HINT, SCHEMA_VERSION, SYSTEM_COLUMNS, Base, Change, Entry, Job, Meta, StoreError, _rowcount, _table,
    now_utc, run_times,
)

# the tables and the queue are re-exported: callers import them from here
__all__ = ["ACTIVE_JOB_INDEX", "Base", "CHANGE_KINDS", "Change", "Changes", "DB_ENV", "DB_FILE", "ENERGY_COLUMNS",
           "Entry", "Job", "JOB_ACTIVE", "KEY_COLUMNS", "Lease", "LeaseLost", "MAX_RANKED_VALUE", "Meta", "REBUILD_HINT",
           "Ranked", "SCHEMA_VERSION", "SYSTEM_COLUMNS", "Store", "StoreError", "now_utc", "run_times"]

LOCK_TIMEOUT_S = 10.0  # the longest a statement waits for a lock (then StoreError: a 503, or the worker retries)
IDLE_IN_TRANSACTION_S = 30.0  # PostgreSQL ends a session idle inside a transaction this long (its locks released)


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


@dataclass(frozen=True)
class Changes:
    """The change counters (schema.Change) as one read saw them: what a cached page was made from."""

    numbers: tuple[int, ...]  # one per CHANGE_KINDS
    changed_at: datetime | None  # the latest change of any kind

    def of(self, *kinds: str) -> tuple[int, ...]:
        return tuple(self.numbers[CHANGE_KINDS.index(k)] for k in kinds)


def _postgresql_timeouts(lock_timeout_s: float, idle_in_transaction_s: float) -> Callable[..., None]:
    """A ``do_connect`` listener: the session's lock and idle-in-transaction timeouts as startup options, added to
    any ``options`` the URL already gives (a ``search_path``)."""
    def add(dialect: Any, conn_rec: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        ours = (f"-c lock_timeout={max(1, int(lock_timeout_s * 1000))} "
                f"-c idle_in_transaction_session_timeout={max(1, int(idle_in_transaction_s * 1000))}")
        cparams["options"] = f"{cparams.get('options', '')} {ours}".strip()
    return add


class Store(JobQueue):
    """The leaderboard database. ``create=True`` (import, serve) makes what is missing: the SQLite file's folder,
    the file, the tables. ``create=False`` (the commands that only read or add to an existing leaderboard: show,
    export, score, reproduce, worker) opens a database that already holds a leaderboard and creates nothing: a
    missing SQLite file, or a database without the leaderboard's tables, is a one-line StoreError naming it (a
    mistyped ``--db`` path must not leave an empty leaderboard behind). Either way an older schema is upgraded in
    place. ``lock_timeout_s``/``idle_in_transaction_s``: see the module docstring."""

    def __init__(self, url: str | None = None, *, create: bool = True, lock_timeout_s: float = LOCK_TIMEOUT_S,
                 idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S):
        from pathlib import Path

        self.url = normalize_url(url)
        self.display_url = safe_url(self.url)
        self.migrated: list[str] = []  # what opening the database upgraded (one line each)
        self.listeners: list[Callable[[], None]] = []  # called after each committed write that changed something
        try:
            parsed = make_url(self.url)
        except (ArgumentError, ValueError):
            raise StoreError(f"not a database URL: {self.display_url}") from None
        kwargs: dict[str, Any] = {"future": True}
        if parsed.get_backend_name() == "sqlite":
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": lock_timeout_s}
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
        if parsed.get_backend_name() == "postgresql":
            event.listen(self.engine, "do_connect", _postgresql_timeouts(lock_timeout_s, idle_in_transaction_s))
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
    def _writing(self, *, let: tuple[type[BaseException], ...] = (), changed: Sequence[str] = ()
                 ) -> Iterator[Session]:
        """A session in one transaction (committed on leaving, rolled back on an error); any database failure is
        one StoreError ("cannot write to URL: why"), except the classes in ``let``, which the caller handles.
        ``changed``: the kinds of data (CHANGE_KINDS) the transaction changes: their counters are raised as its
        last statements (in one order, so that two transactions never wait on each other's counters), and the
        listeners are called once it is committed."""
        try:
            with self._sessions() as session, session.begin():
                yield session
                now = now_utc()
                for kind in sorted(changed):
                    session.execute(update(Change).where(Change.name == kind).values(
                        number=Change.number + 1, changed_at=now).execution_options(synchronize_session=False))
        except let:
            raise
        except SQLAlchemyError as e:
            raise self._unavailable("write to", e) from None
        if changed:
            for listener in list(self.listeners):
                listener()

    def changes(self) -> Changes:
        """The change counters, in one query (a page cache compares them with those its page was made from)."""
        with self._reading() as session:
            rows = dict((name, (number, at)) for name, number, at in session.execute(
                select(Change.name, Change.number, Change.changed_at).limit(len(CHANGE_KINDS))))
        stamps = [at for _, at in rows.values() if at is not None]
        return Changes(tuple(int(rows.get(kind, (0, None))[0] or 0) for kind in CHANGE_KINDS),
                       max(stamps) if stamps else None)

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
        had_changes = insp.has_table(Change.__tablename__)
        had_entries = insp.has_table(table)
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
        self._count_changes(had_entries and not had_changes)
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

    def _count_changes(self, upgraded: bool) -> None:
        """Schema 6: a counter row for each kind of change (schema.Change), made where it is missing."""
        for kind in CHANGE_KINDS:
            try:
                with self.engine.begin() as conn:
                    if conn.execute(select(Change.name).where(Change.name == kind)).scalar() is None:
                        conn.execute(_table(Change).insert().values(name=kind, number=0, changed_at=now_utc()))
            except IntegrityError:
                pass  # another process made it first
        if upgraded and not self.migrated:
            self.migrated.append(f"upgraded the leaderboard database to schema v{SCHEMA_VERSION} (change counters "
                                 "for the server's page cache)")

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
            with self._writing(let=(IntegrityError,), changed=("entries",)) as session:
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
        with self._writing(changed=("entries",)) as session:
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
        with self._writing(changed=("entries", "jobs") if lease is not None else ("entries",)) as session:
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
        with self._writing(changed=("entries", "jobs") if lease is not None else ("entries",)) as session:
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

    def reproductions_of(self, entry_id: int, limit: int | None = None) -> list[SimpleNamespace]:
        """The host's reproductions of an entry, in the order they were stored (``limit``: the latest so many)."""
        q = select(*_LIST).where(Entry.reproduction_of == entry_id).order_by(Entry.id.desc())
        with self._reading() as session:
            rows = [_row(r) for r in session.execute(q.limit(limit) if limit is not None else q)]
        return rows[::-1]

    def count_reproductions(self, entry_id: int) -> int:
        with self._reading() as session:
            return int(session.scalar(select(func.count(Entry.id)).where(Entry.reproduction_of == entry_id)) or 0)

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

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
