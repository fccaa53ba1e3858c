"""Azure Retail Prices API: GPU virtual machine prices, no authentication.

https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices

One OData query per GPU series prefix (``Standard_NC``, ``ND``, ``NG``, ``NV``), primary
meter regions only (``meterRegion='primary'``), each followed through ``NextPageLink``
to the end (1,000 items a page). Azure meters don't name the GPU: model, count (fractions
for partitioned GPUs), vCPUs and memory come from :data:`SIZES`, the documented VM sizes.

Quirks handled here:

* ``type`` is ``Consumption`` (pay as you go; ``skuName`` ending in " Spot" or
  " Low Priority" marks those), ``Reservation`` or ``DevTestConsumption`` (skipped).
* Reservation rows carry the whole term price although ``unitOfMeasure`` says "1 Hour":
  they are stored as ``reserved_1y``/``reserved_3y`` with unit ``term_1y``/``term_3y``;
  the hourly equivalent is computed downstream from the unit. 5-year terms are skipped.
* Windows meters (``productName`` contains "Windows") include the licence: skipped.
* Rows of non-primary meter regions are skipped (the query already asks for primary).
* A size missing from :data:`SIZES` is yielded without a GPU count, so the pipeline
  rejects it with a reason and a human adds the size (never dropped silently).
* ``NextPageLink`` is followed on the configured host only: its scheme and host are
  replaced by the base URL's (a replay server or proxy serves every page, and a response
  can't send the crawler elsewhere).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import loads, plain

log = logging.getLogger(__name__)

API_PATH = "/api/retail/prices"
API_VERSION = "2023-01-01-preview"
SERIES = ("NC", "ND", "NG", "NV")
PUBLIC_BASE = "https://prices.azure.com"


@dataclass(frozen=True)
class VmSize:
    """What an Azure GPU VM size carries, from Microsoft's size documentation."""

    gpu: str
    """The GPU as Microsoft names it."""
    gpu_model: str | None
    """Canonical slug (fixtures/reference/gpus.yaml), or None to map by name."""
    gpu_count: str
    gpu_memory_gb: str
    """Memory of one GPU as the VM sees it (the slice, for a partitioned GPU)."""
    vcpus: int
    memory_gb: int


def _series(
    gpu: str, slug: str | None, gpu_memory: str, sizes: dict[str, tuple[str, int, int]]
) -> dict[str, VmSize]:
    return {
        name: VmSize(gpu, slug, count, gpu_memory, vcpus, memory)
        for name, (count, vcpus, memory) in sizes.items()
    }


def _partitioned(
    gpu: str, slug: str | None, sizes: dict[str, tuple[str, str, int, int]]
) -> dict[str, VmSize]:
    return {
        name: VmSize(gpu, slug, count, gpu_memory, vcpus, memory)
        for name, (count, gpu_memory, vcpus, memory) in sizes.items()
    }


