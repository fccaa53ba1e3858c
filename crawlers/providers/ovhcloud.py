"""OVHcloud Public Cloud GPU instances from the public order catalog (no auth).

``GET /1.0/order/catalog/public/cloud?ovhSubsidiary=FR`` returns the whole Public Cloud
catalog of one billing subsidiary: ``locale`` (currency), ``plans`` (the ``project`` plan
lists its addon families; family ``instance`` names every instance flavour's plan codes)
and ``addons`` (one per plan code, with ``pricings``, ``configurations`` and ``blobs``).
Docs: https://api.ovh.com/console/#/order/catalog/public/cloud~GET

Mapping:

- GPU flavours are the ``instance`` addons whose ``blobs.technical.gpu.number`` > 0
  (t1, t2, a10, a100, h100, h200, l4, l40s, rtx5000…). Other families that carry a GPU
  blob (AI Deploy apps, billed per minute) are not instances and are ignored.
- Plan code ``<flavour>.consumption`` is the hourly price (``on_demand``/hour);
  ``<flavour>.monthly.postpaid`` the monthly plan (``monthly``/month). The billing mode
  comes from the plan code, not from ``intervalUnit`` (some subsidiaries publish "none").
  A trailing ``.3AZ``/``.LZ…`` suffix marks multi-AZ or local-zone pricing: those plans
  are priced separately and offered only in their own regions.
- Prices are integers in 10^-8 of the currency (280000000 = 2.80 EUR), read exactly.
- Regions come from each addon's ``configurations[name=region]``; the hourly variant
  often lists none, so the regions of all variants of a flavour (same zone suffix) are
  merged, and the price is one offer per region. The country follows from OVHcloud's
  site prefix (GRA11 → FR, BHS5 → CA…).
- ``win-`` flavours (Windows licence included) and ``coming_soon`` flavours are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import response_json, scaled

PRICING_URL = "https://www.ovhcloud.com/fr/public-cloud/prices/"
PRICE_EXPONENT = -8
"""Catalog prices are integers in 10^-8 of the currency."""

# OVHcloud site prefix -> ISO 3166 country (https://www.ovhcloud.com/en/about-us/global-infrastructure/)
SITE_COUNTRY = {
    "GRA": "FR",
    "SBG": "FR",
    "RBX": "FR",
    "PAR": "FR",
    "BHS": "CA",
    "TOR": "CA",
    "DE": "DE",
    "LIM": "DE",
    "UK": "GB",
    "ERI": "GB",
    "WAW": "PL",
    "MIL": "IT",
    "SGP": "SG",
    "SYD": "AU",
    "MUM": "IN",
    "VIN": "US",
    "HIL": "US",
    "VA": "US",
    "OR": "US",
}
MODES = {"consumption": ("on_demand", "hour"), "monthly.postpaid": ("monthly", "month")}
_PLAN = re.compile(r"^(?P<flavour>[^.]+)\.(?P<mode>consumption|monthly\.postpaid)(?P<zone>\..+)?$")


def region_country(region: str) -> str | None:
    """GRA11 -> FR, EU-WEST-PAR -> FR, CA-EAST-TOR -> CA, US-EAST-VA-1 -> US."""
    parts = [re.sub(r"\d+$", "", part) for part in region.upper().split("-")]
    # the site is the first part (GRA11, DE1) or the last named one (EU-WEST-PAR)
    for part in [parts[0], *reversed(parts)]:
        if part in SITE_COUNTRY:
            return SITE_COUNTRY[part]
    return None


class OvhCloud(ApiSource):
    name = "ovhcloud"
    provider = "ovhcloud"
    kind = "api"
    schedule = "6h"
    parser_version = "1"
    base_url = "https://api.ovh.com"
    currency = "EUR"
    subsidiary = "FR"
    docs_url = "https://api.ovh.com/console/#/order/catalog/public/cloud~GET"
    terms_url = "https://www.ovhcloud.com/en/terms-and-conditions/contracts/"

    def start(self, ctx: Context) -> Iterator[Request]:
        yield Request(
            f"{ctx.base_url}/1.0/order/catalog/public/cloud",
            params={"ovhSubsidiary": self.subsidiary},
        )

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        catalog = response_json(response)
        if not isinstance(catalog, dict) or not isinstance(catalog.get("addons"), list):
            raise LayoutChanged("expected a catalog object with an 'addons' list")
        currency = catalog["locale"]["currencyCode"]
        instance_codes = _instance_plan_codes(catalog)
        gpu_addons = [
            addon
            for addon in catalog["addons"]
            if addon["planCode"] in instance_codes and _gpu(addon)["number"]
        ]
        regions = _merged_regions(gpu_addons)
        for addon in gpu_addons:
            plan = _PLAN.match(addon["planCode"])
            if plan is None or _skipped(plan["flavour"], addon):
                continue
            price_kind, unit = MODES[plan["mode"]]
            for region in sorted(regions.get((plan["flavour"], plan["zone"]), ())):
                yield _record(addon, plan["flavour"], region, price_kind, unit, currency)


def _instance_plan_codes(catalog: dict[str, Any]) -> set[str]:
    for plan in catalog["plans"]:
        if plan["planCode"] == "project":
            for family in plan["addonFamilies"]:
                if family["name"] == "instance":
                    return set(family["addons"])
    raise LayoutChanged("no 'instance' addon family under the 'project' plan")


def _gpu(addon: dict[str, Any]) -> dict[str, Any]:
    technical = (addon.get("blobs") or {}).get("technical") or {}
    return technical.get("gpu") or {"number": 0}


def _skipped(flavour: str, addon: dict[str, Any]) -> bool:
    tags = (addon.get("blobs") or {}).get("tags") or []
    return flavour.startswith("win-") or "coming_soon" in tags


def _merged_regions(addons: list[dict[str, Any]]) -> dict[tuple[str, str | None], set[str]]:
    """Regions per (flavour, zone suffix), merged over the hourly and monthly variants."""
    merged: dict[tuple[str, str | None], set[str]] = {}
    for addon in addons:
        plan = _PLAN.match(addon["planCode"])
        if plan is None:
            continue
        found = merged.setdefault((plan["flavour"], plan["zone"]), set())
        for configuration in addon.get("configurations") or []:
            if configuration["name"] == "region":
                found.update(configuration["values"])
    return merged


def _price(addon: dict[str, Any]) -> Decimal | None:
    """The one recurring price of a plan (consumption or renew), exactly; None if absent."""
    prices = [
        p["price"]
        for p in addon["pricings"]
        if {"consumption", "renew"} & set(p.get("capacities") or ["consumption"])
    ]
    return scaled(prices[0], PRICE_EXPONENT) if len(prices) == 1 else None


def _record(
    addon: dict[str, Any], flavour: str, region: str, price_kind: str, unit: str, currency: str
) -> RawRecord:
    technical = addon["blobs"]["technical"]
    gpu = technical["gpu"]
    memory = (gpu.get("memory") or {}).get("size")
    model = gpu["model"]
    return {
        "sku": flavour,
        "gpu_name_raw": f"{model} {memory}GB" if memory else model,
        "gpu_count": gpu["number"],
        "gpu_memory_gb": memory,
        "vcpus": (technical.get("cpu") or {}).get("cores"),
        "memory_gb": (technical.get("memory") or {}).get("size"),
        "region": region,
        "country": region_country(region),
        "price_kind": price_kind,
        "unit": unit,
        "price_per": "instance",
        "amount": _price(addon),
        "currency": currency,
        "source_url": PRICING_URL,
        "bare_metal": False,
    }
