"""Trials as one Slurm job array, through submitit (or submitit's local executor, on the same code path).

Each array task runs :func:`run_trial_on_node` on its node: the trial's command as a subprocess in its own
process group, output appended to the trial's log, and a small dict back (exit status, host, start and finish
time) that submitit pickles into its folder. A non-zero exit is an outcome, not an error; an error is what the
executor itself could not do (sbatch refused the array, the job was cancelled, ran out of time, lost its node).

The submitting side polls ``job.done()`` (submitit: a result pickle, or sacct where the cluster keeps accounting;
where it does not, only the result pickle) and, every ``squeue_interval_s``, ``squeue`` for array tasks that Slurm
has finished without a result (cancelled, timed out, node failure), so that it never waits forever on a task that
will not write one.

Everything the node reads or writes is a path from the submitting host (the Python executable, daybreak, the
trial's run directory and log, submitit's folder): they must be on storage that login and compute nodes share.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, TypeAlias

from daybreak.errors import ConfigError
from daybreak.executors.trials import (ExecutorOptions, Trial, TrialOutcome, TrialsCancelled, sbatch_additional,
                                         start_trial_process, visible_gpus)
from daybreak.processes import end_process_group
from daybreak.text import one_line

if TYPE_CHECKING:
    import submitit

    # a trial's job (its result is run_trial_on_node's); declared an alias, so that without the slurm extra, where
    # submitit is Any to the checker, it stays a type (Any) instead of becoming a variable
    _Job: TypeAlias = "submitit.Job[dict[str, Any]]"

# Slurm job states after which a task will not write a result any more (squeue --states=all).
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                   "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}


# --- on the node ------------------------------------------------------------------------------------------------

class _Terminated(BaseException):
    """SIGTERM reached the task (scancel, preemption, the time limit): end the trial and stop."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated(f"signal {signal.Signals(signum).name}")


def _visible_slice(env: dict[str, str], devices: int) -> None:
    """When the allocation holds more GPUs than the trial asked for (an array reserves its largest trial's
    count), show the trial only its own."""
    granted = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if len(granted) > max(0, devices):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(granted[:max(0, devices)])


def run_trial_on_node(argv: Sequence[str], log: str, env: Mapping[str, str], devices: int) -> dict[str, Any]:
    """Run one trial where the array task landed; return what happened to its process.

    Stopping: submitit ignores SIGTERM in its task (it waits for USR2); here SIGTERM (scancel, the time limit)
    ends the trial's process group, as submitit's time-out warning does: the result then says why, with the
    host and times. SIGINT (submitit-local's cancel) and submitit's requeue exit also end the group but are
    re-raised, so that no result is written for a job that is cancelled or will run again."""
    host, log_path = socket.gethostname(), Path(log)
    child_env = dict(os.environ)
    child_env.update({str(k): str(v) for k, v in env.items()})
    child_env["PYTHONUNBUFFERED"] = "1"
    _visible_slice(child_env, devices)
    started_at = time.time()
    try:
        proc = start_trial_process(argv, log_path, child_env)
    except OSError as e:
        message = f"cannot start {argv[0] if argv else '(empty command)'} on {host}: {one_line(e)}"
        with open(log_path, "a", encoding="utf-8") as out:
            out.write(f"daybreak: {message}\n")
        return {"exit_code": None, "host": host, "started_at": None, "finished_at": None, "error": message}
    # The exit status is collected by a thread: a signal handler that raises in the main thread (the only one
    # that runs them) would otherwise be able to strike between waitpid's return and Popen noting the status,
    # which is then lost (Popen reports 0).
    exited = threading.Event()

    def wait() -> None:
        proc.wait()
        exited.set()

    threading.Thread(target=wait, daemon=True).start()
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    error = None
    try:
        exited.wait()
    except BaseException as e:
        end_process_group(proc, grace_s=0.5)  # submitit-local SIGKILLs this task about 1 s after SIGINT
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        error = _stopped_because(e, host, time.time() - started_at)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if error is None and proc.returncode is not None and proc.returncode < 0:
        # Slurm signals every process of the job at its time limit (and on scancel): SIGTERM, then SIGKILL after its
        # KillWait; on a busy node the trial can die of either before this task's own handler runs. Same cause, same
        # message.
        error = _stopped_because(_Terminated(f"signal {_signal_name(-proc.returncode)}"), host,
                                 time.time() - started_at)
    return {"exit_code": proc.returncode, "host": host, "started_at": started_at, "finished_at": time.time(),
            "error": error}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _stopped_because(e: BaseException, host: str, ran_s: float) -> str:
    if isinstance(e, _Terminated):
        why = f"{e} (scancel, preemption or the time limit; if it was the limit, raise --slurm-time-min)"
    elif "timed-out" in str(e):
        why = "its time limit was near (submitit's warning signal; raise --slurm-time-min)"
    else:
        why = one_line(e, 200, with_type=True)
    return f"stopped on {host} after {ran_s:.0f} s: {why}"


