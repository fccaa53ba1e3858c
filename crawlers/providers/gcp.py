"""Google Cloud Billing Catalog API: Compute Engine GPU prices (API key).

https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list

``GET /v1/services/6F81-5844-456A/skus`` (Compute Engine), followed through
``nextPageToken`` to the end. The key travels in the ``X-Goog-Api-Key`` header, not in the
URL, so it never lands in logs or in the crawl run's source URLs.

Two kinds of records:

* **Per-GPU prices** of every GPU SKU (``category.resourceGroup == "GPU"``): one record per
  region in ``serviceRegions``, ``price_per=gpu``, ``gpu_count`` 1, the SKU named after
  Compute Engine's accelerator type (``nvidia-tesla-a100``, ``nvidia-l4``...).
* **Machine types** that come with GPUs (A2, A3, G2; :data:`MACHINES`): Google bills them
  as GPUs + vCPUs + memory, so the instance price is ``gpus × GPU price + vCPUs × core
  price + GiB × RAM price``, emitted for each region and price kind where all three SKUs
  are known. SKUs arrive on any page, so each page emits the machine prices it completes.

``usageType`` OnDemand -> ``on_demand``, Preemptible -> ``spot`` (Spot VMs), Commit1Yr /
Commit3Yr -> ``reserved_1y``/``reserved_3y`` (committed-use prices, still per hour).
A price is ``units`` (a string) + ``nanos`` / 10⁹ of the last non-zero tier of
``pricingInfo[0].pricingExpression.tieredRates``. SKU descriptions are matched against
allow-patterns: anything else (DWS, custom machine cores, sole tenancy...) is skipped and
counted, never mis-priced.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import loads, plain

log = logging.getLogger(__name__)

SERVICE = "6F81-5844-456A"  # Compute Engine
PUBLIC_BASE = "https://cloudbilling.googleapis.com"
PAGE_SIZE = "5000"
SKUS_URL = f"{PUBLIC_BASE}/v1/services/{SERVICE}/skus"

USAGE_TYPES = {
    "OnDemand": "on_demand",
    "Preemptible": "spot",
    "Commit1Yr": "reserved_1y",
    "Commit3Yr": "reserved_3y",
}


@dataclass(frozen=True)
class Accelerator:
    type: str
    """Compute Engine's accelerator type name, used as the per-GPU SKU."""
    gpu: str
    gpu_model: str | None
    gpu_memory_gb: str | None


def _acc(type_: str, gpu: str, slug: str | None, memory: str | None) -> Accelerator:
    return Accelerator(type_, gpu, slug, memory)


# Normalized GPU name from a SKU description -> accelerator
ACCELERATORS: dict[str, Accelerator] = {
    "A100": _acc("nvidia-tesla-a100", "NVIDIA A100 40GB", "nvidia-a100-sxm-40gb", "40"),
    "A100 40GB": _acc("nvidia-tesla-a100", "NVIDIA A100 40GB", "nvidia-a100-sxm-40gb", "40"),
    "A100 80GB": _acc("nvidia-a100-80gb", "NVIDIA A100 80GB", "nvidia-a100-sxm-80gb", "80"),
    "H100": _acc("nvidia-h100-80gb", "NVIDIA H100 80GB", "nvidia-h100-sxm-80gb", "80"),
    "H100 80GB": _acc("nvidia-h100-80gb", "NVIDIA H100 80GB", "nvidia-h100-sxm-80gb", "80"),
    "H100 80GB MEGA": _acc(
        "nvidia-h100-mega-80gb", "NVIDIA H100 80GB Mega", "nvidia-h100-sxm-80gb", "80"
    ),
    "H100 80GB PLUS": _acc(
        "nvidia-h100-mega-80gb", "NVIDIA H100 80GB Mega", "nvidia-h100-sxm-80gb", "80"
    ),
    "H100 MEGA": _acc(
        "nvidia-h100-mega-80gb", "NVIDIA H100 80GB Mega", "nvidia-h100-sxm-80gb", "80"
    ),
    "H200": _acc("nvidia-h200-141gb", "NVIDIA H200 141GB", "nvidia-h200-sxm-141gb", "141"),
    "H200 141GB": _acc("nvidia-h200-141gb", "NVIDIA H200 141GB", "nvidia-h200-sxm-141gb", "141"),
    "B200": _acc("nvidia-b200", "NVIDIA B200", "nvidia-b200-sxm-180gb", "180"),
    "L4": _acc("nvidia-l4", "NVIDIA L4", "nvidia-l4-24gb", "24"),
    "T4": _acc("nvidia-tesla-t4", "NVIDIA T4", "nvidia-t4-16gb", "16"),
    "V100": _acc("nvidia-tesla-v100", "NVIDIA V100 16GB", "nvidia-v100-sxm2-16gb", "16"),
    "P100": _acc("nvidia-tesla-p100", "NVIDIA P100 16GB", "nvidia-p100-pcie-16gb", "16"),
    "P4": _acc("nvidia-tesla-p4", "NVIDIA P4", "nvidia-p4", "8"),
    "K80": _acc("nvidia-tesla-k80", "NVIDIA K80", "nvidia-k80", "12"),
}
WORKSTATION = " VIRTUAL WORKSTATION"


