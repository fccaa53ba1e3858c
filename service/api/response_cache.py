"""Answers of read endpoints kept in memory until the database changes.

The catalog changes only when something commits (an ingest, a reference load, a crawl run
ending); between commits the same GET asks the same question and gets the same bytes. This
ASGI middleware keeps the 200 answers of a fixed list of read endpoints, keyed by path, the
raw query string and the UTC date (certificates' validity and the FX rate in force follow
the date), and serves them again while the database is provably unchanged:

- SQLite: ``PRAGMA data_version`` on a connection of its own that never writes; it changes
  whenever any other connection, in any process, commits.
- PostgreSQL: ``pg_current_snapshot()`` on a connection of its own; equal snapshot texts
  mean the same set of committed transactions (any transaction of the cluster that writes
  changes it, so the check errs on the side of a miss).

An answer is stored only when the token read before the request equals the one read after
it (no commit while it was computed) and the date did not change meanwhile; a token that
cannot be read (database down, locked) sends the request through uncached, marked
``bypass``. Each stored
answer keeps its content ETag (:func:`content_etag`), so a conditional request answered
from here is compared without hashing the body again (the 304 is made outside, by
:mod:`service.api.conditional`). Requests with ``Cache-Control: no-cache`` go through
(computed afresh, not stored), and so does everything not
on the list: exports (streamed), history (its default window ends now), health, metrics,
sources (next run times), feeds and subscriptions. Bounded in entries and bytes (least
recently used out first); ``GPUATLAS_RESPONSE_CACHE_MB=0`` turns it off. Answers carry
``X-Gpuatlas-Cache: hit``, ``miss`` or ``bypass``, counted by outcome in the metrics.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from sqlalchemy import Engine

from service.api.conditional import ASGIApp, Message, Receive, Scope, Send, content_etag

CACHEABLE = re.compile(
    r"/v1/(offers(/\d+)?|eligible-providers|tco|versions|diff|changes|gpus(/[^/]+)?"
    r"|providers(/[^/]+)?|regions|quality)"
)
"""Read endpoints whose answer depends only on the database, the query and the date."""
MAX_ENTRY_SHARE = 16
"""One answer may take at most this share of the cache (1/16)."""
MAX_ENTRIES = 4096
RETRY_SECONDS = 1.0
"""After the token could not be read, how long requests go through without trying again."""
HIT = (b"x-gpuatlas-cache", b"hit")
MISS = (b"x-gpuatlas-cache", b"miss")
BYPASS = (b"x-gpuatlas-cache", b"bypass")
"""A cacheable request answered without the cache: its change token could not be read."""


@dataclass(frozen=True)
class Entry:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    route: Any


class ChangeToken:
    """Reads a value that changes whenever the database's committed data may have."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.dialect.name
        self._conn: Any = None
        self._generation = 0
        self._retry_at = 0.0
        self._lock = threading.Lock()

    @property
    def usable(self) -> bool:
        if self.backend == "postgresql":
            return True
        database = self.engine.url.database
        return self.backend == "sqlite" and bool(database) and database != ":memory:"

    async def read(self) -> Any:
        """The current token, or None when it cannot be read (then nothing is cached).

        After a failure the database is left alone for ``RETRY_SECONDS`` (requests go
        through uncached): an outage costs the requests no extra connection attempts."""
        if time.monotonic() < self._retry_at:
            return None
        if self.backend == "sqlite":
            return self._read()  # microseconds, never waits on a lock (busy timeout 0)
        return await anyio.to_thread.run_sync(self._read)

    def _read(self) -> Any:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._connect()
                    self._generation += 1
                cursor = self._conn.cursor()
                try:
                    if self.backend == "sqlite":
                        cursor.execute("PRAGMA data_version")
                    else:
                        cursor.execute("SELECT pg_current_snapshot()::text")
                    row = cursor.fetchone()
                finally:
                    cursor.close()
                # data_version counts per connection: a new connection's values are not
                # comparable with the old one's, hence the connection's generation
                return (self._generation, row[0]) if row else None
            except Exception:  # any driver error: answer uncached, reconnect later
                self._drop()
                self._retry_at = time.monotonic() + RETRY_SECONDS
                return None

    def _connect(self) -> Any:
        dialect = self.engine.dialect
        cargs, cparams = dialect.create_connect_args(self.engine.url)
        if self.backend == "sqlite":  # read-only: never creates the file, never writes
            path = Path(str(self.engine.url.database)).resolve()
            return sqlite3.connect(
                f"{path.as_uri()}?mode=ro",
                uri=True,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
            )
        cparams = {**cparams, "connect_timeout": 3, "autocommit": True}
        conn = dialect.loaded_dbapi.connect(*cargs, **cparams)
        with conn.cursor() as cursor:
            cursor.execute("SET statement_timeout = 2000")
        return conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # already broken
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._drop()


