"""Reproduction by the host: re-run an entry from its recorded configuration and store the result.

`daybreak leaderboard reproduce ENTRY` (now, in the foreground) and `daybreak leaderboard worker` (jobs queued by
the server's ``POST /api/entries/{id}/reproduce`` or ``reproduce --queue``) both come here.

An entry can be reproduced when it names a daybreak task and recipe: a ``daybreak.run`` record (not one of an
external program timed by ``daybreak time``) or a ``daybreak.repeat`` multi-run entry. Its recorded configuration
is re-run on the host's hardware, each run as ``daybreak run TASK --recipe R --set k=v ... --seed S --rules RULES
--nproc-per-node N --out DIR``, a fresh process started by the experiment executors (daybreak.executors:
``--executor local``, its own process group, a time limit ends it and all its children; or ``slurm``, one job
array per reproduction), with the host's official data (never custom data, never a file path from the record: an
``init_from`` hyperparameter is refused). A multi-run entry re-runs every one of its seeds.

The reproduction is stored as its own entry (provenance ``reproduced``, linked to the original). When it reaches
the target the original becomes ``reproduced`` too, with the ratio of the times (reproduction / original: the
host's hardware is not the submitter's, so the ratio is information, not a verdict). When it does not, the
original keeps its provenance and is marked not reproduced.

Jobs are rows of the store (``queued``, ``running``, ``done``, ``failed`` with the reason), so they survive a
restart of the server or of the worker: a job left ``running`` by a worker that stopped (no heartbeat for
``stale_after_s``) is queued again, at most ``max_attempts`` times. One worker runs one job at a time, and a lease
in the store keeps a second worker from running jobs at the same time on the same database (timings on a busy
machine would not be the host's best).

Exactly once: a worker takes a job under a lease number that grows with every take (daybreak.leaderboard.store.database.
Lease) and renews it with each heartbeat. The reproduction is stored, and the job marked done, in one transaction
that checks the lease is still the job's. A worker that was stopped (SIGSTOP, a suspended VM, a lost network) while
its trial ran on, and whose job was meanwhile taken again as stale, finds at its next heartbeat that the lease is
gone: it stops its trials at once (their process groups, or the Slurm array), stores nothing, and writes why into
the job's history; if its trials had already finished, the fenced transaction refuses its result all the same.

Here: running a plan and storing the reproduction, and the worker. What an entry's plan is (and why an entry
cannot be reproduced), daybreak.leaderboard.reproduce.plan.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from daybreak.errors import DaybreakError
from daybreak.executors import ExecutorOptions
from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for
from daybreak.leaderboard.ingest.submission import SubmissionError
from daybreak.leaderboard.ingest.text_rules import printable
from daybreak.text import one_line

if TYPE_CHECKING:
    from daybreak.executors import Trial, TrialOutcome
    from daybreak.leaderboard.reproduce.plan import Plan
    from daybreak.leaderboard.store.database import Job, Lease, Store

DEFAULT_TIMEOUT_S = 4 * 3600.0
LEASE = "reproduce"


# --- running -----------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    entry_id: int  # the original
    reproduction_id: int | None  # the stored reproduction entry (None: too few runs reached to score)
    reached: bool
    ratio: float | None
    run_dirs: list[str] = field(default_factory=list)
    message: str = ""


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return one_line(printable(" | ".join(tail)), 400)


def _run_trials(plan: Plan, folder: Path, executor: ExecutorOptions, timeout_s: float, cost_per_hour: float | None,
                python: str, say: Callable[[str], None], lost: threading.Event | None = None) -> list[str]:
    """Every run of the plan as a trial of ``executor`` (a fresh ``daybreak run`` process each: locally, or as one
    Slurm job array) -> the run directories' names, in the plan's order. A trial the executor could not run, or
    one stopped at its time limit, is a ReproduceError."""
    from daybreak.analysis.repeat import seed_dir_name
    from daybreak.executors import Trial, TrialsCancelled, make_executor
    from daybreak.leaderboard.store.database import LeaseLost

    names = [seed_dir_name(rp.seed) if plan.multi else "run" for rp in plan.runs]
    trials = [Trial(key=name, argv=rp.command(folder / name, python=python, cost_per_hour=cost_per_hour),
                    run_dir=folder / name, log=folder / f"{name}.log", devices=rp.nproc, timeout_s=timeout_s)
              for name, rp in zip(names, plan.runs)]
    started = time.monotonic()
    finished: set[str] = set()

    def done(trial: Trial, outcome: TrialOutcome) -> None:
        finished.add(trial.key)
        where = f" on {outcome.host}" if outcome.host else ""
        say(f"  {trial.key}: exit status {outcome.exit_code}{where} after {time.monotonic() - started:.1f} s")

    folder.mkdir(parents=True, exist_ok=True)
    try:
        outcomes = make_executor(executor, folder).run(trials, on_done=done, cancel=lost)
    except TrialsCancelled:
        raise LeaseLost(_cancelled(trials, finished, time.monotonic() - started)) from None
    for i, (trial, outcome) in enumerate(zip(trials, outcomes), 1):
        if outcome.error:
            if "time limit" in outcome.error:
                raise ReproduceError(f"run {i}/{len(trials)} took longer than the {timeout_s:g} s limit and was "
                                     "stopped")
            raise ReproduceError(f"run {i}/{len(trials)} ({trial.key}): {one_line(outcome.error, 300)}")
    return names


def _cancelled(trials: list[Trial], finished: set[str], elapsed_s: float) -> str:
    """What the lost lease did to the trials, truthfully: a trial that had ended (reported, or its record written:
    it ended while this worker was stopped) was not stopped."""
    ended = [t for t in trials if t.key in finished or (t.run_dir / "result.json").is_file()]
    stopped = len(trials) - len(ended)
    if not stopped:
        return (f"the lease was lost after the trials had ended ({len(ended)} of {len(trials)}, {elapsed_s:.1f} s "
                "after they started); their results were not stored")
    return (f"the lease was lost while {stopped} of {len(trials)} trial(s) still ran; they were stopped "
            f"{elapsed_s:.1f} s after the trials started" + (f" ({len(ended)} had ended)" if ended else ""))


def reproduce(store: Store, entry_id: int, *, work_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S,
              cost_per_hour: float | None = None, python: str = sys.executable,
              log: Callable[[str], None] | None = None, executor: ExecutorOptions | None = None,
              lease: Lease | None = None, lost: threading.Event | None = None) -> Outcome:
    """Re-run entry ``entry_id`` on this machine (or through ``executor``: a Slurm job array) and store the
    reproduction (see the module docstring). ``lease``: the worker's job (a store Lease), finished in the
    transaction that stores the result, which stores nothing unless the lease still holds; ``lost``: set by the
    worker's heartbeat when the lease is gone, which stops the trials. Either way: LeaseLost."""
    from daybreak.analysis.repeat import summarize
    from daybreak.errors import RecordError
    from daybreak.leaderboard.ingest.importer import parse_submission
    from daybreak.leaderboard.ingest.runs_import import parse_run
    from daybreak.records.run import RunResult

    say = log or (lambda m: print(f"daybreak: {m}", file=sys.stderr, flush=True))
    entry = store.get(entry_id)
    if entry is None:
        raise ReproduceError(f"no entry {entry_id}")
    plan = plan_for(entry)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    folder = Path(work_dir) / f"entry-{entry_id}-{stamp}-{uuid.uuid4().hex[:6]}"
    say(f"reproducing entry {entry_id}: {plan.describe()} in {folder}")
    names = _run_trials(plan, folder, executor or ExecutorOptions(), timeout_s, cost_per_hour, python, say, lost)
    run_dirs = [str(folder / n) for n in names]
    results: list[tuple[str, RunResult]] = []
    for i, (name, rp) in enumerate(zip(names, plan.runs), 1):
        out = folder / name
        try:
            result = RunResult.load(out)
        except RecordError:
            tail = _log_tail(folder / f"{name}.log")
            raise ReproduceError(f"run {i}/{len(plan.runs)} (seed {rp.seed}) wrote no record"
                                 + (f": {tail}" if tail else "")) from None
        if result.status in ("failed", "interrupted"):
            raise ReproduceError(f"run {i}/{len(plan.runs)} (seed {rp.seed}) {result.status}: "
                                 f"{one_line(printable(result.message or 'no message'), 300)}")
        say(f"  run {i}/{len(plan.runs)} seed {rp.seed}: {result.status}")
        results.append((name, result))
    source = f"reproduction of entry {entry_id}"
    try:
        if plan.multi:
            summary = summarize([(n, r, False) for n, r in results], overrides=plan.runs[0].overrides,
                                inputs=[str(folder / n) for n, _ in results], command=["daybreak", "leaderboard",
                                                                                      "reproduce", str(entry_id)])
            summary.save(folder)
            files = [(n, (folder / n / "result.json").read_bytes()) for n, _ in results]
            try:
                sub = parse_submission(summary.model_dump_json().encode(), None, source=source, what=source,
                                       run_files=files)
            except SubmissionError as e:
                reached = sum(r.reached for _, r in results)
                if reached >= 3:
                    raise
                message = (f"not reproduced: {reached} of {len(results)} runs reached the target (the olympic mean "
                           f"needs 3) ({one_line(str(e), 200)})")
                with _refused_after_trials(len(results)):
                    store.mark_not_reproduced(entry_id, lease=lease, reason=message, run_dir=";".join(run_dirs))
                return Outcome(entry_id, None, False, None, run_dirs, message)
        else:
            doc = json.loads((folder / results[0][0] / "result.json").read_text(encoding="utf-8"))
            sub = parse_run(doc, source=source, what=source, allow_unreached=True)
    except SubmissionError as e:
        raise ReproduceError(f"the reproduction's own record was refused: {e}") from None
    except OSError as e:
        raise ReproduceError(f"cannot read the reproduction's record: {e.strerror or e}") from None
    sub.submitter = "host"
    time_s = sub.time_to_target_s
    reached = time_s is not None
    ratio = time_s / entry.time_to_target_s if time_s is not None and entry.time_to_target_s else None

    def describe(repro_id: int) -> str:
        if reached:
            return (f"reproduced: entry {repro_id} reached the target in {sub.time_to_target_s:.3f} s"
                    + (f" ({ratio:.3g} x the original's time)" if ratio else ""))
        return f"not reproduced: entry {repro_id} did not reach the target"

    with _refused_after_trials(len(results)):
        repro_id = store.add_reproduction(entry_id, sub, lease=lease, describe=describe, run_dir=";".join(run_dirs))
    message = describe(repro_id)
    say(f"entry {entry_id}: {message}")
    return Outcome(entry_id, repro_id, reached, ratio, run_dirs, message)


