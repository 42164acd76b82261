"""Slicing a board: filters and sorting (in SQL, on a real server and in the static export), the reference-entry
view, the MLPerf rules column, and the board plots (the Pareto front and the record over time: hand-computed on a
constructed example, then on the real DAWNBench entries and in headless Chromium)."""

import json
import re
import threading
import time
from datetime import date
from urllib.parse import urlencode

import pytest

from daybreak.leaderboard.web.boardplot import Point, cost_time_svg, pareto_front, record_history, record_svg
from daybreak.leaderboard.ingest.importer import import_paths, parse_submission
from daybreak.leaderboard.ranking.query import SORTS, BoardQuery, QueryError, parse_query, slug
from daybreak.leaderboard.web.export import export_site
from daybreak.leaderboard.web.pages import Site
from daybreak.leaderboard.store.database import Store
from daybreak.leaderboard.ingest.submission import PROVENANCES
from daybreak.leaderboard.web.app import Token, create_app, server_config
from daybreak.leaderboard.web.limits import Limits

from conftest import chromium, chromium_or_skip, screenshot, single_line
from test_leaderboard_web import ENTRIES, SECRET, tables_of, train_doc, train_tsv

httpx = pytest.importorskip("httpx")
REAL = ENTRIES.is_dir()
real_only = pytest.mark.skipif(not REAL, reason=f"DAWNBench entries not found at {ENTRIES}")


# --- the plots' computations on a constructed example (answers worked out by hand) -------------------------------

def _p(entry_id, time_s, cost, day):
    return Point(entry_id, f"model {entry_id}", time_s, cost, date.fromisoformat(day))


EXAMPLE = [
    _p(1, 100, 5.0, "2018-01-01"),  # front; the first record
    _p(2, 50, 8.0, "2018-03-01"),  # front (fastest priced); a record (50 < 100)
    _p(3, 200, 2.0, "2018-02-01"),  # front (cheapest); no record (200 > 100)
    _p(4, 120, 6.0, "2018-04-01"),  # dominated by 1 (faster and cheaper)
    _p(5, 50, 9.0, "2018-05-01"),  # dominated by 2 (as fast, dearer); equal to the record: not a new one
    _p(6, 300, 2.0, "2018-06-01"),  # dominated by 3 (as cheap, slower)
    _p(7, 40, None, "2018-07-01"),  # no price: off the front; not a record (entry 9 is faster the same day)
    _p(8, 200, 2.0, "2018-08-01"),  # the same time and cost as 3: neither beats the other, both on the front
    _p(9, 30, 0.0, "2018-07-01"),  # a cost of 0 is no price; the fastest of its day: a record
]


def test_pareto_front_of_a_constructed_example():
    assert [p.entry_id for p in pareto_front(EXAMPLE)] == [2, 1, 3, 8]  # by time


def test_record_history_of_a_constructed_example():
    assert [p.entry_id for p in record_history(EXAMPLE)] == [1, 2, 9]


def test_the_plots_mark_what_was_computed_and_escape_names():
    named = [*EXAMPLE, Point(10, '<script>alert("x")</script>', 500, 50.0, date(2018, 9, 1))]
    svg = str(cost_time_svg(named, lambda i: f"/entries/{i}"))
    assert svg.count('class="pareto-front"') == 1
    assert sorted(re.findall(r'class="front" data-entry="(\d+)"', svg)) == ["1", "2", "3", "8"]
    assert len(re.findall(r'class="point"', svg)) == 4  # 4, 5, 6, 10 (7 and 9 have no price)
    assert "<script>" not in svg and "&lt;script&gt;" in svg and 'href="/entries/10"' in svg
    records = str(record_svg(named, lambda i: f"/entries/{i}"))
    assert re.findall(r'class="record" data-entry="(\d+)"', records) == ["1", "2", "9"]
    assert 'class="record-line"' in records
    assert str(cost_time_svg([EXAMPLE[6]], str)) == ""  # nothing priced: no plot


# --- the query: parameters in, links out ------------------------------------------------------------------------

