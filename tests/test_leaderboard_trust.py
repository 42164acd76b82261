"""Issue 14: a leaderboard people can trust.

Provenance on every entry (reproduced / daybreak-run / self-reported, set by the host only), reproduction by the
host (CLI and the worker's job queue), multi-run entries (olympic mean, N, CV, reached fraction, Welch's t-test
between adjacent entries), plausibility of uploads, and every hardening class found by fuzzing a running server:
unbounded numbers, JSON numbers beyond the float range, a quadratic TSV header check, 500s on odd ids and
parameters, lists that loaded whole documents, a superlinear static export, connections without time limits,
`leaderboard import` of an untrusted folder (FIFOs, symlinks, control characters, duplicate keys), null required
fields, non-ASCII tokens, a database outage, gzip bombs in MNIST files.

Server tests run a real uvicorn on 127.0.0.1 (``server_config``: the same limits ``serve`` uses, shortened), once
on SQLite and once on PostgreSQL (``DAYBREAK_TEST_PG_URL``; CI starts one with .ci/start-postgres.sh).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from daybreak.cli import main
from daybreak.leaderboard.ingest.importer import import_paths, parse_submission
from daybreak.leaderboard.ranking.query import SORTS
from daybreak.leaderboard.ranking.objectives import leaderboard
from daybreak.leaderboard.web.export import export_site
from daybreak.leaderboard.web.pages import Site
from daybreak.leaderboard.store.database import Base, Entry, Store, StoreError
from daybreak.leaderboard.ingest.submission import SubmissionError
from daybreak.leaderboard.web.app import Limits, Token, create_app, load_tokens, server_config
from daybreak.leaderboard.web.cache import RECHECK_S

httpx = pytest.importorskip("httpx")

from conftest import chromium, chromium_or_skip, screenshot, single_line  # noqa: E402

ENTRIES = Path(os.environ.get("DAYBREAK_DAWNBENCH_ENTRIES")
               or Path(__file__).resolve().parents[2] / "shared/data/dawnbench-entries")
PG_ENV = "DAYBREAK_TEST_PG_URL"
SECRET = "trust-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {SECRET}"}
# Short limits so the timeout tests take seconds; every other request here sends its head and body at once. The
# per-client budgets are off and bodies at once raised to the connections: the fuzzing here sends thousands of
# requests, a dozen uploads at a time, from one address (the budgets have their own tests,
# tests/test_leaderboard_load.py).
TEST_LIMITS = Limits(header_timeout_s=1.5, body_timeout_s=2.0, keep_alive_s=1.0, max_connection_s=60.0,
                     max_connections=40, max_header_bytes=16 * 1024, client_rate=0, client_work_s=0,
                     max_client_bodies=40)


# --- records ------------------------------------------------------------------------------------------------


def synth_run(*, seed=0, accuracies=(0.7, 0.95, 0.99), epoch_s=1.0, task="digits", recipe="digits", cost=None,
              run_id=None, started=None, steps_per_epoch=21, world_size=1, hyperparameters=None):
    """A daybreak run record that is consistent the way a real one is: phase intervals on one timeline, every
    rule set's clock read from them at the end of each evaluation (daybreak.rules.read_all), totals from the
    history, wall times around it. ``epoch_s`` sets the speed."""
    from daybreak.measure.system import system_info
    from daybreak.recipes import get_recipe
    from daybreak.records.run import ClockFigure, EpochRecord, PhaseInterval, RunResult
    from daybreak.rules import Interval, read_all
    from daybreak.tasks import get_task

    target = get_task(task).target
    phases = [("data_load", 0.0, 0.3), ("model_init", 0.3, 0.5), ("warmup", 0.5, 0.6)]
    t, history, first = 0.6, [], None
    for i, acc in enumerate(accuracies):
        phases.append(("train", t, t + epoch_s))
        phases.append(("eval", t + epoch_s, t + epoch_s + 0.05))
        end = t + epoch_s + 0.05
        clock = {name: round(r.seconds, 9) for name, r in read_all([Interval(*p) for p in phases], end).items()}
        h = EpochRecord(epoch=i + 1, step=(i + 1) * steps_per_epoch, elapsed_s=clock["dawnbench"], clock_s=clock,
                        accuracy=acc, top1=acc, eval_s=0.05)
        history.append(h)
        phases.append(("record", end, end + 0.01))
        t = end + 0.01
        if acc >= target:
            first = h
            break
    total = t + 0.05
    started = started or datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc) + timedelta(minutes=seed)
    clocks = {name: ClockFigure(rules=name, time_to_target_s=first.clock_s[name] if first else None,
                                clock_s=history[-1].clock_s[name]) for name in history[-1].clock_s}
    return RunResult(
        run_id=run_id or f"digits-{seed}-{epoch_s:g}", task=task, recipe=recipe, model="digits_cnn",
        framework="PyTorch 2.13.0", metric="top1", target=target, target_is_default=True, official=True,
        hyperparameters=hyperparameters or get_recipe(recipe).hyperparameters(), seed=seed, device="cpu", amp="off",
        compile=False, world_size=world_size, status="reached" if first else "not_reached", reached=first is not None,
        time_to_target_s=first and first.elapsed_s, epochs_to_target=first and first.epoch,
        steps_to_target=first and first.step, history=history,
        phases=[PhaseInterval(phase=p, start_s=a, end_s=b) for p, a, b in phases], clocks=clocks, rules="dawnbench",
        total_s=total, init_s=0.6, system=system_info(), started_at=started,
        finished_at=started + timedelta(seconds=total), cost_per_hour=cost, steps_per_epoch=steps_per_epoch,
        per_device_batch_size=64, global_batch_size=64 * world_size, effective_batch_size=64,
        train_examples=steps_per_epoch * 64 * world_size + 3,
    )


def run_doc(**kw) -> dict:
    return json.loads(synth_run(**kw).model_dump_json())


def write_repeat(folder: Path, speeds: list[float], *, seed_start=0, cost=None, unreached=()) -> Path:
    """A `daybreak repeat` directory: seed-<n>/result.json per run and summary.json (daybreak's own summarize)."""
    from daybreak.analysis.repeat import seed_dir_name, summarize

    done = []
    for i, speed in enumerate(speeds):
        seed = seed_start + i
        accuracies = (0.7, 0.9, 0.95) if i in unreached else (0.7, 0.95, 0.99)
        r = synth_run(seed=seed, epoch_s=speed, cost=cost, run_id=f"{folder.name}-seed-{seed}",
                      accuracies=accuracies)
        (folder / seed_dir_name(seed)).mkdir(parents=True, exist_ok=True)
        r.save(folder / seed_dir_name(seed))
        done.append((seed_dir_name(seed), r, False))
    summarize(done, inputs=[str(folder)]).save(folder)
    return folder


def dawnbench_doc(model="Net", date="2019-01-01", cost=2.0, **extra) -> dict:
    doc = {"version": "v1.0", "author": "A. Person", "authorEmail": "a@example.com", "framework": "PyTorch 1.0",
           "codeURL": "https://example.com/x", "model": model, "hardware": "1 V100", "timestamp": date,
           "costPerHour": cost, "misc": {}}
    doc.update(extra)
    return doc


def dawnbench_tsv(hours=(0.01, 0.02, 0.03), accuracies=(80.0, 93.0, 94.2)) -> str:
    return "epoch\thours\ttop1Accuracy\n" + "".join(
        f"{i + 1}\t{h}\t{a}\n" for i, (h, a) in enumerate(zip(hours, accuracies)))


# --- servers ------------------------------------------------------------------------------------------------


def _pg_store(url: str | None = None) -> Store:
    url = url or os.environ.get(PG_ENV, "").strip()
    if not url:
        pytest.skip(f"no PostgreSQL server: set {PG_ENV} (CI: .ci/start-postgres.sh prints it)")
    try:
        store = Store(url)
    except StoreError as e:
        pytest.skip(f"PostgreSQL at {PG_ENV} is not reachable: {e}")
    Base.metadata.drop_all(store.engine)  # a database for tests only: start empty
    Base.metadata.create_all(store.engine)
    Store(url).close()  # writes the schema version again
    return store


def _pg_schema_url(schema: str) -> str:
    """The test database's URL with its own PostgreSQL schema (created empty), so a test that drops tables or
    cuts connections does not touch the module's server, which uses the default schema."""
    from sqlalchemy import create_engine, text

    from daybreak.leaderboard.store.database import normalize_url

    url = os.environ.get(PG_ENV, "").strip()
    if not url:
        pytest.skip(f"no PostgreSQL server: set {PG_ENV} (CI: .ci/start-postgres.sh prints it)")
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as e:  # noqa: BLE001 - reported as a skip
        pytest.skip(f"PostgreSQL at {PG_ENV} is not usable: {e}")
    finally:
        engine.dispose()
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def make_store(kind: str, folder: Path) -> Store:
    return Store(f"sqlite:///{folder / 'trust.sqlite'}") if kind == "sqlite" else _pg_store()


class Served:
    def __init__(self, store: Store, app, limits: Limits):
        self.store, self.app, self.limits = store, app, limits
        self.server = None
        self.thread = None
        self.port = None

    def start(self):
        import uvicorn

        config = server_config(self.app, "127.0.0.1", 0, self.limits, log_level="critical", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kw) -> "httpx.Client":
        # no connection reuse: the server closes idle connections after a second
        return httpx.Client(base_url=self.base, timeout=60, limits=httpx.Limits(max_keepalive_connections=0), **kw)

    def stop(self):
        if self.server is not None:
            self.server.should_exit = True
            self.thread.join(timeout=15)


@contextlib.contextmanager
def serving(store: Store, tokens=None, limits: Limits = TEST_LIMITS):
    app = create_app(store, tokens=tokens if tokens is not None else [Token("tester", SECRET.encode())],
                     limits=limits)
    served = Served(store, app, limits).start()
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    store = make_store(request.param, tmp_path_factory.mktemp(f"trust-{request.param}"))
    with serving(store) as served:
        served.kind = request.param
        yield served
    store.close()


def upload(client, doc, tsv=None, task="cifar10", headers=AUTH, name="entry.json"):
    files = {"submission": (name, json.dumps(doc).encode() if not isinstance(doc, bytes) else doc)}
    if tsv is not None:
        files["tsv"] = ("entry.tsv", tsv.encode() if isinstance(tsv, str) else tsv)
    return client.post("/api/submissions", files=files, data={"task": task} if task else {}, headers=headers)


def post_json(client, raw: bytes, headers=AUTH):
    return client.post("/api/submissions", content=raw, headers={**headers, "content-type": "application/json"})


class Statements:
    """Every SQL statement the store's engine runs inside the block."""

    def __init__(self, store: Store):
        self.store, self.seen = store, []

    def _hook(self, conn, cursor, statement, parameters, context, executemany):
        self.seen.append(statement)

    def __enter__(self):
        from sqlalchemy import event

        event.listen(self.store.engine, "before_cursor_execute", self._hook)
        return self

    def __exit__(self, *exc):
        from sqlalchemy import event

        event.remove(self.store.engine, "before_cursor_execute", self._hook)

    @property
    def selects(self) -> list[str]:
        """The SELECTs on the leaderboard's tables (not the driver's own, e.g. PostgreSQL's on connect)."""
        return [s for s in self.seen if s.lstrip().upper().startswith("SELECT") and "daybreak_leaderboard" in s]


# --- provenance ---------------------------------------------------------------------------------------------


def test_provenance_is_set_by_the_host_never_by_the_uploader(srv, tmp_path):
    store = srv.store
    claimed = run_doc(seed=101, epoch_s=0.9)
    claimed["provenance"] = "reproduced"  # an uploader's claim
    with srv.client() as c:
        r = post_json(c, json.dumps(claimed).encode())
        assert r.status_code == 201, r.text
        uploaded = r.json()["id"]
        assert r.json()["provenance"] == "self-reported"
        entry = c.get(f"/api/entries/{uploaded}").json()
        assert entry["provenance"] == "self-reported"
        assert any("'provenance' field is ignored" in n for n in entry["notes"])
        # the same record imported by the host from its run directory: the row's provenance is raised
        run_dir = tmp_path / "runs" / "d101"
        run_dir.mkdir(parents=True)
        (run_dir / "result.json").write_text(json.dumps(claimed))
        report = import_paths(store, [run_dir])
        assert report.duplicates == 1
        assert c.get(f"/api/entries/{uploaded}").json()["provenance"] == "daybreak-run"
        # ... and an upload never lowers it again
        assert post_json(c, json.dumps(claimed).encode()).json()["duplicate"] is True
        assert c.get(f"/api/entries/{uploaded}").json()["provenance"] == "daybreak-run"
        # a DAWNBench file is self-reported; every JSON row says its provenance, and the tables filter on it
        assert upload(c, dawnbench_doc("Prov DB", date="2019-02-03"), dawnbench_tsv()).status_code == 201
        rows = c.get("/api/leaderboard/cifar10/train-time").json()
        assert rows and all(r["provenance"] in ("reproduced", "daybreak-run", "self-reported") for r in rows)
        digits = c.get("/api/leaderboard/digits/train-time?provenance=daybreak-run").json()
        assert uploaded in [r["entry_id"] for r in digits] and {r["provenance"] for r in digits} == {"daybreak-run"}
        none = c.get("/api/leaderboard/cifar10/train-time?provenance=reproduced,daybreak-run").json()
        assert all(r["provenance"] != "self-reported" for r in none)
        assert c.get("/api/leaderboard/cifar10/train-time?provenance=trusted").status_code == 400
        page = c.get("/tasks/digits/train-time?provenance=daybreak-run").text
        assert 'class="badge prov-daybreak-run"' in page
        assert 'class="badge prov-self-reported"' in c.get("/").text


def test_show_json_rows_carry_provenance_and_filter(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'show.sqlite'}"
    run_dir = tmp_path / "runs" / "one"
    run_dir.mkdir(parents=True)
    synth_run(seed=3).save(run_dir)
    tree = tmp_path / "CIFAR10" / "train"
    tree.mkdir(parents=True)
    (tree / "x.json").write_text(json.dumps(dawnbench_doc()))
    (tree / "x.tsv").write_text(dawnbench_tsv())
    assert main(["leaderboard", "import", str(run_dir), str(tmp_path / "CIFAR10"), "--db", url, "-q"]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "show", "--task", "digits", "--objective", "train-time", "--json", "--db", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["provenance"] for r in rows] == ["daybreak-run"]
    assert main(["leaderboard", "show", "--task", "cifar10", "--objective", "train-time", "--json", "--db", url,
                 "--provenance", "daybreak-run"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["leaderboard", "show", "--task", "cifar10", "--objective", "train-time", "--db", url]) == 0
    assert "self-reported" in capsys.readouterr().out
    assert main(["leaderboard", "show", "--task", "cifar10", "--objective", "train-time", "--db", url,
                 "--provenance", "nope"]) == 2
    assert "unknown provenance 'nope'" in capsys.readouterr().err


def test_a_daybreak_time_record_is_self_reported_and_labelled(tmp_path):
    """`daybreak time` of an external program (a fake trainer printing its own accuracy): self-reported, even
    when the host imports its run directory, and labelled as an external program's claim."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_time_external import REACHING, write_child

    script = write_child(tmp_path, REACHING)
    run_dir = tmp_path / "ext"
    assert main(["time", "--task", "digits", "--out", str(run_dir), "-q", "--", sys.executable, str(script)]) == 0
    with Store(f"sqlite:///{tmp_path / 'ext.sqlite'}") as store:
        assert import_paths(store, [run_dir]).stored == 1
        entry = store.entries()[0]
        assert entry.provenance == "self-reported" and "daybreak time" in entry.provenance_detail
        assert "external program" in entry.model
        html = Site(store).entry_html(entry)
        assert 'class="badge prov-self-reported"' in html and "external program timed by" in html
        assert "no: an external program timed by `daybreak time`" in html  # not reproducible


# --- plausibility -------------------------------------------------------------------------------------------


def _scaled_history(doc, factor):
    for h in doc["history"]:
        h["elapsed_s"] *= factor
        h["clock_s"] = {k: v * factor for k, v in h["clock_s"].items()}
    return doc


def _mutate(change):
    doc = run_doc(seed=7)
    change(doc)
    return doc


def _set(path, value):
    def change(doc):
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return change


def _all(*changes):
    def change(doc):
        for c in changes:
            c(doc)
    return change


@pytest.mark.parametrize("change, fragment", [
    # the history divided by 1000 (the totals left as they were): inconsistent
    (lambda d: _scaled_history(d, 1e-3), "is not the clock at the first evaluation"),
    # ... and the totals too: the phases give the real clock
    (_all(lambda d: _scaled_history(d, 1e-3), lambda d: d.update(time_to_target_s=d["history"][-1]["elapsed_s"]),
          lambda d: [f.update(time_to_target_s=d["history"][-1]["clock_s"][n]) for n, f in d["clocks"].items()]),
     "does not match the record's phase intervals"),
    # ... and the phases too: under the 1 us-per-step floor? no (63 steps); but the clocks still beat nothing:
    # an absurd time is refused by the floor
    (_all(lambda d: _scaled_history(d, 1e-302), lambda d: d.update(time_to_target_s=d["history"][-1]["elapsed_s"]),
          lambda d: [f.update(time_to_target_s=d["history"][-1]["clock_s"][n]) for n, f in d["clocks"].items()],
          lambda d: [p.update(start_s=p["start_s"] * 1e-302, end_s=p["end_s"] * 1e-302) for p in d["phases"]]),
     "impossibly small"),
    (_set(["started_at"], "0001-01-01T00:00:00Z"), "is before 2017-01-01"),
    (_set(["started_at"], "9999-01-01T00:00:00Z"), "is in the future"),
    (_set(["finished_at"], "9999-01-01T00:00:00Z"), "is in the future"),
    (_set(["cost_per_hour"], 1e15), "cost_per_hour 1e+15 is out of range"),
    (_set(["history", 1, "clock_s", "dawnbench"], 0.0), "goes back in time"),
    (_set(["time_to_target_s"], 1.0), "is not the clock at the first evaluation"),
    (_set(["steps_to_target"], 5), "steps_to_target 5 is not"),
    (_all(_set(["reached"], False), _set(["status"], "not_reached")), "says the run did not reach it"),
    (_set(["total_s"], 0.5), "is longer than the run's wall time"),
    (_set(["model"], None), "invalid run record: model"),
    (_set(["history", 0, "accuracy"], 1.5), "history[0].accuracy 1.5 is out of range"),
])
def test_implausible_run_records_are_refused(change, fragment):
    doc = _mutate(change)
    with pytest.raises(SubmissionError) as err:
        parse_submission(json.dumps(doc).encode(), source="upload")
    assert single_line(str(err.value)) and fragment in str(err.value), str(err.value)


def test_the_lower_bound_counts_optimizer_steps():
    doc = run_doc(seed=8, steps_per_epoch=10_000_000)  # 30 million steps in 3.6 s: 0.12 us per step
    with pytest.raises(SubmissionError, match=r"impossibly small for 30,000,000 optimizer steps"):
        parse_submission(json.dumps(doc).encode(), source="x")
    parse_submission(json.dumps(run_doc(seed=8, steps_per_epoch=100_000)).encode(), source="x")  # 36 us/step


@pytest.mark.parametrize("doc, tsv, fragment", [
    (dawnbench_doc(date="2016-12-31"), dawnbench_tsv(), "is before 2017-01-01"),
    (dawnbench_doc(author=None), dawnbench_tsv(), "required field 'author' is null"),
    ({k: v for k, v in dawnbench_doc().items() if k != "author"}, dawnbench_tsv(),
     "required field 'author' is missing"),
    (dawnbench_doc(), dawnbench_tsv(hours=(1e-300, 2e-300, 3e-300)), "impossibly small"),
    (dawnbench_doc(cost=1e6), dawnbench_tsv(hours=(1, 2, 1e6 + 1)), "hours 1e+06 is out of range"),
])
def test_implausible_dawnbench_files_are_refused(doc, tsv, fragment):
    with pytest.raises(SubmissionError) as err:
        parse_submission(json.dumps(doc).encode(), tsv.encode(), source="x", task="cifar10")
    assert fragment in str(err.value), str(err.value)
    assert parse_submission(json.dumps(dawnbench_doc(date="2017-01-01")).encode(), dawnbench_tsv().encode(),
                            source="x", task="cifar10").time_to_target_s == pytest.approx(108.0)


# --- hardening: numbers -------------------------------------------------------------------------------------


def test_no_stored_number_can_reach_infinity(srv, tmp_path):
    """The largest values each reader allows multiply to finite costs; a row that holds inf anyway (stored by an
    older daybreak) is not ranked and breaks no page, API or export."""
    with srv.client() as c:
        biggest = dawnbench_doc("Biggest", cost=1e6, date="2019-03-04")
        r = upload(c, biggest, dawnbench_tsv(hours=(1e5, 5e5, 1e6)))
        assert r.status_code == 201, r.text
        assert c.get(f"/api/entries/{r.json()['id']}").json()["train_cost_usd"] == pytest.approx(1e12)
        doc = run_doc(seed=11, cost=1e6 + 1)
        assert post_json(c, json.dumps(doc).encode()).status_code == 422
        for raw in (b'{"latency": 1e400}', json.dumps(dawnbench_doc()).encode().replace(b'"misc": {}',
                                                                                           b'"misc": {"x": 1e999}')):
            r = post_json(c, raw)
            assert r.status_code == 422 and "out of range" in r.json()["error"], r.text
        victim = upload(c, dawnbench_doc("Victim", date="2019-03-05"), dawnbench_tsv()).json()["id"]
    from sqlalchemy import update

    with srv.store.engine.begin() as conn:  # what an older daybreak could store
        conn.execute(update(Entry).where(Entry.id == victim).values(train_cost_usd=float("inf"),
                                                                      time_to_target_s=float("inf")))
    with srv.client() as c:
        for url in ("/", "/tasks/cifar10/train-cost", "/tasks/cifar10/train-time", f"/entries/{victim}",
                    "/api/leaderboard/cifar10/train-cost", f"/api/entries/{victim}"):
            r = c.get(url)
            assert r.status_code == 200, (url, r.status_code)
            assert "$inf" not in r.text and "Infinity" not in r.text, url
        assert victim not in [row["entry_id"] for row in c.get("/api/leaderboard/cifar10/train-cost").json()]
    out = tmp_path / "site"
    export_site(Site(srv.store), out)
    for f in out.rglob("*.json"):
        json.loads(f.read_text(), parse_constant=lambda name: pytest.fail(f"{f}: {name}"))
    with srv.store.engine.begin() as conn:
        conn.execute(update(Entry).where(Entry.id == victim).values(train_cost_usd=None, time_to_target_s=108.0))


def test_an_import_goes_on_after_a_bad_file(tmp_path, capsys):
    tree = tmp_path / "CIFAR10" / "train"
    tree.mkdir(parents=True)
    for name, doc in (("a_bad", None), ("b_good", dawnbench_doc("Good")), ("c_dupkey", None)):
        (tree / f"{name}.tsv").write_text(dawnbench_tsv())
        if doc is not None:
            (tree / f"{name}.json").write_text(json.dumps(doc))
    (tree / "a_bad.json").write_text(json.dumps(dawnbench_doc("Bad")).replace('"misc": {}', '"misc": {"n": 1e999}'))
    (tree / "c_dupkey.json").write_text('{"model": "A", ' + json.dumps(dawnbench_doc("B"))[1:])
    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    assert main(["leaderboard", "import", str(tmp_path / "CIFAR10"), "--db", url]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    err = dict(line.split(": ", 1) for line in captured.err.strip().splitlines())
    assert "the number 1e999 is out of range" in err[f"skipped {tree / 'a_bad.json'}"]
    assert "duplicate key 'model'" in err[f"skipped {tree / 'c_dupkey.json'}"]
    assert "1 stored, 0 already stored, 2 skipped" in captured.out


# --- hardening: requests ------------------------------------------------------------------------------------


def test_a_huge_tsv_header_is_refused_at_once(srv):
    header = ("epoch\t" * 170_000)[: 1024 * 1024 - 2000]
    with srv.client() as c:
        for tsv in (header + "\n1\n", ("hours " * 160_000) + "\n", "x" * 1_000_000 + "\n"):
            start = time.monotonic()
            r = upload(c, dawnbench_doc("Header"), tsv)
            assert r.status_code == 422 and time.monotonic() - start < 5, (r.status_code, time.monotonic() - start)


@pytest.mark.parametrize("url", [
    "/entries/²", "/entries/%C2%B2", "/entries/%D9%A1%D9%A2", "/api/entries/²", "/api/entries/" + "9" * 40,
    "/api/jobs/²", "/api/jobs/" + "9" * 30,
    "/api/leaderboard/cifar10/train-time?top=" + str(2**64), "/api/leaderboard/cifar10/train-time?top=-1",
    "/api/leaderboard/cifar10/train-time?top=²", "/api/leaderboard/cifar10/train-time?top=1e3",
    "/api/leaderboard/cifar10/train-time?offset=" + str(2**70), "/api/leaderboard/cifar10/train-time?offset=%00",
    "/tasks/cifar10/train-time?page=" + str(2**64), "/tasks/cifar10/train-time?page=0",
    "/tasks/cifar10/train-time?page=%E2%85%A0", "/?provenance=%FF", "/?provenance=" + "x" * 5000,
])
def test_odd_ids_and_parameters_are_4xx(srv, url):
    with srv.client() as c:
        r = c.get(url)
    assert 400 <= r.status_code < 500, (url, r.status_code, r.text[:200])


def test_pages_read_columns_not_documents(srv):
    """GET / and the tables never select document_json (or the curve): a page of ten rows reads ten short rows.
    With large stored documents, the memory a request takes stays small."""
    store = srv.store
    misc = ["x" * 1000] * 900  # 900 kB in strings of the longest length allowed
    for i in range(40):
        store.add(parse_submission(json.dumps(dawnbench_doc(f"Large {i}", misc=misc, date="2019-05-0%d" % (1 + i % 9)))
                                   .encode(), dawnbench_tsv(hours=(0.1, 0.2, 1 + i)).encode(), source=f"large-{i}",
                                   task="cifar10"))
    with srv.client() as c:
        c.get("/")  # warm up templates
        tracemalloc.start()
        try:
            with Statements(store) as seen:
                for url in ("/", "/tasks/cifar10/train-time", "/api/leaderboard/cifar10/train-time?top=100"):
                    assert c.get(url).status_code == 200
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert seen.selects and not [s for s in seen.selects if "document_json" in s or "curve_json" in s]
    assert all("LIMIT" in s.upper() or "count(" in s.lower() for s in seen.selects), seen.selects
    assert peak < 25 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB for pages over {40 * 0.9:.0f} MB of documents"


def test_static_export_grows_linearly(tmp_path):
    """Each board is read once; entries are read 100 at a time; every entry's rank comes from the board pass. The
    number of queries grows by one per 100 entries and the time by about 4x for 4x the entries (quadratic: 16x)."""
    def fill(store, n):
        for i in range(n):
            store.add(parse_submission(json.dumps(dawnbench_doc(f"E{i}", date="2019-01-01")).encode(),
                                       dawnbench_tsv(hours=(0.1, 0.2, 0.3 + i * 1e-3)).encode(), source=f"e{i}",
                                       task="cifar10"))

    measured = {}
    for n in (200, 800):
        with Store(f"sqlite:///{tmp_path / f'export-{n}.sqlite'}") as store:
            fill(store, n)
            with Statements(store) as seen:
                start = time.perf_counter()
                files = export_site(Site(store), tmp_path / f"site-{n}")
                measured[n] = (time.perf_counter() - start, len(seen.selects))
            # 5 tasks x 6 objectives, a page and a JSON each; the two boards with rows (train-time, train-cost) a
            # page per sort and order (but their own) and per accelerator, framework, year and provenance (one each)
            assert files == 1 + 5 * 6 * 2 + 1 + 2 * n + 2 * (len(SORTS) * 2 - 1 + 4)
    (t200, q200), (t800, q800) = measured[200], measured[800]
    assert q800 <= q200 + 6 + 600 // 100, measured
    assert t800 / t200 < 10, measured  # linear ~4, quadratic ~16; a loose complexity check


# --- hardening: connections ---------------------------------------------------------------------------------


def _connect(srv) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    return s


def _read_until_closed(s: socket.socket, limit_s: float) -> tuple[bytes, float]:
    start, data = time.monotonic(), b""
    s.settimeout(limit_s)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data, time.monotonic() - start


def test_connections_have_time_and_size_limits(srv):
    lim = srv.limits
    # a client that connects and sends nothing is closed after the header timeout
    with _connect(srv) as s:
        data, took = _read_until_closed(s, lim.header_timeout_s + 5)
        assert data == b"" and took < lim.header_timeout_s + 3
    # a head sent one line at a time (slowloris): 408 when the head timeout passes, whatever it keeps sending
    with _connect(srv) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        start = time.monotonic()
        got = b""
        try:
            while time.monotonic() - start < lim.header_timeout_s + 4:
                s.sendall(b"X-Slow: 1\r\n")
                s.settimeout(0.3)
                try:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                except socket.timeout:
                    pass
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert got.startswith(b"HTTP/1.1 408"), got[:100]
        assert time.monotonic() - start < lim.header_timeout_s + 3
    # a body that trickles: 408 after the body timeout
    with _connect(srv) as s:
        s.sendall(b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\nAuthorization: Bearer " + SECRET.encode() + b"\r\n\r\n{")
        data, took = _read_until_closed(s, lim.body_timeout_s + 6)
        assert data.startswith(b"HTTP/1.1 408") and took < lim.body_timeout_s + 4, (data[:100], took)
    # an idle kept-alive connection is closed after the keep-alive time
    with _connect(srv) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data, took = _read_until_closed(s, lim.keep_alive_s + 5)
        assert b" 200 " in data.split(b"\r\n")[0] and took < lim.keep_alive_s + 3
    # a head over the size limit: 431 when it arrives whole, 400 when it is still arriving; connection closed
    with _connect(srv) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (lim.max_header_bytes * 2) + b"\r\n\r\n")
        data, _ = _read_until_closed(s, 5)
        assert data.startswith(b"HTTP/1.1 431"), data[:100]
    with _connect(srv) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (lim.max_header_bytes * 2))
        data, _ = _read_until_closed(s, 5)
        assert data.startswith(b"HTTP/1.1 400"), data[:100]
    # a body over the limit without a Content-Length (chunked): 413 once the limit is passed
    with srv.client() as c:
        def chunks():
            for _ in range(3):
                yield b" " * (512 * 1024)

        r = c.post("/api/submissions", content=chunks(), headers={**AUTH, "content-type": "application/json"})
        assert r.status_code == 413
        r = c.request("GET", "/", content=b"x" * (lim.max_body_bytes + 1))
        assert r.status_code == 413
    # more connections than allowed: the next request gets a 503
    idle = [_connect(srv) for _ in range(lim.max_connections)]
    try:
        time.sleep(0.2)
        with _connect(srv) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data, _ = _read_until_closed(s, 5)
            assert data.startswith(b"HTTP/1.1 503"), data[:100]
    finally:
        for s in idle:
            s.close()
    time.sleep(0.3)
    with srv.client() as c:
        assert c.get("/healthz").status_code == 200


def test_a_non_ascii_token_matches(tmp_path):
    secret = "tökén-ünïcödé-0123456789"
    (tmp_path / "tokens").write_text(f"zoë {secret}\n", encoding="utf-8")
    tokens = load_tokens(tmp_path / "tokens")
    with Store(f"sqlite:///{tmp_path / 't.sqlite'}") as store, serving(store, tokens) as served, served.client() as c:
        good = {"Authorization": b"Bearer " + secret.encode("utf-8")}
        bad = {"Authorization": b"Bearer " + secret.replace("ö", "o").encode("utf-8")}
        assert upload(c, dawnbench_doc(), dawnbench_tsv(), headers=bad).status_code == 401
        r = upload(c, dawnbench_doc(), dawnbench_tsv(), headers=good)
        assert r.status_code == 201, r.text
        assert store.get(r.json()["id"]).submitter == "zoë"


class _Proxy:
    """A TCP proxy to the PostgreSQL server: stopping it is an outage the server has to live through."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = None
        self.listener = None
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()

    def start(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", self.port or 0))
        self.port = self.listener.getsockname()[1]
        self.listener.listen(32)
        threading.Thread(target=self._accept, args=(self.listener,), daemon=True).start()

    def _accept(self, listener):
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stop(self):
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.listener.close()
        with self.lock:
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self.sockets = []


def test_a_database_outage_is_a_503_with_the_reason(tmp_path):
    """SQLite: the database's folder disappears. PostgreSQL: the connection to the server goes (a proxy stops)."""
    folder = tmp_path / "db"
    folder.mkdir()
    cases = [("sqlite", Store(f"sqlite:///{folder / 'x.sqlite'}"), None)]
    if os.environ.get(PG_ENV, "").strip():
        from sqlalchemy.engine import make_url

        from daybreak.leaderboard.store.database import normalize_url

        parsed = make_url(normalize_url(_pg_schema_url("daybreak_outage")))
        proxy = _Proxy((parsed.host or "127.0.0.1", parsed.port or 5432))
        proxy.start()
        cases.append(("postgresql", Store(parsed.set(port=proxy.port).render_as_string(hide_password=False)), proxy))
    for kind, store, proxy in cases:
        with serving(store) as served, served.client() as c:
            assert upload(c, dawnbench_doc("Before"), dawnbench_tsv()).status_code == 201
            assert c.get("/").status_code == 200
            if proxy is None:
                store.engine.dispose()
                shutil.rmtree(folder)
            else:
                proxy.stop()
                store.engine.dispose()
            # a page read in the last RECHECK_S is still answered from the cache; then the counters' read fails
            time.sleep(RECHECK_S + 0.1)
            for method, url in (("GET", "/"), ("GET", "/api/leaderboard/cifar10/train-time"), ("GET", "/entries/1"),
                                ("GET", "/healthz")):
                r = c.request(method, url)
                assert r.status_code == 503, (kind, url, r.status_code, r.text[:300])
                assert r.headers.get("retry-after") == "30"
                assert "database is unavailable" in r.text and "Traceback" not in r.text
            r = upload(c, dawnbench_doc("During"), dawnbench_tsv())
            assert r.status_code == 503 and "database is unavailable: cannot" in r.json()["error"], r.text
            assert "daybreak-test" not in r.text  # no password in the reason
            if proxy is not None:
                proxy.start()  # the server comes back: so does the site
                assert c.get("/").status_code == 200
        store.close()


# --- hardening: importing an untrusted folder ---------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_import_of_an_untrusted_folder(tmp_path, capsys):
    tree = tmp_path / "CIFAR10" / "train"
    tree.mkdir(parents=True)
    os.mkfifo(tree / "fifo.json")
    (tree / "leak.json").write_text(json.dumps(dawnbench_doc("Leak")))
    secret = tmp_path / "secret.txt"
    secret.write_text("root:SECRET-CONTENT:0:0\n")
    (tree / "leak.tsv").symlink_to(secret)
    (tree / "linked.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "elsewhere.json").write_text(json.dumps(dawnbench_doc("Elsewhere")))
    (tree / "sub").symlink_to(tmp_path, target_is_directory=True)
    evil = "evil\x1b[2J\x07\u202e.json"
    (tree / evil).write_text("{nope")
    (tree / "good.json").write_text(json.dumps(dawnbench_doc("Good")))
    (tree / "good.tsv").write_text(dawnbench_tsv())
    url = f"sqlite:///{tmp_path / 'u.sqlite'}"
    done = threading.Event()
    result = {}

    def run():
        result["code"] = main(["leaderboard", "import", str(tmp_path / "CIFAR10"), "--db", url])
        done.set()

    threading.Thread(target=run, daemon=True).start()
    assert done.wait(60), "the import hung (on the FIFO?)"
    out = capsys.readouterr()
    assert result["code"] == 1
    text = out.out + out.err
    assert "SECRET-CONTENT" not in text and "root:" not in text
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "evil\\x1b[2J\\x07\\u202e.json" in out.err
    lines = out.err.splitlines()
    assert any("fifo.json" in l and "not a regular file" in l for l in lines), lines
    assert any("leak.json" in l and "leak.tsv: a symbolic link (not followed)" in l for l in lines), lines
    assert any("linked.json" in l and "a symbolic link (not followed)" in l for l in lines), lines
    assert any(l.endswith("sub: a symbolic link to a folder (not followed)") for l in lines), lines
    assert "1 stored" in out.out
    with Store(url) as store:
        assert [e.model for e in store.entries()] == ["Good"]


# --- MNIST: gzip size cap -----------------------------------------------------------------------------------


def test_mnist_gz_is_decompressed_only_as_far_as_its_idx_header_says(tmp_path):
    from daybreak.data.mnist import read_idx
    from daybreak.errors import DataError

    payload = struct.pack(">BBBBI", 0, 0, 8, 1, 4) + bytes([1, 2, 3, 4])
    (tmp_path / "ok.gz").write_bytes(gzip.compress(payload))
    assert list(read_idx(tmp_path / "ok.gz")) == [1, 2, 3, 4]
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = bomb.compress(payload)
    zeros = b"\0" * (1 << 20)
    for _ in range(512):  # 512 MiB of zeros behind a header that declares 4 bytes
        data += bomb.compress(zeros)
    (tmp_path / "bomb.gz").write_bytes(data + bomb.flush())
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="decompresses to more than the 12 bytes its IDX header declares"):
            read_idx(tmp_path / "bomb.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024
    huge = struct.pack(">BBBBIII", 0, 0, 8, 3, 100_000, 100_000, 100_000)
    (tmp_path / "huge.gz").write_bytes(gzip.compress(huge))
    with pytest.raises(DataError, match="its IDX header declares 1,000,000,000,000,016 bytes"):
        read_idx(tmp_path / "huge.gz")


# --- multi-run entries --------------------------------------------------------------------------------------


def test_repeat_directories_are_one_entry_ranked_by_the_olympic_mean(srv, tmp_path):
    from daybreak.analysis.compare import compare_times
    from daybreak.analysis.stats import coefficient_of_variation, olympic_mean

    fast = write_repeat(tmp_path / "fast", [0.50, 0.52, 0.51, 0.49, 0.53], seed_start=0, cost=2.0)
    close = write_repeat(tmp_path / "close", [0.505, 0.53, 0.50, 0.515, 0.495], seed_start=10, cost=2.0)
    write_repeat(tmp_path / "slow", [0.70, 0.72, 0.69, 0.71, 0.73, 0.70], seed_start=20, cost=2.0,
                        unreached=(5,))
    report = import_paths(srv.store, [tmp_path])
    assert (report.stored, report.skipped) == (3, 0), report.to_json()
    with srv.client() as c:
        rows = [r for r in c.get("/api/leaderboard/digits/train-time?top=1000").json() if r["runs"]]
        by_n = {r["runs"]["n"]: r for r in rows}
        assert len(rows) >= 3
        slow_row = by_n[6]
        times = slow_row["runs"]["times_s"]
        assert len(times) == 5 and slow_row["runs"]["reached_fraction"] == pytest.approx(5 / 6)
        assert slow_row["value"] == pytest.approx(olympic_mean(times))
        assert slow_row["runs"]["cv"] == pytest.approx(coefficient_of_variation(times))
        assert slow_row["provenance"] == "daybreak-run"
        ranked = [r for r in c.get("/api/leaderboard/digits/train-time?top=1000&provenance=daybreak-run").json()]
        multi = [r for r in ranked if r["runs"]]
        # adjacent multi-run rows carry daybreak compare's Welch p-value
        for above, below in zip(ranked, ranked[1:]):
            if above["runs"] and below["runs"]:
                expected = compare_times(above["runs"]["times_s"], below["runs"]["times_s"])["welch_p"]
                assert below["p_value_vs_above"] == pytest.approx(expected)
                assert below["significant_vs_above"] == (expected < 0.05)
        verdicts = {r["runs"]["n"]: r["significant_vs_above"] for r in multi}
        assert verdicts[6] is True  # slow vs the one above it: clearly different
        assert False in [r["significant_vs_above"] for r in multi]  # fast vs close: not
        cost = [r for r in c.get("/api/leaderboard/digits/train-cost?top=1000").json() if r["runs"]]
        assert cost and cost[0]["value"] == pytest.approx(olympic_mean(cost[0]["runs"]["times_s"]) / 3600 * 2.0)
        page = c.get("/tasks/digits/train-time").text
        assert "5 runs &middot; CV" in page and "83.3% reached" in page
        assert "significant (Welch p = " in page and "not significant (Welch p = " in page
        entry = c.get(f"/entries/{slow_row['entry_id']}").text
        assert "6 runs, 5 reached the target" in entry and "olympic mean" in entry and "not_reached" in entry
        # the mean final accuracy against the target, as the nanoGPT speedrun judges a record (p < 0.01)
        from daybreak.analysis.stats import target_significance
        from daybreak.records.run import RunResult

        finals = [r.final_accuracy if r.final_accuracy is not None else r.history[-1].accuracy
                  for r in (RunResult.load(tmp_path / "slow" / f"seed-{s}") for s in range(20, 26))]
        sig = target_significance(finals, 0.98, alpha=0.01, confidence=0.99)
        document = c.get(f"/api/entries/{slow_row['entry_id']}").json()["document"]["accuracy_significance"]
        assert document["p_value"] == pytest.approx(sig.p_value) and document["significant"] == sig.significant
        assert document["n_at_or_above_target"] == 5 and document["n"] == 6
        assert (f"final accuracy: 5 of 6 runs at or above the target; mean {sig.mean * 100:.2f}% (99% CI "
                f"{sig.ci_low * 100:.2f}% to {sig.ci_high * 100:.2f}%)") in entry
    # a summary whose runs are missing, or that does not match them, is refused
    with pytest.raises(SubmissionError, match="needs the result.json of each of its 5 runs"):
        parse_submission((fast / "summary.json").read_bytes(), source="x")
    bad = json.loads((close / "summary.json").read_text())
    bad["time_to_target"]["olympic_mean_s"] = 0.001
    files = [(f"seed-{s}", (close / f"seed-{s}" / "result.json").read_bytes()) for s in range(10, 15)]
    with pytest.raises(SubmissionError, match="is not its runs'"):
        parse_submission(json.dumps(bad).encode(), source="x", run_files=files)
    two = write_repeat(tmp_path / "two" / "r", [0.5, 0.5, 0.5], seed_start=40, unreached=(1, 2))
    with pytest.raises(SubmissionError, match="1 of 3 runs reached the target .* the olympic mean needs at least 3"):
        parse_submission((two / "summary.json").read_bytes(), source="x",
                         run_files=[(f"seed-{s}", (two / f"seed-{s}" / "result.json").read_bytes())
                                    for s in (40, 41, 42)])


def test_a_repeat_upload_is_self_reported(srv, tmp_path):
    rep = write_repeat(tmp_path / "up", [0.6, 0.61, 0.62], seed_start=50)
    files = [("submission", ("summary.json", (rep / "summary.json").read_bytes()))]
    with srv.client() as c:
        r = c.post("/api/submissions", files=files, headers=AUTH)
        assert r.status_code == 422 and "needs the result.json of each of its 3 runs" in r.json()["error"]
        files += [("run", ("result.json", (rep / f"seed-{s}" / "result.json").read_bytes())) for s in (50, 51, 52)]
        r = c.post("/api/submissions", files=files, headers=AUTH)
        assert r.status_code == 201, r.text
        entry = c.get(f"/api/entries/{r.json()['id']}").json()
        assert entry["provenance"] == "self-reported" and entry["runs"]["n"] == 3


# --- reproduction -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_run(tmp_path_factory):
    """One real daybreak digits run (a few seconds on a CPU)."""
    from daybreak.train.runner import RunConfig, run

    out = tmp_path_factory.mktemp("digits-run") / "run"
    result = run(RunConfig(task="digits", recipe="digits", seed=3, out=out, quiet=True, threads=1))
    assert result.reached, result.status
    return out


def test_reproduce_a_daybreak_digits_entry_end_to_end(digits_run, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    assert main(["leaderboard", "import", str(digits_run), "--db", url, "-q"]) == 0
    capsys.readouterr()
    code = main(["leaderboard", "reproduce", "1", "--db", url, "--work-dir", str(tmp_path / "work"),
                 "--timeout", "600"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "reproduced: entry 2 reached the target" in out.out
    with Store(url) as store:
        original, repro = store.get(1), store.get(2)
        assert original.provenance == "reproduced" and original.reproduced_by == 2
        assert original.reproduction_status == "reproduced"
        assert original.reproduction_ratio == pytest.approx(repro.time_to_target_s / original.time_to_target_s)
        assert repro.provenance == "reproduced" and repro.reproduction_of == 1 and repro.submitter == "host"
        doc = repro.document
        assert (doc["seed"], doc["recipe"], doc["rules"], doc["world_size"]) == (3, "digits", "dawnbench", 1)
        assert doc["hyperparameters"] == store.get(1).document["hyperparameters"]
        rows = leaderboard(store, "digits", "train-time", provenance=["reproduced"])
        assert {r["entry_id"] for r in rows} == {1, 2}
        html = Site(store).entry_html(original)
        assert "Reproduced by the host" in html and "entry 2" in html
    assert main(["leaderboard", "reproduce", "2", "--db", url]) == 2
    assert "is the host's own reproduction of entry 1" in capsys.readouterr().err


def test_the_server_queues_reproductions_for_the_worker(srv, digits_run, tmp_path):
    from daybreak.leaderboard.reproduce.worker import WorkerOptions, work

    store = srv.store
    report = import_paths(store, [digits_run])
    entry_id = report.outcomes[0].entry_id
    dawnbench_id = store.add(parse_submission(json.dumps(dawnbench_doc("Not reproducible")).encode(),
                                              dawnbench_tsv().encode(), source="nr", task="cifar10"))[0]
    with srv.client() as c:
        assert c.post(f"/api/entries/{entry_id}/reproduce").status_code == 401
        r = c.post(f"/api/entries/{dawnbench_id}/reproduce", headers=AUTH)
        assert r.status_code == 422 and "names no daybreak recipe" in r.json()["error"]
        r = c.post(f"/api/entries/{entry_id}/reproduce", headers=AUTH)
        assert r.status_code == 202, r.text
        job = r.json()["job"]
        assert job["status"] == "queued"
        again = c.post(f"/api/entries/{entry_id}/reproduce", headers=AUTH)
        assert again.status_code == 200 and again.json()["job"]["id"] == job["id"]
        assert "queued" in c.get(f"/entries/{entry_id}").text
    # a job that cannot run fails with its reason (queued behind the server's back, e.g. by an older daybreak)
    failing, _ = store.enqueue(dawnbench_id, "test")
    logs = []
    finished = work(store, WorkerOptions(work_dir=tmp_path / "work", once=True, poll_s=0.1, timeout_s=600,
                                         log=logs.append)).finished
    assert finished == 2, logs
    with srv.client() as c:
        done = c.get(job["url"]).json()
        assert done["status"] == "done" and done["result_entry_id"], done
        assert done["reason"].startswith("reproduced: entry")
        failed = c.get(f"/api/jobs/{failing.id}").json()
        assert failed["status"] == "failed" and "names no daybreak recipe" in failed["reason"]
        row = c.get(f"/api/entries/{entry_id}").json()
        assert row["provenance"] == "reproduced" and row["reproduced_by"] == done["result_entry_id"]
        page = c.get(f"/entries/{entry_id}").text
        assert "Reproduced by the host" in page and f"job {job['id']}: <strong>done</strong>" in page


def _as_entry(doc: dict, source_format: str = "daybreak.run"):
    from types import SimpleNamespace

    return SimpleNamespace(id=5, kind="train", source_format=source_format, document=doc, reproduction_of=None)


def test_the_reproduction_plan_is_the_recorded_configuration():
    from daybreak.leaderboard.reproduce.plan import plan_for

    doc = run_doc(seed=12, world_size=4, hyperparameters={**run_doc()["hyperparameters"], "epochs": 20, "lr": 0.05})
    doc["rules"], doc["eval_every_steps"] = "mlperf", 50
    plan = plan_for(_as_entry(doc))
    cmd = plan.runs[0].command(Path("/tmp/out"), python="python", cost_per_hour=2.5)
    assert cmd[:4] == ["python", "-m", "daybreak", "run"]
    joined = " ".join(cmd)
    assert "digits --recipe digits --seed 12 --rules mlperf --out /tmp/out --quiet" in joined
    assert "--set epochs=20 --set lr=0.05" in joined and "--eval-every-steps 50" in joined
    assert "--nproc-per-node 4" in joined and "--cost-per-hour 2.5" in joined
    assert "batch_size" not in joined  # only what differs from the recipe's defaults
    assert plan.describe() == "digits / digits (epochs=20 lr=0.05), seed 12, mlperf rules, 4 devices"


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d["hyperparameters"].update(rm_rf=1), "'rm_rf' is not one of recipe digits's"),
    (lambda d: d["hyperparameters"].update(epochs="12; rm -rf /"), "is not a int like recipe digits's"),
    (lambda d: d["hyperparameters"].update(epochs=10**9), "within 1e+06 for numbers"),
    (lambda d: d["hyperparameters"].update(augment=1), "is not a bool"),
    (lambda d: d.update(recipe="mnist"), "recipe mnist is for task mnist, not digits"),
    (lambda d: d.update(recipe="external", device="external"), "external program"),
    (lambda d: d.update(world_size=1000), "the host reproduces runs of 1 to 64"),
    (lambda d: d.update(seed=-1), "seed -1 is not in 0..2**32-1"),
    (lambda d: d.update(task="squad", recipe="squad_bert_base", metric="f1",
                        hyperparameters={"init_from": "/etc"}), "init_from"),
])
def test_what_the_host_will_not_run(change, fragment):
    from daybreak.leaderboard.reproduce.plan import ReproduceError, plan_for

    doc = run_doc(seed=13)
    change(doc)
    with pytest.raises(ReproduceError) as err:
        plan_for(_as_entry(doc))
    assert fragment in str(err.value) and single_line(str(err.value)), str(err.value)
    with pytest.raises(ReproduceError, match="names no daybreak recipe"):
        plan_for(_as_entry(dawnbench_doc(), "dawnbench-v1"))


def test_jobs_survive_a_restart_and_failures_are_recorded(tmp_path, digits_run):
    from sqlalchemy import update

    from daybreak.leaderboard.reproduce.worker import WorkerOptions, work
    from daybreak.leaderboard.store.database import Job

    url = f"sqlite:///{tmp_path / 'jobs.sqlite'}"
    with Store(url) as store:
        entry_id = import_paths(store, [digits_run]).outcomes[0].entry_id
        job, _ = store.enqueue(entry_id, "test")
        # a worker took it and died: the row says running, its heartbeat is old
        claimed = store.claim_job("dead-worker")
        assert claimed.id == job.id
        with store.engine.begin() as conn:
            conn.execute(update(Job).where(Job.id == job.id).values(
                heartbeat_at=datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(hours=1)))
    # a new process, a new worker: the job is queued again and runs; it ran past its time limit: failed, with why
    with Store(url) as store:
        logs = []
        assert work(store, WorkerOptions(work_dir=tmp_path / "w", once=True, timeout_s=0.5, stale_after_s=60,
                                         log=logs.append)).finished == 1
        row = store.get_job(job.id)
        assert row.status == "failed" and row.attempts == 2, (row.status, row.reason, logs)
        assert "longer than the 0.5 s limit" in row.reason
        assert any("its worker stopped; queued again" in line for line in logs), logs
        # a second worker waits while one holds the lease
        assert store.acquire_lease("reproduce", "other-worker", 60)
        store.enqueue(entry_id, "test")
        assert work(store, WorkerOptions(work_dir=tmp_path / "w", once=True, log=logs.append)).finished == 0
        assert any("another worker is running reproductions" in line for line in logs)
        store.release_lease("reproduce", "other-worker")


def test_worker_and_reproduce_commands(tmp_path, capsys, digits_run):
    url = f"sqlite:///{tmp_path / 'c.sqlite'}"
    assert main(["leaderboard", "import", str(digits_run), "--db", url, "-q"]) == 0
    assert main(["leaderboard", "reproduce", "1", "--queue", "--db", url]) == 0
    assert "queued: job 1 reproduces entry 1 (digits / digits" in capsys.readouterr().out
    assert main(["leaderboard", "reproduce", "1", "--queue", "--db", url]) == 0
    assert "already queued: job 1" in capsys.readouterr().out
    assert main(["leaderboard", "reproduce", "²", "--db", url]) == 2
    assert main(["leaderboard", "reproduce", "99", "--db", url]) == 2
    assert "no entry 99" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "daybreak", "leaderboard", "worker", "--once", "--db", url,
                           "--work-dir", str(tmp_path / "w"), "--timeout", "1"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "job 1: failed: run 1/1 took longer than the 1 s limit and was stopped" in proc.stderr
    assert "worker finished 1 job(s)" in proc.stderr


# --- migration ----------------------------------------------------------------------------------------------

_V1_COLUMNS = [
    ("content_hash", "VARCHAR(64) NOT NULL UNIQUE"), ("kind", "VARCHAR(16)"), ("task", "VARCHAR(32)"),
    ("source_format", "VARCHAR(32)"), ("source", "VARCHAR(500)"), ("submitter", "VARCHAR(100)"),
    ("model", "VARCHAR(1000)"), ("hardware", "VARCHAR(1000)"), ("framework", "VARCHAR(1000)"),
    ("author", "VARCHAR(1000)"), ("author_email", "VARCHAR(1000)"), ("code_url", "VARCHAR(1000)"),
    ("submitted_at", "TIMESTAMP"), ("imported_at", "TIMESTAMP"), ("metric", "VARCHAR(16)"),
    ("target", "DOUBLE PRECISION"), ("accuracy", "DOUBLE PRECISION"), ("accuracy_unit", "VARCHAR(16)"),
    ("time_to_target_s", "DOUBLE PRECISION"), ("epochs_to_target", "DOUBLE PRECISION"),
    ("cost_per_hour", "DOUBLE PRECISION"), ("train_cost_usd", "DOUBLE PRECISION"),
    ("latency_ms", "DOUBLE PRECISION"), ("cost_per_example_usd", "DOUBLE PRECISION"),
    ("inference_cost_10k_usd", "DOUBLE PRECISION"), ("curve_json", "TEXT"), ("tsv_columns_json", "TEXT"),
    ("document_json", "TEXT"), ("notes_json", "TEXT"),
]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_version_1_database_is_upgraded_in_place(kind, tmp_path):
    from sqlalchemy import create_engine, text

    from daybreak.leaderboard.store.database import normalize_url

    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'v1.sqlite'}"
        pk = "id INTEGER PRIMARY KEY AUTOINCREMENT"
    else:
        url = _pg_schema_url("daybreak_migration")
        pk = "id SERIAL PRIMARY KEY"
    engine = create_engine(normalize_url(url))
    with engine.begin() as conn:
        conn.execute(text(f"CREATE TABLE daybreak_leaderboard_entries ({pk}, "
                          + ", ".join(f"{n} {t}" for n, t in _V1_COLUMNS) + ")"))
        common = dict(kind="train", task="digits", source="s", model="m", hardware="h", framework="f", author="",
                      author_email="", code_url="", submitted_at=datetime(2019, 1, 1), imported_at=datetime(2020, 1, 1),
                      metric="top1", target=0.98, accuracy=0.99, accuracy_unit="fraction", curve_json="[]",
                      tsv_columns_json="[]", notes_json="[]", epochs_to_target=1.0)
        rows = [
            dict(common, content_hash="a", source_format="daybreak.run", submitter=None, time_to_target_s=5.0,
                 train_cost_usd=float("inf"), cost_per_hour=1e300, document_json=json.dumps({"recipe": "digits"})),
            dict(common, content_hash="b", source_format="daybreak.run", submitter="alice", time_to_target_s=4.0,
                 train_cost_usd=1.0, cost_per_hour=1.0, document_json=json.dumps({"recipe": "digits"})),
            dict(common, content_hash="c", source_format="daybreak.run", submitter=None, time_to_target_s=3.0,
                 train_cost_usd=None, cost_per_hour=None, document_json=json.dumps({"recipe": "external"})),
        ]
        for row in rows:
            names = ", ".join(row)
            conn.execute(text(f"INSERT INTO daybreak_leaderboard_entries ({names}) VALUES "
                              f"({', '.join(':' + k for k in row)})"), row)
    engine.dispose()
    with Store(url) as store:
        assert store.migrated and "from schema v1 to v6" in store.migrated[0] and "energy" in store.migrated[0]
        by_hash = {e.content_hash: e for e in store.entries()}
        assert by_hash["a"].provenance == "daybreak-run" and by_hash["a"].train_cost_usd is None
        assert by_hash["a"].cost_per_hour is None and by_hash["a"].ranked_at == datetime(2019, 1, 1)
        assert by_hash["b"].provenance == "self-reported" and by_hash["b"].ranked_at == datetime(2020, 1, 1)
        assert by_hash["c"].provenance == "self-reported" and "daybreak time" in by_hash["c"].provenance_detail
        assert [r["value"] for r in leaderboard(store, "digits", "train-time")] == [3.0, 4.0, 5.0]
        assert Site(store).index_html()
    with Store(url) as store:
        assert not store.migrated  # once
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE daybreak_leaderboard_meta SET value = '99' WHERE key = 'schema_version'"))
    with pytest.raises(StoreError, match="holds leaderboard schema v99, newer than this daybreak's v6"):
        Store(url)


# --- fuzzing a running server -------------------------------------------------------------------------------

_odd_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["²", "١٢٣", "Ⅻ", "-1", "0", "+5", " 7", "1e3", "0x10", "1_000", "NaN", "inf", "%00", "..",
                     "../x",
                     str(2**63), str(2**64), "9" * 25, "9" * 5000, "reproduced", "self-reported,reproduced", ",",
                     "daybreak-run,,", "\u202e"]),
    st.integers(-2**70, 2**70).map(str),
)


@st.composite
def odd_requests(draw):
    x, y, z = draw(_odd_text), draw(_odd_text), draw(_odd_text)
    q = lambda s: quote(s, safe="")  # noqa: E731
    return draw(st.sampled_from([
        f"/entries/{q(x)}", f"/api/entries/{q(x)}", f"/api/jobs/{q(x)}", f"/tasks/{q(x)}/{q(y)}",
        f"/tasks/cifar10/train-time?page={q(x)}&provenance={q(y)}",
        f"/api/leaderboard/cifar10/{q(x)}?top={q(y)}", f"/api/leaderboard/digits/train-time?top={q(x)}&offset={q(y)}"
        f"&provenance={q(z)}", f"/?provenance={q(x)}", f"/api/leaderboard/{q(x)}/latency",
    ]))


def test_fuzzed_requests_never_get_a_server_error(srv):
    seen = []
    with srv.client() as c:
        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
        @given(url=odd_requests())
        def check(url):
            r = c.get(url)
            seen.append(r.status_code)
            assert r.status_code < 500, (url, r.status_code, r.text[:300])

        check()
    assert len(seen) >= 150 and all(code < 500 for code in seen)


_NUMBERS = st.one_of(st.sampled_from([0, -1, 1e-300, 1e15, 1e16, 9e15, 2**53 + 1, 1e308, -1e308, 5e-324,
                                      1.7976931348623157e308, 10**20, 10**400]),
                     st.floats(allow_nan=False, allow_infinity=False), st.integers(-2**80, 2**80))


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield prefix


def _put(doc, path, value):
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


@st.composite
def fuzzed_uploads(draw):
    """A valid upload (DAWNBench train/inference, result.json) with one class of damage: an extreme number
    anywhere, a raw number beyond the float range, a history rescaled, a date out of range, a required field
    null, a duplicated key, a huge TSV header."""
    which = draw(st.sampled_from(["dawnbench", "inference", "run"]))
    seed = draw(st.integers(1000, 10**6))
    if which == "run":
        doc, tsv = run_doc(seed=seed % 10_000, epoch_s=0.5 + (seed % 97) / 100, run_id=f"fz-{seed}"), None
    elif which == "inference":
        doc, tsv = {**dawnbench_doc(f"I{seed}"), "latency": 1.5, "cost": 1e-6, "top1Accuracy": 95.0}, None
        del doc["costPerHour"]
    else:
        doc, tsv = dawnbench_doc(f"D{seed}"), dawnbench_tsv()
    how = draw(st.sampled_from(["number", "raw", "scale", "date", "null", "dupkey", "header", "none"]))
    raw = None
    if how == "number":
        _put(doc, draw(st.sampled_from(list(_paths(doc)))), draw(_NUMBERS))
    elif how == "raw":
        text = json.dumps(doc)
        numbers = list(re.finditer(r"(?<=[:\[ ])-?\d+(\.\d+)?([eE][-+]?\d+)?(?=[,\]}])", text))
        m = draw(st.sampled_from(numbers))
        raw = (text[: m.start()] + draw(st.sampled_from(["1e999", "-1e400", "9" * 400, "1" + "0" * 30]))
               + text[m.end():]).encode()
    elif how == "scale" and which == "run":
        factor = draw(st.sampled_from([1e-3, 1e-300, 1e3, 1e300, 0.0]))
        for h in doc["history"]:
            h["elapsed_s"] *= factor
            h["clock_s"] = {k: v * factor for k, v in h["clock_s"].items()}
    elif how == "scale" and tsv is not None:
        tsv = dawnbench_tsv(hours=tuple(h * draw(st.sampled_from([1e-300, 1e300, 1e7])) for h in (0.01, 0.02, 0.03)))
    elif how == "date":
        when = draw(st.sampled_from(["0001-01-01", "1999-12-31", "2016-12-31", "9999-12-31", "2999-01-01"]))
        if which == "run":
            doc[draw(st.sampled_from(["started_at", "finished_at"]))] = when + "T00:00:00Z"
        else:
            doc["timestamp"] = when
    elif how == "null":
        keys = ["model", "run_id", "task", "history", "system"] if which == "run" else \
            ["author", "model", "hardware", "framework", "timestamp"]
        doc[draw(st.sampled_from(keys))] = None
    elif how == "dupkey":
        key = draw(st.sampled_from(sorted(doc)))
        raw = ("{" + json.dumps(key) + ": " + json.dumps(doc[key]) + ", " + json.dumps(doc)[1:]).encode()
    elif how == "header" and tsv is not None:
        tsv = "epoch\t" * draw(st.integers(7, 100_000)) + "\n1\n"
    return which, raw if raw is not None else json.dumps(doc).encode(), tsv


def test_fuzzed_uploads_get_4xx_or_are_stored_and_rejected_ones_store_nothing(srv):
    store = srv.store
    before = store.count()
    counts = {"created": 0, "duplicate": 0, "rejected": 0}
    with srv.client() as c:
        @settings(max_examples=120, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                         HealthCheck.data_too_large])
        @given(case=fuzzed_uploads())
        def check(case):
            which, raw, tsv = case
            if tsv is not None:
                r = upload(c, raw, tsv, task="cifar10")
            else:
                r = post_json(c, raw) if which == "run" else c.post(
                    "/api/submissions?task=cifar10", content=raw, headers={**AUTH, "content-type": "application/json"})
            assert r.status_code < 500, (r.status_code, r.text[:300])
            if r.status_code == 201:
                counts["created"] += 1
            elif r.status_code == 200:
                counts["duplicate"] += 1
            else:
                assert 400 <= r.status_code < 500 and single_line(r.json()["error"])
                counts["rejected"] += 1

        check()
        assert counts["rejected"] > 30, counts
        assert store.count() - before == counts["created"], counts
        for url in ("/", "/tasks/cifar10/train-cost", "/tasks/digits/train-time", "/api/leaderboard/cifar10/train-cost",
                    "/api/leaderboard/cifar10/inference-cost"):
            r = c.get(url)
            assert r.status_code == 200 and "$inf" not in r.text, url


