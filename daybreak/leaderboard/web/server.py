"""The leaderboard's HTTP server: uvicorn's h11 protocol with the limits uvicorn lacks, and its configuration.

What a connection may hold, before any request reaches the app (daybreak.leaderboard.web.door limits what a
request may make the server do): a complete request head within ``header_timeout_s`` of connecting (or of the
previous response), whether nothing or one byte at a time arrives; a connection's age; ``max_connections`` in all,
each client (a network prefix, daybreak.leaderboard.web.limits.client_group) at most ``max_client_connections`` and
``max_client_heads`` stalled heads. When every connection is taken, a new client's connection closes an idle or
stalled connection of the client holding the most, so that clients that hold many cannot keep out one that holds
none. Every refusal here is the API's one error body, ``{"error": ...}``, with ``Retry-After`` where waiting helps
(uvicorn's own were plain text: its 400 and the 503 of its ``limit_concurrency``, which is not used).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from daybreak.errors import ConfigError
from daybreak.leaderboard.web.limits import Limits, client_group, is_trusted_proxy

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI
    from uvicorn.protocols.http.h11_impl import H11Protocol

# guarded_protocol subclasses uvicorn's *private* h11 protocol (uvicorn has no public hook for a head timeout or a
# connection age). It is tested with the uvicorn versions pyproject.toml allows (>=0.30,<0.55: 0.30.0 and 0.54.0
# run the limit tests); what it relies on is listed here and checked by h11_protocol() at start-up and by
# tests/test_leaderboard_cli.py, so a uvicorn that changed it fails loudly instead of serving without the limits.
# The alternative to this dependency is a reverse proxy's own limits (docs/how-to/leaderboard.md).
UVICORN_TESTED = ">=0.30,<0.55"
H11_METHODS = ("connection_made", "data_received", "handle_events", "on_response_complete", "connection_lost",
               "send_400_response")
H11_ATTRIBUTES = ("loop", "transport", "cycle")  # set by H11Protocol.__init__ / connection_made
CYCLE_ATTRIBUTES = ("response_complete", "keep_alive")  # of the RequestResponseCycle in .cycle

REFUSED_LINGER_S = 1.0  # a refused connection is closed this long after its 503
STALLED_AFTER_S = 1.0  # a request head still unfinished this long after it was due counts as stalled
RETRY_AFTER_S = 10


def h11_protocol() -> type[H11Protocol]:
    """uvicorn's private ``H11Protocol``, after checking that it still has the methods the guard overrides; a
    one-line ConfigError naming the tested versions if it does not."""
    import uvicorn

    hint = (f"uvicorn {getattr(uvicorn, '__version__', '?')} changed the private h11 protocol the leaderboard's "
            f"connection limits rely on: install uvicorn{UVICORN_TESTED}")
    try:
        from uvicorn.protocols.http.h11_impl import H11Protocol
    except ImportError as e:
        raise ConfigError(f"{hint} ({e})") from None
    missing = [name for name in H11_METHODS if not callable(getattr(H11Protocol, name, None))]
    if missing:
        raise ConfigError(f"{hint} (H11Protocol has no {', '.join(missing)})")
    return H11Protocol


def error_bytes(status: int, reason: str, message: str, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 response with the API's error body, written straight to a connection (then closed)."""
    body = json.dumps({"error": message}).encode("utf-8")
    retry = f"retry-after: {retry_after}\r\n".encode() if retry_after is not None else b""
    return (f"HTTP/1.1 {status} {reason}\r\n".encode() + b"content-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n" + retry + b"connection: close\r\n\r\n" + body)


