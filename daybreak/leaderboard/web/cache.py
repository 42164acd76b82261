"""Rendered pages and API answers, kept until the data they show changes, and answered conditionally.

A page is made once per change of what it shows: each cached answer remembers the store's change counters of
the kinds it shows (``entries``, ``jobs``: daybreak.leaderboard.store.schema.Change) as they were read before it
was rendered, and is served while they stand. The counters are read at most every ``recheck_s`` (one short query),
and at once after a write by this server (the store's listeners); a write by another process (``leaderboard
import``, a worker, another server) is seen within ``recheck_s``. Requests for a page being rendered wait for that
render (one render however many ask). So the cost of reading a cached page does not depend on the number of
entries, and a burst of readers costs one render.

Every answer has a strong ``ETag`` (a hash of its body) and ``Last-Modified`` (the change it was made after);
``If-None-Match`` (or, without it, ``If-Modified-Since``) that still holds is a 304 with no body.
``Cache-Control: no-cache``: a browser may keep it, and asks again (a 304) before showing it.

The cache is bounded (``max_bytes``, ``max_pages``; the least recently read go first); answers of 500 and above
are never kept.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Callable, Hashable

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

if TYPE_CHECKING:
    from daybreak.leaderboard.store.database import Changes, Store

MAX_BYTES = 64 * 1024 * 1024
MAX_PAGES = 10_000
RECHECK_S = 0.5


@dataclass(frozen=True)
class Rendered:
    """What a route renders: its body, type, status and extra headers (X-Total-Count, Link)."""

    body: bytes
    media_type: str
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Page:
    rendered: Rendered
    made_from: tuple[int, ...]  # the change counters of the kinds it shows, read before it was rendered
    etag: str
    last_modified: datetime | None


class PageCache:
    def __init__(self, store: Store, *, max_bytes: int = MAX_BYTES, max_pages: int = MAX_PAGES,
                 recheck_s: float = RECHECK_S, enabled: bool = True) -> None:
        self.store = store
        self.max_bytes, self.max_pages, self.recheck_s, self.enabled = max_bytes, max_pages, recheck_s, enabled
        self.pages: OrderedDict[Hashable, Page] = OrderedDict()
        self.size = 0
        self.pending: dict[Hashable, asyncio.Future[Page]] = {}
        self.stats: Counter[str] = Counter()
        self._changes: Changes | None = None
        self._checked = float("-inf")
        self._stale = True
        self._reading: asyncio.Future[Changes] | None = None
        store.listeners.append(self.mark_stale)

    def mark_stale(self) -> None:
        """Called (from any thread) after this process committed a write: read the counters again."""
        self._stale = True

    async def changes(self) -> Changes:
        """The change counters, read at most every ``recheck_s`` (and after a write here); one read at a time."""
        loop = asyncio.get_running_loop()
        if self._changes is not None and not self._stale and loop.time() - self._checked < self.recheck_s:
            return self._changes
        if self._reading is None:
            self._stale = False  # a write from now on marks it stale again
            reading = loop.create_task(run_in_threadpool(self.store.changes))
            self._reading = reading

            def done(task: asyncio.Future[Changes]) -> None:
                self._reading = None
                if not task.cancelled() and task.exception() is None:
                    self._changes, self._checked = task.result(), loop.time()
                elif not task.cancelled():
                    self._stale = True

            reading.add_done_callback(done)
        return await asyncio.shield(self._reading)

    async def page(self, key: Hashable, kinds: tuple[str, ...], render: Callable[[], Rendered]) -> Page:
        """The page of ``key`` as of the current counters of ``kinds``: from the cache, from a render under way,
        or rendered now (in a thread)."""
        if not self.enabled:
            self.stats["render"] += 1
            return _page(await run_in_threadpool(render), (), None)
        changes = await self.changes()
        made_from = changes.of(*kinds)
        cached = self.pages.get(key)
        if cached is not None and cached.made_from == made_from:
            self.pages.move_to_end(key)
            self.stats["hit"] += 1
            return cached
        flight_key = (key, made_from)
        flight = self.pending.get(flight_key)
        if flight is None:
            flight = asyncio.get_running_loop().create_task(self._render(key, made_from, changes.changed_at, render))
            self.pending[flight_key] = flight
            flight.add_done_callback(lambda task: (self.pending.pop(flight_key, None),
                                                   task.cancelled() or task.exception()))
        else:
            self.stats["joined a render"] += 1
        return await asyncio.shield(flight)  # a waiter that is cancelled leaves the render to the others

    async def _render(self, key: Hashable, made_from: tuple[int, ...], changed_at: datetime | None,
                      render: Callable[[], Rendered]) -> Page:
        self.stats["render"] += 1
        page = _page(await run_in_threadpool(render), made_from, changed_at)
        if page.rendered.status < 500:
            self._keep(key, page)
        return page

    def _keep(self, key: Hashable, page: Page) -> None:
        old = self.pages.pop(key, None)
        if old is not None:
            self.size -= len(old.rendered.body)
        self.pages[key] = page
        self.size += len(page.rendered.body)
        while self.pages and (self.size > self.max_bytes or len(self.pages) > self.max_pages):
            _, dropped = self.pages.popitem(last=False)
            self.size -= len(dropped.rendered.body)

    def respond(self, request: Request, page: Page) -> Response:
        """The page, or a 304 when the request's validators still hold."""
        validators = {"ETag": page.etag, "Cache-Control": "no-cache"}
        if page.last_modified is not None:
            validators["Last-Modified"] = format_datetime(page.last_modified.replace(tzinfo=timezone.utc),
                                                          usegmt=True)
        if _not_modified(request, page):
            self.stats["not modified"] += 1
            return Response(status_code=304, headers=validators)
        r = page.rendered
        return Response(r.body, status_code=r.status, media_type=r.media_type, headers={**dict(r.headers),
                                                                                         **validators})


def _page(rendered: Rendered, made_from: tuple[int, ...], changed_at: datetime | None) -> Page:
    etag = '"' + hashlib.sha256(rendered.body).hexdigest()[:32] + '"'
    return Page(rendered, made_from, etag, changed_at.replace(microsecond=0) if changed_at else None)


def _not_modified(request: Request, page: Page) -> bool:
    if page.rendered.status != 200:
        return False
    match = request.headers.get("if-none-match")
    if match is not None:
        tags = {t.strip().removeprefix("W/") for t in match.split(",")}
        return "*" in tags or page.etag in tags
    since = request.headers.get("if-modified-since")
    if since is None or page.last_modified is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError, IndexError):
        return False
    if when.tzinfo is None:
        return False
    return page.last_modified <= when.astimezone(timezone.utc).replace(tzinfo=None)


def html(text: str, status: int = 200) -> Rendered:
    return Rendered(text.encode("utf-8"), "text/html; charset=utf-8", status)


def as_json(data: Any, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Rendered:
    import json

    return Rendered(json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8"),
                    "application/json", status, headers)


async def cached(request: Request, key: Hashable, kinds: tuple[str, ...], render: Callable[[], Rendered]) -> Response:
    """A route's answer through the app's page cache (``request.app.state.cache``)."""
    cache: PageCache = request.app.state.cache
    return cache.respond(request, await cache.page(key, kinds, render))
