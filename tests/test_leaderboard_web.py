"""The leaderboard web site: pages, JSON API, submissions (tokens, limits, malformed uploads), static export,
parallel uploads over loopback, and a headless Chromium look at the index page."""

import json
import os
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from daybreak.errors import ConfigError
from daybreak.leaderboard.ingest.importer import import_paths, parse_submission
from daybreak.leaderboard.ranking.query import SORTS
from daybreak.leaderboard.web.export import export_site
from daybreak.leaderboard.web.pages import Site
from daybreak.leaderboard.store.database import Store
from daybreak.leaderboard.ingest.submission import SubmissionError
from daybreak.leaderboard.web.app import Token, create_app, load_tokens
from daybreak.leaderboard.web.limits import Limits

pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from conftest import chromium, chromium_or_skip, screenshot, single_line  # noqa: E402

ENTRIES = Path(os.environ.get("DAYBREAK_DAWNBENCH_ENTRIES")
               or Path(__file__).resolve().parents[2] / "shared/data/dawnbench-entries")
SECRET = "s3cret-token-for-tests-0123456789"
AUTH = {"Authorization": f"Bearer {SECRET}"}
XSS_MODEL = '<script>alert("model")</script>'
XSS_HARDWARE = '"><img src=x onerror=alert(1)>'


def train_doc(model="ResNet 9", date="2019-01-01", cost=3.06, **extra) -> dict:
    doc = {"version": "v1.0", "author": "A. Person", "authorEmail": "a@example.com", "framework": "PyTorch 1.0",
           "codeURL": "https://example.com/x", "model": model, "hardware": "1 V100", "timestamp": date,
           "costPerHour": cost, "misc": {"note": "<b>not bold</b>"}}
    doc.update(extra)
    return doc


def train_tsv(hours=(0.01, 0.02, 0.03), accuracies=(80.0, 93.0, 94.2)) -> str:
    return "epoch\thours\ttop1Accuracy\n" + "".join(
        f"{i + 1}\t{h}\t{a}\n" for i, (h, a) in enumerate(zip(hours, accuracies)))


def upload(client, doc, tsv=None, task="cifar10", headers=AUTH):
    files = {"submission": ("entry.json", json.dumps(doc).encode(), "application/json")}
    if tsv is not None:
        files["tsv"] = ("entry.tsv", tsv.encode() if isinstance(tsv, str) else tsv, "text/tab-separated-values")
    data = {"task": task} if task else {}
    return client.post("/api/submissions", files=files, data=data, headers=headers)


@pytest.fixture
def store(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'web.sqlite'}") as s:
        yield s


@pytest.fixture
def client(store):
    with TestClient(create_app(store, tokens=[Token("tester", SECRET.encode())])) as c:
        yield c


# --- pages and API ------------------------------------------------------------------------------------------