# --- asking Slurm ------------------------------------------------------------------------------------------------

def _slurm_command(argv: list[str], timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)


def partitions() -> dict[str, str]:
    """{partition: its nodes' GRES (sinfo %G)}; the default partition's name is first. ConfigError when sinfo
    cannot reach the controller."""
    try:
        done = _slurm_command(["sinfo", "-h", "-o", "%P|%G"])
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"--executor slurm: sinfo failed ({one_line(e)})") from None
    if done.returncode != 0:
        raise ConfigError(f"--executor slurm: sinfo failed: {one_line(done.stderr or done.stdout, 200)} "
                          "(is slurmctld reachable from here?)")
    found: dict[str, list[str]] = {}
    default: str | None = None
    for line in done.stdout.splitlines():
        name, _, gres = line.strip().partition("|")
        if not name:
            continue
        if name.endswith("*"):
            name = name[:-1]
            default = default or name
        found.setdefault(name, []).append(gres)
    ordered = ([default] if default else []) + [n for n in found if n != default]
    return {n: ",".join(found[n]) for n in ordered}


def gpus_per_node(gres: str) -> int:
    """The most GPUs one node offers, from sinfo's GRES column: "gpu:a100:8(S:0-1),nvme:1" -> 8, "(null)" -> 0.
    Several node kinds in a partition come joined by commas."""
    most = 0
    for item in gres.split(","):
        fields = item.split("(")[0].strip().split(":")
        if fields[0] != "gpu":
            continue
        count = fields[-1] if len(fields) > 1 else "1"
        most = max(most, int(count) if count.isdigit() else 1)
    return most


def check_partition(partition: str | None) -> None:
    """ConfigError when the cluster has no such partition (or no default one when none is named)."""
    known = partitions()
    if partition is None:
        if not known:
            raise ConfigError("--executor slurm: sinfo lists no partition; name one with --slurm-partition")
        return
    if partition not in known:
        raise ConfigError(f"--slurm-partition {partition}: no such partition; sinfo lists "
                          f"{', '.join(known) or 'none'}")


def sacct_works() -> bool:
    """Whether this cluster keeps job accounting (sacct answers). Without it submitit's job.done() would call a
    failing sacct on every check, and print Slurm's complaint each time."""
    try:
        return _slurm_command(["sacct", "-n", "-X", "-j", "1", "-o", "JobID"], 30.0).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def array_task_states(array_id: str) -> dict[str, str] | None:
    """{"1234_5": "RUNNING", ...} for every task of the array Slurm still knows (squeue keeps finished ones for
    MinJobAge); None when squeue could not answer (controller busy or unreachable: no news, not bad news)."""
    try:
        done = _slurm_command(["squeue", "-h", "-r", "--states=all", "-j", array_id, "-o", "%i|%T"], 30.0)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        # a purged array: "Invalid job id specified" means Slurm forgot all of it
        return {} if "invalid job id" in (done.stderr or "").lower() else None
    states: dict[str, str] = {}
    for line in done.stdout.splitlines():
        task, _, state = line.strip().partition("|")
        if task:
            states[task] = state.strip()
    return states


# --- submitting and collecting ----------------------------------------------------------------------------------

def _signal_delay_s(time_min: int) -> int:
    """Seconds before the time limit at which submitit's USR2 arrives: its 90 s, but no more than a tenth of a
    short limit (submitit treats a USR2 as a time-out, and would end a 1-minute trial at once)."""
    return max(5, min(90, time_min * 6))


