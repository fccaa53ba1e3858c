"""Prometheus metrics without a dependency: request counts and latency histograms.

Per-route (path template) counters live in the process; catalog size and crawl results
are read from the database when /metrics is scraped.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

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
    route = request.scope.get("route")
    return str(getattr(route, "path", "unmatched"))


def install(app: FastAPI) -> Registry:
    registry = Registry()

    @app.middleware("http")
    async def _measure(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            registry.observe(
                request.method, route_template(request), status, time.perf_counter() - started
            )

    return registry
