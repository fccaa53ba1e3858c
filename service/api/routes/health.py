"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy.exc import SQLAlchemyError

from schema.types import utcnow
from service.api.deps import ConnDep
from service.query.runs import catalog_counts, crawl_status_counts, last_good_crawls

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(conn: ConnDep) -> Any:
    try:
        counts = catalog_counts(conn)
        crawls = last_good_crawls(conn)
    except SQLAlchemyError as exc:
        return JSONResponse(
            {"status": "unavailable", "database": str(exc.__class__.__name__)}, status_code=503
        )
    now = utcnow()
    ages = {source: round((now - when).total_seconds()) for source, when in crawls.items()}
    return {"status": "ok", "database": "ok", **counts, "last_crawl_age_seconds": ages}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, conn: ConnDep) -> PlainTextResponse:
    lines = request.app.state.metrics.render()
    lines += request.app.state.response_cache.metrics()
    counts = catalog_counts(conn)
    lines += [
        "# HELP gpuatlas_catalog_version The latest catalog version.",
        "# TYPE gpuatlas_catalog_version gauge",
        f"gpuatlas_catalog_version {counts['version']}",
        "# HELP gpuatlas_active_offers Offers currently active.",
        "# TYPE gpuatlas_active_offers gauge",
        f"gpuatlas_active_offers {counts['active_offers']}",
        "# HELP gpuatlas_price_observations Stored price observations.",
        "# TYPE gpuatlas_price_observations gauge",
        f"gpuatlas_price_observations {counts['observations']}",
        "# HELP gpuatlas_crawl_runs_total Crawl runs by source and status.",
        "# TYPE gpuatlas_crawl_runs_total counter",
    ]
    for source, status, n in crawl_status_counts(conn):
        lines.append(f'gpuatlas_crawl_runs_total{{source="{source}",status="{status}"}} {n}')
    now = utcnow()
    lines += [
        "# HELP gpuatlas_last_good_crawl_age_seconds Age of each source's last good crawl.",
        "# TYPE gpuatlas_last_good_crawl_age_seconds gauge",
    ]
    for source, when in sorted(last_good_crawls(conn).items()):
        age = (now - when).total_seconds()
        lines.append(f'gpuatlas_last_good_crawl_age_seconds{{source="{source}"}} {age:.0f}')
    return PlainTextResponse(
        "\n".join(lines) + "\n", media_type="text/plain; version=0.0.4; charset=utf-8"
    )
