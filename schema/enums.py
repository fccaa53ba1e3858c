"""The catalog's closed vocabularies."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum


class PriceKind(StrEnum):
    on_demand = "on_demand"
    spot = "spot"
    low_priority = "low_priority"
    reserved_1m = "reserved_1m"
    reserved_6m = "reserved_6m"
    reserved_1y = "reserved_1y"
    reserved_3y = "reserved_3y"
    monthly = "monthly"
    weekly = "weekly"
    """A subscription paid a week at a time (e.g. Alibaba Cloud's one-week prepaid term)."""
    interruptible = "interruptible"
    serverless = "serverless"
    """A serverless worker that scales to zero and bills only while it runs (RunPod's flex
    workers): per second, no commitment, a cold start on the first request."""
    serverless_active = "serverless_active"
    """An always-on serverless worker, billed every second whether busy or not, at a discount
    to :attr:`serverless` (RunPod's active workers)."""


class Unit(StrEnum):
    """What one ``amount`` buys: a time span of the SKU (or of one GPU, see PricePer)."""

    second = "second"
    minute = "minute"
    hour = "hour"
    day = "day"
    week = "week"
    month = "month"
    year = "year"
    term_1y = "term_1y"
    """The whole price of a one-year commitment, paid for the term."""
    term_3y = "term_3y"


HOURS_PER_MONTH = Decimal(730)
HOURS = {
    Unit.second: Decimal(1) / Decimal(3600),
    Unit.minute: Decimal(1) / Decimal(60),
    Unit.hour: Decimal(1),
    Unit.day: Decimal(24),
    Unit.week: Decimal(168),
    Unit.month: HOURS_PER_MONTH,
    Unit.year: Decimal(8760),
    Unit.term_1y: Decimal(8760),
    Unit.term_3y: Decimal(26280),
}
"""Hours in one billing unit (a month is 730 hours, a year 8,760)."""


class PricePer(StrEnum):
    instance = "instance"
    gpu = "gpu"


class ProviderKind(StrEnum):
    hyperscaler = "hyperscaler"
    gpu_cloud = "gpu_cloud"
    marketplace = "marketplace"
    unknown = "unknown"


class ProviderStatus(StrEnum):
    active = "active"
    retired = "retired"


class CrawlStatus(StrEnum):
    running = "running"
    ok = "ok"
    failed = "failed"
    quarantined = "quarantined"
    skipped = "skipped"


class OfferStatus(StrEnum):
    active = "active"
    withdrawn = "withdrawn"


class UnmappedKind(StrEnum):
    gpu = "gpu"
    region = "region"
    provider = "provider"


class Interconnect(StrEnum):
    """What connects the GPUs inside one node (see docs/cluster-facts.md)."""

    nvlink = "nvlink"
    """NVLink point to point or through bridges, no switch (e.g. H100 NVL pairs, V100 SXM2)."""
    nvswitch = "nvswitch"
    """NVLink through NVSwitch chips: every GPU reaches every other at full speed (HGX)."""
    pcie = "pcie"
    infinity_fabric = "infinity_fabric"
    """AMD Infinity Fabric between Instinct GPUs (MI250X, MI300X)."""


class Network(StrEnum):
    """What connects one node to the others (see docs/cluster-facts.md)."""

    infiniband = "infiniband"
    roce = "roce"
    """RDMA over Converged Ethernet."""
    efa = "efa"
    """AWS Elastic Fabric Adapter (RDMA over AWS's SRD protocol)."""
    ethernet = "ethernet"
    """Plain (TCP/IP) Ethernet, no RDMA."""


class FactBasis(StrEnum):
    """Where one cluster fact of an offer comes from."""

    source = "source"
    """the price source states it for this SKU"""
    reference = "reference"
    """the reviewed reference data of the SKU's instance family
    (``fixtures/reference/interconnects.yaml``)"""