@contextmanager
def _refused_after_trials(runs: int) -> Iterator[None]:
    """The fenced transaction refused the result: the trials had all ended (they were not stopped)."""
    from daybreak.leaderboard.store.database import LeaseLost

    try:
        yield
    except LeaseLost as e:
        raise LeaseLost(f"its {runs} trial(s) had ended, but when their result was stored {e}: the result was "
                        "refused") from None


# --- the worker --------------------------------------------------------------------------------------------


@dataclass
class WorkerOptions:
    work_dir: Path
    poll_s: float = 5.0
    once: bool = False  # run the queued jobs, then exit
    timeout_s: float = DEFAULT_TIMEOUT_S
    cost_per_hour: float | None = None
    heartbeat_s: float = 15.0
    stale_after_s: float = 120.0  # a running job without a heartbeat for this long: its worker stopped
    max_attempts: int = 2
    python: str = sys.executable
    log: Callable[[str], None] | None = None
    executor: ExecutorOptions = field(default_factory=ExecutorOptions)  # where each job's runs go


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class WorkSummary:
    """What a worker did: jobs it ended (done or failed, stored) and jobs whose lease it lost (nothing stored)."""

    finished: int = 0
    lost: int = 0

    def line(self) -> str:
        text = f"worker finished {self.finished} job(s)"
        if self.lost:
            text += (f"; lost the lease of {self.lost} job(s) to another worker (their results were not stored: see "
                     "each job's history)")
        return text


