"""The live child of `daybreak time`: its process group, the threads reading its pipes, the terminal it writes
to, and daybreak's own SIGTERM/SIGHUP while it runs (daybreak.external.timer drives them).

The child runs in its own process group (session), so ending it ends its children too: SIGTERM to the group,
then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable


class TimingTerminated(BaseException):
    """daybreak itself got SIGTERM/SIGHUP while timing."""


class ProcessGroup:
    """The child's process group (POSIX) or the child alone (elsewhere)."""

    def __init__(self, proc: subprocess.Popen[bytes]):
        self.proc = proc
        self.posix = os.name == "posix"

    def signal(self, sig: int) -> None:
        try:
            if self.posix:
                os.killpg(self.proc.pid, sig)
            elif sig == getattr(signal, "SIGKILL", None):
                self.proc.kill()
            else:
                self.proc.terminate()
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def kill(self) -> None:
        self.signal(signal.SIGKILL if self.posix else signal.SIGTERM)

    def alive(self) -> bool:
        """Is any process of the group still running (zombies do not count)?"""
        if not self.posix:
            return self.proc.poll() is None
        pgid = self.proc.pid
        proc_dir = Path("/proc")
        if proc_dir.is_dir():
            for entry in proc_dir.iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    stat = (entry / "stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2:].split()
                if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                    return True
            return False
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def end(self, grace_s: float) -> None:
        """SIGTERM whatever is left of the group, SIGKILL it after ``grace_s``."""
        if not self.alive():
            return
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        try:
            while time.monotonic() < deadline and self.alive():
                try:
                    self.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            if self.alive():
                self.kill()


def read_pipe(stream: Any, name: str, q: "queue.Queue[tuple[str, float, bytes | None]]") -> None:
    fd = stream.fileno()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        q.put((name, time.time(), chunk or None))
        if not chunk:
            return


class Terminal:
    """Pass the child's output through; a status line on stderr when it is a terminal (never in program.log)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and _isatty(sys.stderr)
        self._shown = False
        self._open_line = {"stdout": False, "stderr": False}
        self._last_draw = 0.0

    def write(self, name: str, chunk: bytes) -> None:
        stream = sys.stdout if name == "stdout" else sys.stderr
        self.clear()
        try:
            stream.flush()
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                buffer.write(chunk)
                buffer.flush()
            else:
                stream.write(chunk.decode("utf-8", errors="replace"))
                stream.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
        self._open_line[name] = not chunk.endswith(b"\n")

    def clear(self) -> None:
        if self._shown:
            try:
                sys.stderr.write("\r\033[K")
                sys.stderr.flush()
            except (ValueError, OSError):
                pass
            self._shown = False

    def status(self, text: Callable[[], str], *, force: bool = False) -> None:
        if not self.enabled or any(self._open_line.values()):
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.5:
            return
        self._last_draw = now
        try:
            sys.stderr.write("\r\033[K" + text())
            sys.stderr.flush()
            self._shown = True
        except (ValueError, OSError):
            pass


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def install_signal_handlers() -> dict[int, Any]:
    if threading.current_thread() is not threading.main_thread():
        return {}

    def _raise(signum: int, frame: Any) -> None:
        raise TimingTerminated()

    old: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            old[sig] = signal.signal(sig, _raise)
        except (ValueError, OSError):
            pass
    return old


def restore_signal_handlers(old: dict[int, Any]) -> None:
    for sig, handler in old.items():
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
