"""Trial executors: run an experiment's trials, each a fresh process, locally or as one Slurm job array.

An experiment (repeat, lesion, ab, ...) hands an executor a list of :class:`Trial` s (a command line, the run
directory it writes, a log file) and gets one :class:`TrialOutcome` per trial back: exit status, host, start and
finish time. The executor neither reads nor judges what a trial wrote; the experiment does that from the run
directory. Three executors, chosen by ``--executor``:

* ``local`` (default): subprocesses on this machine, each in its own process group, ``--parallel`` at a time
  (default: one per visible GPU; on CPU one at a time). GPUs are handed out from a pool as
  ``CUDA_VISIBLE_DEVICES`` slices.
* ``slurm``: one Slurm job array per call through submitit (``daybreak.executors.slurm``); each array task runs
  the trial's command on its node. Run directories and logs must be on storage the nodes share.
* ``submitit-local``: the same submitit code path with submitit's LocalExecutor instead of Slurm (tests, and a
  way to try the Slurm path on one machine).

    options = ExecutorOptions(executor="slurm", slurm_partition="gpu", slurm_time_min=30)
    check_options(options)                       # ConfigError, one line, for any bad value
    outcomes = make_executor(options, Path("exp")).run(trials, on_done=print)
"""

from __future__ import annotations

import os
import queue
import shutil
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

from daybreak.errors import ConfigError
from daybreak.executors import slurm
from daybreak.executors.trials import (EXECUTORS, ExecutorOptions, Trial, TrialOutcome, TrialsCancelled,
                                         sbatch_additional, start_trial_process, visible_gpus)
from daybreak.processes import end_process_group, stop_signals_held
from daybreak.text import one_line

__all__ = ["EXECUTORS", "Executor", "ExecutorOptions", "LocalExecutor", "Trial", "TrialOutcome", "TrialsCancelled",
           "check_options", "make_executor", "visible_gpus"]


class Executor(Protocol):
    name: str

    def run(self, trials: Sequence[Trial], on_done: Callable[[Trial, TrialOutcome], None] | None = None,
            cancel: threading.Event | None = None) -> list[TrialOutcome]:
        """Run every trial; call on_done as each finishes (in the calling thread); return outcomes in the order
        of `trials`. Trials START in the given order (the caller interleaves arms; the executor never reorders).
        KeyboardInterrupt (or an exception from on_done): stop everything (local: end each trial's process
        group; Slurm: scancel the array), then re-raise. ``cancel`` set (by another thread): stop everything
        the same way within about a second and raise TrialsCancelled."""


# --- checking the options -----------------------------------------------------------------------------------------

