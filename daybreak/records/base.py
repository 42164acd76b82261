"""The family of typed JSON records (result.json, summary.json, lesion.json, ...): one base, one loader.

Every record has a ``kind`` field (``daybreak.<name>``, a Literal default declared by the record itself, so that
each keeps its own field order on disk), the daybreak version that wrote it (:class:`Versioned`) and, on the
:class:`Record` base, the file it lives in and its name in messages. :func:`load_record` reads any of them from a run
directory (or the file itself) with one-line errors; :func:`load_record_list` reads a file holding a JSON list of
them (generalization.json).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError, model_validator

from daybreak.errors import RecordError
from daybreak.fileio import atomic_write_text
from daybreak.version import __version__

R = TypeVar("R", bound=BaseModel)
RecordT = TypeVar("RecordT", bound="Record")


class Versioned(BaseModel):
    """A record that says which daybreak wrote it: ``daybreak_version`` (``daybreak --version``; CHANGELOG.md says
    what each version changed). A record made by this code gets this version; one read from a file keeps what the
    file says (None: written before daybreak 0.5, which did not record it here; its ``system.daybreak`` may)."""

    daybreak_version: str | None = None  # the daybreak version that wrote it, set when it is made (None: before 0.5)

    @model_validator(mode="after")
    def _made_by_this_version(self) -> "Versioned":
        # Every record file holds its ``kind``; code that makes a record never passes it (it is the default). So a
        # record without ``kind`` among its given fields is being made now, and one with it was read from somewhere.
        if self.daybreak_version is None and not {"kind", "daybreak_version"} & self.model_fields_set:
            self.daybreak_version = __version__
        return self


class Record(Versioned):
    """Base of daybreak's typed records. A subclass declares ``kind: Literal["daybreak.<name>"]`` (with that
    default) among its fields and sets ``FILE`` (the file's name in its folder; None for records written where
    the user says) and ``WHAT`` (its name in messages: "run", "repeat", ...)."""

    FILE: ClassVar[str | None] = None
    WHAT: ClassVar[str] = "record"

    @classmethod
    def record_kind(cls) -> str:
        """The ``kind`` every file of this record carries (the field's default)."""
        kind: str = cls.model_fields["kind"].default
        return kind

    @classmethod
    def missing_hint(cls, path: Path) -> str:
        """What to tell a user whose ``path`` holds no such file."""
        return f"is this a daybreak {cls.WHAT} directory?"

    def save(self, folder: str | Path, *, durable: bool = True) -> Path:
        """Write ``folder/FILE`` atomically (indented JSON)."""
        if self.FILE is None:
            raise TypeError(f"{type(self).__name__} has no file of its own: write it where the user asked")
        return atomic_write_text(Path(folder) / self.FILE, self.model_dump_json(indent=2) + "\n", durable=durable)

    @classmethod
    def load(cls: type[RecordT], path: str | Path) -> RecordT:
        """Load from the record's folder or the file itself, with one-line errors."""
        path = Path(path)
        return load_record(cls, path, file_name=cls.FILE or path.name, kind=cls.record_kind(), what=cls.WHAT,
                           missing_hint=cls.missing_hint(path))


def _read_json(file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RecordError(f"{file}: not readable JSON ({reason})") from None


def _validate(cls: type[R], data: Any, file: Path, *, kind: str, what: str, where: str = "") -> R:
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else None
        raise RecordError(f"{file}: {where}not a daybreak {what} record (kind {found!r})")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{file}: {where}invalid {what} record: {loc}: {first['msg']}") from None


def load_record(cls: type[R], path: str | Path, *, file_name: str, kind: str, what: str, missing_hint: str) -> R:
    """``path`` is a run directory (the record is ``path/file_name``) or the record file itself.
    ``kind`` is the record's ``kind`` field; ``what`` names it in messages ("run", "inference")."""
    path = Path(path)
    file = path / file_name if path.is_dir() else path
    if not file.exists():
        raise RecordError(f"{path}: no {file_name} here; {missing_hint}")
    return _validate(cls, _read_json(file), file, kind=kind, what=what)


def load_record_list(cls: type[R], file: str | Path, *, kind: str, what: str) -> list[R]:
    """Every record of a file holding a JSON list of them; [] when there is no such file."""
    file = Path(file)
    if not file.exists():
        return []
    data = _read_json(file)
    if not isinstance(data, list):
        raise RecordError(f"{file}: not a list of daybreak {what} records")
    return [_validate(cls, item, file, kind=kind, what=what, where=f"entry {i + 1}: ") for i, item in enumerate(data)]
