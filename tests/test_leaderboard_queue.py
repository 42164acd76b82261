"""Issue 38: a queue no race can double, and no stopped process can hold.

Every change of a job (take, heartbeat, requeue, stale requeue, finish) is one compare-and-set statement on its
status and lease (daybreak.leaderboard.store.jobs). Each test here forces one interleaving: it runs the competing
operation, through a second Store (its own connections, as another process would), at the moment the first
operation's statement is about to reach the database (``before``: SQLAlchemy's before_cursor_execute), and checks
that exactly one reproduction is stored and that the job's history says what happened. On SQLite and PostgreSQL
(``DAYBREAK_TEST_PG_URL``, each test in a schema of its own).

Before: ``requeue_stale`` read the stale jobs and wrote them back by primary key from its copy; a worker that
finished in between had its job requeued and reproduced a second time (2 reproductions on both databases).

Timeouts: a statement waits for a lock at most ``lock_timeout_s`` (a StoreError, not a hang), PostgreSQL ends a
session idle inside a transaction, and the worker retries a database that is busy instead of exiting.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, text

sys.path.insert(0, str(Path(__file__).parent))

from test_leaderboard_once import db_url, entry_store, reproduction  # noqa: E402

from daybreak.leaderboard.store.database import Job, LeaseLost, Store, StoreError, now_utc  # noqa: E402

KINDS = ["sqlite", "postgresql"]


@contextlib.contextmanager
def before(store: Store, starts: str, action):
    """Run ``action()`` once, just before the first statement of ``store`` that starts with ``starts`` is sent."""
    fired = []

    def hook(conn, cursor, statement, parameters, context, executemany):
        if not fired and statement.lstrip().startswith(starts):
            fired.append(action())

    event.listen(store.engine, "before_cursor_execute", hook)
    try:
        yield fired
    finally:
        event.remove(store.engine, "before_cursor_execute", hook)
    assert fired, f"no statement starting with {starts!r} ran"


JOB_UPDATE = "UPDATE daybreak_leaderboard_jobs"
ENTRY_INSERT = "INSERT INTO daybreak_leaderboard_entries"


@pytest.fixture(params=KINDS)
def queue(request, tmp_path):
    """A store with one reproducible entry whose job worker A took (lease 1) and then stopped: its heartbeat is
    five minutes old. Returns (url, entry id, job id, A's lease) and opens more stores on demand."""
    url = db_url(request.param, tmp_path, f"queue_{request.node.name[:30].replace('[', '_').rstrip(']')}")
    store, entry_id = entry_store(url)
    opened = [store]
    job, _ = store.enqueue(entry_id, "tester")
    lease = store.lease_of(store.claim_job("worker-a"))
    with store.engine.begin() as conn:
        conn.execute(Job.__table__.update().values(heartbeat_at=now_utc() - timedelta(minutes=5)))

    def another() -> Store:
        opened.append(Store(url))
        return opened[-1]

    yield store, another, entry_id, job.id, lease
    for s in opened:
        s.close()


def reproductions(store: Store, entry_id: int) -> list[int]:
    return [e.id for e in store.entries() if e.reproduction_of == entry_id]


def events(store: Store, job_id: int) -> list[str]:
    return [line.split(" ", 1)[1] for line in store.get_job(job_id).history_lines]


def finish(store: Store, entry_id: int, lease, seed: int) -> int:
    return store.add_reproduction(entry_id, reproduction(seed), lease=lease, describe=lambda i: f"entry {i}")


def test_a_late_finish_between_the_requeues_read_and_write_keeps_the_job_done(queue):
    """A's result lands after the requeue read the job as stale: the requeue changes nothing; no second take."""
    a_store, another, entry_id, job_id, a = queue
    requeuer, b = another(), another()
    stored = []
    with before(requeuer, JOB_UPDATE, lambda: stored.append(finish(a_store, entry_id, a, 1))):
        assert requeuer.requeue_stale(60, 3) == []
    job = requeuer.get_job(job_id)
    assert (job.status, job.lease, job.result_entry_id) == ("done", 1, stored[0])
    assert b.claim_job("worker-b") is None  # nothing to take again
    assert reproductions(requeuer, entry_id) == stored
    assert events(requeuer, job_id) == ["queued by tester", "taken by worker-a",
                                        f"lease 1: done: entry {stored[0]}"]


def test_a_requeue_between_the_finishs_start_and_its_write_refuses_the_late_result(queue):
    """The requeue commits while A's result transaction is under way: A stores nothing; B's take stores one."""
    a_store, another, entry_id, job_id, a = queue
    requeuer, b_store = another(), another()
    with before(a_store, ENTRY_INSERT, lambda: requeuer.requeue_stale(60, 3)) as fired:
        with pytest.raises(LeaseLost):
            finish(a_store, entry_id, a, 1)
    assert fired == [[(job_id, "queued")]]
    assert reproductions(a_store, entry_id) == []
    b = b_store.lease_of(b_store.claim_job("worker-b"))
    assert b.number == 2
    repro = finish(b_store, entry_id, b, 2)
    assert reproductions(a_store, entry_id) == [repro]
    assert events(a_store, job_id) == ["queued by tester", "taken by worker-a",
                                       "lease 1: no heartbeat for 300 s from worker-a: queued", "taken by worker-b",
                                       f"lease 2: done: entry {repro}"]


def test_two_requeues_of_one_stale_job_requeue_it_once(queue):
    """X and Y both read the job as stale; Y requeues it and B takes it before X writes: X changes nothing (it
    would have put B's running job back in the queue for a third worker)."""
    a_store, another, entry_id, job_id, a = queue
    x, y, b_store = another(), another(), another()
    taken = []

    def y_requeues_and_b_takes():
        assert y.requeue_stale(60, 3) == [(job_id, "queued")]
        taken.append(b_store.lease_of(b_store.claim_job("worker-b")))

    with before(x, JOB_UPDATE, y_requeues_and_b_takes):
        assert x.requeue_stale(60, 3) == []
    b = taken[0]
    job = x.get_job(job_id)
    assert (job.status, job.lease, job.worker, job.attempts) == ("running", 2, "worker-b", 2)
    assert x.claim_job("worker-c") is None
    with pytest.raises(LeaseLost):
        finish(a_store, entry_id, a, 1)  # A wakes up late: refused
    repro = finish(b_store, entry_id, b, 2)
    assert reproductions(x, entry_id) == [repro]
    assert sum("no heartbeat" in e for e in events(x, job_id)) == 1


def test_two_requeues_without_a_take_between_them(queue):
    _, another, entry_id, job_id, _ = queue
    x, y = another(), another()
    with before(x, JOB_UPDATE, lambda: y.requeue_stale(60, 3)) as fired:
        assert x.requeue_stale(60, 3) == []
    assert fired == [[(job_id, "queued")]]
    job = x.get_job(job_id)
    assert (job.status, job.lease, job.attempts) == ("queued", 1, 1)


def test_a_late_finish_racing_a_take_is_refused_and_the_take_stores_one(queue):
    """The job was requeued; A's late result arrives just as B takes the job: A's finish needs the job running
    under lease 1, which it no longer is; B's take and result stand."""
    a_store, another, entry_id, job_id, a = queue
    b_store = another()
    assert b_store.requeue_stale(60, 3) == [(job_id, "queued")]
    refused = []

    def late_finish():
        with pytest.raises(LeaseLost):
            finish(a_store, entry_id, a, 1)
        refused.append(True)

    with before(b_store, JOB_UPDATE, late_finish):
        b = b_store.lease_of(b_store.claim_job("worker-b"))
    assert refused and b.number == 2
    repro = finish(b_store, entry_id, b, 2)
    assert reproductions(b_store, entry_id) == [repro]
    # and the other order: B has taken it when A's result arrives
    with pytest.raises(LeaseLost):
        finish(a_store, entry_id, a, 3)
    assert reproductions(b_store, entry_id) == [repro]


def test_two_takes_of_one_job(queue):
    a_store, another, entry_id, job_id, _ = queue
    b_store, c_store = another(), another()
    assert a_store.requeue_stale(60, 3) == [(job_id, "queued")]
    with before(b_store, JOB_UPDATE, lambda: c_store.claim_job("worker-c")) as fired:
        assert b_store.claim_job("worker-b") is None
    assert fired[0].lease == 2 and fired[0].worker == "worker-c"
    assert [e for e in events(a_store, job_id) if e.startswith("taken by")] == ["taken by worker-a",
                                                                                 "taken by worker-c"]


def test_a_heartbeat_racing_a_stale_requeue(queue):
    """A renews its heartbeat between the requeue's read and write: the job is not stale any more, and stays A's."""
    a_store, another, entry_id, job_id, a = queue
    requeuer = another()
    with before(requeuer, JOB_UPDATE, lambda: a_store.heartbeat(a)) as fired:
        assert requeuer.requeue_stale(60, 3) == []
    assert fired == [True]
    job = requeuer.get_job(job_id)
    assert (job.status, job.lease) == ("running", 1)
    repro = finish(a_store, entry_id, a, 1)
    assert reproductions(requeuer, entry_id) == [repro]


def test_a_stale_job_past_its_attempts_fails_once(queue):
    a_store, another, entry_id, job_id, _ = queue
    x, y = another(), another()
    with before(x, JOB_UPDATE, lambda: y.requeue_stale(60, 1)):
        assert x.requeue_stale(60, 1) == []
    job = x.get_job(job_id)
    assert job.status == "failed" and job.finished_at is not None and "not retried" in job.reason
    assert sum("no heartbeat" in e for e in events(x, job_id)) == 1


# --- timeouts: nobody waits forever on a stopped transaction ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_held_lock_is_a_store_error_after_the_lock_timeout_not_a_hang(kind, tmp_path):
    """A transaction holds the job's row (PostgreSQL) or the database's write lock (SQLite) and stops: another
    writer gets a one-line StoreError after its lock timeout; readers are not held."""
    url = db_url(kind, tmp_path, "locktimeout")
    store, entry_id = entry_store(url)
    job, _ = store.enqueue(entry_id, "tester")
    lease = store.lease_of(store.claim_job("worker-a"))
    waiting = Store(url, lock_timeout_s=0.5)
    holder = store.engine.connect()
    try:
        tx = holder.begin()
        holder.execute(text("UPDATE daybreak_leaderboard_jobs SET reason = 'held' WHERE id = :id"), {"id": job.id})
        started = time.monotonic()
        with pytest.raises(StoreError) as info:
            waiting.heartbeat(lease)
        waited = time.monotonic() - started
        assert "\n" not in str(info.value) and str(info.value).startswith("cannot write to")
        assert waited < 20, waited  # bounded by the lock timeout (0.5 s), not the 30 s it was
        assert waiting.get_job(job.id).status == "running"  # reading is not held
        tx.rollback()
        assert waiting.heartbeat(lease)  # the lock is gone: the same call goes through
    finally:
        holder.close()
        waiting.close()
        store.close()


def test_postgresql_ends_a_session_left_idle_inside_a_transaction(tmp_path):
    """A worker stopped between two statements of a transaction (SIGSTOP) sits "idle in transaction" holding its
    locks: the server ends its session after idle_in_transaction_s, and the others go on."""
    url = db_url("postgresql", tmp_path, "idletx")
    store, entry_id = entry_store(url)
    job, _ = store.enqueue(entry_id, "tester")
    lease = store.lease_of(store.claim_job("worker-a"))
    stopped = Store(url, idle_in_transaction_s=1.0)
    try:
        conn = stopped.engine.connect()
        conn.begin()
        conn.execute(text("UPDATE daybreak_leaderboard_jobs SET reason = 'stopped' WHERE id = :id"), {"id": job.id})
        # ... and the process stops here. Another worker's heartbeat waits for the row, then goes through
        deadline = time.monotonic() + 30
        while True:
            try:
                if store.heartbeat(lease):
                    break
            except StoreError:
                pass
            assert time.monotonic() < deadline, "the idle transaction was never ended"
            time.sleep(0.2)
        with pytest.raises(Exception):  # the stopped process, woken up, finds its session ended
            conn.execute(text("SELECT 1"))
        conn.close()
        assert store.get_job(job.id).reason != "stopped"  # its uncommitted change is gone
    finally:
        stopped.close()
        store.close()


def test_the_worker_waits_out_a_locked_database_instead_of_exiting(tmp_path):
    """SQLite: another process holds the write lock for a while (a worker stopped inside a transaction); the
    worker says so once, retries, and runs the job when the lock is released ("database is locked" ended it)."""
    from daybreak.leaderboard.reproduce.worker import WorkerOptions, work

    url = f"sqlite:///{tmp_path / 'locked.sqlite'}"
    store, entry_id = entry_store(url)
    job, _ = store.enqueue(entry_id, "tester")
    store.close()
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 3\n")  # the trial fails at once: the job ends failed, with its reason
    python.chmod(0o755)
    logs: list[str] = []
    result = []
    options = WorkerOptions(work_dir=tmp_path / "w", once=True, poll_s=0.1, stale_after_s=60, python=str(python),
                            log=logs.append)
    worker_store, lock_store = Store(url, lock_timeout_s=0.2), Store(url)
    holder = lock_store.engine.connect()
    holder.exec_driver_sql("BEGIN IMMEDIATE")
    t = threading.Thread(target=lambda: result.append(work(worker_store, options)))
    t.start()
    try:
        deadline = time.monotonic() + 20
        while not any("trying again" in line for line in logs):
            assert time.monotonic() < deadline and t.is_alive(), logs
            time.sleep(0.05)
        time.sleep(0.5)  # a few more tries while it is still locked
    finally:
        holder.exec_driver_sql("ROLLBACK")
        holder.close()
        lock_store.close()
    t.join(60)
    assert not t.is_alive()
    assert result and result[0].finished == 1, logs
    assert sum("trying again" in line for line in logs) == 1, logs  # said once, not at every try
    assert worker_store.get_job(job.id).status == "failed"
    worker_store.close()


def test_a_worker_whose_finished_result_is_refused_says_so_and_counts_no_job(tmp_path):
    """The trial ended and wrote its record; another worker took the job before the result was stored: the fenced
    transaction refuses it. The worker's line and the job's history say the trial had ended (not that it was
    stopped), and the worker does not count the job as one it finished."""
    import json as _json

    from test_leaderboard_trust import run_doc

    from daybreak.leaderboard.reproduce.worker import WorkerOptions, work

    url = f"sqlite:///{tmp_path / 'refused.sqlite'}"
    store, entry_id = entry_store(url)
    job, _ = store.enqueue(entry_id, "tester")
    record = tmp_path / "record.json"
    record.write_text(_json.dumps(run_doc(seed=8)))
    python = tmp_path / "python"  # stands in for `python -m daybreak run ... --out DIR`: writes a finished record
    python.write_text('#!/bin/sh\nwhile [ "$1" != "--out" ]; do shift; done\nmkdir -p "$2"\n'
                      f'cp {record} "$2/result.json"\n')
    python.chmod(0o755)
    other = Store(url)

    def taken_meanwhile():
        with other.engine.begin() as conn:
            conn.execute(Job.__table__.update().where(Job.id == job.id).values(lease=Job.lease + 1, worker="worker-b"))

    logs: list[str] = []
    with before(store, ENTRY_INSERT, taken_meanwhile):
        summary = work(store, WorkerOptions(work_dir=tmp_path / "w", once=True, poll_s=0.1, python=str(python),
                                            log=logs.append))
    assert (summary.finished, summary.lost) == (0, 1), logs
    assert "finished 0 job(s); lost the lease of 1 job(s)" in summary.line()
    assert reproductions(store, entry_id) == []
    lost = [line for line in store.get_job(job.id).history_lines if "lost by" in line]
    assert len(lost) == 1 and "its 1 trial(s) had ended" in lost[0] and "the result was refused" in lost[0], lost
    assert "were stopped" not in lost[0], lost
    other.close()
    store.close()


def test_a_lost_lease_says_which_trials_it_stopped(tmp_path):
    """A trial that ended while the worker was stopped (its record written, its exit not yet collected) was not
    stopped; "stopped after 102.7 s" was said of such a trial."""
    from daybreak.executors import Trial
    from daybreak.leaderboard.reproduce.worker import _cancelled

    trials = [Trial(key=f"seed-{i}", argv=["x"], run_dir=tmp_path / f"seed-{i}", log=tmp_path / f"{i}.log")
              for i in range(3)]
    for t in trials[:2]:
        t.run_dir.mkdir()
    (trials[0].run_dir / "result.json").write_text("{}")
    assert _cancelled(trials, {"seed-1"}, 102.7) == ("the lease was lost while 1 of 3 trial(s) still ran; they were "
                                                     "stopped 102.7 s after the trials started (2 had ended)")
    (trials[2].run_dir).mkdir()
    (trials[2].run_dir / "result.json").write_text("{}")
    assert _cancelled(trials, {"seed-1"}, 102.7) == ("the lease was lost after the trials had ended (3 of 3, 102.7 s "
                                                     "after they started); their results were not stored")
