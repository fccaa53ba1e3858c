"""Prometheus metrics without a dependency: request counts and latency histograms.

Per-route (path template) counters live in the process; catalog size and crawl results
are read from the database when /metrics is scraped.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Registry:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[tuple[str, str], list[int]] = {}
        self.latency_sum: dict[tuple[str, str], float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        with self.lock:
            self.requests[(method, route, status)] += 1
            counts = self.latency.setdefault((method, route), [0] * (len(BUCKETS) + 1))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            counts[-1] += 1
            self.latency_sum[(method, route)] += seconds

    def render(self) -> list[str]:
        lines = [
            "# HELP gpuatlas_http_requests_total HTTP requests by route and status.",
            "# TYPE gpuatlas_http_requests_total counter",
        ]
        with self.lock:
            for (method, route, status), n in sorted(self.requests.items()):
                lines.append(
                    f'gpuatlas_http_requests_total{{method="{method}",route="{route}",'
                    f'status="{status}"}} {n}'
                )
            lines += [
                "# HELP gpuatlas_http_request_duration_seconds Request latency.",
                "# TYPE gpuatlas_http_request_duration_seconds histogram",
            ]
            for (method, route), counts in sorted(self.latency.items()):
                labels = f'method="{method}",route="{route}"'
                name = "gpuatlas_http_request_duration_seconds_bucket"
                for bound, n in zip(BUCKETS, counts, strict=False):
                    lines.append(f'{name}{{{labels},le="{bound}"}} {n}')
                lines.append(
                    f'gpuatlas_http_request_duration_seconds_bucket{{{labels},le="+Inf"}} '
                    f"{counts[-1]}"
                )
                lines.append(
                    f"gpuatlas_http_request_duration_seconds_sum{{{labels}}} "
                    f"{self.latency_sum[(method, route)]:.6f}"
                )
                lines.append(
                    f"gpuatlas_http_request_duration_seconds_count{{{labels}}} {counts[-1]}"
                )
        return lines


def route_template(request: Request) -> str:
    """The matched route's path template (set in the scope by the router), not the raw path."""
    return _template(request.scope)


def _template(scope: Scope) -> str:
    route = scope.get("route")
    return str(getattr(route, "path", "unmatched"))


class MetricsMiddleware:
    """Counts and times every HTTP request by method, route template and status.

    A plain ASGI middleware: ``@app.middleware("http")`` (Starlette's ``BaseHTTPMiddleware``)
    runs the application in a task of its own and streams the answer through a memory
    channel, which cost more than a whole answer served from the response cache."""

    def __init__(self, app: ASGIApp, *, registry: Registry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def measured(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, measured)
        finally:
            elapsed = time.perf_counter() - started
            self.registry.observe(scope["method"], _template(scope), status, elapsed)


def install(app: FastAPI) -> Registry:
    registry = Registry()
    app.add_middleware(MetricsMiddleware, registry=registry)
    return registry
