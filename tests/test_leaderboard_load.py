"""Issue 38: a board that costs nothing to read, and limits on what a client makes the server do.

- Reading: pages and API answers are cached until the data they show changes (the store's change counters), with
  ETag / Last-Modified and 304; a burst of readers costs one render; a cached page runs no query on the board.
- Limits on work: per-client request and server-time budgets (429 with Retry-After, before the work); clients are
  network prefixes (an IPv6 /64), behind a trusted proxy only the forwarded address; an upload's token is checked
  from its headers before any of its body is read (401 at once); bodies at once per client; 1,000 requests sent and
  abandoned by one address cost no more than its budget, and the next address is served.

The default suite checks what the server does (renders, queries, status codes, what was refused or cancelled),
not how fast: the claims with a clock in them (48 concurrent GET / within 2 s; another address served within 2 s
under attack) are `pytest -m slow` tests against a real `daybreak leaderboard serve` process, and the load
figures are benchmarks/leaderboard_load.py's. Attack traffic goes to 127.0.0.1 from 127.0.0.x only.
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
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_leaderboard_trust import (  # noqa: E402
    AUTH, ENTRIES, SECRET, TEST_LIMITS, Statements, dawnbench_doc, dawnbench_tsv, serving, upload,
)

from daybreak.leaderboard.ingest.importer import import_paths  # noqa: E402
from daybreak.leaderboard.store.database import Store  # noqa: E402
from daybreak.leaderboard.web.app import door_of  # noqa: E402
from daybreak.leaderboard.web.cache import RECHECK_S  # noqa: E402
from daybreak.leaderboard.web.door import Budget  # noqa: E402
from daybreak.leaderboard.web.limits import Limits, client_group, forwarded_client  # noqa: E402

httpx = pytest.importorskip("httpx")
needs_entries = pytest.mark.skipif(not ENTRIES.is_dir(), reason=f"DAWNBench entries not found at {ENTRIES}")
# the server's own limits, as `serve` has them (the budgets on), with the short timeouts of the other server tests
SERVED = replace(Limits(), header_timeout_s=5.0, keep_alive_s=1.0)


def _loopback(address: str) -> None:
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError as e:
            pytest.skip(f"cannot send from {address} on this system ({e})")


def _from(address: str, port: int, timeout_s: float = 10.0) -> socket.socket:
    s = socket.socket()
    s.bind((address, 0))
    s.settimeout(timeout_s)
    s.connect(("127.0.0.1", port))
    return s


def _answered(sockets: list[socket.socket], expected: int, within_s: float) -> dict[int, bytes]:
    """What the server sent on each socket it closed, waiting until ``expected`` were closed (or ``within_s``)."""
    import selectors

    selector, data, closed = selectors.DefaultSelector(), {}, {}
    for i, s in enumerate(sockets):
        s.setblocking(False)
        selector.register(s, selectors.EVENT_READ, i)
        data[i] = b""
    deadline = time.monotonic() + within_s
    while len(closed) < expected and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.2):
            try:
                chunk = key.fileobj.recv(65536)
            except (BlockingIOError, ConnectionResetError):
                chunk = b""
            data[key.data] += chunk
            if not chunk:
                closed[key.data] = data[key.data]
                selector.unregister(key.fileobj)
    time.sleep(0.3)  # a moment for any closing beyond the expected ones, which would be a failure
    for key in list(selector.get_map().values()):
        try:
            if key.fileobj.recv(65536, socket.MSG_DONTWAIT) == b"":
                closed[key.data] = data[key.data]
        except (BlockingIOError, ConnectionResetError):
            pass
    selector.close()
    return closed


def _reader(i: int) -> "httpx.Client":
    """A client of its own address, 127.0.1.(i + 1): one of many readers."""
    return httpx.Client(timeout=60, transport=httpx.HTTPTransport(local_address=f"127.0.1.{i + 1}"))


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (or the socket's timeout)."""
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except (socket.timeout, ConnectionResetError):
        pass
    return data


@pytest.fixture(scope="module")
def dawnbench(tmp_path_factory):
    """A SQLite board of the 187 real DAWNBench files (118 entries)."""
    if not ENTRIES.is_dir():
        pytest.skip(f"DAWNBench entries not found at {ENTRIES}")
    url = f"sqlite:///{tmp_path_factory.mktemp('load') / 'dawnbench.sqlite'}"
    with Store(url) as store:
        assert import_paths(store, [ENTRIES]).stored == 118
    return url


