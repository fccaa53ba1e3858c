"""API keys, alert subscriptions and the alert outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import UTCDateTime


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_key"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=200)
    prefix: str = Field(max_length=16, index=True)
    key_hash: str = Field(max_length=128, unique=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class Subscription(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    api_key_id: int = Field(foreign_key="api_key.id", index=True)
    name: str | None = Field(default=None, max_length=200)
    filters: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    condition: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    channel: str = Field(max_length=16)
    url: str | None = Field(default=None, max_length=2048)
    secret: str | None = Field(default=None, max_length=128)
    created_at: datetime = Field(sa_type=UTCDateTime)
    deleted_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class AlertEvent(SQLModel, table=True):
    __tablename__ = "alert_event"

    id: int | None = Field(default=None, primary_key=True)
    subscription_id: int = Field(foreign_key="subscription.id", index=True)
    catalog_version: int = Field(index=True)
    event_type: str = Field(max_length=32)
    offer_id: int | None = None
    payload: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    idempotency_key: str = Field(max_length=100, unique=True)
    status: str = Field(default="pending", max_length=16, index=True)
    attempts: int = 0
    next_attempt_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_error: str | None = Field(default=None, max_length=2000)
    created_at: datetime = Field(sa_type=UTCDateTime)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
