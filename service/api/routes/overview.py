"""The JSON twins of the overview pages: every GPU at a glance, one GPU, offers compared.

Same documents as the pages (``service.query.overview``), exact decimals as strings.
Current catalog only (no ``as_of``): the trend already covers the last 90 days.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from service.api.deps import ConnDep, cache, reject_unknown_params
from service.api.params import (
    FILTER_PARAMS,
    CurrentListingDep,
    Listing,
    TodayDep,
    invalid,
    iso_country,
    listing_without,
)
from service.api.problems import Problem
from service.api.serialize import dumps, offer_json
from service.compliance.filters import gdpr_countries
from service.query.facts import catalog_facts
from service.query.overview import (
    EXPORT_DESTINATIONS,
    BadIds,
    compare_document,
    gpu_document,
    overview_document,
    parse_compare_ids,
)
from service.query.reference import get_gpu
from service.query.sql import NotFound

router = APIRouter(prefix="/v1", tags=["overview"])

OVERVIEW_PARAMS = FILTER_PARAMS - {"as_of", "include_peers"}
GPU_OVERVIEW_PARAMS = OVERVIEW_PARAMS - {"gpu"} | {"destination"}
"""The path names the GPU: a ``gpu`` filter would be ignored, so it is no parameter."""
JSON = "application/json"
GpuListingDep = Annotated[Listing, Depends(listing_without("as_of", "include_peers", "gpu"))]
"""The path names the GPU: no ``gpu`` filter (nor a past version) is offered."""


@router.get(
    "/overview",
    dependencies=[Depends(reject_unknown_params(OVERVIEW_PARAMS))],
    description="One row per GPU model with current offers matching the filters: name and "
    "memory, how many providers offer it, the cheapest USD per GPU-hour of each price kind "
    "(on-demand, spot, reserved 1y and 3y) with its provider and offer, the cheapest "
    "on-demand price of each of the last 90 UTC days (`trend`), and whether an EU/EEA "
    "region and a provider headquartered outside the US are among its offers.",
)
def overview(conn: ConnDep, listing: CurrentListingDep) -> Response:
    eu = gdpr_countries(conn, listing.today, "eu_eea")
    doc = overview_document(conn, listing.filters, listing.compliance, listing.today, eu)
    response = Response(dumps({"catalog_version": listing.version, **doc}), media_type=JSON)
    cache(response)
    return response


@router.get(
    "/gpus/{slug}/overview",
    dependencies=[Depends(reject_unknown_params(GPU_OVERVIEW_PARAMS))],
    description="One GPU model: its specifications, the cheapest current offer of each "
    "provider and price kind (`matrix`), each provider's cheapest price of each of the "
    "last 90 UTC days (`history`), and the export-control answer for a few destinations "
    "(`destination=CC` adds one). Informational, not legal advice.",
)
def gpu_overview(
    conn: ConnDep,
    listing: GpuListingDep,
    slug: str,
    destination: Annotated[str | None, Query(pattern="^[A-Za-z]{2}$")] = None,
) -> Response:
    try:
        gpu = get_gpu(conn, slug)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
    extra = iso_country("destination", destination)
    destinations = list(EXPORT_DESTINATIONS)
    if extra and extra not in destinations:
        destinations.append(extra)
    doc = gpu_document(conn, gpu, listing.filters, listing.compliance, listing.today, destinations)
    response = Response(dumps({"catalog_version": listing.version, **doc}), media_type=JSON)
    cache(response)
    return response


@router.get(
    "/compare",
    dependencies=[Depends(reject_unknown_params({"ids"}))],
    description="2 to 4 offers side by side: `ids=1,2,3` (or `ids` repeated). Each offer "
    "as `/v1/offers/{id}` gives it; `cheapest_price_per_gpu_hour_usd` is the lowest of them.",
)
def compare(
    conn: ConnDep, listing: TodayDep, ids: Annotated[list[str] | None, Query()] = None
) -> Response:
    try:
        wanted = parse_compare_ids(ids or [])
    except BadIds as exc:
        raise invalid("ids", str(exc), 400) from None
    try:
        doc = compare_document(conn, wanted, listing.today)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
    ctx = catalog_facts(conn, listing.today)
    doc["data"] = [offer_json(row, ctx) for row in doc["data"]]
    response = Response(dumps({"catalog_version": listing.version, **doc}), media_type=JSON)
    cache(response)
    return response
