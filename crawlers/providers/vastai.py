"""Vast.ai marketplace: the cheapest verified offer per GPU model, GPU count and country.

``POST /api/v0/bundles/`` takes a search query (the one the official CLI sends:
``verified``, ``external``, ``rentable``, ``rented`` filters, ``order``, ``type``,
``limit``, ``allocated_storage``) and answers ``{"offers": [...]}``; each offer carries
``id``, ``machine_id``, ``gpu_name``, ``num_gpus``, ``gpu_ram`` (MiB), ``dph_total``
(USD per hour for the whole offer, including ``allocated_storage`` GB of disk),
``min_bid`` (lowest accepted interruptible bid), ``geolocation`` ("Sweden, SE")…
Docs: https://docs.vast.ai/api-reference/search/search-offers (CLI: ``vastai search offers``)

Paging: the endpoint has no cursor, only ``limit``. We page by offer id (order by ``id``
ascending, ``id > last id seen``) so a large market is never cut at the limit; a page
shorter than :attr:`VastAi.page_size` is the last one.

Offer identity: single asks are ephemeral (machines come and go every few minutes), so
one record per ask would churn the catalog with additions and withdrawals. Instead each
(GPU model, nominal GPU memory, GPU count, country) is one offer whose price is the
cheapest current ask: sku ``"<n>x <gpu_name> <memory>GB"``, region = ISO country code
from ``geolocation`` (``unknown`` when the host publishes none), ``on_demand`` from
``dph_total`` and ``interruptible`` (a floor: the minimum bid) from ``min_bid``. Vast.ai
reports prices as binary-float arithmetic (0.4010416666666667); they are rounded to
micro-dollars (6 places). GPU memory is reported as usable MiB (an L40S shows 46068), so
it is snapped to the nominal size (48 GB), which also tells A100 40GB from 80GB.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

from crawlers.base import ApiSource, Context, LayoutChanged, RawRecord, Request, Response
from crawlers.normalize.decimal_json import plain, response_json
from schema.codes import country_codes

PRICING_URL = "https://vast.ai/pricing"
MICRO = Decimal("0.000001")
UNKNOWN_REGION = "unknown"
NOMINAL_GB = (
    4,
    6,
    8,
    10,
    11,
    12,
    16,
    20,
    24,
    32,
    40,
    48,
    64,
    80,
    94,
    96,
    128,
    141,
    144,
    180,
    192,
    256,
    288,
)
_COUNTRY = re.compile(r"(?:^|,)\s*([A-Za-z]{2})\s*$")

Key = tuple[str, int, int, str]


def nominal_gb(mib: Any) -> int | None:
    """Usable MiB -> marketed GB: 46068 -> 48, 143771 -> 141, 81920 -> 80."""
    if not mib:
        return None
    gib = Decimal(mib) / 1024
    for size in NOMINAL_GB:
        if gib <= size:
            return size
    return int(gib.to_integral_value())


def country_of(geolocation: Any) -> str | None:
    """ "Sweden, SE" -> "SE"; "US" -> "US"; None or unknown codes -> None."""
    if not isinstance(geolocation, str):
        return None
    match = _COUNTRY.search(geolocation)
    code = match.group(1).upper() if match else None
    return code if code in country_codes() else None


def _usd(value: Any) -> Decimal | None:
    if value is None:
        return None
    amount = Decimal(value).quantize(MICRO, rounding=ROUND_HALF_EVEN)
    return plain(amount) if amount > 0 else None


class VastAi(ApiSource):
    name = "vastai"
    provider = "vastai"
    kind = "marketplace"  # type: ignore[assignment]  # SourceKind lacks it; see SCHEDULE_DEFAULTS
    schedule = "10m"
    parser_version = "1"
    base_url = "https://console.vast.ai"
    currency = "USD"
    docs_url = "https://docs.vast.ai/api-reference/search/search-offers"
    terms_url = "https://vast.ai/terms"
    seed_fixtures = ("bundles-page-1.json", "bundles-page-2.json")
    page_size = 250
    allocated_storage_gb = 5

    def __init__(self) -> None:
        self._cheapest: dict[Key, dict[str, Decimal | None]] = {}
        self._specimen: dict[Key, dict[str, Any]] = {}

    def start(self, ctx: Context) -> Iterator[Request]:
        yield self._page(ctx, after=None)

    def query(self, after: int | None) -> dict[str, Any]:
        """The search body: the CLI's default filters, paged by offer id."""
        query: dict[str, Any] = {
            "verified": {"eq": True},
            "external": {"eq": False},
            "rentable": {"eq": True},
            "rented": {"eq": False},
            "num_gpus": {"gte": 1},
            "order": [["id", "asc"]],
            "type": "on-demand",
            "limit": self.page_size,
            "allocated_storage": self.allocated_storage_gb,
        }
        if after is not None:
            query["id"] = {"gt": after}
        return query

    def _page(self, ctx: Context, after: int | None) -> Request:
        return Request(f"{ctx.base_url}/api/v0/bundles/", method="POST", json=self.query(after))

    def parse(self, response: Response, ctx: Context) -> Iterator[RawRecord | Request]:
        payload = response_json(response)
        if not isinstance(payload, dict) or not isinstance(payload.get("offers"), list):
            raise LayoutChanged("expected {'offers': [...]}")
        offers = payload["offers"]
        for offer in offers:
            self._add(offer)
        if len(offers) >= self.page_size:
            if response.request is not None:
                yield self._page(ctx, after=max(int(o["id"]) for o in offers))
            return
        yield from self._records()

    def _add(self, offer: dict[str, Any]) -> None:
        count = int(offer["num_gpus"])
        memory = nominal_gb(offer["gpu_ram"])
        country = country_of(offer["geolocation"])
        key: Key = (offer["gpu_name"], memory or 0, count, country or UNKNOWN_REGION)
        prices = {"on_demand": _usd(offer["dph_total"]), "interruptible": _usd(offer["min_bid"])}
        best = self._cheapest.setdefault(key, {"on_demand": None, "interruptible": None})
        for kind, price in prices.items():
            current = best[kind]
            if price is not None and (current is None or price < current):
                best[kind] = price
        self._specimen.setdefault(key, {"memory": memory, "country": country})

    def _records(self) -> Iterator[RawRecord]:
        """The cheapest ask per offer identity, once the last page is in."""
        cheapest, self._cheapest = self._cheapest, {}
        for key, best in sorted(cheapest.items()):
            gpu_name, _, count, region = key
            memory = self._specimen[key]["memory"]
            name = f"{gpu_name} {memory}GB" if memory else gpu_name
            for kind, amount in best.items():
                if amount is None:
                    continue
                yield {
                    "sku": f"{count}x {name}",
                    "gpu_name_raw": name,
                    "gpu_count": count,
                    "gpu_memory_gb": memory,
                    "region": region,
                    "country": self._specimen[key]["country"],
                    "price_kind": kind,
                    "unit": "hour",
                    "price_per": "instance",
                    "amount": amount,
                    "price_floor": kind == "interruptible",
                    "source_url": PRICING_URL,
                }
