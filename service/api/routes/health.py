"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy.exc import SQLAlchemyError

from schema.types import utcnow
from service.api.deps import ConnDep
from service.api.metrics import CONTENT_TYPE
from service.query.runs import catalog_counts, last_good_crawls

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
def metrics(request: Request, conn: ConnDep) -> Response:
    """Prometheus text exposition (prometheus-client): every worker's counts when the API
    runs several, and the catalog's state read from the database."""
    body = request.app.state.metrics.exposition(conn)
    return Response(body, media_type=CONTENT_TYPE)
