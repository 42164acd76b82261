"""The leaderboard's door: the ASGI middleware every request passes before a route runs, and all it refuses.

In this order, each before any work is done for the request:

1. its head: larger than ``max_header_bytes`` -> 431; a Content-Length that is not digits -> 400, over the body
   limit -> 413;
2. the server's load: ``max_connections`` requests already being worked on -> 503;
3. its client's budgets (a client is a network prefix, behind a trusted proxy the forwarded address:
   daybreak.leaderboard.web.limits): requests per second (a token bucket) and seconds of server time per second
   (charged after each request; a client in debt waits) -> 429;
4. a route that takes a submitter token: the token, from the headers -> 401/403 at once, no byte of the body read;
5. a body: at most ``max_client_bodies`` arriving at once per client (-> 429), each counted as it arrives (-> 413)
   and due within ``body_timeout_s`` (-> 408);
6. then the app, in a task of its own, with at most ``max_client_active`` of the client's requests worked on at
   once (the others wait their turn), and a watch on the connection: a client that goes away has its request
   cancelled, where it waits (its turn, a thread, another request's render), so that abandoned requests cost
   nothing more. Work already running in a thread cannot be interrupted; it is bounded by the client's active
   limit and charged to its time budget.

Every refusal is the API's one error body, ``{"error": ...}``, with ``Retry-After`` on 429 and 503; every response
gets the security headers.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections import Counter, OrderedDict
from typing import TYPE_CHECKING, Any

from daybreak.leaderboard.web.limits import Limits, client_group, forwarded_client
from daybreak.leaderboard.web.tokens import Refusal, Token, authorize, needs_token

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

_DIGITS = re.compile(rb"^[0-9]{1,19}$")
MAX_CLIENTS = 20_000  # budgets kept at once; the longest idle are forgotten first
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
     b"frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class Budget:
    """One client's budgets: request tokens and seconds of server time, refilled with time; its requests being
    worked on and its bodies arriving."""

    __slots__ = ("requests", "work_s", "stamp", "turns", "bodies", "active")

    def __init__(self, limits: Limits, now: float) -> None:
        self.requests = float(limits.client_burst)
        self.work_s = limits.client_work_burst_s
        self.stamp = now
        self.turns = asyncio.Semaphore(limits.max_client_active)
        self.bodies = 0
        self.active = 0

    def take(self, limits: Limits, now: float) -> Refusal | None:
        """One request's worth of the budgets -> None, or the 429 that says how long to wait."""
        elapsed, self.stamp = max(0.0, now - self.stamp), now
        self.requests = min(float(limits.client_burst), self.requests + elapsed * limits.client_rate)
        self.work_s = min(limits.client_work_burst_s, self.work_s + elapsed * limits.client_work_s)
        if limits.client_rate > 0 and self.requests < 1:
            wait = (1 - self.requests) / limits.client_rate
            return _too_many(f"too many requests from your address ({limits.client_rate:g} a second, "
                             f"{limits.client_burst} at once)", wait)
        if limits.client_work_s > 0 and self.work_s <= 0:
            wait = -self.work_s / limits.client_work_s
            return _too_many(f"your address has used its share of the server's time ({limits.client_work_s:g} s a "
                             "second)", wait)
        self.requests -= 1
        return None


def _too_many(why: str, wait_s: float) -> Refusal:
    seconds = max(1, math.ceil(wait_s))
    return Refusal(429, f"{why}: try again in {seconds} s", (("Retry-After", str(seconds)),))


