"""Prometheus metrics with ``prometheus-client``: request counts and latency, the response
cache, and the catalog's state.

Request and cache metrics are counted by the process that serves the request. When the API
runs several worker processes (``gpuatlas serve --workers N``), each worker writes its
values to files in ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode,
chosen when that variable is set before the library is imported) and a scrape, answered by
any worker, adds up every worker's files. Catalog figures (version, active offers, crawl
runs, the age of each source's last good crawl) are read from the database at scrape time,
so they are the same whichever worker answers.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Connection
from starlette.types import Scope

from schema.types import utcnow
from service.query.runs import catalog_counts, crawl_status_counts, last_good_crawls

BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

prometheus_client.disable_created_metrics()  # no *_created series: they cannot be summed


def multiprocess_dir() -> str | None:
    """The multiprocess folder when the API runs several workers, else None."""
    return os.environ.get(MULTIPROC_ENV) or None


class Metrics:
    """One application's metrics (each app has its own registry: tests build many apps)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "gpuatlas_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "gpuatlas_http_request_duration_seconds",
            "Request latency by method and route template.",
            ["method", "route"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.cache_requests = Counter(
            "gpuatlas_response_cache_requests",
            "Cacheable GETs, by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.cache_bytes = Gauge(
            "gpuatlas_response_cache_bytes",
            "Bytes of answers held by the response cache (summed over workers).",
            registry=self.registry,
            multiprocess_mode="livesum",
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def cache_outcome(self, outcome: str, held_bytes: int) -> None:
        self.cache_requests.labels(outcome).inc()
        self.cache_bytes.set(held_bytes)

    def exposition(self, conn: Connection) -> bytes:
        """The text a scrape gets: every worker's counts (or this process's) and the
        catalog's state."""
        registry = CollectorRegistry(auto_describe=False)
        folder = multiprocess_dir()
        if folder is not None:
            multiprocess.MultiProcessCollector(registry, path=folder)
        else:
            registry.register(_Forward(self.registry))
        registry.register(CatalogCollector(conn))
        return prometheus_client.generate_latest(registry)


class _Forward(Collector):
    """This process's own metrics, inside a scrape's registry."""

    def __init__(self, source: CollectorRegistry) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        yield from self.source.collect()


class CatalogCollector(Collector):
    """Catalog figures read from the database when /metrics is scraped."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def collect(self) -> Iterator[Metric]:
        counts = catalog_counts(self.conn)
        yield GaugeMetricFamily(
            "gpuatlas_catalog_version", "The latest catalog version.", value=counts["version"]
        )
        yield GaugeMetricFamily(
            "gpuatlas_active_offers", "Offers currently active.", value=counts["active_offers"]
        )
        yield GaugeMetricFamily(
            "gpuatlas_price_observations",
            "Stored price observations.",
            value=counts["observations"],
        )
        runs = CounterMetricFamily(
            "gpuatlas_crawl_runs", "Crawl runs by source and status.", labels=["source", "status"]
        )
        for source, status, n in crawl_status_counts(self.conn):
            runs.add_metric([source, status], n)
        yield runs
        ages = GaugeMetricFamily(
            "gpuatlas_last_good_crawl_age_seconds",
            "Age of each source's last good crawl.",
            labels=["source"],
        )
        now = utcnow()
        for source, when in sorted(last_good_crawls(self.conn).items()):
            ages.add_metric([source], round((now - when).total_seconds()))
        yield ages


def route_template(scope: Scope) -> str:
    """The matched route's path template (set in the scope by the router), not the raw path:
    ``/v1/offers/{offer_id}``, never one series per offer id."""
    route = scope.get("route")
    return str(getattr(route, "path", "unmatched"))


def prepare_multiprocess(folder: str) -> None:
    """Before workers start: an empty folder for their files (a restart's stale files
    would add a dead process's counts to the live ones)."""
    os.makedirs(folder, exist_ok=True)
    for name in os.listdir(folder):
        if name.endswith(".db"):
            os.remove(os.path.join(folder, name))


def process_exit() -> None:
    """This worker is stopping: its live gauges stop counting (counters keep their totals)."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(os.getpid())
