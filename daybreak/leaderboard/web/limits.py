"""What one client may hold of the leaderboard's server (`daybreak leaderboard serve`) and make it do, and who a
client is, in a module of its own so that the command line can show the defaults without importing the web stack
(daybreak.leaderboard.web.app).

A **client** is a network prefix, not an address: an IPv4 address's first ``ipv4_prefix`` bits (32 by default: the
address itself) or an IPv6 address's first ``ipv6_prefix`` bits (64: a host owns a /64, and can send from any of
its 2^64 addresses). Behind a reverse proxy listed in ``trusted_proxies`` the client is the address the proxy
forwarded (``X-Forwarded-For``, read from the right: the first address that is not one of the trusted proxies);
from anyone else that header is ignored.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field, fields, replace
from typing import TypeVar

MAX_REQUEST_BYTES = 1024 * 1024
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


_T = TypeVar("_T")


def _flag(flag: str, help: str, default: _T, metavar: str) -> _T:  # noqa: A002 - the metadata's key
    """A field that is also `serve`'s flag (daybreak.options.add_dataclass_flags reads the metadata)."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar})


@dataclass(frozen=True)
class Limits:
    """What one client may hold of the server and make it do, each field one flag of `daybreak leaderboard serve`.
    The body limit, the body timeout and the per-client budgets are enforced by the app's door
    (daybreak.leaderboard.web.door), before a route runs; the head timeout, the connection age and the connection
    counts by the HTTP protocol (daybreak.leaderboard.web.server)."""

    max_body_bytes: int = _flag("--max-body-bytes", "largest request body (larger: 413)", MAX_REQUEST_BYTES, "N")
    body_timeout_s: float = _flag("--body-timeout", "seconds a request has to send its body, from its head (then "
                                  "408)", 30.0, "S")
    max_header_bytes: int = _flag("--max-header-bytes", "largest request head (larger: 431, or 400 while it "
                                  "arrives)", 16 * 1024, "N")
    header_timeout_s: float = _flag("--header-timeout", "seconds a connection has to send a complete request head, "
                                    "from connecting or from its previous response", 10.0, "S")
    keep_alive_s: float = _flag("--keep-alive", "seconds an idle kept-alive connection stays open", 5.0, "S")
    max_connection_s: float = _flag("--max-connection-age", "seconds after which a connection is closed (after its "
                                    "current response)", 300.0, "S")
    max_connections: int = _flag("--max-connections", "connections, and requests being worked on, all clients "
                                 "together (more: 503; when all are taken, a new client's connection closes an idle "
                                 "or stalled one of the client holding the most)", 200, "N")
    max_client_connections: int = _flag("--max-client-connections", "connections one client may hold (more: 503 "
                                        "at once)", 32, "N")
    max_client_heads: int = _flag("--max-client-heads", "stalled request heads one client may hold (unfinished a "
                                  "second after they were due; more: 503 at once, and a 408 for the stalling one)",
                                  8, "N")
    client_rate: float = _flag("--client-rate", "requests a second one client may send, on average (a token bucket; "
                               "more: 429 with Retry-After; 0: no limit)", 20.0, "N")
    client_burst: int = _flag("--client-burst", "requests one client may send at once before --client-rate holds it",
                              100, "N")
    client_work_s: float = _flag("--client-work", "seconds of the server's time one client may use a second, on "
                                 "average (each request's time is charged after it; a client in debt gets 429 until "
                                 "it is paid; 0: no limit)", 0.5, "S")
    client_work_burst_s: float = _flag("--client-work-burst", "seconds of the server's time one client may use at "
                                       "once", 10.0, "S")
    max_client_active: int = _flag("--max-client-active", "requests of one client worked on at once (the others "
                                   "wait their turn; an abandoned one is dropped)", 4, "N")
    max_client_bodies: int = _flag("--max-client-bodies", "request bodies one client may send at once, each within "
                                   "--body-timeout (more: 429)", 8, "N")
    ipv4_prefix: int = _flag("--ipv4-prefix", "leading bits of an IPv4 address that make one client (32: each "
                             "address)", 32, "BITS")
    ipv6_prefix: int = _flag("--ipv6-prefix", "leading bits of an IPv6 address that make one client (64: a host's "
                             "/64)", 64, "BITS")
    trusted_proxies: tuple[str, ...] = _flag("--trusted-proxy", "a reverse proxy's address or network (repeatable): "
                                             "its X-Forwarded-For names the client; from anyone else the header is "
                                             "ignored", (), "NETWORK")

    def proxies(self) -> tuple[Network, ...]:
        return tuple(ipaddress.ip_network(p, strict=False) for p in self.trusted_proxies)

    def check(self) -> "Limits":
        """A one-line ConfigError naming the flag of a value that cannot be used; the limits with the proxies
        written as networks."""
        from daybreak.errors import ConfigError

        for f in fields(self):
            value, flag = getattr(self, f.name), f.metadata["flag"]
            if f.name == "trusted_proxies":
                try:
                    proxies = parse_networks(value)
                except ValueError as e:
                    raise ConfigError(f"{flag}: {e}") from None
            elif f.name in ("ipv4_prefix", "ipv6_prefix"):
                most = 32 if f.name == "ipv4_prefix" else 128
                if not 1 <= value <= most:
                    raise ConfigError(f"{flag}: must be from 1 to {most}")
            elif f.name in ("client_rate", "client_work_s"):
                if not (value >= 0 and math.isfinite(value)):
                    raise ConfigError(f"{flag}: must be 0 (no limit) or more")
            elif not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{flag}: must be greater than 0")
        return replace(self, trusted_proxies=proxies)


def parse_networks(texts: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """``--trusted-proxy`` values as networks (ValueError with the bad one)."""
    out = []
    for text in texts:
        try:
            out.append(str(ipaddress.ip_network(text.strip(), strict=False)))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP address or network (e.g. 10.0.0.1 or 10.0.0.0/8)") from None
    return tuple(out)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
    return address


def client_group(address: str, limits: Limits) -> str:
    """The client an address belongs to: its network prefix (``203.0.113.7``, ``2001:db8:1:2::/64``); a peer that
    is not an IP address (a Unix socket, a test client) is its own client."""
    parsed = _address(address)
    if parsed is None:
        return address or "-"
    prefix = limits.ipv4_prefix if parsed.version == 4 else limits.ipv6_prefix
    if prefix >= parsed.max_prefixlen:
        return str(parsed)
    return str(ipaddress.ip_network(f"{parsed}/{prefix}", strict=False))


def is_trusted_proxy(address: str, proxies: tuple[Network, ...]) -> bool:
    parsed = _address(address)
    return parsed is not None and any(parsed in network for network in proxies)


def forwarded_client(peer: str, forwarded_for: str | None, proxies: tuple[Network, ...]) -> str:
    """The client's address: the peer's own, unless the peer is a trusted proxy; then the rightmost address of
    ``X-Forwarded-For`` that is not a trusted proxy (each proxy appends the address it received from), or the
    peer when the header holds none."""
    if not proxies or not forwarded_for or not is_trusted_proxy(peer, proxies):
        return peer
    for hop in reversed(forwarded_for.split(",")):
        parsed = _address(hop)
        if parsed is None:
            return peer  # a header we cannot read: the proxy is the client
        if not any(parsed in network for network in proxies):
            return str(parsed)
    return peer