class ResponseCache:
    """The stored answers, their change token and counters (one per application)."""

    def __init__(
        self,
        engine: Engine,
        max_bytes: int,
        on_outcome: Callable[[str, int], None] | None = None,
    ) -> None:
        self.max_bytes = max_bytes
        self.on_outcome = on_outcome
        self.max_entry = max_bytes // MAX_ENTRY_SHARE
        self.token = ChangeToken(engine)
        self.entries: OrderedDict[tuple[str, bytes, date], Entry] = OrderedDict()
        self.size = 0
        self.hits = 0
        self.misses = 0
        self.bypassed = 0
        self.enabled = max_bytes > 0 and self.token.usable
        self._seen: Any = None

    def close(self) -> None:
        self.token.close()

    def lookup(self, key: tuple[str, bytes, date], token: Any) -> Entry | None:
        if token != self._seen:  # a commit since: every stored answer is stale
            self.entries.clear()
            self.size = 0
            self._seen = token
            return None
        entry = self.entries.get(key)
        if entry is not None:
            self.entries.move_to_end(key)
        return entry

    def store(self, key: tuple[str, bytes, date], entry: Entry, token: Any) -> None:
        """Keep ``entry``, computed while the database's token was ``token``."""
        if token != self._seen or len(entry.body) > self.max_entry:
            return
        old = self.entries.pop(key, None)
        if old is not None:
            self.size -= len(old.body)
        self.entries[key] = entry
        self.size += len(entry.body)
        while self.size > self.max_bytes or len(self.entries) > MAX_ENTRIES:
            _, evicted = self.entries.popitem(last=False)
            self.size -= len(evicted.body)

    def counted(self, outcome: str) -> None:
        """Report a ``hit``, ``miss`` or ``bypass`` (and the bytes held) to the application's
        metrics."""
        if self.on_outcome is not None:
            self.on_outcome(outcome, self.size)


class ResponseCacheMiddleware:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, cache: ResponseCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._cacheable(scope):
            await self.app(scope, receive, send)
            return
        cache = self.cache
        before = await cache.token.read()
        if before is None:  # the check failed (ChangeToken.read): computed, and said so
            cache.bypassed += 1
            cache.counted("bypass")
            await self.app(scope, receive, _headed(send, BYPASS))
            return
        key = (scope["path"], scope.get("query_string", b""), datetime.now(UTC).date())
        entry = cache.lookup(key, before)
        if entry is not None:
            cache.hits += 1
            cache.counted("hit")
            scope["route"] = entry.route  # for the metrics' route label
            await send(
                {"type": "http.response.start", "status": entry.status, "headers": entry.headers}
            )
            await send({"type": "http.response.body", "body": entry.body})
            return
        cache.misses += 1
        cache.counted("miss")
        await self._compute(scope, receive, send, key, before)

    def _cacheable(self, scope: Scope) -> bool:
        if not self.cache.enabled or scope["type"] != "http" or scope["method"] != "GET":
            return False
        if CACHEABLE.fullmatch(scope["path"]) is None:
            return False
        for name, value in scope.get("headers", ()):
            if name == b"cache-control" and b"no-cache" in value.lower():
                return False
        return True

    async def _compute(
        self, scope: Scope, receive: Receive, send: Send, key: tuple[str, bytes, date], token: Any
    ) -> None:
        start: Message | None = None
        chunks: list[bytes] = []
        size = 0
        keep = True
        limit = self.cache.max_entry
        last: Message | None = None

        async def capture(message: Message) -> None:
            nonlocal start, size, keep, last
            if message["type"] == "http.response.start":
                keep = message["status"] == 200
                start = {**message, "headers": [*message.get("headers", ()), MISS]}
                await send(start)
                return
            if message["type"] == "http.response.body" and keep:
                body = message.get("body", b"")
                size += len(body)
                if size > limit:
                    keep = False
                    chunks.clear()
                else:
                    chunks.append(body)
                    if not message.get("more_body", False):
                        last = message  # sent once the answer is stored (below)
                        return
            await send(message)

        try:
            await self.app(scope, receive, capture)
            if keep and start is not None and last is not None:
                await self._store(key, token, start, chunks, scope.get("route"))
        finally:
            if last is not None:
                # The answer's end goes out after its store: a client repeating the
                # request at once (on PostgreSQL the token is read on a worker thread,
                # a round trip) found it not stored yet, and half of such repeats missed.
                await send(last)

    async def _store(
        self,
        key: tuple[str, bytes, date],
        token: Any,
        start: Message,
        chunks: list[bytes],
        route: Any,
    ) -> None:
        """Keep the answer computed under ``token`` if the database did not change."""
        if await self.cache.token.read() != token or datetime.now(UTC).date() != key[2]:
            return  # something committed meanwhile (or midnight passed): the answer may mix
        body = b"".join(chunks)
        headers = [h for h in start["headers"] if h != MISS and h[0] != b"etag"]
        headers += [HIT, (b"etag", content_etag(body))]
        self.cache.store(key, Entry(start["status"], headers, body, route), token)


def _headed(send: Send, header: tuple[bytes, bytes]) -> Send:
    """``send`` with ``header`` added to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), header]}
        await send(message)

    return sending
