"""Crash-safe file writes: temp file in the same folder + fsync + rename, so readers see old or new, never half.

Modes follow the umask as ``open()`` and ``mkdir`` do (0644 files and 0755 folders under umask 022): the temp files
and folders that :mod:`tempfile` makes are private (0600/0700) and are opened up to that mode before they are
renamed into place, so what daybreak writes can be published (a web server serving an export, a shared run folder).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, IO


def current_umask() -> int:
    """The process's umask, read without changing it where Linux reports it (``/proc/self/status``); elsewhere
    set and restored at once."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file: 0666 less the umask."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode ``mkdir`` would give a new folder: 0777 less the umask."""
    return 0o777 & ~current_umask()


def make_temp_dir(parent: str | os.PathLike[str], prefix: str) -> Path:
    """A new uniquely named folder in ``parent`` (to build something in, then rename into place) with the mode
    ``mkdir`` would give it."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(folder, dir_mode())
    return folder


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object], *, durable: bool = True) -> Path:
    """Call ``write(fileobj)`` on a temp file beside ``path``, fsync it, then rename it over ``path``.

    ``durable=False`` skips the fsync: the rename is still atomic for every reader and a killed process loses
    nothing (the data is in the OS's buffers); only a machine crash could lose the last version. For writes on a
    run's clock, where disk latency would otherwise be timed."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:  # about the file asked for, not the temp file or a parent folder it names
        raise OSError(e.errno, f"cannot write it ({e.strerror or e})", os.fspath(path)) from None
    try:
        os.fchmod(fd, file_mode())
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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> Path:
    return atomic_write(path, lambda f: f.write(data), durable=durable)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, durable: bool = True) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n", durable=durable)


class AppendLog:
    """An append-only text log: every line is written, flushed and fsync'd before ``write_line`` returns."""

    def __init__(self, path: str | os.PathLike[str]):
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
