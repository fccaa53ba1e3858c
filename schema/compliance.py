"""Certifications, export-control rule sets and GPU classifications."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import UTCDateTime


class Certification(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(foreign_key="provider.slug", max_length=64, index=True)
    scheme: str = Field(max_length=32, index=True)
    status: str = Field(default="certified", max_length=16)
    regions: list[str] | None = Field(default=None, sa_type=JSON, description="null = all")
    valid_from: date | None = None
    valid_to: date | None = None
    evidence_url: str | None = Field(default=None, max_length=1000)
    checked: date | None = None
    recorded_at: datetime = Field(sa_type=UTCDateTime)
    superseded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    notes: str | None = Field(default=None, max_length=2000)


class ExportRuleSet(SQLModel, table=True):
    __tablename__ = "export_rule_set"

    slug: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=300)
    effective_from: date
    effective_to: date | None = None
    rules: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    source_urls: list[str] = Field(default_factory=list, sa_type=JSON)
    checked: date | None = None


class GpuClassification(SQLModel, table=True):
    __tablename__ = "gpu_classification"

    id: int | None = Field(default=None, primary_key=True)
    gpu_slug: str = Field(foreign_key="gpu_model.slug", max_length=64, index=True)
    eccn: str = Field(max_length=32)
    basis: str = Field(max_length=16, description="official | vendor | computed")
    effective_from: date | None = None
    source_url: str | None = Field(default=None, max_length=1000)
    notes: str | None = Field(default=None, max_length=2000)