# --- reading: one render per change, a cached page runs no query ---------------------------------------------------


def test_48_concurrent_readers_of_a_cold_index_cost_one_render(dawnbench):
    """Issue 38: 48 concurrent GET / (no attack at all) left 32 unanswered after 30 s; each rendered the index (130
    ms of CPU). Now the first renders and the others wait for that render."""
    _loopback("127.0.1.48")
    with Store(dawnbench) as store, serving(store, limits=SERVED) as srv:
        cache = srv.app.state.cache
        barrier = threading.Barrier(48)

        def read(i):  # 48 readers: 48 addresses (one address may hold 32 connections)
            with _reader(i) as c:
                barrier.wait(timeout=30)
                r = c.get(f"{srv.base}/")
                return r.status_code, r.headers["etag"], len(r.content)

        with ThreadPoolExecutor(48) as pool:
            answers = list(pool.map(read, range(48)))
        assert {a[0] for a in answers} == {200} and len({a[1] for a in answers}) == 1, answers[:3]
        assert cache.stats["render"] == 1, cache.stats
        assert answers[0][2] > 50_000  # the whole index of the 118 entries


def test_a_cached_page_runs_no_query_and_a_write_renders_it_again(dawnbench, tmp_path):
    import shutil

    from daybreak.leaderboard.ingest.importer import parse_submission

    shutil.copy(dawnbench.removeprefix("sqlite:///"), tmp_path / "copy.sqlite")
    url = f"sqlite:///{tmp_path / 'copy.sqlite'}"
    with Store(url) as store, serving(store, limits=SERVED) as srv, srv.client() as c:
        pages = ("/", "/tasks/cifar10/train-time", "/entries/3", "/api/leaderboard/cifar10/train-time?top=5",
                 "/api/entries/3", "/api/tasks")
        first = {p: c.get(p) for p in pages}
        assert all(r.status_code == 200 for r in first.values())
        with Statements(store) as seen:
            again = {p: c.get(p) for p in pages}
        # nothing read from the board; at most the change counters (if RECHECK_S passed on a busy machine)
        assert [s for s in seen.selects if "daybreak_leaderboard_changes" not in s] == []
        assert all(again[p].content == first[p].content and again[p].headers["etag"] == first[p].headers["etag"]
                   for p in pages)
        # conditional requests: the same ETag is a 304 without a body; so is a Last-Modified not older
        for p in pages:
            r = c.get(p, headers={"If-None-Match": first[p].headers["etag"]})
            assert r.status_code == 304 and r.content == b"" and r.headers["etag"] == first[p].headers["etag"], p
        r = c.get("/", headers={"If-Modified-Since": first["/"].headers["last-modified"]})
        assert r.status_code == 304
        assert c.get("/", headers={"If-None-Match": '"other"'}).status_code == 200
        # an upload (a write here) is seen at once: new bodies, new ETags
        assert upload(c, dawnbench_doc("Cache Buster", date="2019-03-04"), dawnbench_tsv()).status_code == 201
        after = c.get("/", headers={"If-None-Match": first["/"].headers["etag"]})
        assert after.status_code == 200 and "Cache Buster" in after.text
        assert c.get("/tasks/cifar10/train-time").headers["etag"] != first["/tasks/cifar10/train-time"].headers["etag"]
        assert c.get("/api/tasks").headers["etag"] == first["/api/tasks"].headers["etag"]  # not a board: unchanged
        # a write by another process (`leaderboard import`, a worker) is seen within RECHECK_S
        with Store(url) as other:
            other.add(parse_submission(json.dumps(dawnbench_doc("From Another Process", date="2019-03-05")).encode(),
                                       dawnbench_tsv().encode(), source="other", task="cifar10"))
        time.sleep(RECHECK_S + 0.2)
        assert "From Another Process" in c.get("/tasks/cifar10/train-time").text