class Tables(HTMLParser):
    """Rows of every ranking table: {(task, objective): [[cell text, ...], ...]} (empty tables: [])."""

    def __init__(self):
        super().__init__()
        self.tables: dict = {}
        self._current = None
        self._row = None
        self._cell = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-objective" in a and tag in ("table", "p"):
            self.tables[(a["data-task"], a["data-objective"])] = []
            self._current = (a["data-task"], a["data-objective"]) if tag == "table" else None
        elif tag == "tr" and self._current and "data-entry" in a:
            self._row = []
        elif tag == "td" and self._row is not None:
            self._cell = ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += " " + data

    def handle_endtag(self, tag):
        if tag == "td" and self._row is not None and self._cell is not None:
            self._row.append(" ".join(self._cell.split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._current].append(self._row)
            self._row = None
        elif tag == "table":
            self._current = None


def tables_of(html: str) -> dict:
    parser = Tables()
    parser.feed(html)
    return parser.tables


def test_pages_and_api(client, store):
    assert upload(client, train_doc("Fast", cost=2.0), train_tsv((0.1, 0.2, 0.3))).status_code == 201
    assert upload(client, train_doc("Slow", cost=None), train_tsv((1, 2, 3))).status_code == 201
    infer = {**train_doc("Infer"), "latency": 0.5, "cost": 2e-6, "top1Accuracy": 0.95}
    del infer["costPerHour"]
    assert client.post("/api/submissions?task=cifar10", json=infer, headers=AUTH).status_code == 201

    index = client.get("/")
    assert index.status_code == 200 and "text/html" in index.headers["content-type"]
    assert "default-src 'none'" in index.headers["content-security-policy"]
    tables = tables_of(index.text)
    assert len(tables) == 5 * 6  # every task x objective (four DAWNBench, two energy), empty ones too
    assert [r[:3] for r in tables[("cifar10", "train-time")]] == [["1", "0:18:00", "Fast A. Person"],
                                                                  ["2", "3:00:00", "Slow A. Person"]]
    assert [r[:2] for r in tables[("cifar10", "train-cost")]] == [["1", "$0.60"]]
    assert [r[:2] for r in tables[("cifar10", "latency")]] == [["1", "0.5000"]]
    assert [r[:2] for r in tables[("cifar10", "inference-cost")]] == [["1", "$0.02"]]
    assert tables[("imagenet", "train-time")] == [] and tables[("mnist", "latency")] == []

    board = client.get("/tasks/cifar10/train-time")
    assert board.status_code == 200 and len(tables_of(board.text)[("cifar10", "train-time")]) == 2
    assert client.get("/tasks/cifar10/nope").status_code == 404
    assert client.get("/tasks/../etc/passwd").status_code == 404

    rows = client.get("/api/leaderboard/cifar10/train-time").json()
    assert [(r["rank"], r["model"], r["display"], r["value"]) for r in rows] == [
        (1, "Fast", "0:18:00", pytest.approx(1080.0)), (2, "Slow", "3:00:00", pytest.approx(10800.0))]
    assert {"rank", "value", "display", "model", "hardware", "framework", "date", "source"} <= set(rows[0])
    assert rows[0]["source"] == "upload:entry.json"
    assert len(client.get("/api/leaderboard/cifar10/train-time?top=1").json()) == 1
    assert client.get("/api/leaderboard/cifar10/train-time?top=0").status_code == 400
    assert client.get("/api/leaderboard/nope/train-time").status_code == 404
    tasks = client.get("/api/tasks").json()  # the catalog's five, then one board per MLPerf benchmark
    assert len([t for t in tasks if t["clock_rules"] == "dawnbench"]) == 5 and "mlperf-bert" in {t["name"] for t in tasks}

    entry_id = rows[0]["entry_id"]
    page = client.get(f"/entries/{entry_id}")
    assert page.status_code == 200 and "<svg" in page.text and "<polyline" in page.text
    assert "rank 1 of 2" in page.text and "&lt;b&gt;not bold&lt;/b&gt;" in page.text
    data = client.get(f"/api/entries/{entry_id}").json()
    assert data["model"] == "Fast" and data["curve"][-1][0] == 0.3 and data["submitter"] == "tester"
    assert client.get("/entries/99999").status_code == 404 and client.get("/entries/abc").status_code == 404
    assert client.get("/api/entries/99999").status_code == 404
    assert client.get("/healthz").json() == {"ok": True, "entries": 3}


def test_everything_from_a_submission_is_escaped(client, store):
    doc = train_doc(XSS_MODEL, hardware=XSS_HARDWARE, framework="<iframe src=//evil>", author="</td><script>x",
                    codeURL="javascript:alert(1)")
    r = upload(client, doc, train_tsv())
    assert r.status_code == 201, r.text
    entry_id = r.json()["id"]
    for url in ("/", f"/entries/{entry_id}", "/tasks/cifar10/train-time"):
        html = client.get(url).text
        assert "<script>alert" not in html and "<img src=x" not in html and "<iframe" not in html
        assert "<script>" not in html and 'href="javascript:' not in html
        assert "&lt;script&gt;alert(&#34;model&#34;)&lt;/script&gt;" in html
    assert 'href="javascript:' not in client.get(f"/entries/{entry_id}").text
    assert client.get("/api/leaderboard/cifar10/train-time").json()[0]["model"] == XSS_MODEL  # JSON keeps the text


def test_static_export_writes_the_same_pages(tmp_path, client, store):
    upload(client, train_doc(XSS_MODEL), train_tsv())
    out = tmp_path / "site"
    count = export_site(Site(store), out)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    # a board with rows also gets a page per sort column and order (but its own) and per value of accelerator,
    # framework, year and provenance (one each here); cifar10's train-time and train-cost boards have a row
    variants = len(SORTS) * 2 - 1 + 4
    assert count == len(files) == 1 + 5 * 6 * 2 + 1 + 2 + 2 * variants
    assert "entries/1.html" in files and "tasks/squad/latency.html" in files and "api/entries/1.json" in files
    index = (out / "index.html").read_text()
    assert tables_of(index)[("cifar10", "train-time")][0][1] == "0:01:48"
    assert 'href="entries/1.html"' in index and 'href="tasks/cifar10/train-time.html"' in index
    assert "<script>" not in index and "&lt;script&gt;" in index
    entry = (out / "entries" / "1.html").read_text()
    assert 'href="../index.html"' in entry and 'href="../tasks/cifar10/train-time.html"' in entry
    assert json.loads((out / "api/leaderboard/cifar10/train-time.json").read_text())[0]["model"] == XSS_MODEL


def test_export_command(tmp_path, capsys):
    from daybreak.cli import main

    url = f"sqlite:///{tmp_path / 'x.sqlite'}"
    Store(url).close()  # export reads an existing leaderboard (an empty one here); it never creates one
    assert main(["leaderboard", "export", str(tmp_path / "site"), "--db", url]) == 0
    assert "wrote 62 files" in capsys.readouterr().out and (tmp_path / "site" / "index.html").is_file()
    # a symbolic link in the output tree (issue 29: export wrote through it) is refused before anything is written
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = tmp_path / "site2"
    site.mkdir()
    (site / "tasks").symlink_to(elsewhere, target_is_directory=True)
    assert main(["leaderboard", "export", str(site), "--db", url]) == 2
    err = capsys.readouterr().err
    assert f"{site / 'tasks'}: a symbolic link in the export's folder" in err and single_line(err)
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in site.iterdir()) == ["tasks"]
    (site / "tasks").unlink()
    (site / "index.html").symlink_to(elsewhere / "index.html")  # a link as a file the export writes
    with Store(url) as store:
        with pytest.raises(ConfigError, match="index.html: a symbolic link"):
            export_site(Site(store), site)
    assert not (elsewhere / "index.html").exists()
    # the folder named on the command line may itself be a link
    (site / "index.html").unlink()
    (tmp_path / "link-to-site").symlink_to(site, target_is_directory=True)
    assert main(["leaderboard", "export", str(tmp_path / "link-to-site"), "--db", url]) == 0


