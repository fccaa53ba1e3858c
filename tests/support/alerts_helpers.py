"""Shared set-up of the alert tests: a key, subscriptions straight through the store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from schema.alerts import AlertEvent, SubscriptionCreate
from service.alerts.keys import create_api_key
from service.alerts.store import create_subscription
from service.core.config import Settings

EVENT = AlertEvent.__table__  # type: ignore[attr-defined]


def subscribe(
    engine: Engine, settings: Settings, key_id: int | None = None, **body: Any
) -> tuple[int, str]:
    if key_id is None:
        key_id = create_api_key(engine, "tests").id
    body.setdefault("channel", "webhook" if body.get("url") else "atom")
    row, secret = create_subscription(
        engine, settings, key_id, SubscriptionCreate.model_validate(body)
    )
    return int(row["id"]), secret


def events(engine: Engine, **where: Any) -> list[dict[str, Any]]:
    stmt = select(EVENT).order_by(EVENT.c.id)
    for name, value in where.items():
        stmt = stmt.where(EVENT.c[name] == value)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(stmt).mappings()]
