"""The leaderboard's store: one table of validated entries, in SQLite (default) or PostgreSQL, via SQLAlchemy 2.

The database is ``--db URL``, else ``$DAYBREAK_DB``, else a SQLite file in the user data directory
(``platformdirs.user_data_dir("daybreak")/leaderboard.sqlite``). A bare path is taken as a SQLite file;
``postgresql://`` and ``postgres://`` URLs use the psycopg 3 driver (``postgresql+psycopg://``).

Every entry has the SHA-256 of its normalized content under a unique constraint: storing the same submission
twice (a re-import, two uploads racing each other) keeps one row, and the loser of a race gets the winner's id.
All SQL goes through SQLAlchemy's parameterized statements.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from sqlalchemy import Double, DateTime, Integer, String, Text, create_engine, event, func, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from daybreak.errors import DaybreakError
from daybreak.leaderboard.submission import MAX_FIELD_CHARS, MAX_SOURCE_CHARS, Submission, one_line

DB_ENV = "DAYBREAK_DB"
DB_FILE = "leaderboard.sqlite"


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

    @property
    def curve(self) -> list[list[float | None]]:
        return json.loads(self.curve_json or "[]")

    @property
    def document(self) -> Any:
        return json.loads(self.document_json)

    @property
    def notes(self) -> list[str]:
        return json.loads(self.notes_json or "[]")

    @property
    def tsv_columns(self) -> list[str]:
        return json.loads(self.tsv_columns_json or "[]")


def default_db_url() -> str:
    env = os.environ.get(DB_ENV, "").strip()
    if env:
        return env
    from platformdirs import user_data_dir

    return f"sqlite:///{Path(user_data_dir('daybreak')) / DB_FILE}"


def normalize_url(url: str | None) -> str:
    """``None`` -> the default; a bare path -> SQLite; ``postgresql://`` -> psycopg 3."""
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


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    """WAL: readers do not block the writer; NORMAL sync is crash-safe in WAL mode and much faster per commit."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


@dataclass
class Ranked:
    entry: Entry
    value: float


class Store:
    def __init__(self, url: str | None = None, *, create: bool = True):
        self.url = normalize_url(url)
        self.display_url = safe_url(self.url)
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
            else:
                try:
                    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise StoreError(f"cannot create the folder for {self.display_url}: {e.strerror or e}") from None
        elif parsed.get_backend_name() == "postgresql":
            kwargs["pool_pre_ping"] = True
        try:
            self.engine: Engine = create_engine(self.url, **kwargs)
        except (ArgumentError, ImportError, SQLAlchemyError) as e:
            raise StoreError(f"cannot use database {self.display_url}: {_brief(e)}") from None
        if parsed.get_backend_name() == "sqlite" and "poolclass" not in kwargs:
            event.listen(self.engine, "connect", _sqlite_pragmas)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if create:
            try:
                Base.metadata.create_all(self.engine)
            except SQLAlchemyError as e:
                raise StoreError(f"cannot open database {self.display_url}: {_brief(e)}") from None

    # -- writing -------------------------------------------------------------------------------------------

    def add(self, sub: Submission) -> tuple[int, bool]:
        """Store one validated submission in its own transaction -> (entry id, created). Same content twice: one row."""
        if not sub.content_hash:
            raise ValueError("submission has no content hash (call finish())")
        existing = self.find_hash(sub.content_hash)
        if existing is not None:
            return existing, False
        entry = Entry(
            content_hash=sub.content_hash, kind=sub.kind, task=sub.task, source_format=sub.source_format,
            source=sub.source[:MAX_SOURCE_CHARS], submitter=(sub.submitter or None) and sub.submitter[:100],
            model=sub.model, hardware=sub.hardware, framework=sub.framework, author=sub.author,
            author_email=sub.author_email, code_url=sub.code_url, submitted_at=sub.submitted_at,
            imported_at=datetime.now(timezone.utc).replace(tzinfo=None), metric=sub.metric, target=sub.target,
            accuracy=sub.accuracy, accuracy_unit=sub.accuracy_unit, time_to_target_s=sub.time_to_target_s,
            epochs_to_target=sub.epochs_to_target, cost_per_hour=sub.cost_per_hour,
            train_cost_usd=sub.train_cost_usd, latency_ms=sub.latency_ms,
            cost_per_example_usd=sub.cost_per_example_usd, inference_cost_10k_usd=sub.inference_cost_10k_usd,
            curve_json=json.dumps([list(p) for p in sub.curve], allow_nan=False),
            tsv_columns_json=json.dumps(sub.tsv_columns),
            document_json=json.dumps(sub.document, allow_nan=False),
            notes_json=json.dumps(sub.notes),
        )
        try:
            with self._sessions() as session, session.begin():
                session.add(entry)
            return entry.id, True
        except IntegrityError:
            # another writer stored the same content between our look-up and our insert
            existing = self.find_hash(sub.content_hash)
            if existing is None:
                raise
            return existing, False
        except OperationalError as e:
            raise StoreError(f"cannot write to {self.display_url}: {_brief(e)}") from None

    # -- reading -------------------------------------------------------------------------------------------

    def _read(self):
        return self._sessions()

    def find_hash(self, content_hash: str) -> int | None:
        try:
            with self._read() as session:
                return session.scalar(select(Entry.id).where(Entry.content_hash == content_hash))
        except OperationalError as e:
            raise StoreError(f"cannot read {self.display_url}: {_brief(e)}") from None

    def get(self, entry_id: int) -> Entry | None:
        try:
            with self._read() as session:
                return session.get(Entry, entry_id)
        except OperationalError as e:
            raise StoreError(f"cannot read {self.display_url}: {_brief(e)}") from None

    def count(self, task: str | None = None) -> int:
        with self._read() as session:
            q = select(func.count(Entry.id))
            if task is not None:
                q = q.where(Entry.task == task)
            return int(session.scalar(q) or 0)

    def entries(self, task: str | None = None) -> list[Entry]:
        with self._read() as session:
            q = select(Entry).order_by(Entry.id)
            if task is not None:
                q = q.where(Entry.task == task)
            return list(session.scalars(q))

    def ranked(self, task: str, column: str, limit: int | None = None) -> list[Ranked]:
        """Entries of ``task`` with a value in ``column``, best (smallest) first; ties: the earlier submission."""
        attr = getattr(Entry, column)
        try:
            with self._read() as session:
                q = (select(Entry).where(Entry.task == task, attr.is_not(None))
                     .order_by(attr.asc(), Entry.submitted_at.asc(), Entry.id.asc()))
                if limit is not None:
                    q = q.limit(limit)
                return [Ranked(e, getattr(e, column)) for e in session.scalars(q)]
        except OperationalError as e:
            raise StoreError(f"cannot read {self.display_url}: {_brief(e)}") from None

    def iter_ids(self) -> Iterator[int]:
        with self._read() as session:
            yield from session.scalars(select(Entry.id).order_by(Entry.id))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
