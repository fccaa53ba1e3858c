"""Offer listings, one offer, and its price history."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from schema.api import ObservationPublic, OfferPublic, Page
from schema.enums import PriceKind
from service.api import cursor as cursors
from service.api.deps import ConnDep, reject_unknown_params
from service.api.problems import Problem
from service.api.serialize import observation_public, offer_public
from service.queries import NotFound, OfferFilters, current_version, get_offer, list_offers
from service.queries import offer_history as query_history

router = APIRouter(prefix="/v1", tags=["offers"])

LISTING_PARAMS = {
    "gpu",
    "provider",
    "country",
    "price_kind",
    "source",
    "min_gpus",
    "max_gpus",
    "limit",
    "cursor",
}


@router.get(
    "/offers",
    response_model=Page[OfferPublic],
    dependencies=[Depends(reject_unknown_params(LISTING_PARAMS))],
)
def offers(
    conn: ConnDep,
    gpu: Annotated[str | None, Query(max_length=64, description="slug or family")] = None,
    provider: Annotated[str | None, Query(max_length=64)] = None,
    country: Annotated[str | None, Query(pattern="^[A-Za-z]{2}$")] = None,
    price_kind: PriceKind | None = None,
    source: Annotated[str | None, Query(max_length=100)] = None,
    min_gpus: Annotated[Decimal | None, Query(ge=0, le=1024)] = None,
    max_gpus: Annotated[Decimal | None, Query(ge=0, le=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> Page[OfferPublic]:
    version = current_version(conn)
    offset = 0
    if cursor:
        state = cursors.decode(cursor)
        offset = state.get("o", 0)
        if not isinstance(offset, int) or offset < 0:
            raise Problem(400, "Invalid cursor", "bad offset", kind="invalid-cursor")
    filters = OfferFilters(
        gpu=gpu,
        provider=provider,
        country=country,
        price_kind=price_kind.value if price_kind else None,
        source=source,
        min_gpus=min_gpus,
        max_gpus=max_gpus,
    )
    rows = list_offers(conn, filters, limit + 1, offset)
    next_cursor = cursors.encode({"o": offset + limit, "v": version}) if len(rows) > limit else None
    return Page[OfferPublic](
        data=[offer_public(r) for r in rows[:limit]],
        next_cursor=next_cursor,
        catalog_version=version,
    )


@router.get("/offers/{offer_id}", response_model=OfferPublic)
def offer(conn: ConnDep, offer_id: int) -> OfferPublic:
    try:
        return offer_public(get_offer(conn, offer_id))
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None


@router.get(
    "/offers/{offer_id}/history",
    response_model=list[ObservationPublic],
    dependencies=[Depends(reject_unknown_params({"from", "to"}))],
)
def offer_history(
    conn: ConnDep,
    offer_id: int,
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
) -> list[ObservationPublic]:
    for name, value in (("from", start), ("to", end)):
        if value is not None and value.tzinfo is None:
            raise Problem(
                422,
                "Invalid parameter",
                f"{name}: give a time zone (e.g. Z)",
                kind="invalid-parameter",
                invalid_params=[{"name": name, "reason": "naive datetime"}],
            )
    try:
        rows = query_history(conn, offer_id, start, end)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
    return [observation_public(r) for r in rows]