def work(store: Store, options: WorkerOptions, stop: threading.Event | None = None) -> WorkSummary:
    """Run queued reproductions one at a time until stopped (or, with ``once``, until none is queued) -> what
    was done. A database that does not answer (locked by a stopped process, unreachable) is said once and tried
    again every ``poll_s``; with ``once``, for at most ``stale_after_s`` (then its StoreError)."""
    from daybreak.leaderboard.store.database import StoreError

    say = options.log or (lambda m: print(f"daybreak: {m}", file=sys.stderr, flush=True))
    stop = stop or threading.Event()
    holder = worker_name()
    summary = WorkSummary()
    waiting_said = False
    unanswered_since: float | None = None
    try:
        while not stop.is_set():
            try:
                job = _next_job(store, options, holder, say)
            except StoreError as e:
                now = time.monotonic()
                if unanswered_since is None:
                    unanswered_since = now
                    say(f"{e}; trying again every {options.poll_s:g} s")
                elif options.once and now - unanswered_since > options.stale_after_s:
                    raise
                stop.wait(options.poll_s)
                continue
            if unanswered_since is not None:
                say("the database answers again")
                unanswered_since = None
            if job is _WAIT:
                if not waiting_said:
                    say("another worker is running reproductions on this database; waiting")
                    waiting_said = True
            if job is None or job is _WAIT:
                if options.once:
                    return summary
                stop.wait(options.poll_s)
                continue
            assert not isinstance(job, str)
            lease = store.lease_of(job)
            say(f"job {job.id}: reproducing entry {job.entry_id} (attempt {job.attempts}, lease {lease.number})")
            ended = run_job(store, lease, job.entry_id, options, holder, say)
            summary.finished += ended == "ended"
            summary.lost += ended == "lost"
        return summary
    finally:
        try:
            store.release_lease(LEASE, holder)
        except DaybreakError:
            pass


