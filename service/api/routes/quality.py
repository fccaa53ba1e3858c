"""Data-quality endpoints: what the catalog holds but reference data cannot map yet, and
where sources disagree. Thin: the reports are built in :mod:`service.query.quality`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from schema.api import QualityReport, UnmappedNamePublic
from service.api.deps import ConnDep, cache, reject_unknown_params
from service.query.quality import list_unmapped, quality_report

router = APIRouter(prefix="/v1", tags=["quality"])

SourceParam = Annotated[str | None, Query(max_length=100, description="one source name")]


@router.get(
    "/unmapped",
    response_model=list[UnmappedNamePublic],
    dependencies=[Depends(reject_unknown_params({"kind", "source", "limit"}))],
)
def unmapped(
    conn: ConnDep,
    kind: Literal["gpu", "region", "provider"] | None = None,
    source: SourceParam = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    """GPU names, regions and providers seen in crawls but unknown to reference data,
    most frequent first: each needs an alias or a reference row. ``offers`` and
    ``example_skus``: the active offers carrying it now."""
    return list_unmapped(conn, kind, source, limit)


@router.get(
    "/quality",
    response_model=QualityReport,
    dependencies=[Depends(reject_unknown_params({"source", "limit"}))],
)
def quality(
    response: Response,
    conn: ConnDep,
    source: SourceParam = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="rows per list")] = 100,
) -> dict[str, Any]:
    """The catalog's data quality: active offers without a GPU model (per raw name and
    source) or without a country (per provider and region), with counts, sources and up to
    three example SKUs; totals and shares; and the price disagreements — identities that
    several sources report at different USD per GPU-hour, every source's figure kept."""
    cache(response)
    return quality_report(conn, source, limit)
