"""What one client may hold of the leaderboard's server (`daybreak leaderboard serve`), in a module of its own so
that the command line can show the defaults without importing the web stack (daybreak.leaderboard.web.app)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_REQUEST_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """What one client may hold of the server. The body limit and body timeout are enforced by the app's own
    middleware; the others by the HTTP protocol (``daybreak.leaderboard.web.app.server_config``)."""

    max_body_bytes: int = MAX_REQUEST_BYTES
    body_timeout_s: float = 30.0  # from the request head to the last byte of its body
    max_header_bytes: int = 16 * 1024  # a request head (request line + headers) larger than this: 431 (400 while
    # it is still arriving: the h11 parser's buffer limit)
    header_timeout_s: float = 10.0  # from the connection (or the previous response) to a complete request head
    keep_alive_s: float = 5.0  # an idle kept-alive connection is closed after this
    max_connection_s: float = 300.0  # a connection is closed (after its current response) when older than this
    max_connections: int = 200  # concurrent connections and requests, all clients together; beyond it: 503
    # One client (one remote address) may hold at most this many of them, and at most max_client_heads stalled
    # request heads (still unfinished a second after they were due): beyond either, a new connection from that
    # address gets a 503 at once, and a head stalling beyond the share a 408, so that one address cannot take the
    # global limit. Behind a reverse proxy every client has the proxy's address: raise both to --max-connections
    # there and let the proxy limit each client (README, Leaderboard).
    max_client_connections: int = 32
    max_client_heads: int = 8
