"""Ending a child's whole process group (a torchrun launcher and its workers, a timed program and its children)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from contextlib import contextmanager
from typing import Any, Iterator

# the signals that stop a command (Ctrl-C; a scheduler's, `timeout`'s or a container's stop)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while a child is started and recorded as running: one arriving between the
    fork and the record would otherwise leave a child nobody stops (it would run on beside a resumed experiment,
    writing into the run directory the resumption had just cleared). Inside the block their Python handlers only
    note the signal; the old handlers are put back and the noted signals raised again when the block ends. (A
    signal mask would not do: it holds a signal back from the calling thread only, and the kernel hands a
    process-directed signal to any other thread, a trial's waiter among them, whose flag the main thread then
    acts on at once.) Python runs signal handlers in the main thread only, so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    old: dict[int, Any] = {}
    for sig in STOP_SIGNALS:
        handler = signal.getsignal(sig)
        if handler is None or handler is signal.SIG_IGN:  # installed outside Python, or ignored: left alone
            continue
        old[sig] = signal.signal(sig, lambda signum, _frame: noted.append(signum))
    try:
        yield
    finally:
        for held, handler in old.items():
            signal.signal(held, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


def end_process_group(proc: subprocess.Popen[Any], grace_s: float = 10.0) -> None:
    """SIGTERM the process group (torchrun and its workers), then SIGKILL what is left."""
    if hasattr(os, "killpg"):
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
    else:  # pragma: no cover - Windows
        proc.kill()
        proc.wait()