@dataclass(frozen=True)
class Machine:
    accelerator: str
    """Accelerator type (see ACCELERATORS) billed with the machine."""
    family: str
    """Core/RAM SKU family (A2, A3, A3MEGA, A3ULTRA, G2)."""
    gpus: int
    vcpus: int
    memory_gb: int


def _machines(acc: str, family: str, sizes: dict[str, tuple[int, int, int]]) -> dict[str, Machine]:
    return {name: Machine(acc, family, *size) for name, size in sizes.items()}


# machine type -> (GPUs, vCPUs, memory GB); cloud.google.com/compute/docs/gpus
# fmt: off
MACHINES: dict[str, Machine] = {
    **_machines("nvidia-tesla-a100", "A2", {
        "a2-highgpu-1g": (1, 12, 85), "a2-highgpu-2g": (2, 24, 170),
        "a2-highgpu-4g": (4, 48, 340), "a2-highgpu-8g": (8, 96, 680),
        "a2-megagpu-16g": (16, 96, 1360),
    }),
    **_machines("nvidia-a100-80gb", "A2", {
        "a2-ultragpu-1g": (1, 12, 170), "a2-ultragpu-2g": (2, 24, 340),
        "a2-ultragpu-4g": (4, 48, 680), "a2-ultragpu-8g": (8, 96, 1360),
    }),
    **_machines("nvidia-h100-80gb", "A3", {
        "a3-highgpu-1g": (1, 26, 234), "a3-highgpu-2g": (2, 52, 468),
        "a3-highgpu-4g": (4, 104, 936), "a3-highgpu-8g": (8, 208, 1872),
    }),
    **_machines("nvidia-h100-mega-80gb", "A3MEGA", {"a3-megagpu-8g": (8, 208, 1872)}),
    **_machines("nvidia-h200-141gb", "A3ULTRA", {"a3-ultragpu-8g": (8, 224, 2952)}),
    **_machines("nvidia-l4", "G2", {
        "g2-standard-4": (1, 4, 16), "g2-standard-8": (1, 8, 32),
        "g2-standard-12": (1, 12, 48), "g2-standard-16": (1, 16, 64),
        "g2-standard-24": (2, 24, 96), "g2-standard-32": (1, 32, 128),
        "g2-standard-48": (4, 48, 192), "g2-standard-96": (8, 96, 384),
    }),
}
# fmt: on
FAMILY_NAMES = {
    "A2": "A2",
    "A3": "A3",
    "G2": "G2",
    "A3MEGA": "A3MEGA",
    "A3 MEGA": "A3MEGA",
    "A3PLUS": "A3MEGA",
    "A3 PLUS": "A3MEGA",
    "A3ULTRA": "A3ULTRA",
    "A3 ULTRA": "A3ULTRA",
}  # fmt: skip

