"""Data-quality endpoints: what the catalog holds but reference data cannot map yet."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query

from service.api.deps import ConnDep, reject_unknown_params
from service.quality import list_unmapped

router = APIRouter(prefix="/v1", tags=["quality"])


@router.get("/unmapped", dependencies=[Depends(reject_unknown_params({"kind", "source", "limit"}))])
def unmapped(
    conn: ConnDep,
    kind: Literal["gpu", "region", "provider"] | None = None,
    source: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    """GPU names, regions and providers seen in crawls but unknown to reference data,
    most frequent first: each needs an alias or a reference row."""
    return list_unmapped(conn, kind, source, limit)
