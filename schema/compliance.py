"""Certifications, country lists, export-control rule sets and GPU classifications.

Every compliance table is versioned on two time axes (see ``docs/compliance.md``):

* **validity** (``valid_from``/``valid_to``, ``effective_from``/``effective_to``): when the
  fact holds in the world (a certificate's term, a rule's effective dates);
* **record** (``recorded_at``/``superseded_at``): when the catalog held that version of the
  row. Loading a changed row never updates it: the old version gets ``superseded_at`` and a
  new version is inserted, so an ``as_of`` query can answer with what was recorded then.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal, get_args

from sqlalchemy import JSON
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401
from schema.types import UTCDateTime

CertScheme = Literal[
    "iso27001",
    "soc2_type2",
    "hds",
    "c5",
    "iso27017",
    "iso27018",
    "pci_dss",
    "hipaa",
    "fedramp",
]
"""The certification schemes the catalog knows (rows of ``certifications.yaml``)."""
CERT_SCHEMES: tuple[str, ...] = get_args(CertScheme)


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


class CountryMembership(SQLModel, table=True):
    """One country's membership of one list (EU, EEA, adequacy, a US country group)."""

    __tablename__ = "country_membership"

    id: int | None = Field(default=None, primary_key=True)
    country: str = Field(max_length=2, index=True)
    list: str = Field(max_length=32, index=True)
    valid_from: date | None = None
    valid_to: date | None = None
    source_url: str = Field(max_length=1000)
    checked: date
    notes: str | None = Field(default=None, max_length=2000)
    recorded_at: datetime = Field(sa_type=UTCDateTime)
    superseded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class ExportRuleSet(SQLModel, table=True):
    __tablename__ = "export_rule_set"

    id: int | None = Field(default=None, primary_key=True)
    slug: str = Field(max_length=64, index=True)
    name: str = Field(max_length=300)
    effective_from: date
    effective_to: date | None = None
    rules: dict[str, Any] = Field(default_factory=dict, sa_type=JSON)
    source_urls: list[str] = Field(default_factory=list, sa_type=JSON)
    checked: date | None = None
    notes: str | None = Field(default=None, max_length=2000)
    recorded_at: datetime = Field(sa_type=UTCDateTime)
    superseded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class GpuClassification(SQLModel, table=True):
    __tablename__ = "gpu_classification"

    id: int | None = Field(default=None, primary_key=True)
    gpu_slug: str = Field(foreign_key="gpu_model.slug", max_length=64, index=True)
    eccn: str = Field(max_length=32)
    basis: str = Field(max_length=16, description="official | vendor | computed")
    effective_from: date | None = None
    source_url: str | None = Field(default=None, max_length=1000)
    checked: date | None = None
    notes: str | None = Field(default=None, max_length=2000)
    recorded_at: datetime = Field(sa_type=UTCDateTime)
    superseded_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