class ClientTable:
    """What each client (a network prefix) holds of one server: its open connections, its stalled request heads
    (connections whose head is still unfinished ``STALLED_AFTER_S`` after the connection opened or, on a kept-alive
    connection, after its next head began), and which of its connections wait for a head (idle or stalled: the ones
    that may be closed to make room). A burst of ordinary requests is never counted as stalled: their heads arrive
    within a round trip. Connections from a trusted proxy count only in the total. One event loop uses it: no
    lock."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.proxies = limits.proxies()
        self.total = 0
        self.connections: dict[str, int] = {}
        self.stalled: dict[str, int] = {}
        self.waiting: dict[str, dict[Any, None]] = {}  # client -> its connections waiting for a head (in order)
        self.evicted = 0

    def group(self, address: str) -> str | None:
        """The client of a peer address; None for a trusted proxy (its clients are told apart by the door)."""
        return None if is_trusted_proxy(address, self.proxies) else client_group(address, self.limits)

    def admit(self, group: str | None) -> str | None:
        """Count a new connection of ``group`` -> None, or why it is refused (nothing is counted then). At the
        global limit, a connection waiting for a head is closed from the client holding the most, if it holds at
        least two more than this one."""
        if group is not None:
            if self.connections.get(group, 0) >= self.limits.max_client_connections:
                return (f"too many connections from your address ({self.limits.max_client_connections} open, the "
                        "most one client may hold)")
            if self.stalled.get(group, 0) >= self.limits.max_client_heads:
                return self.too_many_heads()
        if self.total >= self.limits.max_connections and not self._evict_for(group):
            return f"the server is full ({self.limits.max_connections} connections): try again later"
        self.total += 1
        if group is not None:
            self.add(self.connections, group, 1)
        return None

    def _evict_for(self, group: str | None) -> bool:
        mine = self.connections.get(group, 0) if group is not None else 0
        holders = [(n, g) for g, n in self.connections.items() if n >= mine + 2 and self.waiting.get(g)]
        if not holders:
            return False
        _, victim_group = max(holders)
        victim = next(iter(self.waiting[victim_group]))
        victim.evict()
        self.evicted += 1
        return True

    def too_many_heads(self) -> str:
        return (f"too many unfinished requests from your address ({self.limits.max_client_heads} connections still "
                "sending their request head)")

    def wait(self, group: str | None, protocol: Any, waiting: bool) -> None:
        if group is None:
            return
        if waiting:
            self.waiting.setdefault(group, {})[protocol] = None
        elif group in self.waiting:
            self.waiting[group].pop(protocol, None)
            if not self.waiting[group]:
                del self.waiting[group]

    @staticmethod
    def add(table: dict[str, int], group: str, delta: int) -> None:
        count = table.get(group, 0) + delta
        if count > 0:
            table[group] = count
        else:
            table.pop(group, None)


def guarded_protocol(limits: Limits, clients: ClientTable | None = None) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the timeouts it lacks: a connection must send a complete request head within
    ``header_timeout_s`` of opening (or of its previous response), whether it sends nothing or one byte at a
    time (a partial head gets a 408); a connection older than ``max_connection_s`` is closed after its current
    response. And the connection limits of :class:`ClientTable`: a connection it refuses gets a 503 at once (not
    read, not counted, closed a second later); a head that stalls beyond its client's ``max_client_heads`` gets a
    408; so that stalled half-requests cannot fill the global ``max_connections``."""
    H11Protocol = h11_protocol()
    table = clients or ClientTable(limits)

    # a class made from the protocol class h11_protocol() checked: to the checker a base it cannot see (a variable)
    class GuardedH11Protocol(H11Protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._head_timer: asyncio.TimerHandle | None = None
            self._grace: asyncio.TimerHandle | None = None  # the head's STALLED_AFTER_S timer
            self._partial = False
            self._old: asyncio.TimerHandle | None = None
            self._admitted = False
            self._group: str | None = None
            self._stalled = False  # counted in table.stalled
            group = table.group(str(self.client[0]) if self.client else "")
            refused = table.admit(group)
            if refused is not None:
                self._refuse(refused)
                return
            self._admitted, self._group = True, group
            self._old = self.loop.call_later(limits.max_connection_s, self._too_old)
            self._arm_head()
            self._start_grace()

        def _refuse(self, why: str) -> None:
            """The 503 at once; the connection is closed a second later, without reading from it and without
            counting it against the global limit: a client that reconnects as soon as it is closed does so once a
            second per connection, not thousands of times."""
            self.connections.discard(self)
            self.transport.pause_reading()
            self.transport.write(error_bytes(503, "Service Unavailable", why, RETRY_AFTER_S))
            self._old = self.loop.call_later(REFUSED_LINGER_S, self.transport.close)

        def evict(self) -> None:
            """Closed to make room for another client (this one holds the most): idle, or its head unfinished."""
            if self._partial:
                self.transport.write(error_bytes(503, "Service Unavailable", "the server is full: this connection "
                                                 "was closed for another client's", RETRY_AFTER_S))
            self._release()
            self.transport.close()

        def _start_grace(self) -> None:
            if self._grace is None and not self._stalled:
                self._grace = self.loop.call_later(STALLED_AFTER_S, self._head_stalled)

        def _head_stalled(self) -> None:
            """The head is still unfinished: count it; beyond the client's share, end this connection."""
            self._grace = None
            if not self._admitted or self._head_timer is None or self.transport.is_closing():
                return
            if self._group is None:
                return  # a trusted proxy's connection: its clients are limited by the door
            self._stalled = True
            table.add(table.stalled, self._group, 1)
            if table.stalled[self._group] > limits.max_client_heads:
                self.transport.write(error_bytes(408, "Request Timeout", table.too_many_heads()))
                self.transport.close()

        def _head_done(self) -> None:
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
            if self._stalled and self._group is not None:
                table.add(table.stalled, self._group, -1)
            self._stalled = False

        def _arm_head(self) -> None:
            self._cancel_head()
            self._partial = False
            self._head_timer = self.loop.call_later(limits.header_timeout_s, self._head_timeout)
            table.wait(self._group, self, True)

        def _cancel_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
            table.wait(self._group, self, False)

        def _head_timeout(self) -> None:
            self._head_timer = None
            table.wait(self._group, self, False)
            if self.transport.is_closing():
                return
            if self._partial:
                self.transport.write(error_bytes(408, "Request Timeout", "request head not received in time"))
            self.transport.close()

        def _too_old(self) -> None:
            if self.transport.is_closing():
                return
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()
            else:
                self.cycle.keep_alive = False  # closed once this response is sent

        def data_received(self, data: bytes) -> None:
            if not self._admitted:
                return  # refused: the 503 is on its way, the request is not read
            if self._head_timer is not None:
                self._partial = True
                self._start_grace()  # a kept-alive connection's next head has begun
            super().data_received(data)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._cancel_head()  # a request head arrived; its body has the app's own time limit
                self._head_done()

        def send_400_response(self, msg: str) -> None:
            """A request h11 cannot parse (a head too large while it arrives, a malformed line): the API's error
            body, not uvicorn's plain text."""
            self.transport.write(error_bytes(400, "Bad Request", f"invalid HTTP request ({msg.rstrip('.')})"))
            self.transport.close()

        def on_response_complete(self) -> None:
            if self._admitted:
                self._arm_head()  # before super(): a pipelined request it starts cancels the timer again
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._release()
            super().connection_lost(exc)

        def _release(self) -> None:
            self._cancel_head()
            if self._old is not None:
                self._old.cancel()
            if self._admitted:
                self._head_done()
                table.total -= 1
                if self._group is not None:
                    table.add(table.connections, self._group, -1)
                self._admitted = False

    return GuardedH11Protocol


def server_config(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, limits: Limits | None = None,
                  **kwargs: Any) -> uvicorn.Config:
    """The uvicorn configuration the leaderboard is served with (``serve`` and the tests use it): the app's
    limits plus the protocol's (head size and time, keep-alive, connection age, connections in all and per
    client; uvicorn's own concurrency limit is off: its 503 was plain text and counted abandoned work)."""
    import uvicorn

    limits = limits or getattr(app.state, "limits", None) or Limits()
    options: dict[str, Any] = dict(log_level="info", lifespan="off", server_header=False, proxy_headers=False)
    options.update(kwargs)
    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits), loop="asyncio",
                          h11_max_incomplete_event_size=limits.max_header_bytes,
                          # uvicorn declares an int; it hands the value to loop.call_later, which takes a float
                          timeout_keep_alive=limits.keep_alive_s,  # type: ignore[arg-type]
                          limit_concurrency=None, **options)
