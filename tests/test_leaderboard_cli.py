"""The leaderboard's command line: which commands may create the database, `serve` on an address it cannot use,
the uvicorn private API the connection limits rely on, and `leaderboard score` (AlgoPerf's cross-task score).
"""

from __future__ import annotations

import asyncio
import json
import socket
import re
import sqlite3
from pathlib import Path

import pytest

from daybreak.cli import main
from daybreak.leaderboard.store.database import Store

from conftest import single_line
from doc_pages import doc_text

REPO = Path(__file__).resolve().parents[1]


def _status(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1


# --- read-only commands never create a database --------------------------------------------------------------------

READ_ONLY = [
    ["leaderboard", "show", "--task", "digits", "--objective", "train-time"],
    ["leaderboard", "score"],
    ["leaderboard", "export", "SITE"],
    ["leaderboard", "reproduce", "1"],
    ["leaderboard", "worker", "--once"],
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=[a[1] for a in READ_ONLY])
def test_read_only_commands_refuse_a_missing_database_and_create_nothing(argv, tmp_path, capsys):
    argv = [str(tmp_path / "site") if a == "SITE" else a for a in argv]
    mistyped = tmp_path / "no-such-folder" / "lb.sqlite"
    for db in (str(mistyped), f"sqlite:///{mistyped}"):
        assert _status([*argv, "--db", db]) == 2
        err = capsys.readouterr().err
        assert single_line(err) and err.startswith("daybreak: error: "), err
        assert f"{mistyped}: no leaderboard database there (nothing was created)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no folder, no file, no site


def test_a_database_that_is_not_a_leaderboard_is_refused_untouched(tmp_path, capsys):
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    before = other.read_bytes()
    assert _status(["leaderboard", "show", "--task", "digits", "--objective", "train-time", "--db", str(other)]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "holds no daybreak leaderboard (nothing was created)" in err
    assert other.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.sqlite"]


def test_import_and_serve_create_the_database_and_say_so(tmp_path, capsys):
    from daybreak.cli import build_parser

    leaderboard = next(a for a in build_parser()._actions if a.dest == "command").choices["leaderboard"]
    commands = next(a for a in leaderboard._actions if a.dest == "leaderboard_command").choices
    for name in ("import", "serve"):
        assert "created (with its folder) when it does not exist" in " ".join(commands[name].format_help().split())
    for name in ("show", "score", "export", "reproduce", "worker"):
        assert "must exist (nothing is created" in " ".join(commands[name].format_help().split())
    db = tmp_path / "new-folder" / "lb.sqlite"
    assert main(["leaderboard", "import", str(tmp_path / "missing-run"), "--db", str(db)]) == 1  # skipped: 1
    assert db.is_file()
    capsys.readouterr()
    assert main(["leaderboard", "show", "--task", "digits", "--objective", "train-time", "--db", str(db)]) == 0
    assert "no entries" in capsys.readouterr().out


# --- serve on an address it cannot use -----------------------------------------------------------------------------

def test_serve_on_a_port_in_use_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        db = tmp_path / "lb.sqlite"
        assert _status(["leaderboard", "serve", "--port", str(port), "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert single_line(err), err
        assert err.startswith(f"daybreak: error: cannot listen on 127.0.0.1:{port}: ") and "another --port" in err
        assert not db.exists()
    finally:
        busy.close()
    assert _status(["leaderboard", "serve", "--host", "no-such-host.invalid", "--db", str(tmp_path / "x")]) == 2
    assert "--host no-such-host.invalid: cannot resolve it" in capsys.readouterr().err


def test_serve_documents_its_exit_status_and_the_reverse_proxy():
    from daybreak.cli import build_parser

    leaderboard = next(a for a in build_parser()._actions if a.dest == "command").choices["leaderboard"]
    serve = next(a for a in leaderboard._actions if a.dest == "leaderboard_command").choices["serve"]
    text = " ".join(serve.format_help().split())
    assert "Exit status: 130 when stopped" in text and "the port already in use" in text
    assert "reverse proxy" in text
    docs = doc_text()  # README.md and docs/**/*.md: the leaderboard's how-to says both
    assert "cannot listen on 127.0.0.1:8000: Address already in use" in docs and "client_header_timeout" in docs


def test_listen_socket_is_what_serve_binds(tmp_path):
    from daybreak.leaderboard.commands import listen_socket

    sock = listen_socket("127.0.0.1", 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1" and sock.getsockname()[1] > 0
    finally:
        sock.close()


# --- the private uvicorn API the connection limits use -------------------------------------------------------------

def _pinned_range() -> str:
    found = re.findall(r'^\s*"(uvicorn[^"]*)"', (REPO / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    assert len(found) == 1, found
    return found[0]


def test_installed_uvicorn_is_inside_the_pinned_tested_range():
    import uvicorn
    from packaging.specifiers import SpecifierSet

    from daybreak.leaderboard.web.app import UVICORN_TESTED

    pinned = _pinned_range()
    assert pinned == f"uvicorn{UVICORN_TESTED}", "pyproject.toml and web.UVICORN_TESTED must name the same range"
    assert uvicorn.__version__ in SpecifierSet(UVICORN_TESTED), (
        f"uvicorn {uvicorn.__version__} is outside the tested range {UVICORN_TESTED}: run tests/test_leaderboard_trust.py"
        " (test_connections_have_time_and_size_limits) with it, then widen the range in pyproject.toml and web/app.py")


def test_uvicorn_private_h11_protocol_still_has_what_the_guard_uses():
    """GuardedH11Protocol overrides H11Protocol's methods and reads .loop, .transport, .cycle and the cycle's
    .response_complete / .keep_alive. A uvicorn that renamed any of them fails here, loudly, by name."""
    import uvicorn
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    from daybreak.leaderboard.web.app import (
        CYCLE_ATTRIBUTES, H11_ATTRIBUTES, H11_METHODS, Limits, guarded_protocol, h11_protocol,
    )

    where = f"uvicorn {uvicorn.__version__}: uvicorn.protocols.http.h11_impl.H11Protocol"
    base = h11_protocol()
    for name in H11_METHODS:
        assert callable(getattr(base, name, None)), f"{where} has no method {name}"

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    class Transport(asyncio.Transport):
        def __init__(self):
            super().__init__()
            self.written, self.closed = bytearray(), False

        def get_extra_info(self, name, default=None):
            return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

        def write(self, data):
            self.written += data

        def close(self):
            self.closed = True

        def is_closing(self):
            return self.closed

        def pause_reading(self):
            pass

        def resume_reading(self):
            pass

    loop = asyncio.new_event_loop()
    try:
        config = Config(app, http=guarded_protocol(Limits()), lifespan="off", log_level="critical",
                        access_log=False)
        config.load()
        protocol = config.http_protocol_class(config=config, server_state=ServerState(), app_state={}, _loop=loop)
        transport = Transport()
        protocol.connection_made(transport)
        for name in H11_ATTRIBUTES:
            assert hasattr(protocol, name), f"{where} has no attribute {name} after connection_made"
        assert protocol.loop is loop and protocol.transport is transport and protocol.cycle is None
        protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        loop.run_until_complete(asyncio.sleep(0.05))
        for name in CYCLE_ATTRIBUTES:
            assert hasattr(protocol.cycle, name), f"{where}: its RequestResponseCycle has no attribute {name}"
        assert protocol.cycle.response_complete is True and protocol.cycle.keep_alive is True
        assert bytes(transport.written).startswith(b"HTTP/1.1 200") and bytes(transport.written).endswith(b"ok")
        assert protocol._head_timer is not None  # the guard re-armed its head timer after the response
        protocol.connection_lost(None)
        assert protocol._head_timer is None
    finally:
        loop.close()


def test_a_changed_private_api_is_a_one_line_error(monkeypatch):
    from uvicorn.protocols.http import h11_impl

    from daybreak.errors import ConfigError
    from daybreak.leaderboard.web.app import UVICORN_TESTED, h11_protocol

    monkeypatch.delattr(h11_impl.H11Protocol, "on_response_complete")
    with pytest.raises(ConfigError) as info:
        h11_protocol()
    message = str(info.value)
    assert "\n" not in message and f"install uvicorn{UVICORN_TESTED}" in message and "on_response_complete" in message


# --- leaderboard score ---------------------------------------------------------------------------------------------
# The constructed example of tests/test_score.py as leaderboard entries (hours; authors A, B, C):
#   cifar10: A 1 (and a slower 1.5), B 2, C 5;  imagenet: A 3, B 1.5, C none;  squad: A 4, B 10, C 2.5
# -> A 37/45, B 5/9, C 1/3.

FIELDS = {"cifar10": ("CIFAR10", ("epoch", "hours", "top1Accuracy"), 94.5),
          "imagenet": ("ImageNet", ("epoch", "hours", "top5Accuracy"), 93.5),
          "squad": ("SQuAD", ("epoch", "hours", "f1Score"), 0.76)}
HOURS = {("A", "cifar10"): [1.0, 1.5], ("B", "cifar10"): [2.0], ("C", "cifar10"): [5.0],
         ("A", "imagenet"): [3.0], ("B", "imagenet"): [1.5],
         ("A", "squad"): [4.0], ("B", "squad"): [10.0], ("C", "squad"): [2.5]}


def _dawnbench_tree(root: Path) -> Path:
    for (author, task), hours in HOURS.items():
        folder, header, accuracy = FIELDS[task]
        for i, h in enumerate(hours):
            name = f"{author}_{task}_{i}"
            doc = {"version": "v1.0", "author": author, "authorEmail": "a@example.com", "framework": "PyTorch 2.0",
                   "codeURL": "https://example.com/code", "model": f"Net-{author}", "hardware": f"{author}'s GPU",
                   "timestamp": "2018-01-01", "costPerHour": 1.0, "misc": {}}
            out = root / folder / "train"
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.json").write_text(json.dumps(doc))
            (out / f"{name}.tsv").write_text("\t".join(header) + "\n" + f"1\t{h}\t{accuracy}\n")
    return root


def test_leaderboard_score_matches_the_hand_computed_example(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'lb.sqlite'}"
    assert main(["leaderboard", "import", str(_dawnbench_tree(tmp_path / "entries")), "--db", db]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "score", "--db", db, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tasks"] == ["cifar10", "imagenet", "squad"] and result["by"] == "author"
    assert result["best_times_s"] == {"cifar10": 3600.0, "imagenet": 5400.0, "squad": 9000.0}
    scores = [(g["name"], g["score"]) for g in result["groups"]]
    assert scores == [("A", pytest.approx(37 / 45)), ("B", pytest.approx(5 / 9)), ("C", pytest.approx(1 / 3))]
    a_cifar = result["groups"][0]["cells"][0]
    assert a_cifar["time_s"] == 3600.0 and a_cifar["ratio"] == 1.0  # A's best entry of its two
    assert result["groups"][2]["cells"][1] == {"task": "imagenet", "time_s": None, "ratio": None, "task_score": 0.0,
                                               "entry_id": None}

    assert main(["leaderboard", "score", "--db", db, "--by", "hardware", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "A's GPU" in text and "0.8222" in text and "B's GPU" in text and "C's GPU" not in text

    # two tasks only; a larger r_max
    assert main(["leaderboard", "score", "--db", db, "--task", "cifar10,squad", "--r-max", "6", "--json"]) == 0
    two = json.loads(capsys.readouterr().out)
    got = {g["name"]: g["score"] for g in two["groups"]}
    assert two["tasks"] == ["cifar10", "squad"]
    assert got == {"A": pytest.approx((1 + 0.88) / 2), "B": pytest.approx((0.8 + 0.4) / 2),
                   "C": pytest.approx((0.2 + 1) / 2)}

    for argv, fragment in ((["--task", "nosuch"], "unknown leaderboard task 'nosuch'"),
                           (["--r-max", "1"], "--r-max 1.0: must be a finite number > 1"),
                           (["--by", "recipe"], "invalid choice: 'recipe'"),
                           (["--top", "0"], "--top must be at least 1")):
        assert _status(["leaderboard", "score", "--db", db, *argv]) == 2
        err = capsys.readouterr().err
        assert single_line(err) and fragment in err, err


def test_leaderboard_score_of_an_empty_leaderboard(tmp_path, capsys):
    db = tmp_path / "lb.sqlite"
    Store(str(db)).close()
    assert main(["leaderboard", "score", "--db", str(db)]) == 0
    assert "no ranked training entries" in capsys.readouterr().out