# armSkuName -> (GPUs, vCPUs, memory GiB); learn.microsoft.com/azure/virtual-machines/sizes
# fmt: off
SIZES: dict[str, VmSize] = {
    # NCv3: NVIDIA Tesla V100 PCIe 16 GB
    **_series("NVIDIA Tesla V100 PCIe 16GB", "nvidia-v100-pcie-16gb", "16", {
        "Standard_NC6s_v3": ("1", 6, 112),
        "Standard_NC12s_v3": ("2", 12, 224),
        "Standard_NC24s_v3": ("4", 24, 448),
        "Standard_NC24rs_v3": ("4", 24, 448),
    }),
    # NCasT4_v3: NVIDIA Tesla T4 16 GB
    **_series("NVIDIA Tesla T4", "nvidia-t4-16gb", "16", {
        "Standard_NC4as_T4_v3": ("1", 4, 28),
        "Standard_NC8as_T4_v3": ("1", 8, 56),
        "Standard_NC16as_T4_v3": ("1", 16, 110),
        "Standard_NC64as_T4_v3": ("4", 64, 440),
    }),
    # NC A100 v4: NVIDIA A100 PCIe 80 GB
    **_series("NVIDIA A100 PCIe 80GB", "nvidia-a100-pcie-80gb", "80", {
        "Standard_NC24ads_A100_v4": ("1", 24, 220),
        "Standard_NC48ads_A100_v4": ("2", 48, 440),
        "Standard_NC96ads_A100_v4": ("4", 96, 880),
    }),
    # NCads H100 v5 and the confidential NCCads H100 v5: NVIDIA H100 NVL 94 GB
    **_series("NVIDIA H100 NVL 94GB", "nvidia-h100-nvl-94gb", "94", {
        "Standard_NC40ads_H100_v5": ("1", 40, 320),
        "Standard_NC80adis_H100_v5": ("2", 80, 640),
        "Standard_NCC40ads_H100_v5": ("1", 40, 320),
    }),
    # NDv2: 8x NVIDIA Tesla V100 SXM2 32 GB (NVLink)
    **_series("NVIDIA Tesla V100 SXM2 32GB", "nvidia-v100-sxm2-32gb", "32", {
        "Standard_ND40rs_v2": ("8", 40, 672),
    }),
    # ND A100 v4: 8x A100 SXM4 40 GB
    **_series("NVIDIA A100 SXM4 40GB", "nvidia-a100-sxm-40gb", "40", {
        "Standard_ND96asr_v4": ("8", 96, 900),
    }),
    # NDm A100 v4: 8x A100 SXM4 80 GB
    **_series("NVIDIA A100 SXM4 80GB", "nvidia-a100-sxm-80gb", "80", {
        "Standard_ND96amsr_A100_v4": ("8", 96, 1900),
    }),
    # ND H100 v5: 8x H100 SXM5 80 GB
    **_series("NVIDIA H100 SXM5 80GB", "nvidia-h100-sxm-80gb", "80", {
        "Standard_ND96isr_H100_v5": ("8", 96, 1900),
    }),
    # ND H200 v5: 8x H200 141 GB
    **_series("NVIDIA H200 141GB", "nvidia-h200-sxm-141gb", "141", {
        "Standard_ND96isr_H200_v5": ("8", 96, 1850),
    }),
    # ND MI300X v5: 8x AMD Instinct MI300X 192 GB
    **_series("AMD Instinct MI300X", "amd-mi300x-192gb", "192", {
        "Standard_ND96isr_MI300X_v5": ("8", 96, 1850),
    }),
    # ND GB200 v6: 4 Blackwell GPUs (two GB200 superchips) per VM
    **_series("NVIDIA GB200", "nvidia-gb200-186gb", "186", {
        "Standard_ND128isr_NDR_GB200_v6": ("4", 128, 900),
    }),
    # NVv3: NVIDIA Tesla M60 (8 GB per GPU)
    **_series("NVIDIA Tesla M60", "nvidia-m60-8gb", "8", {
        "Standard_NV12s_v3": ("1", 12, 112),
        "Standard_NV24s_v3": ("2", 24, 224),
        "Standard_NV48s_v3": ("4", 48, 448),
    }),
    # NVadsA10 v5: partitioned NVIDIA A10 (1/6, 1/3, 1/2 or whole 24 GB GPUs)
    **_partitioned("NVIDIA A10", "nvidia-a10-24gb", {
        "Standard_NV6ads_A10_v5": ("0.1666666667", "4", 6, 55),
        "Standard_NV12ads_A10_v5": ("0.3333333333", "8", 12, 110),
        "Standard_NV18ads_A10_v5": ("0.5", "12", 18, 220),
        "Standard_NV36ads_A10_v5": ("1", "24", 36, 440),
        "Standard_NV36adms_A10_v5": ("1", "24", 36, 880),
        "Standard_NV72ads_A10_v5": ("2", "24", 72, 880),
    }),
    # NVv4: partitioned AMD Radeon Instinct MI25 (16 GB)
    **_partitioned("AMD Radeon Instinct MI25", None, {
        "Standard_NV4as_v4": ("0.125", "2", 4, 14),
        "Standard_NV8as_v4": ("0.25", "4", 8, 28),
        "Standard_NV16as_v4": ("0.5", "8", 16, 56),
        "Standard_NV32as_v4": ("1", "16", 32, 112),
    }),
    # NGads V620: partitioned AMD Radeon PRO V620 (32 GB)
    **_partitioned("AMD Radeon PRO V620", None, {
        "Standard_NG8ads_V620_v1": ("0.25", "8", 8, 16),
        "Standard_NG16ads_V620_v1": ("0.5", "16", 16, 32),
        "Standard_NG32ads_V620_v1": ("1", "32", 32, 64),
        "Standard_NG32adms_V620_v1": ("1", "32", 32, 176),
    }),
}
# fmt: on
_BY_KEY = {name.lower(): (name, size) for name, size in SIZES.items()}

RESERVATION_TERMS = {"1 Year": ("reserved_1y", "term_1y"), "3 Years": ("reserved_3y", "term_3y")}


def series_filter(series: str) -> str:
    return f"serviceName eq 'Virtual Machines' and contains(armSkuName, 'Standard_{series}')"


def first_page_url(base_url: str, series: str) -> str:
    """The first page of one series' query (tests route the replay server by it)."""
    return (
        f"{base_url.rstrip('/')}{API_PATH}?api-version={API_VERSION}"
        f"&meterRegion=%27primary%27&$filter={quote(series_filter(series), safe='')}"
    )