class SubmititExecutor:
    """``slurm``: all trials as ONE job array (sbatch --array, --gpus-per-node from the trials' devices);
    ``submitit-local``: submitit's LocalExecutor, ``options.parallel`` (default 1) jobs at a time, submitted in
    order as earlier ones finish. Collection, outcomes and cancelling are shared."""

    poll_interval_s = 2.0       # how often job.done() is asked (a stat of the result pickle per running trial)
    squeue_interval_s = 15.0    # how often squeue is asked for tasks finished without a result
    lost_grace_s = 10.0         # a finished task's result may take this long to appear on shared storage

    def __init__(self, options: ExecutorOptions, folder: Path, job_name: str = "daybreak"):
        self.options = options
        self.name = options.executor
        self.folder = Path(folder).absolute()
        self.job_name = job_name
        self.local = options.executor == "submitit-local"
        self._sacct = False                          # the cluster answers sacct (set per run)
        self._ended_since: dict[int, float] = {}     # trial index -> when squeue first showed it ended
        self._states: dict[str, str] | None = None   # the last squeue answer
        self._states_at = float("-inf")

    # -- the submitit executor --------------------------------------------------------------------------------

    def _gpus(self, trials: Sequence[Trial]) -> int:
        """GPUs per array task: the largest trial's count where the partition has GPUs, else none (a CPU
        partition refuses any GPU request)."""
        most = max((max(0, t.devices) for t in trials), default=0)
        if self.local:
            return min(most, len(visible_gpus()))
        known = partitions()
        partition = self.options.slurm_partition or next(iter(known), None)
        return most if gpus_per_node(known.get(partition or "", "")) > 0 else 0

    def _executor(self, trials: Sequence[Trial]) -> "submitit.Executor":
        import submitit

        opts = self.options
        gpus = self._gpus(trials)
        self.folder.mkdir(parents=True, exist_ok=True)
        if self.local:
            local = submitit.LocalExecutor(folder=self.folder)
            local.update_parameters(timeout_min=opts.slurm_time_min, gpus_per_node=gpus, stderr_to_stdout=True,
                                    signal_delay_s=_signal_delay_s(opts.slurm_time_min))
            return local
        executor = submitit.SlurmExecutor(folder=self.folder)
        params: dict[str, Any] = {
            "job_name": self.job_name, "time": opts.slurm_time_min, "nodes": 1, "ntasks_per_node": 1,
            "stderr_to_stdout": True, "signal_delay_s": _signal_delay_s(opts.slurm_time_min),
            "array_parallelism": opts.slurm_array_parallelism or max(1, len(trials)),
            "partition": opts.slurm_partition, "cpus_per_task": opts.slurm_cpus_per_trial,
            "gpus_per_node": gpus or None,
            "mem": f"{max(1, round(opts.slurm_mem_gb * 1024))}M" if opts.slurm_mem_gb else None,
            "additional_parameters": sbatch_additional(opts.slurm_additional) or None,
        }
        executor.update_parameters(**{k: v for k, v in params.items() if v is not None})
        return executor

    def _submit(self, executor: "submitit.Executor", trials: Sequence[Trial]) -> list[_Job]:
        """One job array for ``trials`` (Slurm), or one job each (submitit-local). submitit's errors (sbatch's
        message) pass through."""
        with executor.batch():
            jobs = [executor.submit(run_trial_on_node, list(t.argv), str(t.log), dict(t.env), t.devices)
                    for t in trials]
        return jobs

    # -- running ---------------------------------------------------------------------------------------------

    def run(self, trials: Sequence[Trial], on_done: Callable[[Trial, TrialOutcome], None] | None = None,
            cancel: threading.Event | None = None) -> list[TrialOutcome]:
        if not trials:
            return []
        executor = self._executor(trials)
        self._sacct = not self.local and sacct_works()
        self._ended_since, self._states, self._states_at = {}, None, float("-inf")
        for t in trials:
            t.log.parent.mkdir(parents=True, exist_ok=True)
        outcomes: list[TrialOutcome | None] = [None] * len(trials)
        waiting = list(range(len(trials)))
        running: dict[int, _Job] = {}
        try:
            while waiting or running:
                if cancel is not None and cancel.is_set():
                    raise TrialsCancelled("the trials were cancelled")
                room = len(waiting) if not self.local else (self.options.parallel or 1) - len(running)
                if room > 0 and waiting:
                    batch, waiting = waiting[:room], waiting[room:]
                    refused = self._submit_batch(executor, trials, batch, running)
                    for index in batch if refused else ():
                        self._finish(index, TrialOutcome(trials[index].key, None, None, None, None, refused),
                                     trials, outcomes, on_done)
                for index in sorted(running):
                    outcome = self._outcome_if_finished(trials[index], running[index], index)
                    if outcome is not None:
                        del running[index]
                        self._finish(index, outcome, trials, outcomes, on_done)
                if running:
                    time.sleep(self.poll_interval_s)
        except BaseException:
            self._cancel(list(running.values()))
            raise
        return [o for o in outcomes if o is not None]

    def _submit_batch(self, executor: "submitit.Executor", trials: Sequence[Trial], batch: list[int],
                      running: dict[int, _Job]) -> str | None:
        """Submit ``batch``; None when it went, else the one-line reason (e.g. sbatch refused it)."""
        from submitit.core.utils import FailedJobError

        try:
            jobs = self._submit(executor, [trials[i] for i in batch])
        except (FailedJobError, OSError, ValueError, RuntimeError) as e:
            return f"{'sbatch' if not self.local else 'submitit'} refused the trials: {one_line(e, 300)}"
        running.update(zip(batch, jobs))
        if not self.local and jobs:
            partition = self.options.slurm_partition or "the default partition"
            array_id, count = jobs[0].job_id.split("_")[0], f"{len(jobs)} trial{'s' if len(jobs) != 1 else ''}"
            print(f"daybreak: submitted Slurm job array {array_id} ({count}) to {partition}; submitit's files in "
                  f"{self.folder}", file=sys.stderr, flush=True)
        return None

    @staticmethod
    def _finish(index: int, outcome: TrialOutcome, trials: Sequence[Trial], outcomes: list[TrialOutcome | None],
                on_done: Callable[[Trial, TrialOutcome], None] | None) -> None:
        outcomes[index] = outcome
        if on_done:
            on_done(trials[index], outcome)

    def _outcome_if_finished(self, trial: Trial, job: _Job, index: int) -> TrialOutcome | None:
        if self.local or self._sacct:
            if job.done():
                return self._read(trial, job)
        elif job.paths.result_pickle.exists():
            return self._read(trial, job)
        if self.local:
            return None
        state = self._slurm_state(job.job_id)
        if state is None or state not in TERMINAL_STATES and state != "GONE":
            self._ended_since.pop(index, None)
            return None
        first = self._ended_since.setdefault(index, time.monotonic())
        if time.monotonic() - first < self.lost_grace_s:
            return None
        if job.paths.result_pickle.exists():
            return self._read(trial, job)
        what = "Slurm no longer knows it" if state == "GONE" else f"Slurm state {state}"
        limit = f" (time limit {self.options.slurm_time_min} min)" if state == "TIMEOUT" else ""
        return TrialOutcome(trial.key, None, None, None, None,
                            f"job {job.job_id} ended without a result: {what}{limit}; see {job.paths.stdout}")

    def _slurm_state(self, job_id: str) -> str | None:
        """The task's state from the last squeue (refreshed every squeue_interval_s); "GONE" when squeue answered
        without it; None when unknown."""
        if time.monotonic() - self._states_at >= self.squeue_interval_s:
            self._states = array_task_states(job_id.split("_")[0])
            self._states_at = time.monotonic()
        if self._states is None:
            return None
        return self._states.get(job_id, "GONE")

    def _read(self, trial: Trial, job: Any) -> TrialOutcome:
        """The node's dict from the result pickle, or the reason there is none."""
        from submitit.core.utils import FailedJobError, UncompletedJobError

        try:
            result = job.result()
        except FailedJobError as e:
            return TrialOutcome(trial.key, None, None, None, None,
                                f"job {job.job_id} failed on the node: {_last_trace_line(str(e))}; see "
                                f"{job.paths.stdout}")
        except UncompletedJobError:
            state = job.state if self.local or self._sacct else self._slurm_state(job.job_id)
            return TrialOutcome(trial.key, None, None, None, None,
                                f"job {job.job_id} ended without a result (state {state}); see {job.paths.stdout}")
        return TrialOutcome(trial.key, result["exit_code"], result["host"], result["started_at"],
                            result["finished_at"], result.get("error"))

    def _cancel(self, jobs: list[_Job]) -> None:
        """Stop everything still queued or running: scancel the array (Slurm); SIGINT each job's controller and
        wait for it (submitit-local; the task ends its trial's process group)."""
        if not jobs:
            return
        if not self.local:
            array_id = jobs[0].job_id.split("_")[0]
            _slurm_command(["scancel", array_id], 60.0)
            return
        for job in jobs:
            job.cancel(check=False)
        deadline = time.monotonic() + 15.0
        for job in jobs:
            process = getattr(job, "_process", None)
            if process is None:
                continue
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _last_trace_line(text: str) -> str:
    """The exception line of a traceback that submitit wrapped in its own message."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not set(line.strip()) <= {"-"}]
    for line in reversed(lines):
        if not line.startswith(("You can check", "or at paths", "- ")):
            return one_line(line, 300)
    return "unknown error"
