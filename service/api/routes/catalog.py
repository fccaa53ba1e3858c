"""Catalog versions and crawl sources."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from crawlers.registry import all_sources
from schema.api import VersionPublic
from service.api.deps import ConnDep, reject_unknown_params
from service.queries import list_crawl_runs, list_versions

router = APIRouter(prefix="/v1", tags=["catalog"])


@router.get(
    "/versions",
    response_model=list[VersionPublic],
    dependencies=[Depends(reject_unknown_params({"limit"}))],
)
def versions(
    conn: ConnDep, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[VersionPublic]:
    return [VersionPublic.model_validate(r) for r in list_versions(conn, limit)]


@router.get("/sources", dependencies=[Depends(reject_unknown_params(set()))])
def sources(conn: ConnDep) -> list[dict[str, Any]]:
    runs = {}
    for run in reversed(list_crawl_runs(conn, None, 10000)):
        runs[run["source"]] = run
    result = []
    for name, cls in all_sources().items():
        last = runs.get(name)
        result.append(
            {
                "name": name,
                "provider": getattr(cls, "provider", None),
                "kind": getattr(cls, "kind", None),
                "schedule": getattr(cls, "schedule", None),
                "last_run": {
                    k: last[k]
                    for k in (
                        "id",
                        "status",
                        "reason",
                        "started_at",
                        "finished_at",
                        "seen",
                        "added",
                        "changed",
                        "withdrawn",
                        "rejected",
                        "unmapped",
                    )
                }
                if last
                else None,
            }
        )
    return result