def test_a_folder_swapped_for_a_link_mid_export_redirects_nothing(tmp_path, store, monkeypatch):
    """Issue 38: the export checked for links, then wrote by path: ``entries/`` swapped for a link once the export
    had begun writing into it sent the rest outside (46 files). Now every file is written through the descriptor
    of the folder the export opened: the rest land in that folder, wherever it was moved; nothing outside."""
    from daybreak.leaderboard.ingest.importer import parse_submission

    for i in range(6):
        store.add(parse_submission(json.dumps(train_doc(f"Swap {i}", date=f"2019-01-0{i + 1}")).encode(),
                                   train_tsv(hours=(0.01, 0.02, 0.03 + i / 100)).encode(), source=f"s{i}",
                                   task="cifar10"))
    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    real_entry_html, calls = Site.entry_html, []

    def swap_after_the_first_entry(self, entry, *args, **kwargs):
        calls.append(entry.id)
        if len(calls) == 2:  # entries/1.html is written: the export holds entries/ open
            (site / "entries").rename(site / "moved")
            (site / "entries").symlink_to(elsewhere, target_is_directory=True)
        return real_entry_html(self, entry, *args, **kwargs)

    monkeypatch.setattr(Site, "entry_html", swap_after_the_first_entry)
    export_site(Site(store), site)
    assert len(calls) == 6 and list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in (site / "moved").iterdir()) == [f"{i}.html" for i in range(1, 7)]


