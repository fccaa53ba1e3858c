"""Conditional GETs by content: a JSON answer's ETag is a digest of its bytes.

A validator must change whenever the answer does. The catalog version does not cover
everything a body shows: providers' certifications and regions come from reference
loads, every offer carries the time its source last confirmed it (an unchanged re-crawl
moves it, and makes no version), ``/v1/sources`` shows the next run times. So the tag is
the digest of the body itself, and ``If-None-Match`` gets ``304 Not Modified`` exactly
when the client already holds these bytes.

The body is computed first (or served by the response cache, which sits inside this
middleware and stores the same digest with each answer, so a cache hit is not hashed
again). Only complete ``200`` JSON answers of GETs under ``/v1/`` are tagged; problems,
streamed exports (CSV, JSON Lines, Parquet), health checks and everything else pass
through untouched and carry no validator. An ``ETag`` already on an answer comes from
the response cache and is kept.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_TAGGED_BYTES = 256 * 1024 * 1024
"""Larger answers are passed on as they come, untagged (no JSON answer comes near)."""
NOT_FOR_304 = frozenset({b"content-length", b"content-type", b"content-encoding"})
"""Representation headers a 304 leaves out (it has no body)."""


def content_etag(body: bytes) -> bytes:
    """The ETag of an answer with this body: weak (it names the content, not an
    encoding of it), 128 bits of BLAKE2b."""
    return b'W/"' + hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b'"'


def matches(if_none_match: bytes, tag: bytes) -> bool:
    """Whether an ``If-None-Match`` header value names ``tag`` (weak comparison, RFC
    9110 13.1.2: ``W/`` prefixes are ignored; ``*`` matches any current answer)."""
    value = if_none_match.strip()
    if value == b"*":
        return True
    opaque = tag.removeprefix(b"W/")
    return any(candidate.strip().removeprefix(b"W/") == opaque for candidate in value.split(b","))


def _tagged(path: str) -> bool:
    """The API's answers, not health checks (which must report, not be revalidated)."""
    return path.startswith("/v1/")


def _is_json(headers: list[tuple[bytes, bytes]]) -> bool:
    for name, value in headers:
        if name == b"content-type":
            return value.split(b";")[0].strip().lower() == b"application/json"
    return False


class ContentETagMiddleware:
    """The ASGI middleware (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not _tagged(scope["path"]):
            await self.app(scope, receive, send)
            return
        wanted = None
        for name, value in scope.get("headers", ()):
            if name == b"if-none-match":
                wanted = value if wanted is None else wanted + b"," + value
        start: Message | None = None
        chunks: list[bytes] = []
        size = 0

        async def capture(message: Message) -> None:
            nonlocal start, size
            if message["type"] == "http.response.start":
                if message["status"] == 200 and _is_json(list(message.get("headers", ()))):
                    start = message  # held until the whole body is known
                    return
                await send(message)
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            body = message.get("body", b"")
            chunks.append(body)
            size += len(body)
            if size > MAX_TAGGED_BYTES:  # give up tagging: pass on what is held, as is
                held, start = start, None
                await send(held)
                await send({**message, "body": b"".join(chunks)})
                chunks.clear()
                return
            if message.get("more_body", False):
                return
            held, start = start, None
            await self._answer(held, b"".join(chunks), wanted, send)

        await self.app(scope, receive, capture)

    @staticmethod
    async def _answer(start: Message, body: bytes, wanted: bytes | None, send: Send) -> None:
        headers = list(start.get("headers", ()))
        tag = next((value for name, value in headers if name == b"etag"), None)
        if tag is None:
            tag = content_etag(body)
            headers.append((b"etag", tag))
        if wanted is not None and matches(wanted, tag):
            kept = [(name, value) for name, value in headers if name not in NOT_FOR_304]
            await send({"type": "http.response.start", "status": 304, "headers": kept})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})
