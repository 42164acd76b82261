"""The leaderboard store on SQLite and on a real PostgreSQL server.

PostgreSQL: CI starts one with `.ci/start-postgres.sh` and exports the URL it prints as DAYBREAK_TEST_PG_URL;
without that variable (or without a reachable server) the PostgreSQL cases skip with the reason.
"""

import json
import os
import threading
from datetime import datetime

import pytest

from daybreak.leaderboard.ingest.importer import parse_submission
from daybreak.leaderboard.ranking.objectives import leaderboard
from daybreak.leaderboard.store.database import Base, Store, StoreError
from daybreak.leaderboard.ingest.submission import SubmissionError

PG_ENV = "DAYBREAK_TEST_PG_URL"


def _pg_store() -> Store:
    url = os.environ.get(PG_ENV, "").strip()
    if not url:
        pytest.skip(f"no PostgreSQL server: set {PG_ENV} (CI: .ci/start-postgres.sh prints it)")
    try:
        store = Store(url)
    except StoreError as e:
        pytest.skip(f"PostgreSQL at {PG_ENV} is not reachable: {e}")
    Base.metadata.drop_all(store.engine)  # a database for tests only: start empty
    Base.metadata.create_all(store.engine)
    return store


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path):
    s = Store(f"sqlite:///{tmp_path / 'lb.sqlite'}") if request.param == "sqlite" else _pg_store()
    yield s
    s.close()


def submission(model: str, hours: float, date: str = "2018-01-01", cost: float | None = 1.0, latency=None):
    if latency is not None:
        doc = {"model": model, "hardware": "1 GPU", "framework": "PyTorch", "timestamp": date, "latency": latency,
               "cost": None, "top1Accuracy": 95.0, "author": "Someone"}
        return parse_submission(json.dumps(doc).encode(), None, source=f"{model}.json", task="cifar10")
    doc = {"model": model, "hardware": "1 GPU <b>", "framework": "PyTorch", "timestamp": date, "costPerHour": cost,
           "author": "Ünïcode ✓"}
    tsv = f"epoch\thours\ttop1Accuracy\n1\t{hours / 2}\t90\n2\t{hours}\t94.5\n".encode()
    return parse_submission(json.dumps(doc).encode(), tsv, source=f"{model}.json", task="cifar10")


def test_add_get_and_rank(store):
    a_id, created = store.add(submission("A", 0.5, "2018-01-02"))
    assert created
    b_id, _ = store.add(submission("B", 0.5, "2018-01-01"))
    c_id, _ = store.add(submission("C", 0.25, "2019-01-01", cost=None))
    store.add(submission("L", 0, latency=2.5))
    entry = store.get(a_id)
    assert entry.model == "A" and entry.hardware == "1 GPU <b>" and entry.author == "Ünïcode ✓"
    assert entry.submitted_at == datetime(2018, 1, 2) and entry.time_to_target_s == pytest.approx(1800.0)
    assert entry.curve == [[0.25, 0.9, 1.0], [0.5, pytest.approx(0.945), 2.0]]
    assert entry.document["model"] == "A" and entry.notes and entry.accuracy_unit == "percent"
    assert store.get(999_999) is None
    rows = leaderboard(store, "cifar10", "train-time")
    assert [(r["model"], r["rank"]) for r in rows] == [("C", 1), ("B", 2), ("A", 3)]
    assert [r["model"] for r in leaderboard(store, "cifar10", "train-cost")] == ["B", "A"]  # C has no price
    assert [r["model"] for r in leaderboard(store, "cifar10", "latency")] == ["L"]
    assert leaderboard(store, "imagenet", "train-time") == []
    assert store.count() == 4 and store.count("cifar10") == 4 and store.count("squad") == 0
    assert [e.id for e in store.entries()] == sorted([a_id, b_id, c_id, a_id + 3])


def test_same_content_is_stored_once(store):
    sub = submission("A", 0.5)
    first = store.add(sub)
    assert store.add(submission("A", 0.5)) == (first[0], False)
    assert store.count() == 1


def test_a_lost_insert_race_returns_the_winner(store, monkeypatch):
    """The unique constraint decides: an insert that loses the race (IntegrityError) reports the stored row."""
    winner, _ = store.add(submission("A", 0.5))
    monkeypatch.setattr(store, "find_hash", lambda h, real=store.find_hash, calls=[]: (
        calls.append(h) or (None if len(calls) == 1 else real(h))))
    assert store.add(submission("A", 0.5)) == (winner, False)
    assert store.count() == 1


