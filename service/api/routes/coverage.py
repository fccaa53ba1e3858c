"""``GET /v1/coverage``: the coverage matrix. Thin: the document is built in
:mod:`service.query.coverage` (``gpuatlas coverage`` prints the same one)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from schema.api import CoverageMatrix
from service.api.deps import ConnDep, cache, reject_unknown_params
from service.api.problems import Problem
from service.query.coverage import coverage_matrix
from service.query.sql import NotFound

router = APIRouter(prefix="/v1", tags=["quality"])


@router.get(
    "/coverage",
    response_model=CoverageMatrix,
    dependencies=[Depends(reject_unknown_params({"provider"}))],
)
def coverage(
    response: Response,
    conn: ConnDep,
    provider: Annotated[
        str | None,
        Query(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$", description="only this provider (a slug)"),
    ] = None,
) -> dict[str, Any]:
    """Which providers the catalog knows, through which sources, and how well: per provider
    its sources (API, page or peer) with the end of their last good crawl, its active offers
    by price kind, the share of them with a known GPU model and a known location, its
    certifications by status, and whether its prices are first-party or peer-only."""
    cache(response)
    try:
        return coverage_matrix(conn, provider)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
