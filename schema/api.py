"""Public API bodies: what clients see (storage columns never leak through)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Money(BaseModel):
    amount: Decimal
    currency: str


class OfferPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    provider: str
    source: str
    sku: str
    region: str
    country: str | None
    gpu: str | None = Field(description="canonical GPU slug; null when the name is unmapped")
    gpu_name_raw: str | None
    gpu_count: Decimal
    vcpus: Decimal | None
    memory_gb: Decimal | None
    bare_metal: bool | None
    price_kind: str
    unit: str
    price_per: str
    price: Money
    price_is_floor: bool
    hourly_price: Money | None = Field(description="whole SKU for one hour, quoted currency")
    price_per_gpu_hour_usd: Decimal | None
    price_usd: Decimal | None
    fx_rate_usd: Decimal | None = Field(description="USD per unit of the quoted currency")
    fx_date: date | None
    status: str
    first_seen: datetime
    last_changed: datetime
    source_url: str | None
    crawl_run_id: int
    raw_payload_sha256: str | None
    catalog_version: int = Field(description="the version that set the current price")


class ObservationPublic(BaseModel):
    id: int
    amount: Decimal
    currency: str
    price_per_gpu_hour_usd: Decimal | None
    price_usd: Decimal | None
    fx_rate_usd: Decimal | None
    fx_date: date | None
    valid_from: datetime
    valid_to: datetime | None
    version_from: int
    version_to: int | None
    crawl_run_id: int
    raw_payload_sha256: str | None


class VersionPublic(BaseModel):
    id: int
    created_at: datetime
    source: str
    crawl_run_id: int
    added: int
    changed: int
    withdrawn: int
    updated: int


class Page(BaseModel, Generic[T]):
    data: list[T]
    next_cursor: str | None = None
    catalog_version: int
