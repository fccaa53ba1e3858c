"""A real local HTTP server for crawl tests: serves fixture files, injects faults.

Routes map a path (with query string, or without as a fallback) to a list of
responses served in turn (the last repeats), so paging, retries, 429 storms,
truncated bodies, redirect loops and hangs run through the real fetch code.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest


@dataclass
class Reply:
    body: bytes = b""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    truncate: bool = False
    """Announce the full Content-Length but close after half of the body."""
    delay: float = 0.0

    @classmethod
    def file(cls, path: Path, content_type: str | None = None, **kwargs: object) -> Reply:
        guessed = content_type or {
            ".json": "application/json",
            ".xml": "application/xml",
            ".html": "text/html",
            ".csv": "text/csv",
            ".txt": "text/plain",
        }.get(path.suffix, "application/octet-stream")
        return cls(body=path.read_bytes(), content_type=guessed, **kwargs)  # type: ignore[arg-type]


class ReplayServer:
    def __init__(self) -> None:
        self.routes: dict[str, list[Reply]] = {}
        self.hits: dict[str, int] = {}
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                reply = server._next(self.path, self.command, dict(self.headers), body)
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(reply.body)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command == "HEAD":
                    return
                if reply.truncate:
                    self.wfile.write(reply.body[: len(reply.body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(reply.body)

            def _serve_quietly(self) -> None:
                try:
                    self._serve()
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up (caps, timeouts): fine

            do_GET = do_POST = do_HEAD = _serve_quietly  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, path: str, *replies: Reply) -> None:
        self.routes[path] = list(replies)

    def _next(self, path: str, method: str, headers: dict[str, str], body: bytes) -> Reply:
        with self._lock:
            self.requests.append((method, path, headers, body))
            key = path if path in self.routes else path.split("?", 1)[0]
            replies = self.routes.get(key)
            if not replies:
                return Reply(b"not found", status=404, content_type="text/plain")
            count = self.hits.get(key, 0)
            self.hits[key] = count + 1
            return replies[min(count, len(replies) - 1)]

    def __enter__(self) -> ReplayServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def replay_server() -> Iterator[ReplayServer]:
    with ReplayServer() as server:
        yield server


@pytest.fixture(scope="module")
def module_server() -> Iterator[ReplayServer]:
    with ReplayServer() as replay:
        yield replay


@pytest.fixture(name="server")
def reused_server(module_server: ReplayServer) -> ReplayServer:
    """One real local server per test module (its shutdown costs a poll interval), reset.
    Import it into a test module to replace the per-test ``server`` there."""
    module_server.routes.clear()
    module_server.hits.clear()
    module_server.requests.clear()
    return module_server
