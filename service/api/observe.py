"""Every request observed once: its id, its metrics, its log line.

Every answer carries ``X-Request-ID``: the caller's own (``X-Request-ID`` of the request, when
it is 1–128 characters of ``A-Za-z0-9._:-``) or a new one. While the request is served the id
is in :data:`service.core.logs.REQUEST_ID`, so every log line written for it carries it, and
the request ends with one ``gpuatlas.request`` line: method, path, route template, status
and duration. The same pass counts and times it in the application's Prometheus metrics
(:class:`service.api.metrics.Metrics`, by route template).

A plain ASGI middleware: ``@app.middleware("http")`` (Starlette's ``BaseHTTPMiddleware``)
runs the application in a task of its own and streams the answer through a memory channel,
which cost more than a whole answer served from the response cache.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.metrics import Metrics, route_template
from service.core.logs import REQUEST_ID

HEADER = b"x-request-id"
VALID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
log = logging.getLogger("gpuatlas.request")


def request_id(scope: Scope) -> str:
    """The caller's id when it is safe to repeat in headers and logs, else a new one."""
    for name, value in scope.get("headers", ()):
        if name == HEADER and VALID.fullmatch(value):
            return value.decode()
    return uuid.uuid4().hex


class ObserveMiddleware:
    """Sets the request id and echoes it in the answer; when the request is done, counts
    and times it and logs it."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = request_id(scope)
        token = REQUEST_ID.set(rid)
        started = time.perf_counter()
        status = 500

        async def tagged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (HEADER, rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        finally:
            elapsed = time.perf_counter() - started
            route = route_template(scope)
            self.metrics.observe(scope["method"], route, status, elapsed)
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": route,
                        "status": status,
                        "duration_ms": round(elapsed * 1000, 2),
                    },
                )
            REQUEST_ID.reset(token)
