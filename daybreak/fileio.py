"""Crash-safe file writes: temp file in the same folder + fsync + rename, so readers see old or new, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, IO


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], None], *, durable: bool = True) -> Path:
    """Call ``write(fileobj)`` on a temp file beside ``path``, fsync it, then rename it over ``path``.

    ``durable=False`` skips the fsync: the rename is still atomic for every reader and a killed process loses
    nothing (the data is in the OS's buffers); only a machine crash could lose the last version. For writes on a
    run's clock, where disk latency would otherwise be timed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = True) -> Path:
    return atomic_write(path, lambda f: f.write(data), durable=durable)


def atomic_write_text(path: str | os.PathLike, text: str, *, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: str | os.PathLike, obj: Any, *, durable: bool = True) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n", durable=durable)


class AppendLog:
    """An append-only text log: every line is written, flushed and fsync'd before ``write_line`` returns."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a", encoding="utf-8")

    def write_line(self, line: str) -> None:
        self._f.write(line.rstrip("\n") + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> "AppendLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
