"""Start a worker module in a fresh process: plain ``python -m`` for one device, torchrun (DDP) for several.

Nothing here knows what the worker does: it builds the command line (the torchrun part comes from
``daybreak.launch``, shared with `daybreak run --nproc-per-node`) and the environment (threads per process,
PYTHONPATH), runs the process group with a timeout (killing the whole group when it expires) and keeps its
output in a log file. Reusable by anything that runs one job in a fresh process on N devices.

    cmd = build_command("daybreak.sweep.worker", ["--spec", "s.json"], LaunchSpec(nproc_per_node=2))
    outcome = run_process(cmd, worker_env(threads=1), timeout=600, log_path=Path("w.log"))
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

import daybreak
from daybreak.launch import LaunchSpec, torchrun_command
from daybreak.processes import end_process_group

__all__ = ["LaunchSpec", "ProcessOutcome", "build_command", "cpu_cores", "run_process", "threads_per_process",
           "worker_env"]


@dataclass
class ProcessOutcome:
    returncode: int | None  # None when killed for the timeout; negative: killed by that signal
    timed_out: bool
    seconds: float
    log_path: Path | None
    log_tail: str  # the last lines of stdout + stderr

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def threads_per_process(nproc: int, device_type: str, requested: int | None = None) -> int:
    """Intra-op threads for each of ``nproc`` processes on one node: ``requested`` if given; on CPU the cores
    split evenly (at least 1 each) so the processes do not oversubscribe; on a GPU a few cores each for the
    host side."""
    if requested is not None:
        return max(1, requested)
    cores = cpu_cores()
    per = max(1, cores // max(1, nproc))
    return per if device_type == "cpu" else min(per, 8)


def package_root() -> Path:
    """The folder that holds the ``daybreak`` package (put on PYTHONPATH so workers import the same code)."""
    return Path(daybreak.__file__).resolve().parent.parent


def worker_env(threads: int | None = None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    root = str(package_root())
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        env["PYTHONPATH"] = os.pathsep.join([root, *parts])
    env["PYTHONUNBUFFERED"] = "1"
    if threads is not None:
        # torchrun would otherwise set OMP_NUM_THREADS=1 for every process; say what we mean.
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    env.update(extra or {})
    return env


def build_command(module: str, args: list[str], spec: LaunchSpec | None = None,
                  python: str | None = None) -> list[str]:
    """``python -m MODULE ARGS`` for one process; ``daybreak.launch.torchrun_command`` for several (DDP)."""
    spec = (spec or LaunchSpec()).validate()
    if not spec.multi_process:
        return [python or sys.executable, "-m", module, *args]
    cmd = torchrun_command(spec, module, args)
    if python:
        cmd[0] = python
    return cmd


def _tail(path: Path | None, lines: int = 40) -> str:
    if path is None or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - 64 * 1024))
        text = f.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def run_process(cmd: list[str], env: dict[str, str] | None = None, timeout: float | None = None,
                log_path: Path | None = None, poll: Callable[[], None] | None = None,
                poll_interval_s: float = 0.25, cwd: str | Path | None = None) -> ProcessOutcome:
    """Run ``cmd`` in its own process group with stdout+stderr to ``log_path``; kill the group after ``timeout``.

    ``poll()`` is called every ``poll_interval_s`` while it runs (e.g. to update a progress bar). Without
    ``poll`` this process sleeps until the child exits or the timeout expires: no periodic wake-ups that would
    take CPU time from the measured process (``Popen.wait(timeout)`` itself polls every few milliseconds)."""
    out: IO[bytes] | int  # the log file, or subprocess.DEVNULL
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(log_path, "wb")
    else:
        out = subprocess.DEVNULL
    start = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=hasattr(os, "killpg"))
        exited = threading.Event()

        def reap() -> None:
            proc.wait()
            exited.set()

        threading.Thread(target=reap, daemon=True).start()
        timed_out = False
        try:
            while True:
                wait = poll_interval_s if poll is not None else None
                if timeout is not None:
                    left = max(0.0, timeout - (time.perf_counter() - start))
                    wait = left if wait is None else min(wait, left)
                if exited.wait(wait):
                    break
                if poll is not None:
                    poll()
                if timeout is not None and time.perf_counter() - start > timeout:
                    timed_out = True
                    end_process_group(proc)
                    break
        except BaseException:  # KeyboardInterrupt: do not leave workers behind
            end_process_group(proc, grace_s=3.0)
            raise
        proc.wait()
    finally:
        if not isinstance(out, int):  # not subprocess.DEVNULL
            out.close()
    return ProcessOutcome(returncode=None if timed_out else proc.returncode, timed_out=timed_out,
                          seconds=time.perf_counter() - start, log_path=log_path, log_tail=_tail(log_path))
