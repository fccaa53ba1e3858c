"""``POST /v1/sources/{name}/run``: crawl one source now (API key), in a child process.

The crawl run is created before answering, so the 202 carries its id; a background
thread then runs the crawl in a child process with ``crawl_timeout_seconds``, exactly as
the scheduler does (see docs/scheduler.md). Poll ``GET /v1/sources`` for the outcome.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, select

from schema.crawl import CrawlRun
from schema.enums import CrawlStatus
from schema.types import utcnow
from service.api.auth import ApiKeyDep
from service.api.deps import NO_PARAMS, SettingsDep, get_engine
from service.api.problems import Problem
from service.catalog.runs import start_crawl_run
from service.crawl.sources import list_sources

RUN = CrawlRun.__table__  # type: ignore[attr-defined]
router = APIRouter(prefix="/v1", tags=["catalog"])
SourceName = Annotated[
    str, Path(min_length=1, max_length=100, pattern=r"^[a-z0-9][a-z0-9._:-]{0,99}$")
]


@router.post(
    "/sources/{name}/run",
    status_code=202,
    responses={401: {"description": "no or unknown API key"}, 404: {}, 409: {}},
    dependencies=NO_PARAMS,
)
def run_source(
    name: SourceName,
    key_id: ApiKeyDep,
    engine: Annotated[Engine, Depends(get_engine)],
    settings: SettingsDep,
) -> JSONResponse:
    """Start a crawl of ``name`` now; 409 while one of that source is still running."""
    from service.crawl.child import run_crawl_in_child  # spawns a child; imports no crawler

    with engine.connect() as conn:
        info = list_sources(conn).get(name)
    if info is None:
        raise Problem(404, "Not found", f"no source named {name!r}", kind="not-found")
    recent = utcnow() - timedelta(seconds=settings.crawl_timeout_seconds + 60)
    with engine.connect() as conn:
        running = conn.execute(
            select(RUN.c.id)
            .where(
                RUN.c.source == name,
                RUN.c.status == CrawlStatus.running.value,
                RUN.c.started_at > recent,
            )
            .limit(1)
        ).scalar()
    if running is not None:
        raise Problem(
            409, "Conflict", f"crawl run {running} of {name} is still running", kind="conflict"
        )
    run_id = start_crawl_run(engine, name, trigger="api", parser_version=info["parser_version"])
    threading.Thread(
        target=run_crawl_in_child,
        args=(engine, settings, name),
        kwargs={"trigger": "api", "run_id": run_id},
        name=f"crawl-{name}-{run_id}",
        daemon=True,
    ).start()
    body: dict[str, Any] = {"source": name, "crawl_run_id": run_id, "status": "running"}
    return JSONResponse(body, status_code=202, headers={"Location": "/v1/sources"})