class Door:
    """The middleware (see the module docstring). ``tokens``: a callable giving the host's tokens (the app's
    state, which tests change); ``stats``: what it refused and cancelled, by kind."""

    def __init__(self, app: ASGIApp, limits: Limits, tokens: Any) -> None:
        self.app = app
        self.limits = limits
        self.tokens = tokens
        self.proxies = limits.proxies()
        self.clients: OrderedDict[str, Budget] = OrderedDict()
        self.working = 0
        self.stats: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        send = _with_security_headers(send)
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or [])
        length, refusal = self._head(scope, headers)
        has_body = (length is not None and length > 0) or any(k == b"transfer-encoding" for k, _ in headers)
        loop = asyncio.get_running_loop()
        budget = self._budget(scope, headers, loop.time())
        if refusal is None and self.working >= self.limits.max_connections:  # requests worked on (not waiting)
            refusal = Refusal(503, f"the server is busy ({self.limits.max_connections} requests being worked on): try "
                                   "again shortly", (("Retry-After", "5"),))
        refusal = refusal or budget.take(self.limits, loop.time())
        if refusal is None and needs_token(scope.get("method", ""), scope.get("path", "")):
            found = authorize(headers, list(self.tokens()))
            if isinstance(found, Token):
                scope.setdefault("state", {})["submitter"] = found.name
            else:
                refusal = found
        if refusal is None and has_body and budget.bodies >= self.limits.max_client_bodies:
            refusal = Refusal(429, f"too many uploads at once from your address ({self.limits.max_client_bodies}: "
                                   "wait for one to finish)", (("Retry-After", "5"),))
        if refusal is not None:
            self.stats[f"refused {refusal.status}"] += 1
            return await send_error(send, refusal, close=has_body)
        if has_body:
            budget.bodies += 1
            try:
                body = await self._body(receive, send, loop)
            finally:
                budget.bodies -= 1
            if body is None:
                return None
        else:
            body = b""
        await self._work(scope, body, receive, send, budget)

    def _head(self, scope: Scope, headers: list[tuple[bytes, bytes]]) -> tuple[int | None, Refusal | None]:
        """The declared body length, and a refusal of the head itself (size, Content-Length)."""
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
            len(k) + len(v) + 4 for k, v in headers)
        if head > self.limits.max_header_bytes:
            return None, Refusal(431, f"request head of {head:,} bytes is over the {self.limits.max_header_bytes:,}-"
                                      "byte limit")
        declared = next((v.strip() for k, v in headers if k == b"content-length"), None)
        if declared is None:
            return None, None
        if not _DIGITS.match(declared):
            return None, Refusal(400, "bad Content-Length header")
        length = int(declared)
        if length > self.limits.max_body_bytes:
            return length, Refusal(413, f"request body of {length:,} bytes is over the "
                                        f"{self.limits.max_body_bytes:,}-byte limit")
        return length, None

    def _budget(self, scope: Scope, headers: list[tuple[bytes, bytes]], now: float) -> Budget:
        peer = str((scope.get("client") or ("", 0))[0])
        if self.proxies:
            forwarded = next((v.decode("latin-1") for k, v in headers if k == b"x-forwarded-for"), None)
            peer = forwarded_client(peer, forwarded, self.proxies)
        group = client_group(peer, self.limits)
        budget = self.clients.get(group)
        if budget is None:
            if len(self.clients) >= MAX_CLIENTS:  # forget the longest idle client that has nothing under way
                idle = next((g for g, b in self.clients.items() if not (b.active or b.bodies)), None)
                if idle is not None:
                    del self.clients[idle]
            budget = self.clients[group] = Budget(self.limits, now)
        else:
            self.clients.move_to_end(group)
        return budget

    async def _body(self, receive: Receive, send: Send, loop: asyncio.AbstractEventLoop) -> bytes | None:
        """The whole body, counted as it arrives, within the body deadline -> None when refused or gone."""
        deadline = loop.time() + self.limits.body_timeout_s
        chunks: list[bytes] = []
        size = 0
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise asyncio.TimeoutError
                message = await asyncio.wait_for(receive(), remaining)
            except asyncio.TimeoutError:
                self.stats["refused 408"] += 1
                await send_error(send, Refusal(408, f"the request body did not arrive within "
                                                    f"{self.limits.body_timeout_s:g} s"), close=True)
                return None
            if message["type"] == "http.disconnect":
                self.stats["gone while sending"] += 1
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                self.stats["refused 413"] += 1
                await send_error(send, Refusal(413, f"request body over the {self.limits.max_body_bytes:,}-byte "
                                                    "limit"), close=True)
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _work(self, scope: Scope, body: bytes, receive: Receive, send: Send, budget: Budget) -> None:
        """The app in a task of its own, cancelled if the client goes away before its response is complete."""
        loop = asyncio.get_running_loop()
        gone = asyncio.Event()
        complete = False
        replayed = False

        async def app_receive() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def app_send(message: Message) -> None:
            nonlocal complete
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        async def in_turn() -> None:
            async with budget.turns:
                budget.active += 1
                self.working += 1
                started = loop.time()
                try:
                    await self.app(scope, app_receive, app_send)
                finally:
                    budget.active -= 1
                    self.working -= 1
                    budget.work_s -= loop.time() - started

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass  # nothing more of the request is read: its body was read whole

        work, watcher = loop.create_task(in_turn()), loop.create_task(watch())
        try:
            await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done() and not complete:  # the connection ended before the response did
                gone.set()
                work.cancel()
                self.stats["cancelled: the client went away"] += 1
            try:
                await work
            except asyncio.CancelledError:
                if not gone.is_set():
                    raise  # this request itself is being cancelled (the server stops)
        finally:
            watcher.cancel()


def _with_security_headers(send: Send) -> Send:
    async def send_with_headers(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = dict(message)
            message["headers"] = list(message.get("headers") or []) + SECURITY_HEADERS
        await send(message)

    return send_with_headers


async def send_error(send: Send, refusal: Refusal, close: bool = False) -> None:
    """The API's error body; ``close``: the connection is closed after it (a body it did not read is pending)."""
    body = json.dumps({"error": refusal.message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in refusal.headers]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