def test_the_api_pages_a_board_with_links():
    url = "sqlite://"
    with Store(url) as store, serving(store, limits=SERVED) as srv, srv.client() as c:
        for i in range(7):
            assert upload(c, dawnbench_doc(f"Paged {i}", date=f"2019-01-0{i + 1}"),
                          dawnbench_tsv(hours=(0.01, 0.02, 0.03 + i / 100))).status_code == 201
        r = c.get("/api/leaderboard/cifar10/train-time?top=3&offset=3")
        assert r.headers["x-total-count"] == "7" and [row["rank"] for row in r.json()] == [4, 5, 6]
        links = dict(reversed(part.split("; ")) for part in r.headers["link"].split(", "))
        assert links == {'rel="first"': "</api/leaderboard/cifar10/train-time?top=3&offset=0>",
                         'rel="prev"': "</api/leaderboard/cifar10/train-time?top=3&offset=0>",
                         'rel="next"': "</api/leaderboard/cifar10/train-time?top=3&offset=6>"}
        last = c.get("/api/leaderboard/cifar10/train-time?top=3&offset=6&sort=date")
        assert 'rel="next"' not in last.headers["link"] and "sort=date" in last.headers["link"]


def test_an_entry_page_lists_its_latest_reproductions_and_counts_the_rest(tmp_path):
    from test_leaderboard_once import entry_store, reproduction

    from daybreak.leaderboard.web.pages import MAX_REPRODUCTIONS, Site

    store, entry_id = entry_store(f"sqlite:///{tmp_path / 'repros.sqlite'}")
    ids = [store.add_reproduction(entry_id, reproduction(100 + i)) for i in range(MAX_REPRODUCTIONS + 2)]
    html = Site(store).entry_html(store.get(entry_id))
    listed = [i for i in ids if f'href="/entries/{i}"' in html]
    assert listed == ids[2:] and f"({len(ids)} reproductions in all: the latest {MAX_REPRODUCTIONS} are listed)" in html
    store.close()


def test_a_job_is_shown_without_the_tokens_name_or_the_workers_host(tmp_path):
    from test_leaderboard_once import entry_store

    store, entry_id = entry_store(f"sqlite:///{tmp_path / 'jobs.sqlite'}")
    job, _ = store.enqueue(entry_id, "alice-token")
    store.claim_job("build-host-7:4242:0badcafe")
    store.requeue(store.lease_of(store.get_job(job.id)), "requeued: worker build-host-7:4242:0badcafe stopped")
    store.claim_job("other-host:17:feedf00d")
    with serving(store, limits=SERVED) as srv, srv.client() as c:
        text = c.get(f"/api/jobs/{job.id}").text
        page = c.get(f"/entries/{entry_id}").text
    shown = json.loads(text)
    for secret in ("alice-token", "build-host", "4242", "0badcafe", "other-host", "feedf00d"):
        assert secret not in text and secret not in page, secret
    assert shown["requested_by"] == "a submitter"
    assert [line.split(" ", 1)[1] for line in shown["history"]] == [
        "queued by a submitter", "taken by worker 1", "lease 1: requeued: worker worker 1 stopped",
        "taken by worker 2"]
    store.close()


# --- who a client is -------------------------------------------------------------------------------------------


def test_clients_are_network_prefixes_and_forwarded_addresses_count_only_from_a_trusted_proxy():
    limits = Limits()
    assert client_group("203.0.113.7", limits) == "203.0.113.7"
    assert client_group("2001:db8:1:2:aaaa::1", limits) == client_group("2001:db8:1:2:ffff::9", limits) == \
        "2001:db8:1:2::/64"
    assert client_group("2001:db8:1:3::1", limits) != client_group("2001:db8:1:2::1", limits)
    assert client_group("::ffff:203.0.113.7", limits) == "203.0.113.7"  # an IPv4 client on a dual-stack socket
    assert client_group("203.0.113.7", replace(limits, ipv4_prefix=24)) == "203.0.113.0/24"
    assert client_group("testclient", limits) == "testclient"
    proxies = replace(limits, trusted_proxies=("10.0.0.0/8",)).proxies()
    assert forwarded_client("10.1.2.3", "198.51.100.9, 10.0.0.5", proxies) == "198.51.100.9"
    assert forwarded_client("10.1.2.3", "6.6.6.6, 198.51.100.9", proxies) == "198.51.100.9"  # the rightmost hop
    assert forwarded_client("198.51.100.1", "6.6.6.6", proxies) == "198.51.100.1"  # not a proxy: header ignored
    assert forwarded_client("10.1.2.3", "not-an-address", proxies) == "10.1.2.3"
    assert forwarded_client("10.1.2.3", "10.0.0.9", proxies) == "10.1.2.3"  # only proxies: the peer