def test_query_parameters_are_validated_with_one_line_errors():
    q = parse_query({"accelerator": "NVIDIA V100", "framework": "PyTorch", "min_count": "8", "since": "2018-01-01",
                     "until": "2019-12-31", "provenance": "reproduced,daybreak-run", "sort": "date",
                     "order": "desc", "ref": "12", "utm_source": "ignored"})
    assert q == BoardQuery(accelerator="NVIDIA V100", framework="PyTorch", min_count=8, since=date(2018, 1, 1),
                           until=date(2019, 12, 31), provenance=("reproduced", "daybreak-run"), sort="date",
                           order="desc", ref=12)
    assert parse_query(q.params()) == q  # a link's parameters read back as the same query
    for bad in ({"sort": "speed"}, {"order": "up"}, {"min_count": "-1"}, {"min_count": "\u00b2"},
                {"max_count": "9" * 30}, {"since": "2018-13-01"}, {"until": "yesterday"}, {"year": "18"},
                {"ref": "0"}, {"accelerator": "x" * 101}, {"framework": "a\x00b"}, {"provenance": "trusted"},
                {"rules": "mlperf4"}, {"division": "closed,open"}, {"availability": "soon"}):
        with pytest.raises(QueryError) as err:
            parse_query(bad)
        assert single_line(str(err.value)) and len(str(err.value)) < 200, bad
    # each parameter is judged on its own (the API's document states no relation between two): an empty range is
    # a query no entry matches (test_filters_on_the_page_and_the_api_agree: an empty board)
    assert parse_query({"min_count": "9", "max_count": "8"}) == BoardQuery(min_count=9, max_count=8)
    assert parse_query({"since": "2019-01-02", "until": "2019-01-01"}).until == date(2019, 1, 1)


def test_static_page_names_never_carry_a_submission_as_is():
    assert BoardQuery().static_name() == ""
    assert BoardQuery(sort="date", order="desc").static_name() == "sort-date-desc"
    assert BoardQuery(order="desc").static_name() == "sort-rank-desc"
    assert BoardQuery(year=2018).static_name() == "year-2018"
    assert BoardQuery(provenance=("reproduced",)).static_name() == "provenance-reproduced"
    name = BoardQuery(accelerator="../../etc/passwd").static_name()
    assert re.fullmatch(r"accelerator-etc-passwd-[0-9a-f]{8}", name)
    assert slug("NVIDIA V100") != slug("nvidia v100")  # the hash tells apart what the slug does not
    for no_page in (BoardQuery(accelerator="A", framework="B"), BoardQuery(accelerator="A", sort="date"),
                    BoardQuery(ref=3), BoardQuery(min_count=8), BoardQuery(provenance=("reproduced", "daybreak-run"))):
        assert no_page.static_name() is None


# --- a real server with the real entries (or a few made-up ones without them) ------------------------------------

FAKE = [  # (model, hardware, framework, hours to target, USD per hour, date): used where the real files are absent
    ("Alpha", "8 * V100 (AWS p3.16xlarge)", "PyTorch 1.0", 0.1, 24.48, "2019-01-01"),
    ("Beta", "1 V100 / AWS p3.2xlarge", "TensorFlow 1.12", 0.3, 3.06, "2018-06-01"),
    ("Gamma", "1 K80 / AWS p2.xlarge", "PyTorch 0.4", 2.0, 0.9, "2017-10-11"),
    ("Delta", "our lab machine", "MXNet 1.2", 0.5, None, "2018-02-01"),
]


def _add_fake(store):
    for model, hardware, framework, hours, cost, day in FAKE:
        doc = train_doc(model, date=day, cost=cost, hardware=hardware, framework=framework)
        store.add(parse_submission(json.dumps(doc).encode(), train_tsv((hours / 3, hours / 2, hours)).encode(),
                                   source=f"{model}.json", task="cifar10"))
    inference = {**train_doc("Infer", hardware="1 T4 / GCP"), "latency": 0.5, "cost": 2e-6, "top1Accuracy": 0.95}
    del inference["costPerHour"]
    store.add(parse_submission(json.dumps(inference).encode(), None, source="infer.json", task="cifar10"))


