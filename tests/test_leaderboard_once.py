"""Issue 29: exactly once, whatever clients, workers and uploads do.

- Leases with fencing: a worker stopped (SIGSTOP) while its trial runs, whose job another worker takes as stale,
  stores nothing when it wakes up (exactly one reproduction), stops its trial and records why in the job's history.
- One active job per entry by construction, on SQLite and PostgreSQL: 20 concurrent reproduce requests to a cold
  (just started) or a warm server make one job, and every request is answered with it (no 4xx).

Each runs on SQLite and on PostgreSQL (``DAYBREAK_TEST_PG_URL``, in a schema of its own so that other tests'
tables are not touched; skipped without the variable).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_leaderboard_trust import AUTH, SECRET, _pg_schema_url, run_doc, serving  # noqa: E402

from daybreak.leaderboard.ingest.runs_import import parse_run  # noqa: E402
from daybreak.leaderboard.store.database import Job, LeaseLost, Store, now_utc  # noqa: E402

httpx = pytest.importorskip("httpx")


def db_url(kind: str, tmp_path: Path, name: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / f'{name}.sqlite'}"
    return _pg_schema_url(f"once_{name}_{os.getpid()}")


def entry_store(url: str) -> tuple[Store, int]:
    """A store holding one reproducible entry (a consistent digits run record: the host re-runs it for real)."""
    store = Store(url)
    entry_id, _ = store.add(parse_run(run_doc(seed=7), source="digits-7"))
    return store, entry_id


def reproduction(seed: int, epoch_s: float = 1.0):
    sub = parse_run(run_doc(seed=seed, epoch_s=epoch_s), source=f"repro-{seed}", allow_unreached=True)
    sub.submitter = "host"
    return sub


# --- the store: leases, fencing, one active job ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_lost_lease_stores_nothing(kind, tmp_path):
    store, entry_id = entry_store(db_url(kind, tmp_path, "fence"))
    try:
        job, created = store.enqueue(entry_id, "tester")
        same, again = store.enqueue(entry_id, "again")
        assert created and job.lease == 0 and (same.id, again) == (job.id, False)
        a = store.lease_of(store.claim_job("worker-a"))
        assert a.number == 1 and store.heartbeat(a)
        # worker A stops; its heartbeat gets old; worker B requeues the job as stale and takes it
        with store.engine.begin() as conn:
            conn.execute(Job.__table__.update().values(heartbeat_at=now_utc() - timedelta(minutes=5)))
        assert store.requeue_stale(60, 3) == [(job.id, "queued")]
        b = store.lease_of(store.claim_job("worker-b"))
        assert b.number == 2
        # A wakes up: its heartbeat, its result and its failure are all refused; nothing is stored
        assert not store.heartbeat(a)
        before = store.count()
        with pytest.raises(LeaseLost):
            store.add_reproduction(entry_id, reproduction(1), lease=a, describe=lambda i: f"by A: {i}")
        with pytest.raises(LeaseLost):
            store.finish_job(a, "failed", "A's trial failed")
        with pytest.raises(LeaseLost):
            store.mark_not_reproduced(entry_id, lease=a, reason="A: not reproduced")
        assert store.count() == before and store.get(entry_id).reproduction_status is None
        assert not store.requeue(a, "A stops")
        assert "lease 2, running for worker-b" in store.why_lost(a)
        # B stores its reproduction and finishes the job in one transaction
        repro = store.add_reproduction(entry_id, reproduction(2), lease=b, describe=lambda i: f"by B: entry {i}",
                                       run_dir="/w/b")
        done = store.get_job(job.id)
        assert (done.status, done.result_entry_id, done.reason, done.lease, done.run_dir) == (
            "done", repro, f"by B: entry {repro}", 2, "/w/b")
        assert store.count() == before + 1 and store.get(repro).reproduction_of == entry_id
        assert not store.heartbeat(b)  # a finished job holds no lease
        lines = done.history_lines
        assert [line.split(" ", 1)[1] for line in lines] == [
            "queued by tester", "taken by worker-a", "lease 1: no heartbeat for 300 s from worker-a: queued",
            "taken by worker-b", f"lease 2: done: by B: entry {repro}"]
        # the next request makes a new job: the entry has no active one any more
        again, created = store.enqueue(entry_id, "later")
        assert created and again.id != job.id
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_concurrent_enqueues_make_one_job(kind, tmp_path):
    """The unique index over active jobs decides (select-then-insert alone made 2 jobs of 20 on PostgreSQL)."""
    store, entry_id = entry_store(db_url(kind, tmp_path, "enqueue"))
    try:
        barrier = threading.Barrier(20)

        def enqueue(i):
            barrier.wait(timeout=30)
            return store.enqueue(entry_id, f"client-{i}")

        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(enqueue, range(20)))
        assert len({job.id for job, _ in results}) == 1 and sum(created for _, created in results) == 1
        assert len(store.jobs(entry_id=entry_id)) == 1
        # the index itself refuses a second active job, whoever writes it
        from sqlalchemy.exc import IntegrityError

        with pytest.raises(IntegrityError):
            with store.engine.begin() as conn:
                conn.execute(Job.__table__.insert().values(entry_id=entry_id, status="running", created_at=now_utc()))
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_version_4_jobs_table_gets_leases_and_one_active_job_per_entry(kind, tmp_path):
    from sqlalchemy import text

    url = db_url(kind, tmp_path, "jobs_v4")
    store, entry_id = entry_store(url)
    with store.engine.begin() as conn:
        conn.execute(text("DROP INDEX uq_daybreak_leaderboard_jobs_active_entry"))
        for column in ("lease", "history"):
            conn.execute(text(f"ALTER TABLE daybreak_leaderboard_jobs DROP COLUMN {column}"))
        for status, attempts in (("queued", 0), ("running", 1), ("done", 1), ("queued", 0)):
            conn.execute(text("INSERT INTO daybreak_leaderboard_jobs (entry_id, status, reason, requested_by, "
                              "created_at, attempts, worker, run_dir) VALUES (:e, :s, '', 'old', :t, :a, '', '')"),
                         {"e": entry_id, "s": status, "t": now_utc(), "a": attempts})
        conn.execute(text("UPDATE daybreak_leaderboard_meta SET value = '4' WHERE key = 'schema_version'"))
    store.close()
    with Store(url) as store:
        assert any("jobs table to schema v5" in m and "2 duplicate active job(s) marked failed" in m
                   for m in store.migrated), store.migrated
        jobs = sorted(store.jobs(entry_id=entry_id), key=lambda j: j.id)
        assert [(j.status, j.lease) for j in jobs] == [("queued", 0), ("failed", 1), ("done", 1), ("failed", 0)]
        assert jobs[1].reason == f"a second active job of entry {entry_id}: job {jobs[0].id} is its job"
        same, created = store.enqueue(entry_id, "new")
        assert (same.id, created) == (jobs[0].id, False)
        assert store.lease_of(store.claim_job("w")).number == 1
    with Store(url) as store:
        assert not store.migrated


# --- the worker: a lost lease stops the trial -----------------------------------------------------------------


def test_a_worker_that_loses_its_lease_stops_its_trial_and_says_why(tmp_path):
    """The trial (here a stand-in for `python -m daybreak run` that sleeps) is ended within about a second of the
    heartbeat that finds the lease gone; nothing is stored; the job's history names the worker and what happened."""
    from daybreak.leaderboard.reproduce.worker import WorkerOptions, work

    store, entry_id = entry_store(f"sqlite:///{tmp_path / 'lost.sqlite'}")
    pid_file = tmp_path / "trial.pid"
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 600\n")
    python.chmod(0o755)
    job, _ = store.enqueue(entry_id, "tester")
    logs: list[str] = []
    options = WorkerOptions(work_dir=tmp_path / "work", once=True, heartbeat_s=0.2, stale_after_s=60, poll_s=0.1,
                            python=str(python), log=logs.append)
    worker = threading.Thread(target=work, args=(store, options))
    worker.start()
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert time.monotonic() < deadline and worker.is_alive(), logs
        time.sleep(0.05)
    trial = int(pid_file.read_text())
    os.kill(trial, 0)  # running
    # another worker takes the job (as a stale one would be taken): the lease number moves on
    with store.engine.begin() as conn:
        conn.execute(Job.__table__.update().where(Job.id == job.id).values(lease=Job.lease + 1, worker="worker-b"))
    worker.join(timeout=60)
    assert not worker.is_alive()
    with pytest.raises(ProcessLookupError):
        os.kill(trial, 0)  # ended (and reaped) by the worker
    assert store.count() == 1  # nothing stored
    row = store.get_job(job.id)
    assert (row.status, row.lease, row.result_entry_id) == ("running", 2, None)  # left to worker-b as it was
    lost = [line for line in row.history_lines if "lost by" in line]
    assert len(lost) == 1 and "lease 1 lost by" in lost[0] and "job 1 is now lease 2, running for worker-b" in lost[0]
    assert "1 of 1 trial(s) still ran; they were stopped" in lost[0] and "stored nothing" in lost[0], lost
    assert any("lease 1 lost by" in line for line in logs), logs
    store.close()