def test_limits_are_checked_with_one_line_per_bad_flag():
    from daybreak.errors import ConfigError

    assert Limits(trusted_proxies=("10.0.0.1",)).check().trusted_proxies == ("10.0.0.1/32",)
    for bad, flag in ((Limits(trusted_proxies=("nope",)), "--trusted-proxy"), (Limits(ipv6_prefix=129), "--ipv6"),
                      (Limits(client_rate=-1), "--client-rate"), (Limits(max_connections=0), "--max-connections")):
        with pytest.raises(ConfigError, match=flag):
            bad.check()
    assert Limits(client_rate=0, client_work_s=0).check()  # 0: no limit


# --- the global limit: room for a new client, and every refusal in the API's error body ---------------------------


def test_a_full_server_closes_an_idle_connection_of_the_biggest_holder_for_a_new_client():
    """max_connections 10: 127.0.0.2 holds 8 connections waiting for a head, 127.0.0.3 holds 2. A new client
    (127.0.0.1) is served: one of 127.0.0.2's is closed for it (it holds at least two more than the newcomer).
    When every holder holds as few as the newcomer, a new connection is refused: a 503 in the API's error body,
    with Retry-After (uvicorn's own was plain text without it)."""
    for address in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
        _loopback(address)
    limits = replace(SERVED, max_connections=10, header_timeout_s=30.0)
    with Store("sqlite://") as store, serving(store, limits=limits) as srv:
        held = [_from("127.0.0.2", srv.port, timeout_s=2) for _ in range(8)]
        held += [_from("127.0.0.3", srv.port, timeout_s=2) for _ in range(2)]
        time.sleep(0.3)
        with srv.client() as c:
            assert c.get("/healthz").status_code == 200
        still_open = [_still_open(s) for s in held]
        assert still_open[:8].count(False) == 1 and all(still_open[8:]), still_open  # one of the biggest holder's
        for s in held:
            s.close()
        time.sleep(0.3)
        # now ten clients of one connection each: none holds two more than a newcomer
        singles = [_from(f"127.0.{i}.1", srv.port, timeout_s=2) for i in range(10, 20)]
        time.sleep(0.3)
        with _from("127.0.0.4", srv.port) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = _answer(s)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 10" in head.lower(), answer
        assert json.loads(body)["error"].startswith("the server is full (10 connections)")
        for s in singles:
            s.close()


def _still_open(s: socket.socket) -> bool:
    """No end of stream from the server (within 0.2 s)."""
    s.settimeout(0.2)
    try:
        return s.recv(1) != b""
    except socket.timeout:
        return True
    except ConnectionResetError:
        return False


def test_a_request_the_http_parser_refuses_is_a_json_400():
    with Store("sqlite://") as store, serving(store, limits=SERVED) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
            s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            answer = _answer(s)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head
    assert json.loads(body)["error"].startswith("invalid HTTP request")


# --- budgets: requests and server time per client, before the work --------------------------------------------------


def test_a_budget_refuses_before_the_work_and_says_when_to_come_back():
    limits = Limits(client_rate=2, client_burst=3, client_work_s=0.5, client_work_burst_s=1.0)
    budget = Budget(limits, now=100.0)
    assert [budget.take(limits, 100.0) for _ in range(3)] == [None] * 3
    refused = budget.take(limits, 100.0)
    assert (refused.status, dict(refused.headers)["Retry-After"]) == (429, "1")
    assert "2 a second, 3 at once" in refused.message
    assert budget.take(limits, 100.5) is None  # a second token after half a second at 2 a second
    budget.work_s -= 3.0  # a request took 3 s of the server's time (1 s of burst): the client owes 2 s
    refused = budget.take(limits, 101.5)  # requests to spare, but 1.5 s still owed
    assert refused.status == 429 and "share of the server's time (0.5 s a second)" in refused.message
    assert dict(refused.headers)["Retry-After"] == "3"  # 1.5 s owed, paid at 0.5 s a second
    assert budget.take(limits, 104.5).status == 429 and budget.take(limits, 105.0) is None


