"""Atom feeds: recent catalog changes (listing filters) and one subscription's events."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import ValidationError

from schema.alerts import SubscriptionFilters
from schema.types import utcnow
from service.alerts.atom import MEDIA_TYPE, TAG_AUTHORITY, build_feed
from service.alerts.feeds import event_entries, recent_changes
from service.alerts.keys import verify_api_key
from service.alerts.store import get_subscription, list_events
from service.api.auth import presented_key
from service.api.deps import ConnDep, RowId, reject_unknown_params
from service.api.problems import Problem

router = APIRouter(prefix="/v1", tags=["feeds"])
FILTER_PARAMS = set(SubscriptionFilters.model_fields)
ATOM: dict[int | str, dict[str, Any]] = {200: {"content": {"application/atom+xml": {}}}}


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _filters(request: Request) -> SubscriptionFilters:
    raw = {k: v for k, v in request.query_params.items() if k in FILTER_PARAMS}
    try:
        return SubscriptionFilters.model_validate(raw)
    except ValidationError as exc:
        params = [
            {"name": ".".join(str(p) for p in e["loc"]) or "query", "reason": e["msg"]}
            for e in exc.errors()[:20]
        ]
        names = ", ".join(p["name"] for p in params)
        raise Problem(
            422,
            "Invalid parameter",
            f"invalid: {names}",
            kind="invalid-parameter",
            invalid_params=params,
        ) from None


@router.get(
    "/changes.atom",
    response_class=Response,
    responses=ATOM,
    dependencies=[Depends(reject_unknown_params(FILTER_PARAMS | {"limit"}))],
)
def changes_feed(
    request: Request,
    conn: ConnDep,
    filters: Annotated[SubscriptionFilters, Depends(_filters)],
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    """Recent new prices, price changes and withdrawals, filtered like ``/v1/offers``
    (gpu, provider, source, region, country, not_country, price_kind, min_gpus,
    max_gpus, min_gpu_memory_gb, bare_metal, max_price_per_gpu_hour)."""
    entries, latest = recent_changes(conn, filters, _base(request), limit)
    body = build_feed(
        feed_id=f"{TAG_AUTHORITY}changes?{request.url.query}",
        title="gpuatlas: GPU price changes",
        subtitle="New offers, price changes and withdrawals in the gpuatlas catalog",
        self_url=str(request.url),
        alternate_url=f"{_base(request)}/v1/offers",
        updated=latest or utcnow(),
        entries=entries,
    )
    return Response(body, media_type=MEDIA_TYPE)


@router.get(
    "/subscriptions/{subscription_id}/feed.atom",
    response_class=Response,
    responses=ATOM,
    dependencies=[Depends(reject_unknown_params({"token", "limit"}))],
)
def subscription_feed(
    subscription_id: RowId,
    request: Request,
    conn: ConnDep,
    token: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    """A subscription's events. Authenticate with the owner's API key, or with
    ``?token=<the subscription secret>`` (for feed readers, which cannot send headers)."""
    row = get_subscription(conn, subscription_id)
    missing = Problem(404, "Not found", f"subscription {subscription_id} does not exist")
    if row is None:
        raise missing
    key = presented_key(request)
    if token is not None:
        if not hmac.compare_digest(token.encode(), (row["secret"] or "").encode()):
            raise Problem(401, "Unauthorized", "wrong feed token", kind="unauthorized")
    elif key is None:
        raise Problem(
            401, "Unauthorized", "give ?token=<secret> or an API key", kind="unauthorized"
        )
    elif verify_api_key(conn, key) != row["api_key_id"]:
        raise missing
    events = list_events(conn, subscription_id, limit=limit)
    entries = event_entries(events, _base(request))
    body = build_feed(
        feed_id=f"{TAG_AUTHORITY}subscription:{subscription_id}",
        title=f"gpuatlas alerts: {row['name'] or f'subscription {subscription_id}'}",
        self_url=f"{_base(request)}/v1/subscriptions/{subscription_id}/feed.atom",
        alternate_url=f"{_base(request)}/v1/subscriptions/{subscription_id}",
        updated=max((e.updated for e in entries), default=row["created_at"]),
        entries=entries,
    )
    return Response(body, media_type=MEDIA_TYPE)
