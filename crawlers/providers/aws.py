"""AWS Price List bulk API: EC2 GPU and accelerator instance prices, no authentication.

https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-the-aws-price-list-bulk-api.html

The region index (``/offers/v1.0/aws/AmazonEC2/current/region_index.json``) names each
region's offer file (``currentVersionUrl``). Offer files are large (hundreds of MB to GB),
so they are spooled to disk (``Request(stream_to_file=True)``) and read with an
incremental JSON parser (ijson): a whole offer file is never in memory. Three passes over
the spooled file, each in ijson's C backend: ``products`` (keeping the attributes of GPU
and accelerator SKUs only, a few hundred), ``terms.OnDemand`` and ``terms.Reserved``
(term objects one SKU at a time, kept only for those SKUs).

Kept: instance families in :data:`FAMILIES`, Linux, shared tenancy, no pre-installed
software, ``capacitystatus`` Used, AWS Regions (not Local/Wavelength Zones), on-demand
capacity (not Capacity Blocks). Prices:

* ``OnDemand`` -> ``on_demand``, per hour.
* ``Reserved``, standard offering class only (convertible skipped):
  No Upfront -> ``reserved_1y``/``reserved_3y`` per **hour** (the hourly fee);
  All Upfront -> ``reserved_1y``/``reserved_3y`` per **term** (``term_1y``/``term_3y``,
  the upfront fee, whose hourly part is zero). Partial Upfront is two prices (a fee plus an
  hourly rate) that no single amount states: skipped. Each purchase option is its own
  offer, told apart by its unit.

GPU model and count come from :data:`FAMILIES` and :data:`GPU_COUNTS` (EC2 products carry a
``gpu`` count but no model); vCPUs and memory from the product attributes.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import IO, Any, ClassVar
from urllib.parse import urlsplit

import ijson

from crawlers.base import (
    ApiSource,
    Context,
    LayoutChanged,
    RawRecord,
    Request,
    Response,
    SourceError,
)
from crawlers.normalize.decimal_json import plain
from crawlers.normalize.network import network_gbps
from schema.text import ascii_digits

log = logging.getLogger(__name__)

INDEX_PATH = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
PUBLIC_BASE = "https://pricing.us-east-1.amazonaws.com"


@dataclass(frozen=True)
class Family:
    gpu: str
    """The accelerator as AWS names it."""
    gpu_model: str | None
    """Canonical slug (fixtures/reference/gpus.yaml), or None to map by name."""
    gpu_memory_gb: str | None


# Instance family -> accelerator; aws.amazon.com/ec2/instance-types/ (accelerated computing)
FAMILIES: dict[str, Family] = {
    "p3": Family("NVIDIA Tesla V100 SXM2 16GB", "nvidia-v100-sxm2-16gb", "16"),
    "p3dn": Family("NVIDIA Tesla V100 SXM2 32GB", "nvidia-v100-sxm2-32gb", "32"),
    "p4d": Family("NVIDIA A100 SXM4 40GB", "nvidia-a100-sxm-40gb", "40"),
    "p4de": Family("NVIDIA A100 SXM4 80GB", "nvidia-a100-sxm-80gb", "80"),
    "p5": Family("NVIDIA H100 SXM5 80GB", "nvidia-h100-sxm-80gb", "80"),
    "p5e": Family("NVIDIA H200 141GB", "nvidia-h200-sxm-141gb", "141"),
    "p5en": Family("NVIDIA H200 141GB", "nvidia-h200-sxm-141gb", "141"),
    "p6-b200": Family("NVIDIA B200", "nvidia-b200-sxm-180gb", "180"),
    "g4dn": Family("NVIDIA T4", "nvidia-t4-16gb", "16"),
    "g4ad": Family("AMD Radeon Pro V520", "amd-radeon-pro-v520-8gb", "8"),
    "g5": Family("NVIDIA A10G", "nvidia-a10g-24gb", "24"),
    "g5g": Family("NVIDIA T4G", "nvidia-t4-16gb", "16"),
    "g6": Family("NVIDIA L4", "nvidia-l4-24gb", "24"),
    "gr6": Family("NVIDIA L4", "nvidia-l4-24gb", "24"),
    "g6e": Family("NVIDIA L40S", "nvidia-l40s-48gb", "48"),
    "trn1": Family("AWS Trainium", "aws-trainium-32gb", "32"),
    "trn1n": Family("AWS Trainium", "aws-trainium-32gb", "32"),
    "trn2": Family("AWS Trainium2", "aws-trainium2-96gb", "96"),
    "inf1": Family("AWS Inferentia", None, "8"),
    "inf2": Family("AWS Inferentia2", "aws-inferentia2-32gb", "32"),
    "dl1": Family("Habana Gaudi HL-205", "intel-gaudi-hl-205", "32"),
}

# Accelerators per instance type; a size missing here falls back to the product's "gpu".
GPU_COUNTS: dict[str, int] = {
    "p3.2xlarge": 1, "p3.8xlarge": 4, "p3.16xlarge": 8, "p3dn.24xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8,
    "p5.4xlarge": 1, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8,
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1,
    "g4dn.12xlarge": 4, "g4dn.16xlarge": 1, "g4dn.metal": 8,
    "g4ad.xlarge": 1, "g4ad.2xlarge": 1, "g4ad.4xlarge": 1, "g4ad.8xlarge": 2,
    "g4ad.16xlarge": 4,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.12xlarge": 4,
    "g5.16xlarge": 1, "g5.24xlarge": 4, "g5.48xlarge": 8,
    "g5g.xlarge": 1, "g5g.2xlarge": 1, "g5g.4xlarge": 1, "g5g.8xlarge": 1,
    "g5g.16xlarge": 2, "g5g.metal": 2,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.12xlarge": 4,
    "g6.16xlarge": 1, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "gr6.4xlarge": 1, "gr6.8xlarge": 1,
    "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.4xlarge": 1, "g6e.8xlarge": 1,
    "g6e.12xlarge": 4, "g6e.16xlarge": 1, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "trn1.2xlarge": 1, "trn1.32xlarge": 16, "trn1n.32xlarge": 16, "trn2.48xlarge": 16,
    "inf1.xlarge": 1, "inf1.2xlarge": 1, "inf1.6xlarge": 4, "inf1.24xlarge": 16,
    "inf2.xlarge": 1, "inf2.8xlarge": 1, "inf2.24xlarge": 6, "inf2.48xlarge": 12,
    "dl1.24xlarge": 8,
}  # fmt: skip

COMPUTE_FAMILIES = {"Compute Instance", "Compute Instance (bare metal)"}
# attribute -> values kept (an absent attribute passes: older files lack some of them)
REQUIRED = {
    "operatingSystem": {"Linux"},
    "tenancy": {"Shared"},
    "preInstalledSw": {"NA"},
    "capacitystatus": {"Used"},
    "licenseModel": {"No License required"},
    "operation": {"RunInstances"},
    "locationType": {"AWS Region"},
    "marketoption": {"OnDemand"},
}
RESERVED = {
    ("1yr", "No Upfront"): ("reserved_1y", "hour", "Hrs"),
    ("3yr", "No Upfront"): ("reserved_3y", "hour", "Hrs"),
    ("1yr", "All Upfront"): ("reserved_1y", "term_1y", "Quantity"),
    ("3yr", "All Upfront"): ("reserved_3y", "term_3y", "Quantity"),
}
_MEMORY = re.compile(r"^\s*([\d,]+(?:\.\d+)?)\s*GiB\s*$")


def offer_url(base_url: str, region: str, index_path: str = INDEX_PATH) -> str:
    """The stable 'current' offer file of one region (a record's provenance link)."""
    return f"{base_url}{index_path.removesuffix('region_index.json')}{region}/index.json"


class AwsPriceList(ApiSource):
    name = "aws"
    provider = "aws"
    schedule = "1d"
    parser_version = "1"
    base_url = PUBLIC_BASE
    currency = "USD"
    max_bytes = 100 * 1024**3  # every region's EC2 offer file: tens of GB in all, streamed
    keep_records = True  # a few GPU offers out of tens of GB: never parsed twice
    docs_url = "https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/price-changes.html"
    terms_url = "https://aws.amazon.com/ec2/pricing/"

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        """Products and terms left out on purpose, by reason."""

    index_path: ClassVar[str] = INDEX_PATH
    public_base: ClassVar[str] = PUBLIC_BASE
    """Where a record's provenance link points (the live endpoint, not a replay server)."""

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(f"{ctx.base_url}{self.index_path}", meta={"kind": "region_index"})

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        kind = response.meta.get("kind") or self._sniff(response)
        if kind == "region_index":
            yield from self.parse_region_index(response, ctx)
            return
        try:
            yield from self.parse_offer(response, response.meta.get("region"))
        except ijson.JSONError as exc:
            raise SourceError("invalid payload", f"offer file: {exc}"[:300]) from None

    # -------------------------------------------------------------------- region index

    def parse_region_index(self, response: Response, ctx: Context) -> Iterator[Request]:
        with response.open() as handle:
            index = json.load(handle)
        regions = index["regions"]
        if not isinstance(regions, dict) or not regions:
            raise LayoutChanged("region index lists no regions")
        base = urlsplit(ctx.base_url)
        for code, entry in sorted(regions.items()):
            path = urlsplit(str(entry["currentVersionUrl"])).path
            if not path.startswith("/offers/"):
                raise LayoutChanged(f"unexpected currentVersionUrl {path[:200]!r}")
            url = f"{base.scheme}://{base.netloc}{path}"
            yield Request(url, stream_to_file=True, meta={"kind": "offer", "region": code})

    # -------------------------------------------------------------------- offer file

    def parse_offer(self, response: Response, region_hint: str | None) -> Iterator[RawRecord]:
        with response.open() as handle:
            products, seen = self._gpu_products(handle, region_hint)
            if not seen:
                raise LayoutChanged("offer file has no 'products'")
            log.info("aws %s: %d GPU SKUs of %d products", response.url, len(products), seen)
            if not products:
                return
            handle.seek(0)
            found = 0
            for sku, terms in ijson.kvitems(handle, "terms.OnDemand"):
                base = products.get(sku)
                if base is None:
                    continue
                found += 1
                for term in terms.values():
                    yield from self._on_demand(base, term)
            if not found:
                raise LayoutChanged("no 'terms.OnDemand' entries for the GPU products")
            handle.seek(0)
            for sku, terms in ijson.kvitems(handle, "terms.Reserved"):
                base = products.get(sku)
                if base is not None:
                    for term in terms.values():
                        yield from self._reserved(base, term)

    def _gpu_products(
        self, handle: IO[bytes], region_hint: str | None
    ) -> tuple[dict[str, RawRecord], int]:
        products: dict[str, RawRecord] = {}
        seen = with_family = 0
        for sku, product in ijson.kvitems(handle, "products"):
            seen += 1
            with_family += "productFamily" in product
            base = self.product(product, region_hint)
            if base is not None:
                products[sku] = base
        if seen and not with_family:
            raise LayoutChanged("no product has a 'productFamily'")
        return products, seen

    def product(self, product: dict[str, Any], region_hint: str | None) -> RawRecord | None:
        """The SKU-level fields of a GPU product kept by the filters, else None."""
        if product.get("productFamily") not in COMPUTE_FAMILIES:
            return None
        attributes = product["attributes"]
        instance_type = str(attributes["instanceType"])
        family = FAMILIES.get(instance_type.split(".", 1)[0])
        if family is None:
            return None
        for name, allowed in REQUIRED.items():
            value = attributes.get(name)
            if value is not None and value not in allowed:
                self.skipped[f"{name} {value}"] += 1
                return None
        region = attributes.get("regionCode") or region_hint
        if not region:
            raise LayoutChanged(f"no regionCode for {instance_type}")
        count = GPU_COUNTS.get(instance_type) or _positive_int(attributes.get("gpu"))
        record: RawRecord = {
            "sku": instance_type,
            "gpu_model": family.gpu_model,
            "gpu_name_raw": family.gpu,
            "gpu_memory_gb": family.gpu_memory_gb,
            "vcpus": _positive_int(attributes.get("vcpu")),
            "memory_gb": _gib(attributes.get("memory")),
            "region": region,
            "price_per": "instance",
            "bare_metal": instance_type.endswith(".metal"),
            "source_url": offer_url(self.public_base, region, self.index_path),
        }
        if count is not None:
            record["gpu_count"] = count
        network = network_gbps(attributes.get("networkPerformance"))
        if network is not None:  # the kind (EFA or not) is not in the price list
            record["network_gbps"] = str(network)
        return record

    def _on_demand(self, base: RawRecord, term: dict[str, Any]) -> Iterator[RawRecord]:
        for dimension in term["priceDimensions"].values():
            if dimension["unit"] == "Hrs":
                yield from self._priced(base, dimension, "on_demand", "hour")

    def _reserved(self, base: RawRecord, term: dict[str, Any]) -> Iterator[RawRecord]:
        attributes = term["termAttributes"]
        if attributes.get("OfferingClass") != "standard":
            self.skipped[f"offering class {attributes.get('OfferingClass')}"] += 1
            return
        rule = RESERVED.get((attributes["LeaseContractLength"], attributes["PurchaseOption"]))
        if rule is None:
            self.skipped[f"purchase option {attributes['PurchaseOption']}"] += 1
            return
        price_kind, unit, dimension_unit = rule
        for dimension in term["priceDimensions"].values():
            if dimension["unit"] == dimension_unit:
                yield from self._priced(base, dimension, price_kind, unit)

    def _priced(
        self, base: RawRecord, dimension: dict[str, Any], price_kind: str, unit: str
    ) -> Iterator[RawRecord]:
        prices = dimension["pricePerUnit"]
        if not isinstance(prices, dict) or not prices:
            raise LayoutChanged("pricePerUnit is empty")
        currency, text = next(iter(prices.items()))
        try:
            amount = Decimal(str(text))
        except InvalidOperation:
            raise LayoutChanged(f"unparseable price {text!r}") from None
        if amount <= 0:
            self.skipped["zero price"] += 1
            return
        yield {
            **base,
            "price_kind": price_kind,
            "unit": unit,
            "amount": str(plain(amount)),
            "currency": currency,
        }

    @staticmethod
    def _sniff(response: Response) -> str:
        """Region index or offer file, from the first top-level key (saved files have no meta)."""
        with response.open() as handle:
            try:
                for prefix, event, value in ijson.parse(handle):
                    if prefix == "" and event == "map_key" and value in {"regions", "products"}:
                        return "region_index" if value == "regions" else "offer"
            except ijson.JSONError as exc:
                raise SourceError("invalid payload", str(exc)[:300]) from None
        raise LayoutChanged("neither a region index nor an offer file")


def _positive_int(value: Any) -> int | None:
    text = str(value or "").replace(",", "").strip()
    return int(text) if ascii_digits(text) and int(text) > 0 else None


def _gib(value: Any) -> str | None:
    match = _MEMORY.match(str(value or ""))
    return match.group(1).replace(",", "") if match else None