def test_a_client_over_its_rate_gets_429_and_another_is_served():
    _loopback("127.0.0.2")
    limits = replace(SERVED, client_rate=1, client_burst=5)
    with Store("sqlite://") as store, serving(store, limits=limits) as srv:
        codes = []
        for _ in range(8):
            with _from("127.0.0.2", srv.port) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                codes.append(_answer(s))
        assert [a[:12] for a in codes[:5]] == [b"HTTP/1.1 200"] * 5
        late = codes[-1]
        assert late.startswith(b"HTTP/1.1 429") and b"\r\nretry-after: " in late.lower()
        assert json.loads(late.split(b"\r\n\r\n", 1)[1])["error"].startswith("too many requests from your address")
        with srv.client() as c:  # 127.0.0.1 has its own budget
            assert c.get("/healthz").status_code == 200


# --- uploads: the token before the body; bodies at once -------------------------------------------------------------


def test_an_unauthenticated_upload_declaring_1_mb_is_refused_401_before_its_body():
    """Issue 38: the body was read before the token was checked: 408 after 30 s. Now the 401 comes while no byte
    of the body was sent, and (with Expect: 100-continue) the client is never asked for it."""
    limits = replace(SERVED, body_timeout_s=30.0)
    with Store("sqlite://") as store, serving(store, limits=limits) as srv:
        for extra in (b"", b"Expect: 100-continue\r\n"):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Content-Length: 1048576\r\n" + extra + b"\r\n")
                answer = _answer(s)  # the server closes the connection after its 401
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 401 ") and b"100 Continue" not in answer, answer[:200]
            assert b"www-authenticate: Bearer" in head and b"connection: close" in head
            assert json.loads(body)["error"].startswith("a submitter token is required")
        # a wrong token likewise; the right one has its body read (and refused for what it is, after reading)
        for token, status in ((b"wrong-token-0123456789", b"401"), (SECRET.encode(), b"422")):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          b"Authorization: Bearer " + token + b"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                assert _answer(s).startswith(b"HTTP/1.1 " + status), token


def test_stalled_upload_bodies_from_7_addresses_hold_nothing():
    """Issue 38: 7 addresses x 32 unauthenticated uploads that declare 1 MB and stall took the server (0/48 served).
    Each is now a 401 at once and closed; and a token holder's stalled bodies are held to max_client_bodies (the
    rest 429 at once)."""
    for i in range(2, 10):
        _loopback(f"127.0.0.{i}")
    head = (b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048576\r\n")
    with Store("sqlite://") as store, serving(store, limits=replace(SERVED, body_timeout_s=30.0)) as srv:
        answers = []
        for i in range(2, 9):
            sockets = [_from(f"127.0.0.{i}", srv.port) for _ in range(32)]
            for s in sockets:
                s.sendall(head + b"\r\n{")
            answers += [_answer(s)[:12] for s in sockets]
            for s in sockets:
                s.close()
        assert len(answers) == 224 and set(answers) <= {b"HTTP/1.1 401", b"HTTP/1.1 503"}, set(answers)
        assert answers.count(b"HTTP/1.1 401") >= 200, answers.count(b"HTTP/1.1 401")
        with srv.client() as c:
            assert c.get("/healthz").status_code == 200
        # a token holder stalling 32 bodies from one address: 8 are read (and time out), 24 refused at once
        stalled = [_from("127.0.0.9", srv.port) for _ in range(32)]
        for s in stalled:
            s.sendall(head + b"Authorization: Bearer " + SECRET.encode() + b"\r\n\r\n{")
        answered = _answered(stalled, 24, within_s=20)
        assert sorted(a[:12] for a in answered.values()) == [b"HTTP/1.1 429"] * 24, answered
        assert all(b"too many uploads at once from your address (8" in a for a in answered.values())
        with srv.client() as c:
            assert c.get("/healthz").status_code == 200
        for s in stalled:
            s.close()


# --- abandoned requests ------------------------------------------------------------------------------------------


def test_a_thousand_abandoned_requests_cost_no_more_than_their_clients_budget(dawnbench):
    """Issue 38: 1,000 complete requests sent and abandoned by one address kept the server busy 35-55 s (each was
    worked on after its client had gone). Each here asks for a board page no one asked before (a render each);
    the address's budget lets at most client_burst + client_rate a second through, those whose client has gone by
    their turn are cancelled before their render, and the next address is served."""
    _loopback("127.0.0.2")
    with Store(dawnbench) as store, serving(store, limits=SERVED) as srv:
        with srv.client() as c:
            assert c.get("/").status_code == 200
        cache = srv.app.state.cache
        renders_before = cache.stats["render"]
        started = time.monotonic()
        for i in range(1000):
            try:
                s = _from("127.0.0.2", srv.port, timeout_s=5)
            except OSError:
                continue  # the address holds its share of connections: refused
            s.sendall(f"GET /tasks/cifar10/train-time?page={i + 2} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            s.close()
        sent_s = time.monotonic() - started
        with srv.client() as c:
            assert c.get("/").status_code == 200
        door = door_of(srv.app)
        deadline = time.monotonic() + 60
        while door.working and time.monotonic() < deadline:
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        renders = cache.stats["render"] - renders_before
        budget = SERVED.client_burst + SERVED.client_rate * elapsed
        assert renders <= budget, (renders, budget, dict(door.stats))
        assert door.stats["refused 429"] + door.stats["cancelled: the client went away"] > 0, dict(door.stats)
        print(f"1,000 abandoned requests sent in {sent_s:.1f} s: {renders} rendered, {dict(door.stats)}, "
              f"load {os.getloadavg()}")


# --- the claims with a clock (pytest -m slow) ---------------------------------------------------------------------


def _serve(db_url: str, port: int, *extra: str) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "daybreak", "leaderboard", "serve", "--db", db_url, "--port",
                               str(port), *extra], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return server
        assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed_gets(base: str, n: int, concurrent: bool) -> list[float]:
    """Seconds each GET / took (inf when it failed or was not a 200)."""
    barrier = threading.Barrier(n) if concurrent else None

    def get(i):
        with _reader(i) if concurrent else httpx.Client(timeout=30) as c:
            if barrier:
                barrier.wait(timeout=30)
            started = time.monotonic()
            try:
                ok = c.get(f"{base}/").status_code == 200
            except httpx.HTTPError:
                ok = False
            return time.monotonic() - started if ok else float("inf")

    if concurrent:
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(get, range(n)))
    return [get(i) for i in range(n)]


