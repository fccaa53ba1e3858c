"""Export-control answers per GPU and destination, and the compliance datasets' sources."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query
from fastapi.encoders import jsonable_encoder

from service.api.deps import NO_PARAMS, ConnDep, SettingsDep, reject_unknown_params
from service.api.problems import Problem
from service.compliance import NOTICE
from service.compliance.queries import ComplianceError, export_control
from service.compliance.sources import compliance_sources

router = APIRouter(prefix="/v1", tags=["compliance"])


def _problem(exc: ComplianceError) -> Problem:
    if exc.status == 404:
        return Problem(404, "Not found", str(exc), kind="not-found")
    name = exc.param or "request"
    return Problem(
        exc.status,
        "Invalid parameter",
        str(exc),
        kind="invalid-parameter",
        invalid_params=[{"name": name, "reason": str(exc)}],
    )


@router.get(
    "/gpus/{slug}/export-control",
    dependencies=[Depends(reject_unknown_params({"destination", "as_of"}))],
    summary="Export-control classification and licence answer for one GPU and destination",
)
def gpu_export_control(
    conn: ConnDep,
    slug: Annotated[str, Path(max_length=200, description="GPU slug or any known alias")],
    destination: Annotated[
        str, Query(min_length=1, max_length=8, description="ISO 3166-1 alpha-2 country")
    ],
    as_of: Annotated[date | None, Query(description="the day to answer for (UTC)")] = None,
) -> dict[str, Any]:
    """Classification (ECCN, basis), TPP, performance density, the rule set in force on
    ``as_of`` (default: today), whether a licence is required (true / false / null = unknown),
    the reasons, citations and an informational-not-legal-advice notice."""
    day = as_of or datetime.now(UTC).date()
    try:
        return export_control(conn, slug, destination, day).to_dict()
    except ComplianceError as exc:
        raise _problem(exc) from None


@router.get(
    "/compliance/sources",
    dependencies=NO_PARAMS,
    summary="Every compliance dataset with its source URLs and check dates",
)
def sources(conn: ConnDep, settings: SettingsDep) -> dict[str, Any]:
    """Entries checked more than ``GPUATLAS_REFERENCE_STALE_DAYS`` days ago are ``stale``."""
    today = datetime.now(UTC).date()
    body = compliance_sources(conn, today, settings.reference_stale_days)
    body["notice"] = NOTICE
    return jsonable_encoder(body)  # type: ignore[no-any-return]
