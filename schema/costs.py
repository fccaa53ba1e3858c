"""What a GPU instance costs besides itself: data transfer and storage, per provider.

One row is one tier of one cost of one provider, in one region or in all of them
(``region`` empty). A tier bills every GB (per month for transfer, per month stored for
storage) from ``from_gb`` up to the next tier's ``from_gb``; a free allowance is a tier
priced 0. Each row keeps the page it was read from and the day it was checked.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from enum import StrEnum

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401  (naming convention first)
from schema.types import DecimalType

ALL_REGIONS = ""
"""``provider_cost.region`` of a row that holds in every region of its provider."""


class CostKind(StrEnum):
    internet_egress = "internet_egress"
    """data sent from an instance to the internet, per GB in a month"""
    inter_region = "inter_region"
    """data sent to another region of the same provider, per GB in a month"""
    block_storage = "block_storage"
    """volumes and file systems attached to instances, per GB stored for a month"""
    object_storage = "object_storage"
    """buckets (S3-style object storage), per GB stored for a month"""


class ProviderCost(SQLModel, table=True):
    __tablename__ = "provider_cost"
    __table_args__ = (UniqueConstraint("provider", "region", "kind", "from_gb"),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(foreign_key="provider.slug", max_length=64, index=True)
    region: str = Field(default=ALL_REGIONS, max_length=100)
    kind: str = Field(max_length=32)
    from_gb: Decimal = Field(sa_type=DecimalType, description="the tier's first GB")
    price: Decimal = Field(sa_type=DecimalType, description="per GB, or per GB-month stored")
    currency: str = Field(max_length=3)
    source_url: str = Field(max_length=1000)
    checked: date
    notes: str | None = Field(default=None, max_length=2000)