@pytest.mark.slow
@needs_entries
def test_48_concurrent_get_of_the_dawnbench_board_are_all_answered_within_2_s(dawnbench):
    """Issue 38's "done when": on a board of the 187 DAWNBench entries, 48 concurrent GET / to a just-started
    `serve` (cold: the first request renders) all answered within 2 s (0 of 48 before)."""
    _loopback("127.0.1.48")
    port = _free_port()
    server = _serve(dawnbench, port)
    try:
        took = _timed_gets(f"http://127.0.0.1:{port}", 48, concurrent=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert max(took) <= 2.0, (sorted(took)[-5:], os.getloadavg())


@pytest.mark.slow
@needs_entries
def test_stalled_bodies_and_abandoned_requests_leave_another_address_served_within_2_s(dawnbench):
    """Issue 38's "done when": while 127.0.0.2..8 each keep 32 stalled upload bodies open (reconnecting when
    closed) and 127.0.0.9 sends and abandons 1,000 requests for pages no one asked before, 127.0.0.1's 48 GET / are
    each answered within 2 s."""
    for i in range(2, 10):
        _loopback(f"127.0.0.{i}")
    port = _free_port()
    server = _serve(dawnbench, port)
    stop = threading.Event()
    head = (b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1048576\r\n\r\n{")

    def stall(address: str) -> None:
        while not stop.is_set():
            held = []
            for _ in range(32):
                try:
                    s = _from(address, port, timeout_s=2)
                    s.sendall(head)
                    held.append(s)
                except OSError:
                    pass
            stop.wait(0.5)
            for s in held:
                s.close()

    def abandon() -> None:
        for i in range(1000):
            if stop.is_set():
                return
            try:
                with _from("127.0.0.9", port, timeout_s=2) as s:
                    s.sendall(f"GET /tasks/imagenet/train-time?page={i + 2} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            except OSError:
                pass

    attackers = [threading.Thread(target=stall, args=(f"127.0.0.{i}",), daemon=True) for i in range(2, 9)]
    attackers.append(threading.Thread(target=abandon, daemon=True))
    try:
        assert _timed_gets(f"http://127.0.0.1:{port}", 1, concurrent=False)[0] < 30  # warm
        for t in attackers:
            t.start()
        time.sleep(1.0)
        took = _timed_gets(f"http://127.0.0.1:{port}", 48, concurrent=False)
    finally:
        stop.set()
        for t in attackers:
            t.join(timeout=30)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert max(took) <= 2.0, (sorted(took)[-5:], os.getloadavg())