def _at_least_one(flag: str, value: int | float | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{flag} {value}: give a number of at least 1")


def _check_slurm_values(options: ExecutorOptions) -> None:
    if not isinstance(options.slurm_time_min, int) or options.slurm_time_min < 1:
        raise ConfigError(f"--slurm-time-min {options.slurm_time_min}: give a whole number of minutes, at least 1")
    _at_least_one("--slurm-cpus-per-trial", options.slurm_cpus_per_trial)
    _at_least_one("--slurm-array-parallelism", options.slurm_array_parallelism)
    if options.slurm_mem_gb is not None and not options.slurm_mem_gb > 0:
        raise ConfigError(f"--slurm-mem-gb {options.slurm_mem_gb}: give a positive number of GB")
    sbatch_additional(options.slurm_additional)


def _slurm_flags_given(options: ExecutorOptions) -> list[str]:
    """The Slurm flags set away from their defaults."""
    defaults = ExecutorOptions()
    return [ExecutorOptions.__dataclass_fields__[name].metadata["flag"]
            for name in ("slurm_partition", "slurm_time_min", "slurm_cpus_per_trial", "slurm_mem_gb",
                         "slurm_array_parallelism", "slurm_additional", "slurm_folder")
            if getattr(options, name) != getattr(defaults, name)]


def _require_submitit(executor: str) -> None:
    try:
        import submitit  # noqa: F401
    except ImportError:
        raise ConfigError(f"--executor {executor} needs submitit: pip install 'daybreak[slurm]' (or pip install "
                          "submitit)") from None


def _require_slurm_commands() -> None:
    missing = [c for c in ("sbatch", "squeue", "scancel", "srun", "sinfo") if shutil.which(c) is None]
    if missing:
        raise ConfigError(f"--executor slurm: {', '.join(missing)} not found on PATH; run on a Slurm login node "
                          "(or use --executor local)")


def check_options(options: ExecutorOptions) -> None:
    """A ConfigError (one line) for every bad value, before anything starts: unknown executor, counts below 1,
    malformed sbatch options, Slurm flags without --executor slurm, --executor slurm without submitit, without
    the Slurm commands or with a partition the cluster does not have."""
    if options.executor not in EXECUTORS:
        raise ConfigError(f"--executor {options.executor!r}: choose one of {', '.join(EXECUTORS)}")
    _at_least_one("--parallel", options.parallel)
    _check_slurm_values(options)
    if options.executor == "local":
        given = _slurm_flags_given(options)
        if given:
            raise ConfigError(f"{given[0]} applies to --executor slurm; add --executor slurm (or drop {given[0]})")
        return
    if options.executor == "slurm" and options.parallel is not None:
        raise ConfigError("--parallel applies to local executors; on Slurm use --slurm-array-parallelism")
    _require_submitit(options.executor)
    if options.executor == "slurm":
        _require_slurm_commands()
        slurm.check_partition(options.slurm_partition)


def make_executor(options: ExecutorOptions, experiment_dir: Path) -> Executor:
    """The executor the options name (checked first: ConfigError for bad options)."""
    check_options(options)
    if options.executor == "local":
        return LocalExecutor(parallel=options.parallel)
    folder = Path(options.slurm_folder) if options.slurm_folder else Path(experiment_dir) / "slurm"
    return slurm.SubmititExecutor(options, folder=folder, job_name=f"daybreak-{Path(experiment_dir).name}")


# --- local: subprocesses -----------------------------------------------------------------------------------------

def _check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise TrialsCancelled("the trials were cancelled")


def trial_environment(trial: Trial, gpus: Sequence[str] | None) -> dict[str, str]:
    """This process's environment, the trial's extras, and (with a GPU pool) its CUDA_VISIBLE_DEVICES slice."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    env.update({str(k): str(v) for k, v in trial.env.items()})
    return env


# (trial index, exit code, time.time() it exited), put by each trial's waiting thread
_Finished = queue.Queue[tuple[int, int, float]]


@dataclass
class _Running:
    index: int
    proc: subprocess.Popen[bytes]
    gpus: list[str]
    started_at: float


class LocalExecutor:
    """Each trial a fresh subprocess in its own process group (so that ending it ends torchrun and its workers
    too), stdout and stderr appended to the trial's log.

    How many at once: ``parallel``, by default one per visible GPU, each trial taking ``trial.devices`` GPUs
    from the pool. On a machine without GPUs one at a time unless ``parallel`` says otherwise: trials running
    side by side would compete for the same cores and memory bandwidth, and each one's time-to-target would
    then depend on what its neighbours happened to be doing. A trial waits for its GPUs rather than letting a
    later one overtake it: trials start in the given order."""

    name = "local"

    def __init__(self, parallel: int | None = None, gpus: Sequence[str] | None = None):
        self.gpus = list(visible_gpus() if gpus is None else gpus)
        self.parallel = parallel or max(1, len(self.gpus))

    def run(self, trials: Sequence[Trial], on_done: Callable[[Trial, TrialOutcome], None] | None = None,
            cancel: threading.Event | None = None) -> list[TrialOutcome]:
        self._check_devices(trials)
        outcomes: list[TrialOutcome | None] = [None] * len(trials)
        waiting = deque(range(len(trials)))
        running: dict[int, _Running] = {}
        finished: _Finished = queue.Queue()
        free = list(self.gpus)
        try:
            while waiting or running:
                _check_cancel(cancel)
                while waiting and len(running) < self.parallel and self._fits(trials[waiting[0]], free):
                    index = waiting.popleft()
                    with stop_signals_held():  # a Ctrl-C or SIGTERM now finds the trial in `running`, and stops it
                        started = self._start(index, trials[index], free, finished)
                        if not isinstance(started, TrialOutcome):
                            running[index] = started
                    if isinstance(started, TrialOutcome):  # could not even start
                        outcomes[index] = started
                        if on_done:
                            on_done(trials[index], started)
                if not running:
                    continue
                index, code, finished_at = self._next_finished(finished, trials, running, cancel)
                slot = running.pop(index)
                free.extend(slot.gpus)
                limit = trials[index].timeout_s
                late = limit is not None and finished_at - slot.started_at >= limit
                outcome = TrialOutcome(trials[index].key, code, socket.gethostname(), slot.started_at, finished_at,
                                       f"stopped after its {limit:g} s time limit" if late else None)
                outcomes[index] = outcome
                if on_done:
                    on_done(trials[index], outcome)
        except BaseException:
            self._stop(running.values())
            raise
        return [o for o in outcomes if o is not None]

    def _check_devices(self, trials: Sequence[Trial]) -> None:
        if not self.gpus:
            return  # CPU: devices only say how many processes the trial's own command starts
        most = max((t.devices for t in trials), default=0)
        if most > len(self.gpus):
            raise ConfigError(f"a trial needs {most} GPUs but this machine shows {len(self.gpus)} "
                              f"(CUDA_VISIBLE_DEVICES={','.join(self.gpus)}); use --executor slurm or fewer devices")

    def _fits(self, trial: Trial, free: list[str]) -> bool:
        return not self.gpus or len(free) >= max(0, trial.devices)

    def _start(self, index: int, trial: Trial, free: list[str], finished: _Finished) -> _Running | TrialOutcome:
        gpus: list[str] = []
        if self.gpus:
            gpus, free[:] = free[:max(0, trial.devices)], free[max(0, trial.devices):]
        started_at = time.time()
        try:
            proc = start_trial_process(trial.argv, trial.log, trial_environment(trial, gpus if self.gpus else None))
        except OSError as e:
            free.extend(gpus)
            message = f"cannot start {trial.argv[0] if trial.argv else '(empty command)'}: {one_line(e)}"
            with open(trial.log, "a", encoding="utf-8") as log:
                log.write(f"daybreak: {message}\n")
            return TrialOutcome(trial.key, None, socket.gethostname(), None, None, message)
        threading.Thread(target=lambda: finished.put((index, proc.wait(), time.time())), daemon=True,
                         name=f"wait-{trial.key}").start()
        return _Running(index, proc, gpus, started_at)

    @staticmethod
    def _next_finished(finished: _Finished, trials: Sequence[Trial] = (), running: dict[int, _Running] | None = None,
                       cancel: threading.Event | None = None) -> tuple[int, int, float]:
        """Sleep until a trial exits (a timeout only so that Ctrl-C and ``cancel`` are seen promptly on every
        platform, and so that a trial past its ``timeout_s`` is ended: its process group gets SIGTERM, then
        SIGKILL)."""
        while True:
            _check_cancel(cancel)
            try:
                return finished.get(timeout=1.0)
            except queue.Empty:
                now = time.time()
                for index, slot in (running or {}).items():
                    limit = trials[index].timeout_s
                    if limit is not None and now - slot.started_at > limit and slot.proc.poll() is None:
                        threading.Thread(target=end_process_group, args=(slot.proc,), kwargs={"grace_s": 5.0},
                                         daemon=True).start()

    @staticmethod
    def _stop(running: Iterable[_Running]) -> None:
        """End every running trial's process group, all at once: SIGTERM to each, then SIGKILL what is left."""
        stoppers = [threading.Thread(target=end_process_group, args=(r.proc,), kwargs={"grace_s": 5.0})
                    for r in running]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
