"""Comparisons across providers: who is eligible, and what a workload costs over time."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from schema.api import (
    EligibleProviders,
    TcoProvider,
    TcoResult,
)
from service.api.deps import ConnDep, cache, reject_unknown_params
from service.api.params import FILTER_PARAMS, ListingDep
from service.api.serialize import eligible_json
from service.core.units import HOURS_PER_MONTH
from service.query.eligibility import eligible_providers, explain_exclusions
from service.query.facts import catalog_facts
from service.query.tco import StorageClass, Workload
from service.query.tco import tco as total_cost

router = APIRouter(prefix="/v1", tags=["compare"])

MAX_TB = 1_000_000
TCO_PARAMS = (
    "gpu_count",
    "hours_per_month",
    "months",
    "egress_tb_per_month",
    "inter_region_tb_per_month",
    "storage_tb",
    "storage_class",
)


@router.get(
    "/eligible-providers",
    response_model=EligibleProviders,
    dependencies=[Depends(reject_unknown_params(FILTER_PARAMS | {"explain"}))],
    description="One row per provider with a matching offer: its cheapest (USD per "
    "GPU-hour) and how many match. `explain=true` adds why every other provider is out.",
)
def eligible(
    response: Response,
    conn: ConnDep,
    listing: ListingDep,
    explain: bool = False,
) -> EligibleProviders:
    cache(response, pinned=listing.as_of)
    rows = eligible_providers(
        conn, listing.filters, version=listing.pinned_version, compliance=listing.compliance
    )
    reasons = None
    if explain:
        reasons = explain_exclusions(
            conn,
            listing.filters,
            {r["provider"] for r in rows},
            version=listing.pinned_version,
            compliance=listing.compliance,
        )
    names = catalog_facts(conn, listing.today).gpu_names
    return EligibleProviders.model_validate(eligible_json(rows, names, listing.version, reasons))


@router.get(
    "/tco",
    response_model=TcoResult,
    dependencies=[Depends(reject_unknown_params(FILTER_PARAMS | set(TCO_PARAMS)))],
    description="Per provider, the cost of `gpu_count` GPUs used `hours_per_month` for "
    "`months`, for each price kind offered (cheapest matching offer per GPU-hour), with "
    "the hidden costs beside the instance: `egress_tb_per_month` sent to the internet, "
    "`inter_region_tb_per_month` sent to the provider's other regions, and `storage_tb` "
    "of `storage_class` storage (1 TB = 1,024 GB), each at the offer's region's published "
    "rates. Hourly kinds bill used hours; monthly and reserved kinds bill every hour of "
    "each whole term (730 h a month), paid at the term's start. A hidden cost whose price "
    "is unknown is left out of `total_usd` and named in `unknown_costs`. "
    "`break_even_month`: the first month whose cumulative on-demand cost reaches the "
    "reserved term's, hidden costs included.",
)
def tco(
    response: Response,
    conn: ConnDep,
    listing: ListingDep,
    gpu_count: Annotated[Decimal, Query(gt=0, le=100_000)] = Decimal(8),
    hours_per_month: Annotated[Decimal, Query(gt=0, le=HOURS_PER_MONTH)] = HOURS_PER_MONTH,
    months: Annotated[int, Query(ge=1, le=120)] = 12,
    egress_tb_per_month: Annotated[Decimal, Query(ge=0, le=MAX_TB)] = Decimal(0),
    inter_region_tb_per_month: Annotated[Decimal, Query(ge=0, le=MAX_TB)] = Decimal(0),
    storage_tb: Annotated[Decimal, Query(ge=0, le=MAX_TB)] = Decimal(0),
    storage_class: Annotated[StorageClass, Query()] = "block",
) -> TcoResult:
    cache(response, pinned=listing.as_of)
    work = Workload(
        gpu_count,
        hours_per_month,
        months,
        egress_tb_per_month,
        inter_region_tb_per_month,
        storage_tb,
        storage_class,
    )
    data = total_cost(
        conn,
        listing.filters,
        work,
        on=listing.today,
        version=listing.pinned_version,
        compliance=listing.compliance,
    )
    return TcoResult(
        catalog_version=listing.version,
        gpu_count=gpu_count,
        hours_per_month=hours_per_month,
        months=months,
        egress_tb_per_month=egress_tb_per_month,
        inter_region_tb_per_month=inter_region_tb_per_month,
        storage_tb=storage_tb,
        storage_class=storage_class,
        data=[TcoProvider.model_validate(p) for p in data],
    )
