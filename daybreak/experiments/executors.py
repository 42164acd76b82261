"""Trial executors (interim local-only version; the Slurm executor lands from its own branch)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

from daybreak.errors import ConfigError
from daybreak.processes import end_process_group


@dataclass(frozen=True)
class Trial:
    key: str
    argv: list[str]
    run_dir: Path
    log: Path
    devices: int = 1
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class TrialOutcome:
    key: str
    exit_code: int | None
    host: str | None
    started_at: float | None
    finished_at: float | None
    error: str | None = None


@dataclass
class ExecutorOptions:
    executor: str = field(default="local", metadata={"help": "local | slurm", "flag": "--executor"})
    parallel: int | None = field(default=None, metadata={"help": "trials at once", "flag": "--parallel"})


class Executor(Protocol):
    name: str

    def run(self, trials: Sequence[Trial],
            on_done: Callable[[Trial, TrialOutcome], None] | None = None) -> list[TrialOutcome]: ...


class LocalExecutor:
    name = "local"

    def run(self, trials, on_done=None):
        outcomes = []
        for t in trials:
            t.log.parent.mkdir(parents=True, exist_ok=True)
            started = time.time()
            with open(t.log, "ab") as log:
                proc = subprocess.Popen(t.argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                        env={**os.environ, **t.env})
                try:
                    code = proc.wait()
                except BaseException:
                    end_process_group(proc)
                    raise
            o = TrialOutcome(t.key, code, socket.gethostname(), started, time.time())
            outcomes.append(o)
            if on_done:
                on_done(t, o)
        return outcomes


def check_options(options: ExecutorOptions) -> None:
    if options.executor != "local":
        raise ConfigError(f"--executor {options.executor}: only local here")


def make_executor(options: ExecutorOptions, experiment_dir: Path) -> Executor:
    return LocalExecutor()