_PREFIX = r"^(?:Commitment v1: )?(?:Spot Preemptible )?"
_SUFFIX = r" (?:running )?in (?P<where>[^()]+?)(?: for (?P<years>\d) Years?)?$"
GPU_SKU = re.compile(
    _PREFIX + r"(?:Nvidia )?(?:Tesla )?(?P<gpu>[A-Za-z0-9 ]+?) GPU"
    r"(?: attached to Spot Preemptible VMs)?" + _SUFFIX
)
HOST_SKU = re.compile(
    _PREFIX + r"(?P<family>A2|A3|A3 ?Mega|A3 ?Plus|A3 ?Ultra|G2) "
    r"(?:Instance (?P<part>Core|Ram)|(?P<commit>Cpu|Ram))" + _SUFFIX
)
MONEY_FIELDS = {"currencyCode", "units", "nanos"}
EXPECTED_UNITS = {"gpu": "h", "core": "h", "ram": "GiBy.h"}

Key = tuple[str, str, str]
"""(component, region, price kind), e.g. ("gpu:nvidia-l4", "us-central1", "spot")."""


def skus_url(base_url: str, page_token: str = "") -> str:
    """One page of the SKU list (tests route the replay server by it)."""
    params = {"pageSize": PAGE_SIZE}
    if page_token:
        params["pageToken"] = page_token
    return f"{base_url.rstrip('/')}/v1/services/{SERVICE}/skus?{urlencode(params)}"


def sku_price(sku: dict[str, Any]) -> tuple[Decimal, str, str] | None:
    """(price, currency, usage unit) of the last non-zero tier, or None if all are zero."""
    expression = sku["pricingInfo"][0]["pricingExpression"]
    for tier in reversed(expression["tieredRates"]):
        money = tier["unitPrice"]
        if not set(money) <= MONEY_FIELDS or "currencyCode" not in money:
            raise LayoutChanged(f"unexpected unitPrice fields {sorted(money)}")
        # proto3 JSON leaves out zero fields: "units" (an int64, so a string) or "nanos"
        units = Decimal(str(money.get("units") or "0"))
        amount = units + Decimal(int(money.get("nanos") or 0)).scaleb(-9)
        if amount > 0:
            return amount, str(money["currencyCode"]), str(expression["usageUnit"])
    return None


def gpu_name(raw: str) -> str:
    return " ".join(raw.upper().split())