def rebase(link: str, base_url: str) -> str:
    """``link`` with the scheme and host of ``base_url`` (paths and queries are kept)."""
    page = urlsplit(link)
    base = urlsplit(base_url)
    if not page.path.startswith(API_PATH):
        raise LayoutChanged(f"NextPageLink points outside the prices API: {link[:200]!r}")
    return urlunsplit((base.scheme, base.netloc, page.path, page.query, ""))


def price_source_url(sku: str, region: str) -> str:
    """A stable, human-usable query for one size in one region (provenance)."""
    odata = f"armSkuName eq '{sku}' and armRegionName eq '{region}'"
    return f"{PUBLIC_BASE}{API_PATH}?api-version={API_VERSION}&$filter={quote(odata, safe='')}"


class AzureRetailPrices(ApiSource):
    name = "azure"
    provider = "azure"
    schedule = "6h"
    parser_version = "1"
    base_url = PUBLIC_BASE
    currency = "USD"
    docs_url = (
        "https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices"
    )
    terms_url = "https://azure.microsoft.com/pricing/details/virtual-machines/linux/"

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        """Rows left out on purpose, by reason (Windows, DevTest, ...)."""

    def start(self, ctx: Context) -> Iterator[Request]:
        for series in SERIES:
            yield Request(first_page_url(ctx.base_url, series), meta={"series": series})

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        page = loads(response.body)
        if not isinstance(page, dict):
            raise LayoutChanged("the response is not a JSON object")
        items = page["Items"]
        if not isinstance(items, list):
            raise LayoutChanged("'Items' is not a list")
        before = sum(self.skipped.values())
        count = 0
        for item in items:
            record = self.record(item)
            if record is not None:
                count += 1
                yield record
        log.info(
            "azure page %s: %d records, %d rows skipped (so far: %s)",
            response.url, count, sum(self.skipped.values()) - before, dict(self.skipped),
        )  # fmt: skip
        link = page["NextPageLink"]
        if link:
            yield Request(rebase(str(link), ctx.base_url), meta=response.meta)

    def record(self, item: dict[str, Any]) -> RawRecord | None:
        """One price row -> one raw record, or None (and the reason counted) to skip it."""
        kind = self._price_kind(item)
        if isinstance(kind, str):
            self.skipped[kind] += 1
            return None
        price_kind, unit = kind
        amount = item["retailPrice"]
        if not isinstance(amount, Decimal | int) or isinstance(amount, bool):
            raise LayoutChanged(f"retailPrice is not a number: {amount!r}")
        if amount <= 0:
            self.skipped["zero price"] += 1
            return None
        region = item["armRegionName"]
        if not region:
            self.skipped["no region"] += 1
            return None
        sku_name = str(item["armSkuName"])
        known = _BY_KEY.get(sku_name.lower())
        record: RawRecord = {
            "region": region,
            "price_kind": price_kind,
            "unit": unit,
            "price_per": "instance",
            "amount": str(plain(amount)),
            "currency": item["currencyCode"],
        }
        if known is None:
            # Unknown size: no GPU count, so the pipeline rejects it with a reason.
            record.update(sku=sku_name, gpu_name_raw=sku_name)
        else:
            name, size = known
            record.update(
                sku=name,
                gpu_model=size.gpu_model,
                gpu_name_raw=size.gpu,
                gpu_count=size.gpu_count,
                gpu_memory_gb=size.gpu_memory_gb,
                vcpus=size.vcpus,
                memory_gb=size.memory_gb,
            )
        record["source_url"] = price_source_url(record["sku"], region)
        return record

    @staticmethod
    def _price_kind(item: dict[str, Any]) -> tuple[str, str] | str:
        """(price_kind, unit) of a row to keep, or the reason to skip it."""
        price_type = item["type"]
        sku_name = str(item["skuName"])
        if "Windows" in str(item["productName"]):
            return "windows"
        if price_type == "DevTestConsumption":
            return "devtest"
        if item.get("isPrimaryMeterRegion") is False:
            return "non-primary meter region"
        if item["unitOfMeasure"] != "1 Hour":
            return f"unit {item['unitOfMeasure']}"
        if price_type == "Consumption":
            if sku_name.endswith(" Spot"):
                return ("spot", "hour")
            if sku_name.endswith(" Low Priority"):
                return ("low_priority", "hour")
            return ("on_demand", "hour")
        if price_type == "Reservation":
            term = RESERVATION_TERMS.get(str(item["reservationTerm"]))
            if term is None:
                return f"reservation term {item['reservationTerm']}"
            return term
        return f"type {price_type}"
