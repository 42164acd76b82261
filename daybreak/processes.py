"""Ending a child's whole process group (a torchrun launcher and its workers, a timed program and its children)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


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
