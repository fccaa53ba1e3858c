"""HEAD requests, answered as the GET of the same URL would be, without its body.

RFC 9110 (9.3.2) has every general-purpose server answer HEAD on what it answers GET on,
with the same status and headers (``Content-Length``, ``Content-Type``, ``ETag``,
``Cache-Control``): monitors, link checkers and caches ask HEAD to learn whether a
resource exists or changed without fetching it. FastAPI routes answer GET only (a HEAD
was a 405 everywhere, ``/healthz`` included).

Everything inside this middleware (the content ETag, the response cache, the routes)
sees a GET, so a HEAD gets exactly the GET's headers, a ``304`` for a matching
``If-None-Match``, and a ``405`` with ``Allow`` where there is no GET. The body is
computed as for the GET (the tag is the body's digest) and dropped here. What sits
outside it (the request's log line and metrics) sees the HEAD, on the route it matched.
The server's own scope keeps saying HEAD: it sends no body after a HEAD's headers
(uvicorn checks the method it was given).
"""

from __future__ import annotations

from service.api.conditional import ASGIApp, Message, Receive, Scope, Send


class HeadAsGetMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        ended = False

        async def without_body(message: Message) -> None:
            nonlocal ended
            if message["type"] != "http.response.body":
                await send(message)
                return
            if ended or message.get("more_body", False):
                return  # a part of the body: dropped
            ended = True
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        inner = {**scope, "method": "GET"}  # a copy: the server keeps reading the HEAD
        try:
            await self.app(inner, receive, without_body)
        finally:
            if "route" in inner:  # what the router matched, for the log line and metrics
                scope["route"] = inner["route"]