# --- submissions: tokens, formats, limits -------------------------------------------------------------------


def test_submissions_need_a_valid_token(store):
    with TestClient(create_app(store)) as closed:
        r = upload(closed, train_doc(), train_tsv())
        assert r.status_code == 403 and "without --token-file" in r.json()["error"]
    with TestClient(create_app(store, tokens=[Token("t", SECRET.encode())])) as c:
        assert upload(c, train_doc(), train_tsv(), headers={}).status_code == 401
        r = upload(c, train_doc(), train_tsv(), headers={"Authorization": "Bearer wrong-token-wrong-token"})
        assert r.status_code == 401 and r.json() == {"error": "invalid submitter token"}
        assert r.headers["www-authenticate"] == "Bearer"
        # one way to send a token (issue 29: an undocumented second header was read too)
        r = upload(c, train_doc(), train_tsv(), headers={"X-Daybreak-Token": SECRET})
        assert r.status_code == 401 and "X-Daybreak-Token is not read" in r.json()["error"]
        assert upload(c, train_doc(), train_tsv(), headers={"Authorization": f"bearer {SECRET}"}).status_code == 201
    assert store.count() == 1


def test_token_file(tmp_path):
    f = tmp_path / "tokens"
    f.write_text(f"# submitters\nalice {SECRET}\n\n{SECRET}-2\n")
    tokens = load_tokens(f)
    assert [t.name for t in tokens] == ["alice", "token-4"]
    f.write_text("short\n")
    with pytest.raises(Exception, match="shorter than 16 characters"):
        load_tokens(f)
    with pytest.raises(Exception, match="cannot read the token file"):
        load_tokens(tmp_path / "missing")


def test_duplicates_and_formats(client, store, tmp_path):
    r1 = upload(client, train_doc(), train_tsv())
    r2 = upload(client, train_doc(), train_tsv().replace("\n", "\r\n"))  # same content, other line ends
    assert (r1.status_code, r2.status_code) == (201, 200)
    assert r2.json()["duplicate"] is True and r2.json()["id"] == r1.json()["id"]
    # a DAWNBench JSON saying its own task (daybreak's dawnbench.json) needs no task field
    own = train_doc(misc={"daybreakTask": "digits"})
    assert upload(client, own, train_tsv(accuracies=(50, 98.5, 99)), task=None).status_code == 201
    # text fields instead of files work too
    r = client.post("/api/submissions", data={"submission": json.dumps(train_doc("Text")), "tsv": train_tsv(),
                                              "task": "cifar10"}, files={"x": ("", b"")}, headers=AUTH)
    assert r.status_code == 400 and "unexpected form field 'x'" in r.json()["error"]
    r = client.post("/api/submissions", data={"submission": json.dumps(train_doc("Text")), "tsv": train_tsv(),
                                              "task": "cifar10"}, headers=AUTH)
    assert r.status_code == 201, r.text
    assert client.post("/api/submissions", content=b"x", headers={**AUTH, "content-type": "text/plain"}
                       ).status_code == 415
    assert store.count() == 3


