"""The catalog's vocabulary: tables, interchange records and enums (imports nothing else)."""

from schema.alerts import AlertEvent, ApiKey, Subscription
from schema.base import metadata, text_by_code_point
from schema.catalog import GpuAlias, GpuModel, InstanceType, Provider, Region
from schema.cluster import ClusterReference
from schema.compliance import (
    Certification,
    CountryMembership,
    ExportRuleSet,
    GpuClassification,
)
from schema.costs import ProviderCost
from schema.crawl import (
    CrawlRun,
    CrawlRunPayload,
    RawPayload,
    RejectedRecord,
    SourceInfo,
    UnmappedName,
)
from schema.fx import FxRate
from schema.prices import CatalogVersion, Offer, OfferLocation, PriceObservation
from schema.records import OfferRecord

text_by_code_point(metadata)

__all__ = [
    "AlertEvent",
    "ApiKey",
    "CatalogVersion",
    "Certification",
    "ClusterReference",
    "CountryMembership",
    "CrawlRun",
    "CrawlRunPayload",
    "ExportRuleSet",
    "FxRate",
    "GpuAlias",
    "GpuClassification",
    "GpuModel",
    "InstanceType",
    "Offer",
    "OfferLocation",
    "OfferRecord",
    "PriceObservation",
    "Provider",
    "ProviderCost",
    "RawPayload",
    "Region",
    "RejectedRecord",
    "SourceInfo",
    "Subscription",
    "UnmappedName",
    "metadata",
]
