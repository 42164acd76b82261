"""The reproduction queue: jobs as rows of the store, changed only by compare-and-set.

A job goes queued -> running -> done | failed, and back to queued when its worker stops (on its own, or found
stale: no heartbeat for a while). Every one of these changes is **one UPDATE statement whose WHERE clause states
what the writer saw** -- the job's status and its lease number -- so that of two writers racing for the same job
exactly one changes it and the other changes nothing (it reads the row count and says what happened):

=============  ========================================================  ================================
change         the statement's condition                                 what it sets
=============  ========================================================  ================================
take           ``status = 'queued'`` (the oldest such job)               running, ``lease = lease + 1``
heartbeat      ``status = 'running' AND lease = L``                      the heartbeat time
requeue        ``status = 'running' AND lease = L``                      queued (the worker is stopping)
stale requeue  ``status = 'running' AND lease = L AND heartbeat old``    queued, or failed after N takes
finish         ``status = 'running' AND lease = L``                      done | failed, in the same
                                                                          transaction as the result
=============  ========================================================  ================================

The lease number is a fencing token: it grows with every take, so a worker that was stopped, whose job was taken
again as stale, finds its number is not the job's when it wakes up, and stores nothing. A stale requeue reads the
candidates first and then sets each with its own statement that re-checks status, lease *and* the heartbeat's age:
a worker that finished, or renewed its heartbeat, or a second requeue that got there first, between the read and
the write, makes that statement change nothing (tests/test_leaderboard_queue.py forces each interleaving on SQLite
and PostgreSQL). The history is appended in SQL (``history || line``), never rebuilt from a copy, so no event is
lost to a concurrent writer.

Each entry has at most one active (queued or running) job, by a unique partial index (schema.ACTIVE_JOB_INDEX); a
request that loses the race to create it is answered with the job that won.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from daybreak.errors import DaybreakError
from daybreak.leaderboard.ingest.submission import one_line
from daybreak.leaderboard.store.schema import (
    JOB_ACTIVE, Job, Meta, StoreError, _history_line, _rowcount, now_utc,
)

NO_SYNC = {"synchronize_session": False}  # the statements' conditions are SQL's to evaluate, not the session's


class LeaseLost(DaybreakError):
    """A worker's lease on a job is no longer the job's (it was taken again as stale, or finished by another
    worker): nothing the worker does to the job or the leaderboard is stored any more."""


@dataclass(frozen=True)
class Lease:
    """A worker's hold on one job: the job's lease number when the worker took it (a fencing token)."""

    job_id: int
    number: int
    worker: str


class JobQueue:
    """The job methods of daybreak.leaderboard.store.database.Store (which provides the sessions)."""

    if TYPE_CHECKING:
        display_url: str

        def _reading(self) -> AbstractContextManager[Session]: ...

        def _writing(self, *, let: tuple[type[BaseException], ...] = (), changed: Sequence[str] = ()
                     ) -> AbstractContextManager[Session]: ...

    def enqueue(self, entry_id: int, requested_by: str = "") -> tuple[Job, bool]:
        """Queue a reproduction of ``entry_id`` -> (job, created); an active job of the entry is returned as is.
        Concurrent callers make one job: the unique index over active jobs refuses every insert but one, and the
        others read the job that won."""
        for _ in range(10):
            with self._reading() as session:
                active = session.scalar(select(Job).where(Job.entry_id == entry_id, Job.status.in_(JOB_ACTIVE))
                                        .order_by(Job.id).limit(1))
            if active is not None:
                return active, False
            job = Job(entry_id=entry_id, status="queued", reason="", requested_by=requested_by[:100],
                      created_at=now_utc(), attempts=0, worker="", run_dir="", lease=0,
                      history=_history_line(f"queued by {requested_by or 'an unnamed requester'}"))
            try:
                with self._writing(let=(IntegrityError,), changed=("jobs",)) as session:
                    session.add(job)
                return job, True
            except IntegrityError:
                continue  # another request queued it between our look-up and our insert: read theirs
        raise StoreError(f"cannot write to {self.display_url}: the job of entry {entry_id} kept changing")

    def get_job(self, job_id: int) -> Job | None:
        with self._reading() as session:
            return session.get(Job, job_id)

    def jobs(self, entry_id: int | None = None, status: str | None = None, limit: int = 100) -> list[Job]:
        with self._reading() as session:
            q = select(Job).order_by(Job.id.desc()).limit(limit)
            if entry_id is not None:
                q = q.where(Job.entry_id == entry_id)
            if status is not None:
                q = q.where(Job.status == status)
            return list(session.scalars(q))

    def claim_job(self, worker: str) -> Job | None:
        """Take the oldest queued job for ``worker``: one statement sets it running under the next lease number
        where it is still queued (PostgreSQL skips a row another take has locked) -> the job (its ``lease`` is the
        worker's), or None when nothing is queued."""
        for _ in range(20):
            now = now_utc()
            oldest = (select(Job.id).where(Job.status == "queued").order_by(Job.id).limit(1)
                      .with_for_update(skip_locked=True).scalar_subquery())
            take = (update(Job).where(Job.id == oldest, Job.status == "queued").values(
                status="running", started_at=now, heartbeat_at=now, worker=worker[:200],
                attempts=Job.attempts + 1, lease=func.coalesce(Job.lease, 0) + 1,
                history=func.coalesce(Job.history, "") + _history_line(f"taken by {worker}", now))
                .returning(Job.id).execution_options(**NO_SYNC))
            with self._writing(changed=("jobs",)) as session:
                taken = session.scalar(take)
                job = session.get(Job, taken) if taken is not None else None
            if job is not None:
                return job
            with self._reading() as session:  # nothing taken: none queued, or another worker took it first
                if session.scalar(select(Job.id).where(Job.status == "queued").limit(1)) is None:
                    return None
        return None

    def lease_of(self, job: Job) -> Lease:
        return Lease(job.id, int(job.lease or 0), job.worker)

    @staticmethod
    def _holds(lease: Lease) -> Any:
        """The SQL condition that ``lease`` is still the job's: the same lease number, the job still running."""
        return and_(Job.id == lease.job_id, Job.lease == lease.number, Job.status == "running")

    def heartbeat(self, lease: Lease) -> bool:
        """Renew ``lease`` -> False when it is not the job's any more (taken again as stale, or finished)."""
        with self._writing() as session:  # the pages do not show heartbeats: no change to announce
            return _rowcount(session.execute(update(Job).where(self._holds(lease)).values(heartbeat_at=now_utc())
                                             .execution_options(**NO_SYNC))) == 1

    def why_lost(self, lease: Lease) -> str:
        """What became of a lost lease's job, for the worker's record: "job 3 is now lease 2, running for W"."""
        job = self.get_job(lease.job_id)
        if job is None:
            return f"job {lease.job_id} is gone"
        holder = f" for {job.worker}" if job.worker and job.worker != lease.worker else ""
        return (f"job {job.id} is now lease {job.lease}, {job.status}{holder}"
                + (" (taken again as stale: no heartbeat from this worker)" if (job.lease or 0) > lease.number else ""))

    def note_job(self, job_id: int, line: str) -> None:
        """Append one line to a job's history (whoever holds it: the line only records what happened)."""
        with self._writing(changed=("jobs",)) as session:
            session.execute(update(Job).where(Job.id == job_id).values(
                history=func.coalesce(Job.history, "") + _history_line(line)).execution_options(**NO_SYNC))

    def finish_job(self, lease: Lease, status: str, reason: str = "", result_entry_id: int | None = None,
                   run_dir: str = "") -> None:
        """End the job held by ``lease`` (``done`` or ``failed``, with the reason); LeaseLost if it is not."""
        with self._writing(changed=("jobs",)) as session:
            self._finish(session, lease, status, reason, result_entry_id, run_dir)

    def requeue(self, lease: Lease, reason: str) -> bool:
        """Give the job held by ``lease`` back to the queue (its worker is stopping) -> False if it was not held."""
        with self._writing(changed=("jobs",)) as session:
            return _rowcount(session.execute(update(Job).where(self._holds(lease)).values(
                status="queued", reason=one_line(reason, 1000),
                history=func.coalesce(Job.history, "") + _history_line(f"lease {lease.number}: {reason}"))
                .execution_options(**NO_SYNC))) == 1

    def _finish(self, session: Session, lease: Lease, status: str, reason: str, result_entry_id: int | None,
                run_dir: str = "") -> None:
        """Inside a write transaction: the job's end, only while ``lease`` holds it (else LeaseLost, and the
        caller's transaction is rolled back with everything else it wrote)."""
        line = f"lease {lease.number}: {status}" + (f": {reason}" if reason else "")
        done = session.execute(update(Job).where(self._holds(lease)).values(
            status=status, reason=one_line(reason, 1000), result_entry_id=result_entry_id, finished_at=now_utc(),
            run_dir=one_line(run_dir, 1000), history=func.coalesce(Job.history, "") + _history_line(line))
            .execution_options(**NO_SYNC))
        if _rowcount(done) != 1:
            raise LeaseLost(f"job {lease.job_id}: lease {lease.number} is not the job's any more")

    def requeue_stale(self, stale_after_s: float, max_attempts: int) -> list[tuple[int, str]]:
        """Running jobs whose worker stopped (no heartbeat for ``stale_after_s``): queued again, or failed after
        ``max_attempts`` takes -> [(job id, new status)] of the jobs this call changed. Each is changed by its own
        compare-and-set on the status, lease and heartbeat age it was read with: a job finished, renewed or
        requeued by someone else in between is left as that writer left it."""
        limit = now_utc() - timedelta(seconds=stale_after_s)
        stale_now = or_(Job.heartbeat_at.is_(None), Job.heartbeat_at < limit)
        with self._reading() as session:
            found = session.execute(select(Job.id, Job.lease, Job.worker, Job.heartbeat_at, Job.attempts)
                                    .where(Job.status == "running", stale_now).order_by(Job.id)).all()
        out = []
        for job_id, lease, worker, beat, attempts in found:
            now = now_utc()
            silent = "no heartbeat" if beat is None else f"no heartbeat for {(now - beat).total_seconds():.0f} s"
            failed = attempts >= max_attempts
            status = "failed" if failed else "queued"
            reason = (f"the worker stopped during this job {attempts} times (last: {worker}); not retried" if failed
                      else f"requeued: worker {worker} stopped during the job")
            line = _history_line(f"lease {lease}: {silent} from {worker}: {status}", now)
            with self._writing(changed=("jobs",)) as session:
                changed = session.execute(update(Job).where(
                    Job.id == job_id, Job.status == "running", func.coalesce(Job.lease, 0) == (lease or 0),
                    stale_now).values(
                    status=status, reason=one_line(reason, 1000),
                    finished_at=now if failed else Job.finished_at,
                    history=func.coalesce(Job.history, "") + line).execution_options(**NO_SYNC))
                if _rowcount(changed) == 1:
                    out.append((job_id, status))
        return out

    # -- the database's worker lease (one worker runs reproductions on a database at a time) -------------------

    def acquire_lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """A named lease in the meta table (compare-and-set): one worker runs reproductions at a time on the
        host. Held until released or not renewed for ``ttl_s``; the holder renews it by acquiring it again."""
        key = f"lease:{name}"[:64]
        now = now_utc()
        try:
            with self._writing(let=(IntegrityError,)) as session:
                if session.get(Meta, key) is None:
                    session.add(Meta(key=key, value="", updated_at=now - timedelta(seconds=ttl_s + 1)))
        except IntegrityError:
            pass  # another worker created it first
        with self._writing() as session:
            done = session.execute(update(Meta).where(Meta.key == key, or_(
                Meta.value == holder, Meta.value == "", Meta.updated_at < now - timedelta(seconds=ttl_s)))
                .values(value=holder[:400], updated_at=now).execution_options(**NO_SYNC))
            return _rowcount(done) == 1

    def release_lease(self, name: str, holder: str) -> None:
        key = f"lease:{name}"[:64]
        with self._writing() as session:
            session.execute(update(Meta).where(Meta.key == key, Meta.value == holder).values(value="")
                            .execution_options(**NO_SYNC))
