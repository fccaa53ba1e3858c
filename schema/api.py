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
    basis: Literal["source", "reference", "peer", "provider"] = Field(
        description="who says the offer can run there: the source itself, reference "
        "regions, peer catalogs' regional rows, or (weakest) the provider's GPU regions "
        "when none of those places this GPU"
    )


class InterconnectPublic(BaseModel):
    kind: Literal["nvlink", "nvswitch", "pcie", "infinity_fabric"] | None = Field(
        description="what connects the GPUs inside the node; null: unknown"
    )
    kind_basis: Literal["source", "reference"] | None = Field(
        description="who says so: the price source, or the reviewed reference data of the "
        "instance family (see docs/cluster-facts.md); null when unknown"
    )
    gbps_per_gpu: Decimal | None = Field(
        description="GB/s per GPU (both directions, as vendors quote it); null: unknown"
    )
    gbps_basis: Literal["source", "reference"] | None


class NetworkPublic(BaseModel):
    kind: Literal["infiniband", "roce", "efa", "ethernet"] | None = Field(
        description="what connects the node to other nodes; null: unknown"
    )
    kind_basis: Literal["source", "reference"] | None
    gbps_per_node: Decimal | None = Field(
        description="Gb/s per node (every NIC together); null: unknown"
    )
    gbps_basis: Literal["source", "reference"] | None


class OfferPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    provider: str
    source: str
    sku: str
    region: str
    country: str | None
    gpu: str | None = Field(description="canonical GPU slug; null when the name is unmapped")
    gpu_name: str | None = Field(
        default=None,
        description="the GPU model's human name (e.g. 'H100 SXM 80GB'); null when unmapped",
    )
    gpu_name_raw: str | None
    gpu_inferred: bool = Field(
        default=False,
        description="the GPU model was picked by a documented family default, "
        "not read from the name",
    )
    gpu_count: Decimal
    vcpus: Decimal | None
    memory_gb: Decimal | None
    bare_metal: bool | None
    price_kind: str
    unit: str
    price_per: str
    price: Money
    price_is_floor: bool
    price_includes_tax: bool | None = Field(
        default=None,
        description="the quoted price includes sales tax/VAT (true), excludes it (false), "
        "or the source does not say (null)",
    )
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
    raw_payload_url: str | None = Field(
        description="the URL the payload the price was read from was fetched at"
    )
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
    interconnect: InterconnectPublic | None = Field(
        default=None,
        description="the GPU interconnect inside the node; null when nothing is known "
        "(see docs/cluster-facts.md)",
    )
    network: NetworkPublic | None = Field(
        default=None,
        description="the network between nodes; null when nothing is known "
        "(see docs/cluster-facts.md)",
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
    raw_payload_url: str | None = Field(
        description="the URL the payload the price was read from was fetched at"
    )


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
    province: str | None = None
    country: str | None = None


class CertificationSummary(BaseModel):
    scheme: str
    valid_to: date | None = None
    regions: list[str] | None = Field(default=None, description="null = every region")


class ExportControlSummary(BaseModel):
    eccn: str
    basis: str = Field(description="official | vendor | computed")
    note: str = "informational, not legal advice"


class SourcePrice(BaseModel):
    """One source's offer for a (provider, sku, region, price kind)."""

    source: str
    offer_id: int
    price_per_gpu_hour_usd: Decimal | None = Field(
        description="that source's own figure (prices that disagree are kept, never averaged)"
    )


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
    also_from: list[SourcePrice] = Field(
        default_factory=list,
        description="the other sources reporting this offer's (provider, sku, region, price "
        "kind), most authoritative first; listings show each such offer once by default",
    )


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


class EligibleRow(BaseModel):
    """One line of ``gpuatlas eligible --format jsonl|csv``: an eligible provider (with its
    cheapest offer) or, with ``--explain``, an excluded one (with its reasons)."""

    provider: str
    offer_count: int | None = None
    cheapest: OfferPublic | None = None
    reasons: list[str] | None = None


class EligibleProviders(BaseModel):
    catalog_version: int
    data: list[EligibleProvider]
    excluded: list[Exclusion] | None = None


class CostTierPublic(BaseModel):
    from_gb: Decimal = Field(description="the tier bills each GB from here to the next tier")
    price: Decimal = Field(description="per GB sent in a month, or per GB stored a month")


class CostRatePublic(BaseModel):
    provider: str
    kind: str = Field(description="internet_egress | inter_region | block_storage | object_storage")
    region: str | None = Field(description="the region it holds in; null: every region")
    currency: str
    tiers: list[CostTierPublic]
    source_url: str
    checked: date
    notes: str | None = None
    usd_per_unit: Decimal | None = Field(
        default=None, description="USD per unit of currency used (the ECB rate of fx_date)"
    )
    fx_date: date | None = None


class TcoOption(BaseModel):
    price_kind: str
    offer_id: int
    region: str
    price_per_gpu_hour_usd: Decimal
    instance_usd: Decimal = Field(description="the instance over the whole period")
    egress_usd: Decimal | None = Field(description="internet egress; null: price unknown")
    inter_region_usd: Decimal | None = Field(
        description="transfer to other regions; null: price unknown"
    )
    storage_usd: Decimal | None = Field(description="storage; null: price unknown")
    total_usd: Decimal = Field(description="the instance and every known hidden cost")
    unknown_costs: list[str] = Field(
        default_factory=list, description="hidden costs left out of total_usd, and why"
    )
    break_even_month: int | None = Field(
        default=None,
        description="reserved terms: first month whose cumulative on-demand cost reaches it",
    )


class TcoProvider(BaseModel):
    provider: str
    options: list[TcoOption]
    hidden_cost_rates: list[CostRatePublic] = Field(
        default_factory=list, description="the transfer and storage rates the options used"
    )


class TcoResult(BaseModel):
    catalog_version: int
    gpu_count: Decimal
    hours_per_month: Decimal
    months: int
    egress_tb_per_month: Decimal
    inter_region_tb_per_month: Decimal
    storage_tb: Decimal
    storage_class: str
    data: list[TcoProvider]


class UnmappedNamePublic(BaseModel):
    kind: str = Field(description="gpu | region | provider")
    source: str
    value: str
    occurrences: int = Field(description="records that carried it, over every crawl")
    first_seen_at: datetime
    last_seen_at: datetime
    last_crawl_run_id: int | None
    offers: int = Field(default=0, description="active offers carrying it now")
    example_skus: list[str] = Field(default_factory=list, description="up to three")


class QualityTotals(BaseModel):
    active_offers: int
    without_gpu: int = Field(description="active offers whose GPU name maps to no model")
    without_country: int = Field(description="active offers that cannot be placed in a country")
    without_gpu_share: float = Field(description="without_gpu / active_offers (0-1)")
    without_country_share: float
    price_disagreements: int = Field(
        description="identities several sources report at different USD per GPU-hour"
    )


class UnmappedGpu(BaseModel):
    name: str | None = Field(description="the GPU name as the source wrote it")
    source: str
    offers: int
    example_skus: list[str] = Field(description="up to three, alphabetical")


class UnmappedRegion(BaseModel):
    provider: str
    region: str
    sources: list[str]
    offers: int
    example_skus: list[str] = Field(description="up to three, alphabetical")


class PriceDisagreement(BaseModel):
    provider: str
    sku: str
    region: str
    price_kind: str
    min_price_per_gpu_hour_usd: Decimal
    max_price_per_gpu_hour_usd: Decimal
    reports: list[SourcePrice] = Field(
        description="every source's figure, most authoritative first (never averaged)"
    )


class QualityReport(BaseModel):
    catalog_version: int
    source: str | None = Field(description="the source the report is limited to, if any")
    totals: QualityTotals
    unmapped_gpus: list[UnmappedGpu] = Field(description="most offers first")
    unmapped_regions: list[UnmappedRegion] = Field(description="most offers first")
    price_disagreements: list[PriceDisagreement] = Field(description="widest spread first")


class CoverageSource(BaseModel):
    name: str = Field(description="the source, e.g. `skypilot:cudo`")
    kind: Literal["api", "page", "peer"] = Field(
        description="the provider's price API, its pricing page, or a peer catalog"
    )
    last_good_crawl: datetime | None = Field(
        description="when its last `ok` crawl finished; null: never"
    )
    active_offers: int = Field(description="the active offers this source holds now")


class CoverageOffers(BaseModel):
    total: int = Field(description="active offers of the provider (every source's copy)")
    by_price_kind: dict[str, int] = Field(description="price kind -> active offers")


class CoverageCertifications(BaseModel):
    certified: list[str] = Field(description="schemes the provider's own trust page lists")
    reported: list[str]
    not_certified: list[str]
    unknown: list[str] = Field(description="schemes nobody has established either way")


class CoverageProvider(BaseModel):
    provider: str
    name: str | None = Field(description="null: not in the reference data")
    kind: str | None = Field(description="hyperscaler, gpu_cloud or marketplace")
    prices: Literal["first_party", "peer_only", "none"] = Field(
        description="first_party: a first-party source has active offers; peer_only: only "
        "peer catalogs do; none: no active offers"
    )
    sources: list[CoverageSource] = Field(description="most authoritative first")
    offers: CoverageOffers
    gpu_known_share: float | None = Field(
        description="share (0-1) of its active offers with a GPU model; null without offers"
    )
    location_known_share: float | None = Field(
        description="share (0-1) of its active offers placed in a country; null without offers"
    )
    certifications: CoverageCertifications = Field(description="by status, today")
    certifications_known: bool = Field(
        description="whether any scheme's status is known (certified, reported, not certified)"
    )


class CoverageTotals(BaseModel):
    providers: int
    with_offers: int
    first_party: int
    peer_only: int
    active_offers: int


class CoverageMatrix(BaseModel):
    catalog_version: int
    totals: CoverageTotals
    providers: list[CoverageProvider] = Field(
        description="first-party first, then peer-only, then without offers; by slug"
    )
