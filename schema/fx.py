"""Foreign-exchange reference rates (per euro, as the ECB publishes them)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import DecimalType

MAX_FX_DAY_MOVE = Decimal(2)
"""A rate more than this factor away from the same currency's rate on the nearest other day
(in the feed, or already stored) is a broken feed (a decimal slip, a x100 spike), not a
market move: stored rates never change, so a bad one would convert that day's prices for
good."""


class FxRate(SQLModel, table=True):
    __tablename__ = "fx_rate"
    __table_args__ = (UniqueConstraint("rate_date", "currency"),)

    id: int | None = Field(default=None, primary_key=True)
    rate_date: date = Field(index=True)
    currency: str = Field(max_length=3)
    per_eur: Decimal = Field(sa_type=DecimalType, description="units of currency per 1 EUR")
    source: str = Field(max_length=64)
    crawl_run_id: int | None = None
