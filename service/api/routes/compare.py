"""Comparisons across providers: who is eligible, and what a workload costs over time."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response

from schema.api import (
    EligibleProvider,
    EligibleProviders,
    Exclusion,
    TcoOption,
    TcoProvider,
    TcoResult,
)
from service.api.deps import ConnDep, cache, reject_unknown_params
from service.api.params import FILTER_PARAMS, ListingDep
from service.api.serialize import offer_public
from service.core.units import HOURS_PER_MONTH, q
from service.query.eligibility import cheapest_by_kind, eligible_providers, explain_exclusions
from service.query.facts import catalog_facts

router = APIRouter(prefix="/v1", tags=["compare"])

HOURLY_KINDS = {"on_demand", "spot", "low_priority", "interruptible"}
TERM_MONTHS = {
    "monthly": 1,
    "reserved_1m": 1,
    "reserved_6m": 6,
    "reserved_1y": 12,
    "reserved_3y": 36,
}


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
    excluded = None
    if explain:
        reasons = explain_exclusions(
            conn,
            listing.filters,
            {r["provider"] for r in rows},
            version=listing.pinned_version,
            compliance=listing.compliance,
        )
        excluded = [Exclusion(provider=p, reasons=r) for p, r in sorted(reasons.items())]
    names = catalog_facts(conn, listing.today).gpu_names
    return EligibleProviders(
        catalog_version=listing.version,
        data=[
            EligibleProvider(
                provider=r["provider"],
                offer_count=r["offer_count"],
                cheapest=offer_public(r, names),
            )
            for r in rows
        ],
        excluded=excluded,
    )


def term_cost(per_gpu_hour: Decimal, gpus: Decimal, term: int, months: int) -> Decimal:
    """A commitment bills every hour of each whole term, paid when the term starts."""
    terms = math.ceil(months / term)
    return per_gpu_hour * gpus * HOURS_PER_MONTH * term * terms


def break_even(
    on_demand: Decimal, reserved: Decimal, gpus: Decimal, hours: Decimal, term: int, months: int
) -> int | None:
    for month in range(1, months + 1):
        if on_demand * gpus * hours * month >= term_cost(reserved, gpus, term, month):
            return month
    return None


@router.get(
    "/tco",
    response_model=TcoResult,
    dependencies=[
        Depends(reject_unknown_params(FILTER_PARAMS | {"gpu_count", "hours_per_month", "months"}))
    ],
    description="Per provider, the cost of `gpu_count` GPUs used `hours_per_month` for "
    "`months`, for each price kind offered (cheapest matching offer per GPU-hour). Hourly "
    "kinds bill used hours; monthly and reserved kinds bill every hour of each whole term "
    "(730 h a month), paid at the term's start. `break_even_month`: the first month whose "
    "cumulative on-demand cost reaches the reserved term's.",
)
def tco(
    response: Response,
    conn: ConnDep,
    listing: ListingDep,
    gpu_count: Annotated[Decimal, Query(gt=0, le=100_000)] = Decimal(8),
    hours_per_month: Annotated[Decimal, Query(gt=0, le=HOURS_PER_MONTH)] = HOURS_PER_MONTH,
    months: Annotated[int, Query(ge=1, le=120)] = 12,
) -> TcoResult:
    cache(response, pinned=listing.as_of)
    rows = cheapest_by_kind(
        conn, listing.filters, version=listing.pinned_version, compliance=listing.compliance
    )
    by_provider: dict[str, dict[str, dict]] = {}  # type: ignore[type-arg]
    for row in rows:
        by_provider.setdefault(row["provider"], {})[row["price_kind"]] = row
    data = []
    for provider, kinds in sorted(by_provider.items()):
        od = kinds.get("on_demand")
        options = []
        for kind, row in sorted(kinds.items()):
            price = row["gpu_hour_usd"]
            even = None
            if kind in HOURLY_KINDS:
                total = price * gpu_count * hours_per_month * months
            elif kind in TERM_MONTHS:
                term = TERM_MONTHS[kind]
                total = term_cost(price, gpu_count, term, months)
                if od is not None:
                    even = break_even(
                        od["gpu_hour_usd"], price, gpu_count, hours_per_month, term, months
                    )
            else:
                continue
            options.append(
                TcoOption(
                    price_kind=kind,
                    offer_id=row["id"],
                    price_per_gpu_hour_usd=price,
                    total_usd=q(total),
                    break_even_month=even,
                )
            )
        options.sort(key=lambda o: o.total_usd)
        data.append(TcoProvider(provider=provider, options=options))
    return TcoResult(
        catalog_version=listing.version,
        gpu_count=gpu_count,
        hours_per_month=hours_per_month,
        months=months,
        data=data,
    )
