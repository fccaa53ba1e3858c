"""Alert subscriptions (API key): create, list, read, delete, and their delivery log."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.routing import APIRoute

from schema.alerts import (
    AlertEventPublic,
    EventStatus,
    SubscriptionCreate,
    SubscriptionCreated,
    SubscriptionPublic,
)
from schema.text import ascii_digits
from service.alerts.ssrf import UnsafeUrl
from service.alerts.store import (
    LimitReached,
    create_subscription,
    delete_subscription,
    get_subscription,
    list_events,
    list_subscriptions,
)
from service.api.auth import ApiKeyDep
from service.api.deps import (
    NO_PARAMS,
    ConnDep,
    RowId,
    SettingsDep,
    get_engine,
    reject_nul_body,
    reject_unknown_params,
)
from service.api.problems import Problem

MAX_BODY_BYTES = 64 * 1024


async def read_bounded_body(request: Request, limit: int = MAX_BODY_BYTES) -> None:
    """Read the body (at most ``limit`` bytes) before FastAPI parses it; 413 beyond, 422
    for a NUL character in one of its strings."""
    declared = request.headers.get("content-length")
    too_large = Problem(
        413, "Content too large", f"the body exceeds {limit} bytes", kind="content-too-large"
    )
    if declared and ascii_digits(declared) and int(declared) > limit:
        raise too_large
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    request._body = b"".join(chunks)  # what Request.body() returns from now on
    reject_nul_body(request._body)


class BoundedBodyRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def bounded(request: Request) -> Response:
            if request.method in ("POST", "PUT", "PATCH"):
                await read_bounded_body(request)
            return await handler(request)

        return bounded


router = APIRouter(prefix="/v1", tags=["alerts"], route_class=BoundedBodyRoute)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "filters": row["filters"],
        "condition": row["condition"],
        "channel": row["channel"],
        "url": row["url"],
        "feed_url": f"/v1/subscriptions/{row['id']}/feed.atom",
        "created_at": row["created_at"],
    }


def owned_subscription(subscription_id: RowId, key_id: ApiKeyDep, conn: ConnDep) -> dict[str, Any]:
    """The caller's live subscription, or 404 (another key's subscription is not found)."""
    row = get_subscription(conn, subscription_id)
    if row is None or row["api_key_id"] != key_id:
        raise Problem(404, "Not found", f"subscription {subscription_id} does not exist")
    return row


OwnedSubscription = Annotated[dict[str, Any], Depends(owned_subscription)]


@router.post(
    "/subscriptions",
    status_code=201,
    response_model=SubscriptionCreated,
    responses={401: {}, 413: {}, 422: {}},
    dependencies=NO_PARAMS,
)
def create(
    body: SubscriptionCreate,
    key_id: ApiKeyDep,
    settings: SettingsDep,
    request: Request,
) -> SubscriptionCreated:
    """The response holds the subscription's secret, once: the HMAC key of webhook
    signatures and the token of its Atom feed (``feed.atom?token=...``)."""
    try:
        row, secret = create_subscription(get_engine(request), settings, key_id, body)
    except UnsafeUrl as exc:
        raise Problem(
            422,
            "Invalid parameter",
            f"url: {exc}",
            kind="invalid-parameter",
            invalid_params=[{"name": "url", "reason": str(exc)}],
        ) from None
    except LimitReached as exc:
        raise Problem(409, "Too many subscriptions", str(exc), kind="limit-reached") from None
    return SubscriptionCreated(**_public(row), secret=secret)


@router.get(
    "/subscriptions",
    response_model=list[SubscriptionPublic],
    dependencies=NO_PARAMS,
)
def list_all(key_id: ApiKeyDep, conn: ConnDep) -> list[SubscriptionPublic]:
    return [SubscriptionPublic(**_public(row)) for row in list_subscriptions(conn, key_id)]


@router.get(
    "/subscriptions/{subscription_id}", response_model=SubscriptionPublic, dependencies=NO_PARAMS
)
def read(subscription: OwnedSubscription) -> SubscriptionPublic:
    return SubscriptionPublic(**_public(subscription))


@router.delete("/subscriptions/{subscription_id}", status_code=204, dependencies=NO_PARAMS)
def delete(subscription: OwnedSubscription, key_id: ApiKeyDep, request: Request) -> Response:
    delete_subscription(get_engine(request), key_id, subscription["id"])
    return Response(status_code=204)


@router.get(
    "/subscriptions/{subscription_id}/events",
    response_model=list[AlertEventPublic],
    dependencies=[Depends(reject_unknown_params({"status", "before", "limit"}))],
)
def events(
    subscription: OwnedSubscription,
    conn: ConnDep,
    status: EventStatus | None = None,
    before: Annotated[
        int | None, Query(ge=1, le=2**31 - 1, description="page back: ids below this")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AlertEventPublic]:
    """Newest first: pending, delivered and dead-lettered (``status=dead``) events."""
    rows = list_events(
        conn,
        subscription["id"],
        status=status.value if status else None,
        before_id=before,
        limit=limit,
    )
    return [AlertEventPublic(**row) for row in rows]