def test_daybreak_result_json_upload(client, store):
    from test_leaderboard import _run_result

    raw = _run_result().model_dump_json().encode()
    r = client.post("/api/submissions", content=raw, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 201, r.text
    assert r.json()["task"] == "digits" and r.json()["kind"] == "train"
    r = client.post("/api/submissions", files={"submission": ("result.json", raw), "tsv": ("x.tsv", b"x")},
                    headers=AUTH)
    assert r.status_code == 422 and "takes no TSV" in r.json()["error"]
    assert store.count() == 1


def test_request_size_limit(client, store):
    big = b"{" + b" " * (1024 * 1024) + b"}"
    r = client.post("/api/submissions", content=big, headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["error"]

    def chunks():  # no Content-Length: counted while reading
        for _ in range(3):
            yield b" " * (512 * 1024)

    r = client.post("/api/submissions", content=chunks(), headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413
    tsv = train_tsv() + "#" * (1024 * 1024)
    assert upload(client, train_doc(), tsv).status_code == 413
    assert store.count() == 0


# --- hypothesis: malformed submissions are refused with a 4xx and store nothing -----------------------------

REQUIRED = ["model", "hardware", "framework", "timestamp"]
_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$|^\d{4}-\d{2}-\d{2}[T ]")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_line_safe = st.characters(blacklist_categories=("Cc", "Zl", "Zp", "Cs"))
not_a_string = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(),
                         st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                              max_size=2))


def _bad_cell(text: str) -> bool:
    tokens = text.split()
    return not (len(tokens) == 1 and (_NUMBER.match(tokens[0]) or tokens[0].startswith("#")))


@st.composite
def malformed(draw):
    doc, tsv_rows = train_doc(), [[1, 0.1, 80.0], [2, 0.2, 93.0], [3, 0.3, 94.5]]
    how = draw(st.sampled_from(["drop", "type", "long", "control", "timestamp", "price", "cell", "hours",
                                "below", "json", "columns"]))
    if how == "drop":
        del doc[draw(st.sampled_from(REQUIRED))]
    elif how == "type":
        doc[draw(st.sampled_from(REQUIRED + ["author", "codeURL"]))] = draw(not_a_string)
    elif how == "long":
        doc[draw(st.sampled_from(REQUIRED[:3]))] = "x" * draw(st.integers(1001, 5000))
    elif how == "control":
        doc[draw(st.sampled_from(REQUIRED[:3]))] = "a" + draw(st.sampled_from(["\n", "\t", "\x00", "\x1b"])) + "b"
    elif how == "timestamp":
        doc["timestamp"] = draw(st.text(max_size=30).filter(lambda t: not _DATE.match(t.strip())))
    elif how == "price":
        doc["costPerHour"] = draw(st.one_of(st.floats(max_value=0, allow_nan=False), st.booleans(),
                                            st.text(max_size=8).filter(lambda t: not _NUMBER.match(t.strip()))))
    elif how == "cell":
        row, col = draw(st.integers(0, 2)), draw(st.integers(0, 2))
        tsv_rows[row][col] = draw(st.text(_line_safe, max_size=12).filter(_bad_cell))
    elif how == "hours":
        row = draw(st.integers(1, 2))
        tsv_rows[row][1] = tsv_rows[row - 1][1] - draw(st.floats(0, 10, allow_nan=False))
    elif how == "below":
        # (a column whose values all lie in 0..1 reads as a fraction: 0.94-1.0 of it would reach the target)
        scale = draw(st.one_of(st.floats(0.0, 0.0099), st.floats(0.011, 0.99)))
        for r in tsv_rows:
            r[2] = r[2] * scale
    elif how == "json":
        return draw(st.binary(max_size=200)), "epoch\thours\ttop1Accuracy\n1\t0.1\t95\n".encode()
    elif how == "columns":
        header = draw(st.sampled_from(["epoch\thours", "hours\ttop1Accuracy\tepoch\textra", "epoch\thours\thours",
                                       "epoch\ttime\ttop1Accuracy", ""]))
        body = "".join("\t".join(str(c) for c in r) + "\n" for r in tsv_rows)
        return json.dumps(doc).encode(), (header + "\n" + body).encode()
    body = "epoch\thours\ttop1Accuracy\n" + "".join("\t".join(str(c) for c in r) + "\n" for r in tsv_rows)
    return json.dumps(doc).encode(), body.encode("utf-8", "surrogatepass")


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=malformed())
def test_malformed_uploads_get_a_4xx_and_store_nothing(client, store, case):
    json_bytes, tsv_bytes = case
    r = client.post("/api/submissions", files={"submission": ("s.json", json_bytes), "tsv": ("s.tsv", tsv_bytes)},
                    data={"task": "cifar10"}, headers=AUTH)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    message = r.json()["error"]
    assert single_line(message) and len(message) < 400
    with pytest.raises(SubmissionError):  # the same bytes through the importer: refused too
        parse_submission(json_bytes, tsv_bytes, source="s", task="cifar10")
    assert store.count() == 0