def _job(url: str, job_id: int) -> Job:
    with Store(url) as store:
        return store.get_job(job_id)


def _wait(what, condition, timeout_s: float, procs=()):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        for p in procs:
            assert p.poll() is None, f"{what}: a process exited early ({p.returncode}): {p.stderr.read()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_stopped_worker_whose_job_was_taken_stores_no_second_reproduction(kind, tmp_path):
    """Issue 29's scenario with real workers and real digits trials: worker A is stopped (SIGSTOP) while its trial
    runs (the trial, in a session of its own, goes on); worker B takes the job as stale and runs it; A is continued
    (SIGCONT) while B's trial runs. Exactly one reproduction is stored (B's), the job is B's, and its history says
    that A lost its lease and stored nothing."""
    url = db_url(kind, tmp_path, "sigstop")
    store, entry_id = entry_store(url)
    job, _ = store.enqueue(entry_id, "tester")
    store.close()
    cmd = [sys.executable, "-m", "daybreak", "leaderboard", "worker", "--once", "--db", url, "--stale-after", "4",
           "--poll", "0.2", "--timeout", "600"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    a = subprocess.Popen(cmd + ["--work-dir", str(tmp_path / "a")], stderr=subprocess.PIPE, text=True, env=env)
    b = None
    try:
        _wait("A's trial", lambda: list((tmp_path / "a").glob("entry-*/run.log")), 120, [a])
        assert _job(url, job.id).lease == 1
        os.kill(a.pid, signal.SIGSTOP)
        # A's heartbeat (and its hold on the database's worker lease) grows old: B may take over
        _wait("A's heartbeat to go stale", lambda: now_utc() - _job(url, job.id).heartbeat_at > timedelta(seconds=5),
              60)
        b = subprocess.Popen(cmd + ["--work-dir", str(tmp_path / "b")], stderr=subprocess.PIPE, text=True, env=env)
        _wait("B's take", lambda: _job(url, job.id).lease == 2, 120, [b])
        _wait("B's trial", lambda: list((tmp_path / "b").glob("entry-*/run.log")), 60, [b])
        os.kill(a.pid, signal.SIGCONT)
        a_err = a.communicate(timeout=120)[1]
        b_err = b.communicate(timeout=300)[1]
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.wait()
    assert a.returncode == 0 and b.returncode == 0, (a_err[-2000:], b_err[-2000:])
    with Store(url) as store:
        reproductions = [e for e in store.entries() if e.reproduction_of == entry_id]
        assert len(reproductions) == 1, (a_err[-2000:], b_err[-2000:])
        row = store.get_job(job.id)
        assert (row.status, row.lease, row.result_entry_id) == ("done", 2, reproductions[0].id), row.history
        lost = [line for line in row.history_lines if "lease 1 lost by" in line]
        assert len(lost) == 1 and "stored nothing" in lost[0], row.history
        assert store.get(entry_id).reproduced_by in (None, reproductions[0].id)
    assert "lease 1 lost by" in a_err and f"job {job.id}: done" in b_err, (a_err[-2000:], b_err[-2000:])


# --- the server: 20 concurrent reproduce requests ---------------------------------------------------------------


def _reproduce_20(base: str, entry_id: int) -> list[tuple[int, dict]]:
    barrier = threading.Barrier(20)

    def post(_):
        with httpx.Client(base_url=base, timeout=120) as c:
            barrier.wait(timeout=60)
            r = c.post(f"/api/entries/{entry_id}/reproduce", headers=AUTH)
            return r.status_code, r.json()

    with ThreadPoolExecutor(20) as pool:
        return list(pool.map(post, range(20)))


def _one_job(answers: list[tuple[int, dict]]) -> int:
    codes = sorted(code for code, _ in answers)
    assert codes == [200] * 19 + [202], answers  # no 4xx: every request is answered with the one job
    ids = {body["job"]["id"] for _, body in answers}
    assert len(ids) == 1 and sum(body["queued"] for _, body in answers) == 1
    return ids.pop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_twenty_concurrent_reproduce_requests_to_a_cold_server_make_one_job(kind, tmp_path):
    """A fresh `daybreak leaderboard serve` process: its first requests arrive together (registry discovery and
    the job's creation race each other)."""
    url = db_url(kind, tmp_path, "cold")
    store, entry_id = entry_store(url)
    store.close()
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"tester {SECRET}\n")
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "daybreak", "leaderboard", "serve", "--db", url, "--port",
                               str(port), "--token-file", str(tokens)], stderr=subprocess.PIPE, text=True)
    try:
        def listening():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait("the server", listening, 60, [server])
        job_id = _one_job(_reproduce_20(f"http://127.0.0.1:{port}", entry_id))
    finally:
        server.send_signal(signal.SIGTERM)
        err = server.communicate(timeout=30)[1]
    with Store(url) as store:
        assert [j.id for j in store.jobs(entry_id=entry_id)] == [job_id], err[-2000:]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_twenty_concurrent_reproduce_requests_to_a_warm_server_make_one_job(kind, tmp_path):
    store, entry_id = entry_store(db_url(kind, tmp_path, "warm"))
    try:
        with serving(store) as srv:
            with srv.client() as c:
                assert c.get(f"/entries/{entry_id}").status_code == 200
            job_id = _one_job(_reproduce_20(srv.base, entry_id))
            again = _reproduce_20(srv.base, entry_id)
            assert {body["job"]["id"] for _, body in again} == {job_id}
            with srv.client() as c:
                public = c.get(f"/api/jobs/{job_id}").text  # the token's name is the host's: not shown
                assert json.loads(public)["history"][0].endswith("queued by a submitter") and "tester" not in public
        assert [j.id for j in store.jobs(entry_id=entry_id)] == [job_id]
    finally:
        store.close()