def _add_mlperf(store):
    """Two MNIST entries, one timed under MLPerf's rules (as `import-mlperf` stores them), one under DAWNBench's."""
    for model, rules, hours in (("Under DAWNBench", "dawnbench", 0.02), ("Under MLPerf", "mlperf", 0.01)):
        doc = train_doc(model, hardware="8 * V100 (AWS p3.16xlarge)")
        sub = parse_submission(json.dumps(doc).encode(), train_tsv((hours / 2, hours), (98.0, 99.2)).encode(),
                               source=model, task="mnist")
        if rules == "mlperf":
            sub.clock_rules, sub.mlperf_round, sub.division, sub.availability = "mlperf", "v4.0", "closed", "available"
        store.add(sub)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import uvicorn

    folder = tmp_path_factory.mktemp("board-server")
    store = Store(f"sqlite:///{folder / 'board.sqlite'}")
    if REAL:
        import_paths(store, [ENTRIES])
    else:
        _add_fake(store)
    _add_mlperf(store)
    # the board's pages, not its door: one test client reads them as fast as it can, which the per-address
    # budgets would answer with 429 on a slow machine (the door has its own tests: test_leaderboard_load.py)
    app = create_app(store, tokens=[Token("tester", SECRET.encode())], limits=Limits(client_rate=0, client_work_s=0))
    srv = uvicorn.Server(server_config(app, "127.0.0.1", 0, log_level="warning", access_log=False))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    base = f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client, store
    srv.should_exit = True
    thread.join(timeout=10)
    store.close()


def api(client, board="cifar10/train-time", **params):
    r = client.get(f"/api/leaderboard/{board}", params={"top": 1000, **params})
    assert r.status_code == 200, r.text
    return r.json()


def page(client, board="cifar10/train-time", **params):
    r = client.get(f"/tasks/{board}", params=params)
    assert r.status_code == 200 and "text/html" in r.headers["content-type"], r.text[:300]
    return r.text


def entry_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr data-entry="(\d+)"', html)]


SORT_KEY = {  # what each sort orders by, read from an API row ("" / None: not stated, last in either order)
    "rank": lambda r: r["rank"], "model": lambda r: r["model"].lower(),
    "accelerator": lambda r: r["accelerator"].lower() or None, "count": lambda r: r["accelerator_count"],
    "framework": lambda r: (r["framework_name"].lower(), r["framework_version"]) if r["framework_name"] else None,
    "date": lambda r: r["date"], "rules": lambda r: (r["clock_rules"], r["mlperf_round"], r["division"]),
    "provenance": lambda r: PROVENANCES.index(r["provenance"]), "runs": lambda r: (r["runs"] or {"n": 1})["n"],
}


@pytest.mark.parametrize("sort", SORTS)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_every_column_sorts_both_ways_on_the_server(server, sort, order):
    client, _ = server
    everything = api(client)
    rows = api(client, sort=sort, order=order)
    assert sorted(r["entry_id"] for r in rows) == sorted(r["entry_id"] for r in everything)
    assert sorted(r["rank"] for r in rows) == list(range(1, len(rows) + 1))  # the rank stays the objective's
    rank_of = {r["entry_id"]: r["rank"] for r in everything}
    assert all(rank_of[r["entry_id"]] == r["rank"] for r in rows)
    keys = [SORT_KEY[sort](r) for r in rows]
    stated = [k for k in keys if k is not None]
    assert keys == stated + [None] * (len(keys) - len(stated)), "rows without a value come last"
    assert stated == sorted(stated, reverse=order == "desc")
    for a, b in zip(rows, rows[1:]):  # ties: by rank
        if SORT_KEY[sort](a) == SORT_KEY[sort](b):
            assert a["rank"] < b["rank"]
    assert entry_ids(page(client, sort=sort, order=order)) == [r["entry_id"] for r in rows][:100]


