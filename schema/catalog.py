"""Reference entities: providers, regions, GPU models and their aliases, SKUs."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from sqlalchemy import JSON, UniqueConstraint
from sqlmodel import Field, SQLModel

from schema.base import metadata  # noqa: F401  (naming convention first)
from schema.types import DecimalType


class Provider(SQLModel, table=True):
    slug: str = Field(primary_key=True, max_length=64)
    name: str = Field(max_length=200)
    hq_country: str | None = Field(default=None, max_length=2)
    kind: str = Field(default="unknown", max_length=32)
    status: str = Field(default="active", max_length=16)
    website: str | None = Field(default=None, max_length=500)
    pricing_url: str | None = Field(default=None, max_length=500)
    source_url: str | None = Field(default=None, max_length=500)
    checked: date | None = None
    notes: str | None = Field(default=None, max_length=2000)


class Region(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("provider", "code"),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(foreign_key="provider.slug", max_length=64, index=True)
    code: str = Field(max_length=100)
    name: str | None = Field(default=None, max_length=200)
    country: str = Field(max_length=2, index=True)
    city: str | None = Field(default=None, max_length=200)
    province: str | None = Field(
        default=None,
        max_length=100,
        description="first-level subdivision (province, state) where the source names one",
    )
    gpus: list[str] | None = Field(
        default=None,
        sa_type=JSON,
        description="GPU families known in this region (null: not published)",
    )
    members: list[str] | None = Field(
        default=None,
        sa_type=JSON,
        description="a group code (e.g. a price page's 'north-america'): its member region codes",
    )
    source_url: str | None = Field(default=None, max_length=500)
    checked: date | None = None


class GpuModel(SQLModel, table=True):
    __tablename__ = "gpu_model"

    slug: str = Field(primary_key=True, max_length=64)
    vendor: str = Field(max_length=32)
    name: str = Field(max_length=200)
    family: str = Field(max_length=32, index=True)
    memory_gb: Decimal | None = Field(default=None, sa_type=DecimalType)
    memory_type: str | None = Field(default=None, max_length=32)
    memory_bandwidth_tbps: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_fp64: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_tf32: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_bf16: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_fp16: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_fp8: Decimal | None = Field(default=None, sa_type=DecimalType)
    tops_int8: Decimal | None = Field(default=None, sa_type=DecimalType)
    tflops_fp4: Decimal | None = Field(default=None, sa_type=DecimalType)
    die_area_mm2: Decimal | None = Field(default=None, sa_type=DecimalType)
    interconnect: str | None = Field(default=None, max_length=200)
    form_factor: str | None = Field(default=None, max_length=32)
    default_rank: int | None = Field(
        default=None,
        description="a family default: picked (lowest first) when a raw name leaves out "
        "what tells this model from its siblings (schema.gpu_names)",
    )
    data_center: bool = True
    tdp_w: int | None = None
    launch_year: int | None = None
    source_url: str | None = Field(default=None, max_length=1000)
    checked: date | None = None
    notes: str | None = Field(default=None, max_length=2000)


class GpuAlias(SQLModel, table=True):
    __tablename__ = "gpu_alias"

    alias: str = Field(primary_key=True, max_length=200, description="normalized spelling")
    gpu_slug: str = Field(foreign_key="gpu_model.slug", max_length=64, index=True)
    spelling: str = Field(max_length=200, description="as written in the reference data")


class InstanceType(SQLModel, table=True):
    __tablename__ = "instance_type"
    __table_args__ = (UniqueConstraint("provider", "name"),)

    id: int | None = Field(default=None, primary_key=True)
    provider: str = Field(foreign_key="provider.slug", max_length=64)
    name: str = Field(max_length=200)
    gpu_slug: str | None = Field(default=None, max_length=64)
    gpu_count: Decimal = Field(sa_type=DecimalType)
    vcpus: Decimal | None = Field(default=None, sa_type=DecimalType)
    memory_gb: Decimal | None = Field(default=None, sa_type=DecimalType)
    bare_metal: bool | None = None