class GcpBillingCatalog(ApiSource):
    name = "gcp"
    provider = "gcp"
    schedule = "6h"
    parser_version = "1"
    base_url = PUBLIC_BASE
    currency = "USD"
    credential = "gcp_api_key"
    docs_url = "https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list"
    terms_url = "https://cloud.google.com/compute/gpus-pricing"

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        """SKUs left out on purpose, by reason."""
        self.components: dict[Key, tuple[Decimal, str]] = {}
        """Known unit prices (amount, currency) of GPUs, cores and RAM."""
        self.emitted: set[tuple[str, str, str]] = set()
        """(machine type, region, price kind) already yielded."""

    def headers(self, ctx: Context) -> dict[str, str]:
        return {"X-Goog-Api-Key": ctx.credential} if ctx.credential else {}

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(skus_url(ctx.base_url))

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        page = loads(response.body)
        if not isinstance(page, dict):
            raise LayoutChanged("the response is not a JSON object")
        # Google APIs leave out empty repeated fields: an empty last page may be {}.
        skus = page["skus"] if "skus" in page or set(page) - {"nextPageToken"} else []
        if not isinstance(skus, list):
            raise LayoutChanged("'skus' is not a list")
        for sku in skus:
            yield from self.sku(sku)
        yield from self.machines()
        log.info("gcp page %s: %d SKUs; skipped so far %s", response.url, len(skus),
                 dict(self.skipped))  # fmt: skip
        token = page.get("nextPageToken")
        if token:
            yield Request(skus_url(ctx.base_url, str(token)))

    def sku(self, sku: dict[str, Any]) -> Iterator[RawRecord]:
        category = sku["category"]
        description = str(sku["description"])
        price_kind = USAGE_TYPES.get(str(category["usageType"]))
        regions = [str(r) for r in sku["serviceRegions"]]
        if category["resourceGroup"] == "GPU":
            match = GPU_SKU.match(description)
            if match is None:
                self.skipped["unrecognised GPU SKU"] += 1
                return
            if price_kind is None:
                self.skipped[f"usage type {category['usageType']}"] += 1
                return
            accelerator = self._accelerator(match["gpu"])
            priced = self._price(sku, "gpu")
            if priced is None:
                return
            amount, currency = priced
            for region in regions:
                self._remember((f"gpu:{accelerator.type}", region, price_kind), amount, currency)
                record: RawRecord = {
                    "sku": accelerator.type,
                    "gpu_name_raw": accelerator.gpu,
                    "gpu_count": "1",
                    "region": region,
                    "price_kind": price_kind,
                    "unit": "hour",
                    "price_per": "gpu",
                    "amount": str(plain(amount)),
                    "currency": currency,
                    "source_url": SKUS_URL,
                }
                if accelerator.gpu_model:
                    record["gpu_model"] = accelerator.gpu_model
                if accelerator.gpu_memory_gb:
                    record["gpu_memory_gb"] = accelerator.gpu_memory_gb
                yield record
            return
        host = HOST_SKU.match(description)
        if host is None or price_kind is None:
            return  # not a GPU machine's core or RAM: the rest of Compute Engine
        part = "core" if (host["part"] or host["commit"]) in ("Core", "Cpu") else "ram"
        priced = self._price(sku, part)
        if priced is None:
            return
        family = FAMILY_NAMES[host["family"].upper()]
        for region in regions:
            self._remember((f"{part}:{family}", region, price_kind), *priced)

    def machines(self) -> Iterator[RawRecord]:
        """Instance prices of the machine types whose three unit prices are now known."""
        regions = sorted({key[1] for key in self.components})
        for name, machine in MACHINES.items():
            accelerator = next(a for a in ACCELERATORS.values() if a.type == machine.accelerator)
            for region in regions:
                for price_kind in USAGE_TYPES.values():
                    if (name, region, price_kind) in self.emitted:
                        continue
                    gpu = self.components.get((f"gpu:{machine.accelerator}", region, price_kind))
                    core = self.components.get((f"core:{machine.family}", region, price_kind))
                    ram = self.components.get((f"ram:{machine.family}", region, price_kind))
                    if gpu is None or core is None or ram is None:
                        continue
                    currency = gpu[1]
                    if not currency == core[1] == ram[1]:
                        continue
                    amount = (
                        machine.gpus * gpu[0] + machine.vcpus * core[0] + machine.memory_gb * ram[0]
                    )
                    self.emitted.add((name, region, price_kind))
                    yield {
                        "sku": name,
                        "gpu_model": accelerator.gpu_model,
                        "gpu_name_raw": accelerator.gpu,
                        "gpu_count": machine.gpus,
                        "gpu_memory_gb": accelerator.gpu_memory_gb,
                        "vcpus": machine.vcpus,
                        "memory_gb": machine.memory_gb,
                        "region": region,
                        "price_kind": price_kind,
                        "unit": "hour",
                        "price_per": "instance",
                        "amount": str(plain(amount)),
                        "currency": currency,
                        "source_url": SKUS_URL,
                    }

    def _accelerator(self, raw: str) -> Accelerator:
        name = gpu_name(raw)
        workstation = name.endswith(WORKSTATION)
        known = ACCELERATORS.get(name.removesuffix(WORKSTATION))
        if known is None:
            # A GPU this table doesn't know: named after Google's description, so the
            # pipeline maps it by alias or reports it unmapped.
            slug = re.sub(r"[^a-z0-9]+", "-", raw.lower()).strip("-")
            return Accelerator(slug, raw.strip(), None, None)
        if workstation:
            return Accelerator(f"{known.type}-vws", f"{known.gpu} Virtual Workstation",
                               known.gpu_model, known.gpu_memory_gb)  # fmt: skip
        return known

    def _price(self, sku: dict[str, Any], part: str) -> tuple[Decimal, str] | None:
        priced = sku_price(sku)
        if priced is None:
            self.skipped["zero price"] += 1
            return None
        amount, currency, unit = priced
        if unit != EXPECTED_UNITS[part]:
            self.skipped[f"{part} priced per {unit}"] += 1
            return None
        return amount, currency

    def _remember(self, key: Key, amount: Decimal, currency: str) -> None:
        known = self.components.get(key)
        if known is not None and known != (amount, currency):
            self.skipped["conflicting unit price (first kept)"] += 1
            return
        self.components[key] = (amount, currency)
