"""Subscriptions and their events: create, list, delete (soft), read the outbox."""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update

from schema.alerts import AlertEvent, Channel, Subscription, SubscriptionCreate
from schema.types import utcnow
from service.alerts.ssrf import check_url
from service.core.config import Settings
from service.core.db import writer

SUBSCRIPTION = Subscription.__table__  # type: ignore[attr-defined]
EVENT = AlertEvent.__table__  # type: ignore[attr-defined]
MAX_SUBSCRIPTIONS_PER_KEY = 1000


class LimitReached(Exception):
    """The API key already has the maximum number of subscriptions."""


def create_subscription(
    engine: Engine, settings: Settings, api_key_id: int, body: SubscriptionCreate
) -> tuple[dict[str, Any], str]:
    """Store a subscription; returns its row and its secret (shown to the caller once).

    A webhook URL is vetted first (:class:`~service.alerts.ssrf.UnsafeUrl` when refused)."""
    if body.channel == Channel.webhook:
        assert body.url is not None
        check_url(body.url, allow_private=settings.allow_private_webhooks)
    secret = secrets.token_urlsafe(32)
    values = {
        "api_key_id": api_key_id,
        "name": body.name,
        "filters": body.filters.model_dump(mode="json", exclude_none=True),
        "condition": body.condition.model_dump(mode="json", exclude_none=True),
        "channel": body.channel.value,
        "url": body.url,
        "secret": secret,
        "created_at": utcnow(),
    }
    with writer(engine).begin() as conn:
        live = conn.execute(
            select(SUBSCRIPTION.c.id)
            .where(SUBSCRIPTION.c.api_key_id == api_key_id, SUBSCRIPTION.c.deleted_at.is_(None))
            .limit(MAX_SUBSCRIPTIONS_PER_KEY)
        ).all()
        if len(live) >= MAX_SUBSCRIPTIONS_PER_KEY:
            raise LimitReached(f"an API key may hold {MAX_SUBSCRIPTIONS_PER_KEY} subscriptions")
        result = conn.execute(insert(SUBSCRIPTION).values(**values))
        values["id"] = int(result.inserted_primary_key[0])  # type: ignore[index]
    return values, secret


PUBLIC_COLUMNS = (
    SUBSCRIPTION.c.id,
    SUBSCRIPTION.c.name,
    SUBSCRIPTION.c.filters,
    SUBSCRIPTION.c.condition,
    SUBSCRIPTION.c.channel,
    SUBSCRIPTION.c.url,
    SUBSCRIPTION.c.created_at,
)


def list_subscriptions(conn: Connection, api_key_id: int) -> list[dict[str, Any]]:
    stmt = (
        select(*PUBLIC_COLUMNS)
        .where(SUBSCRIPTION.c.api_key_id == api_key_id, SUBSCRIPTION.c.deleted_at.is_(None))
        .order_by(SUBSCRIPTION.c.id)
    )
    return [dict(row) for row in conn.execute(stmt).mappings()]


def get_subscription(conn: Connection, subscription_id: int) -> dict[str, Any] | None:
    """A live subscription with its owner and secret (internal use), or None."""
    stmt = select(*PUBLIC_COLUMNS, SUBSCRIPTION.c.api_key_id, SUBSCRIPTION.c.secret).where(
        SUBSCRIPTION.c.id == subscription_id, SUBSCRIPTION.c.deleted_at.is_(None)
    )
    row = conn.execute(stmt).mappings().first()
    return dict(row) if row is not None else None


def delete_subscription(engine: Engine, api_key_id: int, subscription_id: int) -> bool:
    """Soft delete: its events stay readable; pending ones are dead-lettered on delivery."""
    with writer(engine).begin() as conn:
        result = conn.execute(
            update(SUBSCRIPTION)
            .where(
                SUBSCRIPTION.c.id == subscription_id,
                SUBSCRIPTION.c.api_key_id == api_key_id,
                SUBSCRIPTION.c.deleted_at.is_(None),
            )
            .values(deleted_at=utcnow())
        )
        return bool(result.rowcount)


def list_events(
    conn: Connection,
    subscription_id: int,
    *,
    status: str | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Events newest first (``before_id`` pages back)."""
    stmt = select(EVENT).where(EVENT.c.subscription_id == subscription_id)
    if status:
        stmt = stmt.where(EVENT.c.status == status)
    if before_id is not None:
        stmt = stmt.where(EVENT.c.id < before_id)
    stmt = stmt.order_by(EVENT.c.id.desc()).limit(limit)
    return [dict(row) for row in conn.execute(stmt).mappings()]
