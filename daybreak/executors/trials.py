"""What an executor is handed and what it hands back: trials, their outcomes, and the executor options.

Kept apart from the executors themselves (daybreak.executors re-exports all of it) so that the local
and the Slurm executors can share them without importing each other.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

from daybreak.errors import ConfigError, DaybreakError

EXECUTORS = ("local", "slurm", "submitit-local")


class TrialsCancelled(DaybreakError):
    """``run(..., cancel=EVENT)``: the event was set, so the executor stopped every trial it had started (local:
    their process groups ended; Slurm: the array cancelled) and returned none of them."""


@dataclass(frozen=True)
class Trial:
    """One fresh process of an experiment."""

    key: str                  # unique in the experiment, safe as a file name, e.g. "0003-candidate-seed-1"
    argv: list[str]           # the full command, e.g. [sys.executable, "-m", "daybreak", "run", ...]
    run_dir: Path             # the trial's run directory (the command writes it; the executor only reports)
    log: Path                 # stdout+stderr of the trial go here (appended; created with parents)
    devices: int = 1          # accelerators: GPUs per Slurm task; locally a CUDA_VISIBLE_DEVICES slice
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment for the trial
    timeout_s: float | None = None  # locally: end the trial's process group past this (the outcome says why)


@dataclass
class TrialOutcome:
    """What became of a trial's process (not of its training: that is in its run directory)."""

    key: str
    exit_code: int | None     # None: never ran, lost, or cancelled before it started
    host: str | None
    started_at: float | None  # time.time() on the host that ran it
    finished_at: float | None
    error: str | None = None  # one line when the executor itself failed (submission refused, node lost, ...)


_T = TypeVar("_T")


def _opt(flag: str, help: str, default: _T, metavar: str | None = None) -> _T:  # noqa: A002 - the metadata's key
    metadata = {"help": help, "flag": flag}
    if metavar:
        metadata["metavar"] = metavar
    return field(default=default, metadata=metadata)


@dataclass
class ExecutorOptions:
    """Where and how an experiment's trials run. Each field is one command-line flag (its metadata)."""

    executor: str = _opt("--executor", "where trials run: local (subprocesses on this machine), slurm (one Slurm "
                         "job array through submitit; needs daybreak[slurm] and sbatch) or submitit-local "
                         "(submitit's local executor, the Slurm code path on this machine)", "local")
    parallel: int | None = _opt("--parallel", "local: trials at once (default: one per visible GPU, but 1 for "
                                "lesion and ab, whose pairs never run side by side; on CPU 1, because parallel "
                                "trials would compete for the cores and slow each other)", None, "N")
    slurm_partition: str | None = _opt("--slurm-partition", "Slurm partition (default: the cluster's default "
                                       "partition)", None, "NAME")
    slurm_time_min: int = _opt("--slurm-time-min", "Slurm time limit of each trial, in minutes", 60, "MIN")
    slurm_cpus_per_trial: int | None = _opt("--slurm-cpus-per-trial", "CPU cores per trial (sbatch "
                                            "--cpus-per-task; default: the partition's default)", None, "N")
    slurm_mem_gb: float | None = _opt("--slurm-mem-gb", "memory per trial in GB (sbatch --mem; default: the "
                                      "partition's default)", None, "GB")
    slurm_array_parallelism: int | None = _opt("--slurm-array-parallelism", "trials running at once on the "
                                               "cluster (the %N of sbatch --array; default: as many as the "
                                               "cluster gives)", None, "N")
    slurm_additional: tuple[str, ...] = _opt("--slurm-additional", "another sbatch option, KEY=VALUE without the "
                                             "dashes (e.g. account=ml, qos=high, constraint=a100); repeatable",
                                             (), "KEY=VALUE")
    slurm_folder: Path | None = _opt("--slurm-folder", "where submitit keeps its job scripts, pickles and logs "
                                     "(default: EXPERIMENT_DIR/slurm; must be on storage the nodes share)",
                                     None, "DIR")


def sbatch_additional(entries: Sequence[str]) -> dict[str, str | bool]:
    """``--slurm-additional`` entries as submitit's ``additional_parameters``: ``KEY=VALUE`` -> {KEY: VALUE}, a
    bare ``KEY`` (e.g. ``exclusive``) -> {KEY: True}. Leading dashes are forgiven."""
    out: dict[str, str | bool] = {}
    for entry in entries:
        key, sep, value = str(entry).partition("=")
        key = key.strip().lstrip("-")
        if not key or not all(c.isalnum() or c in "-_" for c in key) or (sep and not value.strip()):
            raise ConfigError(f"--slurm-additional {entry!r}: give an sbatch option as KEY=VALUE, e.g. "
                              "account=ml or constraint=a100")
        out[key.replace("_", "-")] = value.strip() if sep else True
    return out


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out, as CUDA_VISIBLE_DEVICES entries: CUDA_VISIBLE_DEVICES's own entries
    when it is set, else 0..N-1; empty on a machine without CUDA. Counting does not create a CUDA context."""
    try:
        import torch

        count = torch.cuda.device_count()
    except Exception:  # no torch, no driver: no GPU to hand out
        count = 0
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return listed[:count]
    return [str(i) for i in range(count)]


def _child_setup() -> Callable[[], None]:
    """The trial's ``preexec_fn``: on Linux it asks to be sent SIGTERM when the process that started it dies, even
    by SIGKILL (an experiment killed outright, a Slurm task's wrapper lost): the trial sits in a process group of
    its own, so nothing else would stop it, and it would run on, writing its run directory, beside the experiment's
    resumption. Where prctl does not exist the trial merely outlives such a death."""
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the forked child only calls it
        except (OSError, AttributeError):
            prctl = None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def setup() -> None:
        if prctl is not None:
            prctl(pr_set_pdeathsig, sigterm)

    return setup


def start_trial_process(argv: Sequence[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    """The trial's command in a new session (its own process group, so that ending it ends torchrun and its
    workers too), stdout and stderr appended to ``log``, no stdin. OSError when it cannot start."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=dict(env), start_new_session=True, preexec_fn=_child_setup())