# --- a real server on loopback: parallel uploads, headless Chromium ----------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn

    folder = tmp_path_factory.mktemp("lb-server")
    store = Store(f"sqlite:///{folder / 'served.sqlite'}")
    if ENTRIES.is_dir():
        import_paths(store, [ENTRIES])
    # one module's tests share this server and its per-address budgets: off, or a slow machine's run meets 429
    app = create_app(store, tokens=[Token("tester", SECRET.encode())], limits=Limits(client_rate=0, client_work_s=0))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    port = srv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", store
    srv.should_exit = True
    thread.join(timeout=10)
    store.close()


def test_parallel_uploads_over_loopback_store_each_once(server):
    import httpx

    base, store = server
    before = store.count()
    distinct = [train_doc(f"Parallel {i}", date="2020-02-0%d" % (i + 1)) for i in range(4)]
    jobs = [distinct[i % 4] for i in range(24)]  # each distinct submission 6 times, all at once

    def post(doc):
        with httpx.Client(timeout=30) as c:
            files = {"submission": ("p.json", json.dumps(doc).encode()), "tsv": ("p.tsv", train_tsv().encode())}
            r = c.post(f"{base}/api/submissions", files=files, data={"task": "cifar10"}, headers=AUTH)
            return doc["model"], r.status_code, r.json()

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(post, jobs))
    assert sorted(code for _, code, _ in results) == [200] * 20 + [201] * 4
    ids: dict = {}
    for model, _, body in results:
        ids.setdefault(model, set()).add(body["id"])
    assert all(len(v) == 1 for v in ids.values()) and len(ids) == 4
    assert store.count() == before + 4


def test_index_in_headless_chromium(server, tmp_path):
    browser = chromium_or_skip()
    base, store = server
    dom = chromium(browser, tmp_path / "profile1", "--dump-dom", f"{base}/")
    assert dom.returncode == 0, dom.stderr[-2000:]
    tables = tables_of(dom.stdout)
    assert len(tables) == 30
    cifar = tables[("cifar10", "train-time")]
    assert cifar, "the CIFAR-10 training-time table has no rows"
    assert [r[0] for r in cifar] == [str(i) for i in range(1, len(cifar) + 1)]
    assert all(re.fullmatch(r"\d+:\d\d:\d\d(\.\d{3})?", r[1]) for r in cifar)
    if ENTRIES.is_dir():
        assert cifar[0][1] == "0:00:09.429" and cifar[0][2].startswith("Custom Resnet 9")
        assert len(cifar) == 10  # the index shows the first 10; the full table has the rest
        assert tables[("imagenet", "latency")][0][1] == "0.0739"
    screenshot(browser, f"{base}/", tmp_path / "index.png", "1280,2000", keep_as="leaderboard-index.png")


def test_serve_command_serves_and_takes_submissions(tmp_path):
    import socket
    import sys

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {SECRET}\n")
    db = f"sqlite:///{tmp_path / 'served.sqlite'}"
    proc = subprocess.Popen([sys.executable, "-m", "daybreak", "leaderboard", "serve", "--port", str(port), "--db", db,
                             "--token-file", str(tokens)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.2)
        files = {"submission": ("s.json", json.dumps(train_doc("Served")).encode()), "tsv": ("s.tsv", train_tsv())}
        r = httpx.post(f"{base}/api/submissions", files=files, data={"task": "cifar10"}, headers=AUTH, timeout=10)
        assert r.status_code == 201, r.text
        assert httpx.get(f"{base}/api/leaderboard/cifar10/train-time", timeout=10).json()[0]["model"] == "Served"
        assert "Served" in httpx.get(f"{base}/", timeout=10).text
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with Store(db) as store:
        assert store.entries()[0].submitter == "alice"
