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
    writing into the run directory the resumption had just cleared). They are delivered when the block ends. A
    child started inside the block must unblock them (``release_stop_signals`` in its ``preexec_fn``): a signal
    mask survives exec. Only the main thread takes signals in Python, so elsewhere this does nothing."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def release_stop_signals() -> None:
    """In a child started under ``stop_signals_held``: take SIGINT and SIGTERM again (a ``preexec_fn``)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


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
