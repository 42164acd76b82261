"""Reading a typed JSON record (result.json, inference.json, ...) from a run directory, with one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from daybreak.errors import RecordError

R = TypeVar("R", bound=BaseModel)


def load_record(cls: type[R], path: str | Path, *, file_name: str, kind: str, what: str, missing_hint: str) -> R:
    """``path`` is a run directory (the record is ``path/file_name``) or the record file itself.
    ``kind`` is the record's ``kind`` field; ``what`` names it in messages ("run", "inference")."""
    path = Path(path)
    file = path / file_name if path.is_dir() else path
    if not file.exists():
        raise RecordError(f"{path}: no {file_name} here; {missing_hint}")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise RecordError(f"{file}: not readable JSON ({reason})") from None
    if not isinstance(data, dict) or data.get("kind") != kind:
        found = data.get("kind") if isinstance(data, dict) else None
        raise RecordError(f"{file}: not a daybreak {what} record (kind {found!r})")
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise RecordError(f"{file}: invalid {what} record: {where}: {first['msg']}") from None