def test_concurrent_uploads_store_valid_ones_once_and_rejected_ones_never(srv):
    store = srv.store
    before = store.count()
    valid = [dawnbench_doc(f"Load {i}", date="2020-01-%02d" % (1 + i % 28)) for i in range(40)]
    invalid = [dawnbench_doc(f"Bad {i}", author=None) for i in range(20)] + \
              [dawnbench_doc(f"Old {i}", date="2016-06-01") for i in range(20)]
    jobs = [(d, 201) for d in valid] + [(d, 200) for d in valid[:20]] + [(d, 422) for d in invalid]

    def post(job):
        doc, _ = job
        with srv.client() as c:
            return upload(c, doc, dawnbench_tsv()).status_code

    with ThreadPoolExecutor(max_workers=12) as pool:
        codes = list(pool.map(post, jobs))
    assert all(code < 500 for code in codes), codes
    assert sorted(codes).count(422) == 40 and codes.count(201) == 40 and codes.count(200) == 20, codes
    assert store.count() - before == 40


# --- the page, in a browser ---------------------------------------------------------------------------------


def test_provenance_badges_and_multirun_rows_in_headless_chromium(srv, tmp_path):
    """The three badges, a multi-run row pair with its significance line and a reproduced entry, as a browser
    renders them (DOM and a screenshot; DAYBREAK_SCREENSHOT_DIR keeps the PNGs)."""
    browser = chromium_or_skip()
    if srv.kind != "sqlite":
        pytest.skip("one screenshot is enough (the SQLite server)")
    store = srv.store
    write_repeat(tmp_path / "shot-a", [0.40, 0.41, 0.42, 0.39, 0.40], seed_start=60, cost=3.0)
    write_repeat(tmp_path / "shot-b", [0.402, 0.43, 0.395, 0.41, 0.40], seed_start=70, cost=3.0)
    write_repeat(tmp_path / "shot-c", [0.55, 0.56, 0.54, 0.57, 0.55, 0.56], seed_start=80, cost=3.0, unreached=(2,))
    import_paths(store, [tmp_path / "shot-a", tmp_path / "shot-b", tmp_path / "shot-c"])
    original_dir = tmp_path / "shot-run"
    original_dir.mkdir()
    synth_run(seed=90, epoch_s=0.45, cost=3.0).save(original_dir)
    original = import_paths(store, [original_dir]).outcomes[0].entry_id
    repro = parse_submission(synth_run(seed=90, epoch_s=0.6, cost=3.0, run_id="host-90").model_dump_json().encode(),
                             source="reproduction of entry %d" % original)
    repro.submitter = "host"
    store.add_reproduction(original, repro)
    with srv.client() as c:
        uploaded = json.dumps(run_doc(seed=91, epoch_s=0.47, cost=3.0, run_id="up-91")).encode()
        assert post_json(c, uploaded).status_code == 201
    url = f"{srv.base}/tasks/digits/train-time"
    dom = chromium(browser, tmp_path / "p1", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    rows = re.findall(r'<tr data-entry="(\d+)" data-provenance="([a-z-]+)">', dom.stdout)
    assert {p for _, p in rows} == {"reproduced", "daybreak-run", "self-reported"}, rows
    for badge in ("reproduced", "daybreak-run", "self-reported"):
        assert re.search(rf'<td class="prov"><span class="badge prov-{badge}"', dom.stdout), badge
    assert "5 runs · CV" in dom.stdout and "83.3% reached" in dom.stdout and "Welch p =" in dom.stdout
    assert "host time ×" in dom.stdout
    for name, page in (("leaderboard-provenance.png", url), ("leaderboard-reproduced-entry.png",
                                                             f"{srv.base}/entries/{original}")):
        screenshot(browser, page, tmp_path / name, "1400,1000", keep_as=name)
    entry_dom = chromium(browser, tmp_path / "p3", "--dump-dom", f"{srv.base}/entries/{original}").stdout
    assert 'class="badge prov-reproduced"' in entry_dom and "Reproduced by the host" in entry_dom
