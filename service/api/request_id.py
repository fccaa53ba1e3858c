"""Request ids and the request log.

Every answer carries ``X-Request-ID``: the caller's own (``X-Request-ID`` of the request, when
it is 1–128 characters of ``A-Za-z0-9._:-``) or a new one. While the request is served the id
is in :data:`service.core.logs.REQUEST_ID`, so every log line written for it carries it, and
the request ends with one ``gpuatlas.request`` line: method, path, route template, status
and duration.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.api.metrics import route_template
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


class RequestIdMiddleware:
    """Sets the request id, echoes it in the answer, and logs the request when done."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
            if log.isEnabledFor(logging.INFO):
                log.info(
                    "%s %s %s",
                    scope["method"],
                    scope["path"],
                    status,
                    extra={
                        "method": scope["method"],
                        "path": scope["path"],
                        "route": route_template(scope),
                        "status": status,
                        "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    },
                )
            REQUEST_ID.reset(token)