@real_only
def test_real_orderings_of_the_cifar10_training_board(server):
    client, _ = server
    ranks = lambda **q: [r["rank"] for r in api(client, **q)]  # noqa: E731
    assert ranks(sort="count", order="desc")[:6] == [1, 4, 10, 2, 3, 9]  # 8 V100s x3, then 4 GPUs x3
    assert ranks(sort="count", order="desc")[-4:] == [28, 29, 30, 31]  # CPU only: 0 accelerators
    assert ranks(sort="date", order="desc")[:4] == [2, 1, 3, 5]  # 2020-01-05, 2019-12-11, 2019-10-15 (x2)
    assert ranks(sort="date")[0] == 15  # the first of 2017-10-11 by rank (ResNet 164 on a P100)
    by_accelerator = api(client, sort="accelerator")
    assert [r["accelerator"] for r in by_accelerator[:7]] == ["CPU only"] * 4 + ["NVIDIA GeForce GTX 1080 Ti"] * 2 + [
        "NVIDIA K80"]
    assert [r["rank"] for r in by_accelerator[4:6]] == [9, 13]
    assert ranks(sort="framework")[-2:] == [14, 18]  # TensorFlow 1.5 sorts after 1.2 and 1.3
    assert [r["model"] for r in api(client, sort="model")[:2]] == ["BaiduNet9", "BaiduNet9"]


@real_only
def test_real_rows_filtered_by_accelerator_and_framework(server):
    client, _ = server
    gtx = api(client, accelerator="NVIDIA GeForce GTX 1080 Ti")
    assert [(r["rank"], r["model"], r["display"], r["accelerator_count"]) for r in gtx] == [
        (1, "BaiduNet9", "0:01:42", 4), (2, "KervResNet34", "0:35:36", 1)]
    tensorflow = api(client, framework="tensorflow")  # case does not matter
    assert [r["rank"] for r in tensorflow] == list(range(1, 11))
    assert (tensorflow[0]["display"], tensorflow[-1]["display"]) == ("1:07:55", "102:48:08")
    assert {r["framework_name"] for r in tensorflow} == {"TensorFlow"}
    many = api(client, accelerator="NVIDIA V100", framework="PyTorch", min_count=4)
    assert [r["display"] for r in many] == ["0:00:09.429", "0:00:10.663", "0:00:27.976", "0:00:44.443", "0:02:54"]
    assert [r["rank"] for r in many] == [1, 2, 3, 4, 5]
    assert [r["display"] for r in api(client, min_count=4, max_count=4)] == ["0:00:10.663", "0:00:27.976",
                                                                            "0:01:42"]
    assert {r["date"][:4] for r in api(client, year=2017)} == {"2017"}
    assert len(api(client, since="2019-10-15", until="2019-12-11")) == 3
    html = page(client, accelerator="NVIDIA GeForce GTX 1080 Ti", sort="date")
    table = tables_of(html)[("cifar10", "train-time")]
    assert [row[:2] for row in table] == [["2", "0:35:36"], ["1", "0:01:42"]]  # 2018-04-20, then 2019-08-13
    assert table[0][2].startswith("KervResNet34") and table[0][3].startswith("NVIDIA GeForce GTX 1080 Ti")
    assert "2 of 31 entries (filtered)" in html
    assert 'class="on">NVIDIA GeForce GTX 1080 Ti</a>' in html


def test_filters_on_the_page_and_the_api_agree(server):
    client, _ = server
    for params in ({"accelerator": "NVIDIA V100"}, {"framework": "PyTorch", "sort": "date"}, {"min_count": 2},
                   {"provenance": "self-reported", "order": "desc"}, {"accelerator": "No Such Chip"},
                   {"min_count": 9, "max_count": 8}, {"since": "2019-01-02", "until": "2019-01-01"}):
        rows = api(client, **params)
        assert entry_ids(page(client, **params)) == [r["entry_id"] for r in rows][:100]
        if "max_count" in params or "until" in params:
            assert rows == []  # an empty range: no entry matches
        if "accelerator" in params:
            assert all(r["accelerator"] == params["accelerator"] for r in rows)


@pytest.mark.parametrize("params, fragment", [
    ({"sort": "speed"}, "sort must be one of"), ({"order": "up"}, "order must be one of"),
    ({"min_count": "-1"}, "min_count must be a whole number"), ({"since": "2018-02-30"}, "since must be a date"),
    ({"accelerator": "x" * 101}, "printable characters"),
    ({"division": "secret"}, "division must be one of"), ({"provenance": "trusted"}, "unknown provenance"),
])
def test_bad_parameters_are_400_with_one_line(server, params, fragment):
    client, _ = server
    r = client.get("/api/leaderboard/cifar10/train-time", params=params)
    assert r.status_code == 400 and fragment in r.json()["error"] and single_line(r.json()["error"]), r.text
    r = client.get("/tasks/cifar10/train-time", params=params)
    assert r.status_code == 400 and "text/html" in r.headers["content-type"] and fragment in r.text
    assert "Traceback" not in r.text