_WAIT = "wait"  # another worker holds the database's worker lease


def _next_job(store: Store, options: WorkerOptions, holder: str, say: Callable[[str], None]) -> Job | str | None:
    """The next job taken for this worker, None when none is queued, _WAIT when another worker runs jobs."""
    if not store.acquire_lease(LEASE, holder, options.stale_after_s):
        return _WAIT
    for job_id, status in store.requeue_stale(options.stale_after_s, options.max_attempts):
        say(f"job {job_id}: its worker stopped; {'queued again' if status == 'queued' else 'failed'}")
    return store.claim_job(holder)


def run_job(store: Store, lease: Lease, entry_id: int, options: WorkerOptions, holder: str,
            say: Callable[[str], None]) -> str:
    """One job under ``lease``: a heartbeat thread renews it (and the worker's lease on the database) every
    ``heartbeat_s``; when the lease is found gone, the trials are stopped and the job's history says why ->
    "ended" (done or failed, stored), "lost" (the lease was lost: nothing stored) or "left" (the database failed:
    the job is left to be requeued as stale)."""
    from daybreak.leaderboard.store.database import LeaseLost

    beat_stop, lost = threading.Event(), threading.Event()

    def beat() -> None:
        while not beat_stop.wait(options.heartbeat_s):
            try:
                if not store.heartbeat(lease):
                    lost.set()  # stops the trials within a second (executors' cancel)
                    return
                store.acquire_lease(LEASE, holder, options.stale_after_s)
            except DaybreakError:
                pass  # the database is away for a moment: the next beat tries again

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    job_id = lease.job_id
    try:
        outcome = reproduce(store, entry_id, work_dir=options.work_dir, timeout_s=options.timeout_s,
                            cost_per_hour=options.cost_per_hour, python=options.python, log=say,
                            executor=options.executor, lease=lease, lost=lost)
        say(f"job {job_id}: done: {outcome.message}")
        return "ended"
    except LeaseLost as e:
        _lost(store, lease, holder, str(e), say)
        return "lost"
    except ReproduceError as e:
        return _end(store, lease, holder, "failed", str(e), say)
    except KeyboardInterrupt:
        store.requeue(lease, "requeued: the worker was stopped during the job")
        raise
    except DaybreakError as e:  # the store itself: leave the job to be requeued as stale
        say(f"job {job_id}: {e}; left to be queued again once its heartbeat is stale")
        time.sleep(min(options.poll_s, 5.0))
        return "left"
    except Exception as e:  # noqa: BLE001 - a bug must not stop the queue; the job says what happened
        return _end(store, lease, holder, "failed", f"unexpected error: {type(e).__name__}: {one_line(str(e), 300)}",
                    say)
    finally:
        beat_stop.set()
        beater.join(timeout=5)


def _end(store: Store, lease: Lease, holder: str, status: str, reason: str, say: Callable[[str], None]) -> str:
    from daybreak.leaderboard.store.database import LeaseLost

    try:
        store.finish_job(lease, status, reason)
        say(f"job {lease.job_id}: {status}: {reason}")
        return "ended"
    except LeaseLost as e:
        _lost(store, lease, holder, f"{e} (it would have ended {status}: {one_line(reason, 120)})", say)
        return "lost"


def _lost(store: Store, lease: Lease, holder: str, detail: str, say: Callable[[str], None]) -> None:
    """Record in the job's history that this worker lost its lease and stored nothing (the job itself, now
    another worker's, is left as it is)."""
    line = f"lease {lease.number} lost by {holder}: {store.why_lost(lease)}; {detail}; this worker stored nothing"
    try:
        store.note_job(lease.job_id, line)
    except DaybreakError:
        pass
    say(f"job {lease.job_id}: {line}")
