"""Public API bodies: what clients see (storage columns never leak through)."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Money(BaseModel):
    amount: Decimal
    currency: str


class LocationPublic(BaseModel):
    region: str = Field(description="a region code of the offer's provider")
    country: str | None
    basis: Literal["source", "reference", "peer"] = Field(
        description="who says the offer can run there: the source itself, reference "
        "regions, or peer catalogs' regional rows"
    )


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
    location_region: str | None = Field(
        default=None,
        description="for an offer quoted for several places (region 'global' or a group): "
        "the location matching the location filters, else the first one; `country` is its "
        "country. Null when the offer has no locations",
    )
    locations: list[LocationPublic] = Field(
        default_factory=list,
        description="where an offer quoted for several places can run (empty for an offer "
        "in one region, and where no location is published); see docs/locations.md",
    )


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


class RegionInfo(BaseModel):
    code: str
    name: str | None = None
    city: str | None = None
    country: str | None = None


class CertificationSummary(BaseModel):
    scheme: str
    valid_to: date | None = None
    regions: list[str] | None = Field(default=None, description="null = every region")


class ExportControlSummary(BaseModel):
    eccn: str
    basis: str = Field(description="official | vendor | computed")
    note: str = "informational, not legal advice"


class OfferDetail(OfferPublic):
    """An offer with its context: region facts, certifications, export control, freshness."""

    price_per_pflop_hour_usd: Decimal | None = Field(
        default=None, description="USD per dense BF16 PFLOP-hour; null when specs are unknown"
    )
    region_info: RegionInfo | None = None
    certifications: list[CertificationSummary] = Field(
        default_factory=list, description="the provider's certifications valid today"
    )
    export_control: ExportControlSummary | None = None
    last_confirmed: datetime | None = Field(
        default=None, description="end of the last successful crawl of this offer's source"
    )
    display_price: Money | None = Field(
        default=None, description="price_usd converted to the requested display currency"
    )
    display_price_per_gpu_hour: Money | None = None


class HistoryBucket(BaseModel):
    start: datetime
    end: datetime
    currency: str
    min: Decimal
    max: Decimal
    last: Decimal
    min_price_per_gpu_hour_usd: Decimal | None
    max_price_per_gpu_hour_usd: Decimal | None
    last_price_per_gpu_hour_usd: Decimal | None
    observations: int


class HistoryPage(BaseModel):
    offer_id: int
    resolution: str
    data: list[HistoryBucket]


class ChangeOffer(BaseModel):
    id: int
    source: str
    provider: str
    sku: str
    region: str
    price_kind: str
    unit: str
    gpu: str | None
    gpu_count: Decimal


class ChangePrice(BaseModel):
    amount: Decimal
    currency: str
    price_per_gpu_hour_usd: Decimal | None


class Change(BaseModel):
    kind: str = Field(description="added | changed | withdrawn")
    version: int | None = None
    at: datetime | None = None
    offer: ChangeOffer
    old: ChangePrice | None
    new: ChangePrice | None


class DiffPage(BaseModel):
    from_version: int
    to_version: int
    data: list[Change]
    next_cursor: str | None = None


class ChangesPage(BaseModel):
    since: int
    until: int
    data: list[Change]
    next_cursor: str | None = None
    catalog_version: int


class EligibleProvider(BaseModel):
    provider: str
    offer_count: int
    cheapest: OfferPublic


class Exclusion(BaseModel):
    provider: str
    reasons: list[str]


class EligibleProviders(BaseModel):
    catalog_version: int
    data: list[EligibleProvider]
    excluded: list[Exclusion] | None = None


class TcoOption(BaseModel):
    price_kind: str
    offer_id: int
    price_per_gpu_hour_usd: Decimal
    total_usd: Decimal
    break_even_month: int | None = Field(
        default=None,
        description="reserved terms: first month whose cumulative on-demand cost reaches it",
    )


class TcoProvider(BaseModel):
    provider: str
    options: list[TcoOption]


class TcoResult(BaseModel):
    catalog_version: int
    gpu_count: Decimal
    hours_per_month: Decimal
    months: int
    data: list[TcoProvider]