def test_the_reference_view(server):
    client, _ = server
    rows = api(client)
    ref = rows[len(rows) // 2]
    with_ref = api(client, ref=ref["entry_id"])
    for r in with_ref:
        assert r["ref_ratio"] == pytest.approx(r["value"] / ref["value"])
        assert r["ref_text"] == f"{r['ref_ratio']:.3g}x the reference's time"
    assert next(r for r in with_ref if r["entry_id"] == ref["entry_id"])["ref_ratio"] == 1.0
    html = page(client, ref=ref["entry_id"], sort="date")
    assert "&times; the reference&rsquo;s time" in html and "(the reference)" in html
    assert f'<tr data-entry="{ref["entry_id"]}" data-provenance="self-reported" class="reference">' in html
    entry_page = client.get(f"/entries/{ref['entry_id']}").text
    assert f'class="as-reference" href="/tasks/cifar10/train-time?ref={ref["entry_id"]}"' in entry_page
    cost = api(client, "cifar10/train-cost")[0]  # the reference needs a value on the board it is applied to
    inference = api(client, "cifar10/latency")[0]
    # a ref naming no entry of the board is a 404 (the parameter is well formed; its entry is not on the board)
    r = client.get("/api/leaderboard/cifar10/train-time", params={"ref": inference["entry_id"]})
    assert r.status_code == 404 and "has no time on the cifar10 train-time board" in r.json()["error"]
    r = client.get("/api/leaderboard/cifar10/train-time", params={"ref": 99999})
    assert r.status_code == 404 and r.json() == {"error": "ref: no such entry"}
    r = client.get("/tasks/cifar10/train-time", params={"ref": 99999})
    assert r.status_code == 404 and "text/html" in r.headers["content-type"] and "ref: no such entry" in r.text
    assert api(client, "cifar10/train-cost", ref=cost["entry_id"])[0]["ref_text"].endswith("the reference's cost")


def test_the_rules_column_and_the_mlperf_filters(server):
    client, _ = server
    rows = api(client, "mnist/train-time")
    assert [(r["model"], r["rules"], r["availability"]) for r in rows] == [
        ("Under MLPerf", "MLPerf v4.0 closed", "available"), ("Under DAWNBench", "DAWNBench v1", "")]
    assert [r["model"] for r in api(client, "mnist/train-time", rules="mlperf")] == ["Under MLPerf"]
    assert [r["model"] for r in api(client, "mnist/train-time", division="closed", availability="available")] == [
        "Under MLPerf"]
    assert [r["model"] for r in api(client, "mnist/train-time", sort="rules")] == ["Under DAWNBench", "Under MLPerf"]
    html = page(client, "mnist/train-time")
    assert ('<td class="rules rules-mlperf" title="timed and scored by MLPerf Training\'s rules: run_start to '
            'run_stop, olympic mean of the round\'s runs">MLPerf v4.0 closed<br><span class="muted">target 99% top-1 '
            'accuracy</span><br><span class="muted">available</span></td>') in html
    assert '<td class="rules">DAWNBench v1</td>' in html
    assert '<td class="rules">DAWNBench v1</td>' in html
    assert 'data-dim="division"' in html and 'name="availability"' in html
    assert 'data-dim="division"' not in page(client)  # no MLPerf entry on cifar10: no MLPerf filters


def _front_and_records(html: str) -> tuple[list[int], list[int]]:
    return ([int(i) for i in re.findall(r'class="front" data-entry="(\d+)"', html)],
            [int(i) for i in re.findall(r'class="record" data-entry="(\d+)"', html)])


@real_only
def test_the_real_boards_plots(server):
    client, _ = server
    rows = api(client)
    by = {(r["date"], r["display"]): r["entry_id"] for r in rows}
    html = page(client)
    front, records = _front_and_records(html)
    # by hand: the fastest entries (the 8- and 4-V100 ResNet 9s, Kakao Brain's) give no price; BaiduNet9P is the
    # fastest with one (44 s, $0.105) and BaiduNet9 the cheapest (72 s, $0.021); nothing beats either on both
    assert sorted(front) == sorted([by[("2019-05-28", "0:00:44.443")], by[("2019-05-07", "0:01:12")]])
    assert records == [by[k] for k in (
        ("2017-10-11", "2:31:41"), ("2018-01-31", "1:07:55"), ("2018-04-18", "0:02:54"), ("2018-11-06", "0:01:14"),
        ("2019-04-14", "0:01:14"), ("2019-05-07", "0:01:12"), ("2019-05-28", "0:00:44.443"),
        ("2019-10-15", "0:00:27.976"), ("2019-12-11", "0:00:09.429"))]
    assert "11 entries without a price left out" in html
    assert "pareto-front" not in page(client, "cifar10/train-cost")  # the plots are on the training-time board
    only_gtx = page(client, accelerator="NVIDIA GeForce GTX 1080 Ti")  # the plots follow the filters
    assert _front_and_records(only_gtx)[1] == [by[("2018-04-20", "0:35:36")], by[("2019-08-13", "0:01:42")]]


def test_static_export_pages_per_sort_and_filter(tmp_path, server):
    client, store = server
    out = tmp_path / "site"
    export_site(Site(store), out)
    board = out / "tasks/cifar10/train-time.html"
    rows = api(client)
    accelerator = rows[0]["accelerator"]
    framework = rows[0]["framework_name"]
    html = board.read_text()
    sort_file = out / "tasks/cifar10/train-time/sort-date-desc.html"
    accel_file = out / f"tasks/cifar10/train-time/{BoardQuery(accelerator=accelerator).static_name()}.html"
    fw_file = out / f"tasks/cifar10/train-time/{BoardQuery(framework=framework).static_name()}.html"
    linked = {(board.parent / href).resolve() for href in re.findall(r'href="([^"#?]+)"', html)}
    assert {sort_file.resolve(), accel_file.resolve(), fw_file.resolve()} <= linked  # linked from the board
    assert entry_ids(sort_file.read_text()) == [r["entry_id"] for r in api(client, sort="date", order="desc")]
    assert entry_ids(accel_file.read_text()) == [r["entry_id"] for r in api(client, accelerator=accelerator)]
    assert entry_ids(fw_file.read_text()) == [r["entry_id"] for r in api(client, framework=framework)]
    for year in {r["date"][:4] for r in rows}:
        assert entry_ids((out / f"tasks/cifar10/train-time/year-{year}.html").read_text()) == [
            r["entry_id"] for r in api(client, year=year)]
    assert 'class="pareto-front"' in html and "<form" not in html  # no server: links, not a form
    for exported in (out / "tasks").rglob("*.html"):  # every link of every board page leads to a written file
        for href in re.findall(r'href="([^"#?]+)"', exported.read_text()):
            if "://" not in href:
                assert (exported.parent / href).resolve().is_file(), (exported, href)


def test_board_with_the_pareto_plot_in_headless_chromium(server, tmp_path):
    browser = chromium_or_skip()
    client, store = server
    url = f"{client.base_url}/tasks/cifar10/train-time?" + urlencode({"sort": "date", "order": "desc"})
    dom = chromium(browser, tmp_path / "p1", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert re.search(r'<path class="pareto-front" d="M [\d.]+ \d+ V', dom.stdout), "no Pareto front in the SVG"
    front, records = _front_and_records(dom.stdout)
    priced = [e for e in store.entries("cifar10") if e.train_cost_usd and e.time_to_target_s]
    expected = pareto_front([Point(e.id, e.model, e.time_to_target_s, e.train_cost_usd, e.submitted_at.date())
                             for e in priced])
    assert sorted(front) == sorted(p.entry_id for p in expected) and front
    assert records and 'class="record-line"' in dom.stdout
    screenshot(browser, url, tmp_path / "board.png", "1400,2400", keep_as="leaderboard-board-plots.png")
