"""GPU models, providers and regions: the catalog's reference entities."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from schema.types import utcnow
from service.api.deps import NO_PARAMS, ConnDep, VersionDep, reject_unknown_params
from service.api.params import iso_country
from service.api.problems import Problem
from service.query.reference import get_gpu, get_provider, list_gpus, list_providers, list_regions
from service.query.sql import NotFound

router = APIRouter(prefix="/v1", tags=["reference"])


def _found(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None


@router.get("/gpus", dependencies=NO_PARAMS)
def gpus(conn: ConnDep, version: VersionDep) -> list[dict[str, Any]]:
    return list_gpus(conn)


@router.get("/gpus/{slug}", dependencies=NO_PARAMS)
def gpu(conn: ConnDep, version: VersionDep, slug: str) -> dict[str, Any]:
    return _found(get_gpu, conn, slug)  # type: ignore[no-any-return]


@router.get("/providers", dependencies=NO_PARAMS)
def providers(conn: ConnDep, version: VersionDep) -> list[dict[str, Any]]:
    return list_providers(conn)


@router.get("/providers/{slug}", dependencies=NO_PARAMS)
def provider(conn: ConnDep, version: VersionDep, slug: str) -> dict[str, Any]:
    return _found(get_provider, conn, slug, utcnow().date())  # type: ignore[no-any-return]


@router.get("/regions", dependencies=[Depends(reject_unknown_params({"provider", "country"}))])
def regions(
    conn: ConnDep,
    version: VersionDep,
    provider: Annotated[str | None, Query(max_length=64)] = None,
    country: Annotated[str | None, Query(pattern="^[A-Za-z]{2}$")] = None,
) -> list[dict[str, Any]]:
    return list_regions(conn, provider, iso_country("country", country))