def test_parallel_writers_store_each_submission_once(store):
    subs = [submission(f"M{i % 4}", 0.1 * (1 + i % 4)) for i in range(16)]  # 4 distinct, each 4 times
    results, errors = [], []
    barrier = threading.Barrier(8)

    def worker(chunk):
        try:
            barrier.wait(timeout=10)
            for s in chunk:
                results.append(store.add(s))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(subs[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert store.count() == 4
    assert sum(created for _, created in results) == 4 and len({i for i, _ in results}) == 4


def test_bad_database_urls_are_one_line_errors(tmp_path):
    with pytest.raises(StoreError, match="cannot use database nosuchdriver://"):
        Store("nosuchdriver://x")
    with pytest.raises(StoreError) as err:
        Store("postgresql+psycopg://u:secret@127.0.0.1:1/x")
    assert "secret" not in str(err.value) and "***" in str(err.value) and "\n" not in str(err.value)
    assert Store(str(tmp_path / "plain-path.sqlite")).count() == 0


def test_awkward_text_round_trips(store):
    doc = {"model": "Net ✓ 网络", "hardware": "1 GPU", "framework": "PyTorch", "timestamp": "2018-01-01",
           "author": "A",
           "latency": 1.0, "top1Accuracy": 95.0, "misc": {"nul": "a\u0000b", "emoji": "\U0001F600", "quote": "'; DROP"}}
    raw = json.dumps(doc).encode()  # \u0000 and the emoji's surrogate pair as JSON escapes
    # a submission with a control character in its text is refused (test_leaderboard_fuzz); the store still keeps
    # whatever text a Submission holds (PostgreSQL's JSONB has no \u0000: the store escapes it)
    with pytest.raises(SubmissionError, match=r"misc\.nul: the text contains control characters \(\\x00\)"):
        parse_submission(raw, None, source="src.json", task="cifar10")
    clean = json.dumps({**doc, "misc": {**doc["misc"], "nul": "ab"}}).encode()
    sub = parse_submission(clean, None, source="src\x00.json", task="cifar10")
    sub.document = doc
    entry_id, _ = store.add(sub)
    entry = store.get(entry_id)
    assert entry.model == "Net ✓ 网络" and entry.document["misc"] == doc["misc"] and entry.source == "src.json"


def test_every_submission_field_has_its_column_and_round_trips(store):
    """Entry is derived from Submission: every field is stored (in the column of its name, or as JSON), and what
    comes back is what went in."""
    from dataclasses import fields

    from daybreak.leaderboard.store.database import EMPTY_AS_NULL, STORED_AS_JSON, Entry
    from daybreak.leaderboard.ingest.submission import Submission

    columns = set(Entry.__table__.columns.keys())
    for f in fields(Submission):
        assert (STORED_AS_JSON[f.name][0] if f.name in STORED_AS_JSON else f.name) in columns, f.name
    sub = submission("Fields", 0.5)
    sub.accelerator, sub.accelerator_count, sub.cpu = "NVIDIA V100", 8, "Intel Xeon E5-2686 v4"
    sub.framework_name, sub.framework_version, sub.cloud_instance = "PyTorch", "1.0", "p3.16xlarge"
    sub.code_commit, sub.recipe_sha256 = "ab" * 20, "cd" * 32
    sub.clock_rules, sub.mlperf_round, sub.division, sub.availability = "mlperf", "v4.0", "closed", "available"
    entry = store.get(store.add(sub)[0])
    for f in fields(Submission):
        if f.name in STORED_AS_JSON or f.name in ("ranked_at", "submitter"):
            continue
        sent = getattr(sub, f.name)
        expected = None if sent == "" and f.name in EMPTY_AS_NULL else sent
        assert getattr(entry, f.name) == expected, f.name
    assert entry.document == sub.document and entry.notes == sub.notes and entry.curve == [list(p) for p in sub.curve]
    assert entry.accelerator_count == 8 and entry.mlperf_round == "v4.0" and entry.code_commit == "ab" * 20


def test_a_database_failure_is_one_store_error_on_every_method(tmp_path):
    """One error wrapper: with the database gone, reads and writes raise StoreError naming the action."""
    store = Store(f"sqlite:///{tmp_path / 'lb.sqlite'}")
    store.add(submission("A", 0.5))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE daybreak_leaderboard_entries")
        conn.exec_driver_sql("DROP TABLE daybreak_leaderboard_jobs")
    for call, action in ((lambda: store.get(1), "cannot read"), (lambda: store.count(), "cannot read"),
                         (lambda: store.ranked("cifar10", "time_to_target_s"), "cannot read"),
                         (lambda: list(store.iter_entries()), "cannot read"), (lambda: store.jobs(), "cannot read"),
                         (lambda: store.add(submission("B", 0.25)), "cannot read"),
                         (lambda: store.enqueue(1), "cannot read"), (lambda: store.claim_job("w"), "cannot write to"),
                         (lambda: store.mark_not_reproduced(1), "cannot write to")):
        with pytest.raises(StoreError) as err:
            call()
        assert str(err.value).startswith(action) and "\n" not in str(err.value)
    store.close()


def test_a_version_3_database_gets_the_system_columns_filled_in(tmp_path, capsys):
    """Schema 4 adds the structured system, attribution and rule-set columns to an older table and fills them in
    from the stored documents with today's readers."""
    from sqlalchemy import text as sql

    from daybreak.cli import main
    from daybreak.leaderboard.store.database import SYSTEM_COLUMNS

    run = tmp_path / "run"
    assert main(["run", "--out", str(run), "-q", "--threads", "1"]) == 0
    url = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(run), "--db", url]) == 0
    capsys.readouterr()
    with Store(url) as store:
        store.add(submission("Old DAWNBench entry", 0.5))
        expected = {e.id: {c: getattr(e, c) for c in SYSTEM_COLUMNS} for e in store.entries()}
        with store.engine.begin() as conn:
            for index in ("accelerator", "framework_name"):
                conn.execute(sql(f"DROP INDEX ix_daybreak_leaderboard_entries_{index}"))
            for column in (*SYSTEM_COLUMNS, "clock_rules", "mlperf_round", "division", "availability"):
                conn.execute(sql(f"ALTER TABLE daybreak_leaderboard_entries DROP COLUMN {column}"))
            conn.execute(sql("UPDATE daybreak_leaderboard_meta SET value = '3' WHERE key = 'schema_version'"))
    with Store(url) as store:
        assert store.migrated and "from schema v3 to v6" in store.migrated[0] and "structured systems" in store.migrated[0]
        entries = store.entries()
        assert {e.id: {c: getattr(e, c) for c in SYSTEM_COLUMNS} for e in entries} == expected
        assert all(e.clock_rules == "dawnbench" for e in entries)
        run_entry = next(e for e in entries if e.source_format == "daybreak.run")
        assert run_entry.accelerator == "CPU only" and run_entry.recipe_sha256
