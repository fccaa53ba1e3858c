"""Offer listings, one offer, and its price history."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from sqlalchemy import Connection

from schema.api import HistoryPage, ObservationPublic, OfferDetail, Page
from schema.types import decimal_to_text, utcnow
from service.api import cursor as cursors
from service.api.deps import ConnDep, VersionDep, cache, reject_unknown_params
from service.api.params import FILTER_PARAMS, DisplayCurrency, ListingDep, check_currency, invalid
from service.api.problems import Problem
from service.api.serialize import dumps, observation_public, offer_json
from service.catalog.fx import FxTable
from service.core.units import q
from service.query.facts import offer_context
from service.query.history import TooManyBuckets, offer_buckets
from service.query.history import offer_history as query_history
from service.query.offers import After, also_from, get_offer, list_offers
from service.query.sql import SORT_KEYS, NotFound

router = APIRouter(prefix="/v1", tags=["offers"])

OfferId = Annotated[int, Path(ge=1, le=2**31 - 1)]

LISTING_PARAMS = FILTER_PARAMS | {"sort", "limit", "cursor", "currency"}
SORT_VALUES = tuple(SORT_KEYS) + tuple(f"-{k}" for k in SORT_KEYS)
SortParam = Literal[
    "price_per_gpu_hour",
    "price",
    "price_per_pflop_hour",
    "gpu_count",
    "provider",
    "-price_per_gpu_hour",
    "-price",
    "-price_per_pflop_hour",
    "-gpu_count",
    "-provider",
]


def query_fingerprint(request: Request) -> str:
    """What a cursor is valid for: every parameter but the cursor and the page size."""
    items = sorted(
        (k, v) for k, v in request.query_params.multi_items() if k not in ("cursor", "limit")
    )
    return hashlib.sha256(repr(items).encode()).hexdigest()[:12]


def _cursor_value(value: Any) -> Any:
    """A sort key as the cursor carries it: a number as its text (SQLite reads some keys
    as floats, PostgreSQL as decimals: the same cursor either way)."""
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        return decimal_to_text(value)
    return value


def _decode_after(state: dict[str, Any], dialect: str, sort: str) -> After:
    offer_id, value = cursors.integer(state.get("i")), state.get("k")
    if value is None or sort == "provider":
        if value is not None and not isinstance(value, str):
            raise cursors.invalid()
        return After(value, offer_id)
    number = cursors.number(value)
    return After(float(number) if dialect == "sqlite" else number, offer_id)


def display_rate(conn: Connection, currency: str | None, today: Any) -> tuple[str, Decimal] | None:
    code = check_currency(currency)
    if code is None:
        return None
    if code == "USD":
        return code, Decimal(1)
    conversion = FxTable.load(conn).to_usd(code, today)
    if conversion is None or not conversion.usd_per_unit:
        raise invalid("currency", f"no exchange rate known for {code}")
    return code, q(Decimal(1) / conversion.usd_per_unit)


@router.get(
    "/offers",
    response_model=Page[OfferDetail],
    dependencies=[Depends(reject_unknown_params(LISTING_PARAMS))],
)
def offers(
    request: Request,
    response: Response,
    conn: ConnDep,
    listing: ListingDep,
    sort: Annotated[
        SortParam, Query(description="sort key; prefix with '-' for descending")
    ] = "price_per_gpu_hour",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
    currency: DisplayCurrency = None,
) -> Response:
    descending = sort.startswith("-")
    key = sort.removeprefix("-")
    version = listing.version
    fingerprint = query_fingerprint(request)
    after = None
    if cursor:
        state = cursors.decode(cursor)
        if state.get("q") != fingerprint:
            raise cursors.invalid("the cursor belongs to a different query")
        version = cursors.integer(state.get("v"), listing.current)
        after = _decode_after(state, conn.dialect.name, key)
    cache(response, pinned=version != listing.current)
    pinned = None if version == listing.current else version
    rows = list_offers(
        conn,
        listing.filters,
        limit + 1,
        version=pinned,
        compliance=listing.compliance,
        sort=key,
        descending=descending,
        after=after,
    )
    next_cursor = None
    if len(rows) > limit:
        last = rows[limit - 1]
        next_cursor = cursors.encode(
            {
                "v": version,
                "q": fingerprint,
                "k": _cursor_value(last["sort_value"]),
                "i": last["id"],
            }
        )
    page = rows[:limit]
    ctx = offer_context(conn, page, listing.today)
    display = display_rate(conn, currency, listing.today)
    others = also_from(conn, page, version=pinned)
    body = {
        "data": [offer_json(r, ctx, display, others[r["id"]]) for r in page],
        "next_cursor": next_cursor,
        "catalog_version": version,
    }
    return json_response(body, response)


def json_response(body: Any, response: Response) -> Response:
    """``body`` (plain values shaped like the response model) as JSON, with the headers set."""
    return Response(dumps(body), media_type="application/json", headers=dict(response.headers))


@router.get(
    "/offers/{offer_id}",
    response_model=OfferDetail,
    dependencies=[Depends(reject_unknown_params({"currency"}))],
)
def offer(
    response: Response,
    conn: ConnDep,
    offer_id: OfferId,
    version: VersionDep,
    currency: DisplayCurrency = None,
) -> Response:
    try:
        row = get_offer(conn, offer_id)
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
    today = utcnow().date()
    ctx = offer_context(conn, [row], today)
    display = display_rate(conn, currency, today)
    others = also_from(conn, [row])[offer_id]
    return json_response(offer_json(row, ctx, display, others), response)


def _utc(name: str, value: datetime | None) -> datetime | None:
    """``value`` in UTC; a 422 naming ``name`` without a time zone or when its UTC instant
    lies outside years 1-9999 (``9999-12-31T23:59:59-01:00``)."""
    if value is None:
        return None
    if value.tzinfo is None:
        raise Problem(
            422,
            "Invalid parameter",
            f"{name}: give a time zone (e.g. Z)",
            kind="invalid-parameter",
            invalid_params=[{"name": name, "reason": "naive datetime"}],
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise invalid(name, "out of range (years 1 to 9999 in UTC)") from None


@router.get(
    "/offers/{offer_id}/history",
    response_model=list[ObservationPublic] | HistoryPage,
    dependencies=[Depends(reject_unknown_params({"from", "to", "resolution"}))],
    description="raw: every observation, oldest first (a list). day / week: one bucket per "
    "UTC day or ISO week with min / max / last price (an object with `data`).",
)
def offer_history(
    conn: ConnDep,
    offer_id: OfferId,
    version: VersionDep,
    start: Annotated[datetime | None, Query(alias="from")] = None,
    end: Annotated[datetime | None, Query(alias="to")] = None,
    resolution: Literal["raw", "day", "week"] = "raw",
) -> list[ObservationPublic] | HistoryPage:
    start, end = _utc("from", start), _utc("to", end)
    if start is not None and end is not None and end < start:
        raise invalid("to", "before from")
    try:
        if resolution == "raw":
            return [observation_public(r) for r in query_history(conn, offer_id, start, end)]
        now = utcnow()  # no bucket for a day that has not come: no price was seen there
        buckets = offer_buckets(conn, offer_id, resolution, start, min(end or now, now))
    except NotFound as exc:
        raise Problem(404, "Not found", str(exc)) from None
    except TooManyBuckets as exc:
        raise invalid("from", f"{exc}: give a later from, or resolution=week") from None
    except OverflowError:
        raise invalid("from", "out of range") from None
    return HistoryPage(offer_id=offer_id, resolution=resolution, data=buckets)  # type: ignore[arg-type]
