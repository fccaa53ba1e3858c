"""Cluster facts of instance families, from reviewed reference data.

One row says what connects the GPUs of a provider's SKUs inside a node (the
interconnect, GB/s per GPU) and what connects their nodes (the network, Gb/s per node),
for one SKU (``sku``) or every SKU whose name starts with ``sku_prefix``. Ingest reads
these rows for the facts a price source does not state itself
(``fixtures/reference/interconnects.yaml``, loaded by ``service.catalog.cluster``).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from sqlalchemy import UniqueConstraint
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401  (naming convention first)
from schema.types import DecimalType


class ClusterReference(SQLModel, table=True):
    __tablename__ = "cluster_reference"
    __table_args__ = (UniqueConstraint("provider", "sku", "sku_prefix"),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(foreign_key="provider.slug", max_length=64, index=True)
    sku: str = Field(default="", max_length=200, description="one SKU name ('' with a prefix)")
    sku_prefix: str = Field(default="", max_length=200, description="SKU names starting so")
    interconnect: str | None = Field(default=None, max_length=16)
    interconnect_gbps: Decimal | None = Field(default=None, sa_type=DecimalType)
    network: str | None = Field(default=None, max_length=16)
    network_gbps: Decimal | None = Field(default=None, sa_type=DecimalType)
    source_url: str = Field(max_length=1000)
    checked: date
    notes: str | None = Field(default=None, max_length=2000)
