"""The provider farm: a loopback HTTP server that serves API sources' fixtures and HTML
pricing pages, changes their prices on a seeded schedule (logging the truth) and injects
faults (counted by kind).

Each source adapter parses its fixture once and exposes *knobs*: prices the farm may move,
each tied to the catalog offers it must show up in (source, sku, ``on_demand``). A fault
is armed on one source and served to its next request(s); the clean document is never
touched by a fault. Every clean (fault-free) answer records which value of each knob was
served and when, so the runner can demand exactly those values in the catalog history.
"""

from __future__ import annotations

import codecs
import copy
import csv
import io
import json
import random
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape as xml_escape

from service.core.config import FIXTURES_DIR

HOSTILE = "<script>alert('x')</script>\u202e\u200f<b>evil</b>\x00&amp;\"'"
BIG_FIELD = "A" * (10 * 1024 * 1024)
HARD = "hard"
"""A fault served to every attempt of one crawl (retries included): the crawl must fail."""

FAULT_KINDS = (
    "http_429",
    "http_500",
    "http_503",
    "slow",
    "truncated",
    "invalid_json",
    "renamed_field",
    "layout_changed",
    "columns_reordered",
    "drop_90",
    "spike_x100",
    "duplicates",
    "hostile",
)
TRANSIENT = {"http_429"}  # one bad answer, the retry gets a clean one: the crawl succeeds
LAYOUT_FAULTS = {"renamed_field", "layout_changed"}
"""Faults after which the crawl must fail with the reason ``layout changed``."""
API_ONLY = {"invalid_json", "renamed_field"}
HTML_ONLY = {"layout_changed", "columns_reordered"}
ROBOTS = b"User-agent: *\nDisallow: /private/\n"


@dataclass
class Knob:
    source: str
    key: str
    sku: str
    amount: Decimal
    setter: Callable[[Any, Decimal], None]


class Adapter:
    """One source: its route, its fixture, its knobs and how each fault mangles it."""

    name: str
    path: str
    fixture: Path
    content_type = "application/json"
    prefix = ""
    """Path prefix of the source's base URL on the farm (HTML sources share paths)."""
    method = "GET"
    pages = 1
    """Pages of one crawl (a paged API): page 0 starts a crawl, the last one ends it."""

    def __init__(self) -> None:
        self.doc: Any = json.loads(self.fixture.read_text())

    def route(self, method: str, path: str, query: str) -> int | None:
        """The page a request asks for (None: not this source's)."""
        return 0 if method == self.method and path == self.path else None

    def route_body(self, method: str, path: str, query: str, body: bytes) -> int | None:
        """The page a request asks for, when the request body says which (a POST search)."""
        return self.route(method, path, query)

    def render_page(self, doc: Any, page: int) -> bytes:
        return self.render(doc)

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        return self.mangle(kind, doc, rng)

    def knob_pages(self, key: str) -> set[int]:
        """The pages a knob's price is on."""
        return {0}

    def publish(self, doc: Any, rng: random.Random) -> dict[str, Any] | None:
        """A legitimate change of a source without price knobs (a new FX day)."""
        return None

    def spike_doc(self, doc: Any, rng: random.Random) -> dict[str, Any] | None:
        """The ×100 spike of a source without price knobs."""
        return None

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        """Remove one product from ``doc`` (a legitimate withdrawal): the skus whose offers
        it takes away (none: this source has no withdrawal)."""
        return []

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        """The fault kinds this source can be served (in ``kinds``' order)."""
        return [k for k in kinds if k not in HTML_ONLY]

    def content_type_of(self, page: int) -> str:
        """The Content-Type of a page's answers (a version file, then a zip...)."""
        return self.content_type

    def invalid_page(self, doc: Any, clean: bytes, page: int, rng: random.Random) -> bytes:
        """The body of ``invalid_json`` (a payload the parser cannot read) on ``page``;
        ``doc`` is the crawl's clean document (not to be modified)."""
        return clean[: len(clean) // 3] + b"}{,"

    def render(self, doc: Any) -> bytes:
        return json.dumps(doc, ensure_ascii=False).encode()

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        """The body of a content fault (``doc`` is a copy of the clean document)."""
        if kind == "renamed_field":
            self.rename(doc)
        elif kind == "drop_90":
            self.drop(doc, rng)
        elif kind == "duplicates":
            self.duplicate(doc)
        elif kind == "hostile":
            self.hostile(doc)
        return self.render(doc)

    def knobs(self) -> dict[str, Knob]:
        raise NotImplementedError

    def new_amount(self, old: Decimal, rng: random.Random) -> Decimal:
        factor = Decimal(str(round(rng.uniform(0.8, 1.25), 3)))
        new = (old * factor).quantize(Decimal("0.01"))
        return new if new not in (old, 0) else old + Decimal("0.01")

    def rename(self, doc: Any) -> None:
        raise NotImplementedError

    def drop(self, doc: Any, rng: random.Random) -> None:
        raise NotImplementedError

    def duplicate(self, doc: Any) -> None:
        raise NotImplementedError

    def hostile(self, doc: Any) -> None:
        raise NotImplementedError


def _keep_tenth(items: list[Any], rng: random.Random) -> list[Any]:
    return rng.sample(items, max(1, len(items) // 10))


class Oracle(Adapter):
    name = "oracle"
    path = "/pls/apex/cetools/api/v1/products/"
    fixture = FIXTURES_DIR / "oracle" / "products-USD.json"

    def knobs(self) -> dict[str, Knob]:
        from crawlers.providers.oracle import SHAPES

        found = {}
        for index, item in enumerate(self.doc["items"]):
            shapes = SHAPES.get(item["partNumber"], ())
            if item["metricName"] != "GPU Per Hour" or len(shapes) != 1:
                continue
            prices = [
                p
                for loc in item["currencyCodeLocalizations"]
                if loc["currencyCode"] == "USD"
                for p in loc["prices"]
                if p["model"] == "PAY_AS_YOU_GO"
            ]
            if len(prices) != 1 or prices[0]["value"] is None:
                continue

            def setter(doc: Any, amount: Decimal, i: int = index) -> None:
                for loc in doc["items"][i]["currencyCodeLocalizations"]:
                    for p in loc["prices"]:
                        if loc["currencyCode"] == "USD" and p["model"] == "PAY_AS_YOU_GO":
                            p["value"] = float(amount)

            amount = Decimal(str(prices[0]["value"]))
            found[item["partNumber"]] = Knob(
                self.name, item["partNumber"], shapes[0].name, amount, setter
            )
        return found

    def rename(self, doc: Any) -> None:
        doc["products"] = doc.pop("items")

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["items"] = _keep_tenth(doc["items"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["items"] = doc["items"] + copy.deepcopy(doc["items"])

    def hostile(self, doc: Any) -> None:
        for item in doc["items"]:
            item["displayName"] = f"{item['displayName']} {HOSTILE}"
        doc["items"][0]["description"] = BIG_FIELD


class Lambda(Adapter):
    name = "lambda"
    path = "/api/v1/instance-types"
    fixture = FIXTURES_DIR / "lambda" / "instance-types.json"

    def knobs(self) -> dict[str, Knob]:
        found = {}
        for key, entry in self.doc["data"].items():
            item = entry["instance_type"]
            if not item["specs"]["gpus"]:
                continue

            def setter(doc: Any, amount: Decimal, k: str = key) -> None:
                doc["data"][k]["instance_type"]["price_cents_per_hour"] = int(amount * 100)

            amount = Decimal(item["price_cents_per_hour"]) / 100
            found[key] = Knob(self.name, key, item["name"], amount, setter)
        return found

    def rename(self, doc: Any) -> None:
        doc["instance_types"] = doc.pop("data")

    def drop(self, doc: Any, rng: random.Random) -> None:
        keep = _keep_tenth(sorted(doc["data"]), rng)
        doc["data"] = {k: doc["data"][k] for k in keep}

    def duplicate(self, doc: Any) -> None:
        for key in list(doc["data"]):
            doc["data"][f"{key}-copy"] = copy.deepcopy(doc["data"][key])

    def hostile(self, doc: Any) -> None:
        for entry in doc["data"].values():
            entry["instance_type"]["description"] = HOSTILE
            for region in entry.get("regions_with_capacity_available") or []:
                region["description"] = HOSTILE
        first = next(iter(doc["data"].values()))
        first["instance_type"]["description"] = BIG_FIELD


class Ovh(Adapter):
    name = "ovhcloud"
    path = "/1.0/order/catalog/public/cloud"
    fixture = FIXTURES_DIR / "ovhcloud" / "catalog-public-cloud-FR.json"
    plan = re.compile(r"^([^.]+)\.consumption$")

    def knobs(self) -> dict[str, Knob]:
        found = {}
        for index, addon in enumerate(self.doc["addons"]):
            match = self.plan.match(addon["planCode"])
            gpu = ((addon.get("blobs") or {}).get("technical") or {}).get("gpu") or {}
            prices = [
                p
                for p in addon["pricings"]
                if {"consumption", "renew"} & set(p.get("capacities") or ["consumption"])
            ]
            if not match or not gpu.get("number") or len(prices) != 1:
                continue
            if match[1].startswith("win-"):
                continue

            def setter(doc: Any, amount: Decimal, i: int = index) -> None:
                for p in doc["addons"][i]["pricings"]:
                    if {"consumption", "renew"} & set(p.get("capacities") or ["consumption"]):
                        p["price"] = int(amount * 10**8)

            amount = Decimal(prices[0]["price"]) / 10**8
            found[addon["planCode"]] = Knob(self.name, addon["planCode"], match[1], amount, setter)
        return found

    def rename(self, doc: Any) -> None:
        doc["addOns"] = doc.pop("addons")

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["addons"] = _keep_tenth(doc["addons"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["addons"] = doc["addons"] + copy.deepcopy(doc["addons"])

    def hostile(self, doc: Any) -> None:
        for addon in doc["addons"]:
            addon["invoiceName"] = f"{addon.get('invoiceName', '')} {HOSTILE}"
        doc["addons"][0]["chaos_note"] = BIG_FIELD


class RunPod(Adapter):
    """GraphQL: one ``POST /graphql`` answers every GPU type's prices."""

    name = "runpod"
    path = "/graphql"
    method = "POST"
    fixture = FIXTURES_DIR / "runpod" / "gpu-catalog.json"
    clouds = (
        ("secure", "secureCloud", "securePrice"),
        ("community", "communityCloud", "communityPrice"),
    )

    def knobs(self) -> dict[str, Knob]:
        found = {}
        for gpu in self.doc["data"]["gpuTypes"]:
            for cloud, offered, price in self.clouds:
                if not gpu[offered] or not gpu[price]:
                    continue

                def setter(doc: Any, amount: Decimal, g: str = gpu["id"], f: str = price) -> None:
                    for each in doc["data"]["gpuTypes"]:  # by id: a withdrawal shifts indices
                        if each["id"] == g:
                            each[f] = float(amount)

                key = f"{gpu['id']}/{cloud}"
                found[key] = Knob(self.name, key, key, Decimal(str(gpu[price])), setter)
        return found

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        gpus = doc["data"]["gpuTypes"]
        gpu = gpus.pop(rng.randrange(len(gpus)))
        return [f"{gpu['id']}/{cloud}" for cloud, offered, _ in self.clouds if gpu[offered]]

    def rename(self, doc: Any) -> None:
        doc["data"]["gpu_types"] = doc["data"].pop("gpuTypes")

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["data"]["gpuTypes"] = _keep_tenth(doc["data"]["gpuTypes"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["data"]["gpuTypes"] = doc["data"]["gpuTypes"] + copy.deepcopy(doc["data"]["gpuTypes"])

    def hostile(self, doc: Any) -> None:
        for gpu in doc["data"]["gpuTypes"]:  # fields the parser does not read
            gpu["displayName"] = f"{gpu['displayName']} {HOSTILE}"
            gpu["manufacturer"] = f"{gpu['manufacturer']} {HOSTILE}"
        for centre in doc["data"]["dataCenters"]:
            centre["name"] = f"{centre['name']} {HOSTILE}"
        doc["data"]["gpuTypes"][0]["chaos_note"] = BIG_FIELD


class PagedJson(Adapter):
    """A paged JSON API: ``doc`` is the list of pages, each holding its entries under
    ``items``. A knob is one key whose entries (``entries``: (page, index) pairs, on any
    page) are all served at one price (``amounts``), set by ``_set``."""

    items: str
    """the key of a page's entry list"""
    renamed: str
    """what ``renamed_field`` renames ``items`` to"""
    separators: tuple[str, str] | None = None
    entries: dict[str, list[tuple[int, int]]]
    amounts: dict[str, Decimal]

    def _set(self, doc: Any, key: str, amount: Decimal) -> None:
        raise NotImplementedError

    def hostile_items(self, items: list[Any]) -> None:
        """Hostile strings in fields the parser does not read."""
        raise NotImplementedError

    def render_page(self, doc: Any, page: int) -> bytes:
        return json.dumps(doc[page], ensure_ascii=False, separators=self.separators).encode()

    def render(self, doc: Any) -> bytes:
        return self.render_page(doc, 0)

    def knob_pages(self, key: str) -> set[int]:
        return {p for p, _ in self.entries[key]}

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            return lambda doc, amount: self._set(doc, key, amount)

        return {
            key: Knob(self.name, key, key, amount, setter(key))
            for key, amount in self.amounts.items()
        }

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        items = doc[page][self.items]
        if kind == "renamed_field":
            doc[page][self.renamed] = doc[page].pop(self.items)
        elif kind == "drop_90":
            doc[page][self.items] = _keep_tenth(items, rng)
        elif kind == "duplicates":
            doc[page][self.items] = items + copy.deepcopy(items)
        elif kind == "hostile":
            self.hostile_items(items)
            items[0]["chaos_note"] = BIG_FIELD
        return self.render_page(doc, page)


class Gcp(PagedJson):
    """Cloud Billing Catalog: three pages chained by ``nextPageToken``; ``doc`` is the list
    of pages. Knobs are the on-demand per-GPU prices of accelerators no machine type is
    priced from (T4, V100, P100, P4...): each accelerator's SKUs (regional and
    multi-regional, spread over the pages) are served at one price, so its offers agree in
    every region. Faults hit one page of a crawl (a 500 on page 3 must fail the crawl and
    leave no partial catalog), but ``drop_90`` every page."""

    name = "gcp"
    items, renamed = "skus", "skuList"
    pages = 3

    def __init__(self) -> None:
        from crawlers.providers.gcp import (
            GPU_SKU,
            MACHINES,
            SERVICE,
            GcpBillingCatalog,
            sku_price,
        )

        self.path = f"/v1/services/{SERVICE}/skus"
        files = [FIXTURES_DIR / "gcp" / f"skus-page-{n}.json" for n in range(1, self.pages + 1)]
        self.doc = [json.loads(f.read_text()) for f in files]
        self.tokens = {"": 0}
        for index, page in enumerate(self.doc[:-1]):
            self.tokens[page["nextPageToken"]] = index + 1
        priced_machines = {m.accelerator for m in MACHINES.values()}
        parser = GcpBillingCatalog()
        self.entries: dict[str, list[tuple[int, int]]] = {}
        for p, page in enumerate(self.doc):
            for i, sku in enumerate(page["skus"]):
                category = sku["category"]
                if category["resourceGroup"] != "GPU" or category["usageType"] != "OnDemand":
                    continue
                match = GPU_SKU.match(sku["description"])
                priced = sku_price(sku)
                if match is None or priced is None or priced[2] != "h":
                    continue
                accelerator = parser._accelerator(match["gpu"]).type
                if accelerator not in priced_machines:
                    self.entries.setdefault(accelerator, []).append((p, i))
        self.amounts: dict[str, Decimal] = {}
        for accelerator, spots in self.entries.items():
            p, i = spots[0]
            price = sku_price(self.doc[p]["skus"][i])
            assert price is not None
            self.amounts[accelerator] = max(price[0].quantize(Decimal("0.01")), Decimal("0.01"))
            self._set(self.doc, accelerator, self.amounts[accelerator])

    def _set(self, doc: Any, accelerator: str, amount: Decimal) -> None:
        units = int(amount)
        nanos = int((amount - units) * 10**9)
        for p, i in self.entries[accelerator]:
            tier = doc[p]["skus"][i]["pricingInfo"][0]["pricingExpression"]["tieredRates"][-1]
            tier["unitPrice"] = {"currencyCode": "USD", "units": str(units), "nanos": nanos}

    def route(self, method: str, path: str, query: str) -> int | None:
        if method != "GET" or path != self.path:
            return None
        token = parse_qs(query).get("pageToken", [""])[0]
        return self.tokens.get(token)

    def hostile_items(self, items: list[Any]) -> None:
        for sku in items:
            sku["serviceProviderName"] = f"{sku['serviceProviderName']} {HOSTILE}"
            sku["category"]["serviceDisplayName"] += f" {HOSTILE}"


WITHDRAWN = "chaos_withdrawn"
"""The mark of an entry a paged source withdrew (left out of every answer)."""


class _PagedWithdrawal(PagedJson):
    """A paged JSON source that can withdraw a product: its entries are marked
    (``WITHDRAWN``) rather than removed, so every entry keeps its (page, index) position
    (the knobs' and older crawls' snapshots), and are left out of every answer. The product
    withdrawn is a knob's among those with the fewest entries, on pages ``allowed``."""

    def product(self, item: dict[str, Any]) -> str | None:
        """The sku of the offers an entry makes (None: it makes none)."""
        raise NotImplementedError

    def allowed(self, pages: set[int]) -> bool:
        """Whether a product on these pages may be withdrawn."""
        return True

    def visible(self, doc: Any, page: int) -> dict[str, Any]:
        if self.items not in doc[page]:  # renamed (a fault)
            return dict(doc[page])
        items = [item for item in doc[page][self.items] if not item.get(WITHDRAWN)]
        return {**doc[page], self.items: items}

    def render_page(self, doc: Any, page: int) -> bytes:
        return json.dumps(
            self.visible(doc, page), ensure_ascii=False, separators=self.separators
        ).encode()

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        doc[page] = self.visible(doc, page)
        return super().mangle_page(kind, doc, page, rng)

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        where: dict[str, set[int]] = {}
        entries: Counter[str] = Counter()
        for p, page in enumerate(doc):
            for item in page[self.items]:
                sku = None if item.get(WITHDRAWN) else self.product(item)
                if sku is not None:
                    where.setdefault(sku, set()).add(p)
                    entries[sku] += 1
        total = sum(entries.values())
        candidates = [
            sku
            for sku in sorted(where)
            if sku in self.amounts and self.allowed(where[sku]) and entries[sku] * 10 <= total
        ]
        if not candidates:
            return []
        fewest = min(entries[sku] for sku in candidates)
        sku = rng.choice([s for s in candidates if entries[s] == fewest])
        for page in doc:
            for item in page[self.items]:
                if self.product(item) == sku:
                    item[WITHDRAWN] = True
        return [sku]


class Azure(_PagedWithdrawal):
    """Azure Retail Prices API: four queries (one per VM family, ``$filter`` on
    ``Standard_NC``, ``ND``, ``NG``, ``NV``), seven pages chained by ``NextPageLink``
    (``$skip``); ``doc`` is the list of pages in the order the crawler asks for them
    (breadth-first: the four first pages, then NC 2, NV 2, NV 3). Knobs are the Linux
    pay-as-you-go price of each known size, served at one price in every region (its first
    row's), so its offers agree everywhere; spot, low-priority and reservation rows never
    move. Faults hit one page of a crawl (``drop_90`` every page). A withdrawal takes one
    size out of every page (every price kind, every region)."""

    name = "azure"
    items, renamed = "Items", "items"
    separators = (",", ":")
    pages = 7
    files: tuple[str, ...] = (
        *("nc-page-1", "nd-page-1", "ng-page-1", "nv-page-1"),  # the four first pages
        *("nc-page-2", "nv-page-2", "nv-page-3"),  # then their NextPageLinks, in order
    )

    def __init__(self) -> None:
        from crawlers.providers.azure import API_PATH, SIZES

        self.path = API_PATH
        self.doc = [
            json.loads((FIXTURES_DIR / "azure" / f"{f}.json").read_text()) for f in self.files
        ]
        self.order = {}
        for index, name in enumerate(self.files):
            family, _, number = name.partition("-page-")
            self.order[(family.upper(), (int(number) - 1) * 1000)] = index
        self.entries: dict[str, list[tuple[int, int]]] = {}
        for p, page in enumerate(self.doc):
            for i, item in enumerate(page["Items"]):
                if (
                    item["armSkuName"] in SIZES
                    and item["type"] == "Consumption"
                    and "Windows" not in item["productName"]
                    and not item["skuName"].endswith((" Spot", " Low Priority"))
                    and item["unitOfMeasure"] == "1 Hour"
                    and item.get("isPrimaryMeterRegion") is not False
                ):
                    self.entries.setdefault(item["armSkuName"], []).append((p, i))
        self.amounts: dict[str, Decimal] = {}
        for sku, spots in self.entries.items():
            p, i = spots[0]
            amount = Decimal(str(self.doc[p]["Items"][i]["retailPrice"])).quantize(Decimal("0.01"))
            self.amounts[sku] = max(amount, Decimal("0.01"))
            self._set(self.doc, sku, self.amounts[sku])

    def _set(self, doc: Any, sku: str, amount: Decimal) -> None:
        for p, i in self.entries[sku]:
            item = doc[p]["Items"][i]
            item["retailPrice"] = item["unitPrice"] = float(amount)

    def route(self, method: str, path: str, query: str) -> int | None:
        if method != "GET" or path != self.path:
            return None
        args = parse_qs(query)
        family = re.search(r"'Standard_(N[A-Z])'", args.get("$filter", [""])[0])
        if family is None:
            return None
        return self.order.get((family.group(1), int(args.get("$skip", ["0"])[0] or 0)))

    def product(self, item: dict[str, Any]) -> str | None:
        from crawlers.providers.azure import _BY_KEY

        known = _BY_KEY.get(str(item["armSkuName"]).lower())
        return known[0] if known else None

    def hostile_items(self, items: list[Any]) -> None:
        for item in items:
            item["meterName"] = f"{item['meterName']} {HOSTILE}"
            item["location"] = f"{item['location']} {HOSTILE}"


class VastAi(_PagedWithdrawal):
    """Vast.ai's marketplace search, ``POST /api/v0/bundles/``: two pages of asks, the
    second asked for with ``"id": {"gt": last id}`` in the search body. The crawler keeps
    the cheapest ask per (GPU, memory, count, country); a knob is one such sku, every ask
    of it (every host, every country, both pages) served at one ``dph_total`` (its first
    ask's, to the cent), so it stays the cheapest ask and its offers agree in every
    country. ``min_bid`` (the interruptible floor) never moves. A withdrawal takes every
    ask of one sku off the market, one whose asks are all on the second page (a first page
    shorter than the page size would end the crawler's paging there)."""

    name = "vastai"
    items, renamed = "offers", "asks"
    path = "/api/v0/bundles/"
    method = "POST"
    pages = 2

    def __init__(self) -> None:
        from crawlers.providers.vastai import nominal_gb

        files = [FIXTURES_DIR / "vastai" / f"bundles-page-{n}.json" for n in (1, 2)]
        self.doc = [json.loads(f.read_text()) for f in files]
        self.entries: dict[str, list[tuple[int, int]]] = {}
        for p, page in enumerate(self.doc):
            for i, ask in enumerate(page["offers"]):
                memory = nominal_gb(ask["gpu_ram"])
                if not memory or ask["dph_total"] is None:
                    continue
                sku = f"{int(ask['num_gpus'])}x {ask['gpu_name']} {memory}GB"
                self.entries.setdefault(sku, []).append((p, i))
        self.amounts: dict[str, Decimal] = {}
        for sku, spots in self.entries.items():
            p, i = spots[0]
            first = Decimal(str(self.doc[p]["offers"][i]["dph_total"]))
            self.amounts[sku] = max(first.quantize(Decimal("0.01")), Decimal("0.01"))
            self._set(self.doc, sku, self.amounts[sku])

    def _set(self, doc: Any, sku: str, amount: Decimal) -> None:
        for p, i in self.entries[sku]:
            doc[p]["offers"][i]["dph_total"] = float(amount)

    def route_body(self, method: str, path: str, query: str, body: bytes) -> int | None:
        if method != self.method or path != self.path:
            return None
        try:
            search = json.loads(body or b"{}")
        except ValueError:
            return 0
        return 1 if isinstance(search, dict) and "id" in search else 0

    def product(self, item: dict[str, Any]) -> str | None:
        from crawlers.providers.vastai import nominal_gb

        memory = nominal_gb(item["gpu_ram"])
        return f"{int(item['num_gpus'])}x {item['gpu_name']} {memory}GB" if memory else None

    def allowed(self, pages: set[int]) -> bool:
        return pages == {1}

    def hostile_items(self, items: list[Any]) -> None:
        for ask in items:
            ask["hostname"] = f"{ask.get('hostname')} {HOSTILE}"
            ask["cpu_name"] = f"{ask.get('cpu_name')} {HOSTILE}"


_DAY = re.compile(r'<Cube time="(\d{4}-\d{2}-\d{2})">(.*?)</Cube>', re.S)
_RATE = re.compile(r'<Cube currency="([A-Z]{3})" rate="([0-9.]+)"/>')


class Ecb(Adapter):
    """The ECB's 90-day reference-rate feed (XML). No price knobs: a legitimate change is
    a new business day published on top (every rate moved by at most 1 %), which must end
    up in ``fx_rate`` exactly; the ×100 spike publishes a new day whose USD rate is ×100,
    which must not (a published rate never changes, so a spiked day would stay)."""

    name = "ecb"
    path = "/stats/eurofxref/eurofxref-hist-90d.xml"
    fixture = FIXTURES_DIR / "ecb" / "eurofxref-hist-90d.xml"
    content_type = "application/xml"

    def __init__(self) -> None:
        self.doc = self.fixture.read_text()

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        # fewer days is not wrong for a feed of dated rates (stored ones never change)
        return [k for k in kinds if k not in HTML_ONLY and k != "drop_90"]

    def knobs(self) -> dict[str, Knob]:
        return {}

    def render(self, doc: Any) -> bytes:
        return str(doc).encode()

    def _next_day(
        self, doc: str, rng: random.Random, factor: Callable[[str], Decimal]
    ) -> tuple[str, dict[str, Any]]:
        latest = _DAY.search(doc)
        assert latest is not None
        day = date.fromisoformat(latest.group(1)) + timedelta(days=1)
        rates = {}
        for currency, rate in _RATE.findall(latest.group(2)):
            old = Decimal(rate)
            rates[currency] = (old * factor(currency)).quantize(old)
        cubes = "".join(f'<Cube currency="{c}" rate="{r}"/>' for c, r in rates.items())
        block = f'<Cube time="{day.isoformat()}">{cubes}</Cube>\n\t\t'
        return doc[: latest.start()] + block + doc[latest.start() :], {
            "t": time.time(),
            "date": day.isoformat(),
            "rates": rates,
        }

    def publish(self, doc: Any, rng: random.Random) -> dict[str, Any] | None:
        self.doc, event = self._next_day(
            str(doc), rng, lambda _c: Decimal(str(round(rng.uniform(0.99, 1.01), 4)))
        )
        return event

    def spike_doc(self, doc: Any, rng: random.Random) -> dict[str, Any] | None:
        self.spiked, event = self._next_day(
            str(doc), rng, lambda c: Decimal(100 if c == "USD" else 1)
        )
        return event

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        text = str(doc)
        if kind == "spike_x100":
            return self.spiked.encode()
        if kind == "renamed_field":
            text = text.replace("<Cube", "<Rates").replace("</Cube>", "</Rates>")
        elif kind == "duplicates":
            days = _DAY.findall(text)
            start = text.index('<Cube time="')
            text = (
                text[:start]
                + "".join(f'<Cube time="{d}">{body}</Cube>\n' for d, body in days)
                + text[start:]
            )
        elif kind == "hostile":
            mark = xml_escape(HOSTILE.replace("\x00", ""))
            text = text.replace("</gesmes:name>", f" {mark}</gesmes:name>", 1)
            text = text.replace("<Cube>", f"<!-- {BIG_FIELD} --><Cube>", 1)
        return text.encode()


class SkyPilotCsv(Adapter):
    """A SkyPilot catalog file (``vms.csv``): ``doc`` is the header and rows. Which offers a
    row makes (its sku, price kinds) is asked of the source's own row parser. Knobs are the
    on-demand price of each GPU instance type, served at one price in every region and zone
    (its first row's); spot prices never move. CSV faults: ``invalid_json`` is an
    unbalanced quote (``invalid payload``), ``renamed_field`` renames the price header,
    ``hostile`` goes in an extra column the parser does not read. A withdrawal removes
    every row of one instance type among those with the fewest offers, never half of
    them (the count guard); ``drop_90`` is only served while the source has enough offers
    for the count guard to judge it, withdrawal included."""

    content_type = "text/csv; charset=utf-8"
    peer: str
    version = "v8"
    price_column = "Price"
    sku_column = "InstanceType"
    min_offers_for_drop = 5
    """The count guard's ``min_offers_for_ratio_check``: below it a drop is not refused."""

    def __init__(self) -> None:
        from crawlers.base import Response
        from crawlers.registry import get_source

        self.path = self.catalog_path()
        self.parser = get_source(self.name)()
        self.response = Response("http://farm/", 200, b"")
        raw = self.fixture.read_bytes()
        self.newline = "\r\n" if b"\r\n" in raw else "\n"
        self.bom = raw.startswith(codecs.BOM_UTF8)
        rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"), newline="")))
        self.doc = {"header": rows[0], "rows": [r for r in rows[1:] if r]}
        self.header = [name.strip() for name in rows[0]]
        self.price = self.header.index(self.price_column)
        self.sku = self.header.index(self.sku_column)
        self.amounts: dict[str, Decimal] = {}
        for row in self.doc["rows"]:
            key = self.key_of(row)
            if key is not None:
                amount = Decimal(row[self.price]).quantize(Decimal("0.01"))
                self.amounts.setdefault(key, max(amount, Decimal("0.01")))
        for key, amount in self.amounts.items():
            self._set(self.doc, key, amount)

    def catalog_path(self) -> str:
        return f"/catalogs/{self.version}/{self.peer}/vms.csv"

    def row_offers(self, row: list[str]) -> list[dict[str, Any]]:
        """The records the source's parser makes of one row (none: CPU-only, unpriced)."""
        if len(row) != len(self.header):
            return []
        fields = {name: value.strip() for name, value in zip(self.header, row, strict=True)}
        return list(self.parser.offers(fields, 0, self.response))

    def key_of(self, row: list[str]) -> str | None:
        """The knob of a row: the sku of its on-demand offer (None: it has none)."""
        found = [r["sku"] for r in self.row_offers(row) if r["price_kind"] == "on_demand"]
        return found[0] if found else None

    def offer_counts(self, doc: Any) -> Counter[str]:
        """Offers per sku (one per sku, region and price kind, as the parser collapses)."""
        offers = {
            (r["sku"], r["region"], r["price_kind"])
            for row in doc["rows"]
            for r in self.row_offers(row)
        }
        return Counter(sku for sku, _, _ in offers)

    def _withdrawable(self, doc: Any) -> list[str]:
        counts = self.offer_counts(doc)
        total = sum(counts.values())
        fewest = min(counts.values(), default=0)
        return sorted(
            sku for sku, n in counts.items() if n == fewest and 2 * (total - n) >= total > n
        )

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        counts = self.offer_counts(self.doc)
        after = sum(counts.values()) - min(counts.values(), default=0)  # once withdrawn
        small = after < self.min_offers_for_drop
        return [k for k in super().kinds(kinds) if not (small and k == "drop_90")]

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        candidates = self._withdrawable(doc)
        if not candidates:
            return []
        sku = rng.choice(candidates)
        doc["rows"] = [
            row for row in doc["rows"] if all(r["sku"] != sku for r in self.row_offers(row))
        ]
        return [sku]

    def _set(self, doc: Any, key: str, amount: Decimal) -> None:
        for row in doc["rows"]:
            if self.key_of(row) == key:
                row[self.price] = f"{amount}"

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            return lambda doc, amount: self._set(doc, key, amount)

        return {
            key: Knob(self.name, key, key, amount, setter(key))
            for key, amount in self.amounts.items()
        }

    def render(self, doc: Any) -> bytes:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator=self.newline)
        writer.writerow(doc["header"])
        writer.writerows(doc["rows"])
        return (codecs.BOM_UTF8 if self.bom else b"") + out.getvalue().encode()

    def unbalanced(self, doc: Any) -> bytes:
        """The CSV with a quote opening its first row that the row does not close (the
        row's own quotes escaped): the field runs over the line end into the next rows."""
        text = self.render(doc).decode()
        cut = text.index(self.newline) + len(self.newline)
        end = text.find(self.newline, cut)
        end = len(text) if end < 0 else end
        return (text[:cut] + '"' + text[cut:end].replace('"', '""') + text[end:]).encode()

    def invalid_page(self, doc: Any, clean: bytes, page: int, rng: random.Random) -> bytes:
        return self.unbalanced(doc)

    def rename(self, doc: Any) -> None:
        doc["header"][self.price] = f"{self.price_column}USD"

    def drop(self, doc: Any, rng: random.Random) -> None:
        doc["rows"] = _keep_tenth(doc["rows"], rng)

    def duplicate(self, doc: Any) -> None:
        doc["rows"] = [row for row in doc["rows"] for _ in (0, 1)]

    def hostile(self, doc: Any) -> None:
        doc["header"] = [*doc["header"], "Notes"]
        doc["rows"] = [[*row, HOSTILE] for row in doc["rows"]]
        big = [""] * len(doc["header"])  # a row the reader refuses (field limit): a CPU one
        big[self.sku], big[-1] = "chaos-cpu", BIG_FIELD
        doc["rows"].append(big)


class SkyPilotLambda(SkyPilotCsv):
    name = "skypilot:lambda"
    peer = "lambda"
    fixture = FIXTURES_DIR / "skypilot" / "lambda.csv"


class SkyPilotRunPod(SkyPilotCsv):
    name = "skypilot:runpod"
    peer = "runpod"
    fixture = FIXTURES_DIR / "skypilot" / "runpod.csv"


_ROW = re.compile(r"<tr\b[^>]*>.*?</tr>", re.S)
_CELL = re.compile(r"(<t[dh]\b[^>]*>)(.*?)(</t[dh]>)", re.S)
_PRICE = re.compile(r"\$(\d+\.\d+)")
SCRIPT_MOUNT = '<div id="app" data-prices-url="/api/prices"></div>'
"""What a redesign that moves the prices into a script leaves where they were."""
SLOT = re.compile(r"\{\{knob:([^}]+)\}\}")
"""A knob's slot in a page template (``{{knob:<key>}}``)."""


def _cells(row: str) -> list[str]:
    return [m.group(2) for m in _CELL.finditer(row)]


def _set_cells(row: str, cells: list[str]) -> str:
    found = iter(cells)
    return _CELL.sub(lambda m: m.group(1) + next(found) + m.group(3), row)


class HtmlAdapter(Adapter):
    """A pricing page (Scrapy spider): the fixture becomes a template whose price cells
    are slots; ``doc`` is the knobs' amounts, rendered into the page on every answer.

    Faults rewrite the rendered page: the first table is the price table (its ``<thead>``
    row and ``<tbody>`` rows)."""

    content_type = "text/html; charset=utf-8"
    page: str
    """The spider's start path."""
    price_cell: int
    unread_cell: int
    """A column the spider does not read (hostile strings go there)."""
    swap: tuple[int, int]
    """Two columns the spider finds by name: reordering them must change nothing."""
    header: tuple[str, str]
    """A header the spider keys on, and the renamed one that must fail the crawl."""
    min_rows_for_drop = 5

    def __init__(self) -> None:
        self.prefix = f"/{self.name}"
        self.path = self.prefix + self.page
        html = self.fixture.read_text()
        start, end = html.index("<tbody"), html.index("</tbody>")
        rows = []
        self.skus: dict[str, str] = {}
        self.doc = {}
        for row in _ROW.findall(html[start:end]):
            cells = _cells(row)
            price = _PRICE.search(cells[self.price_cell]) if len(cells) > self.price_cell else None
            if price is not None:
                key = self.sku_of(row, cells)
                self.doc[key] = Decimal(price.group(1))
                self.skus[key] = key
                cells[self.price_cell] = _PRICE.sub(
                    "$" + "{{knob:" + key + "}}", cells[self.price_cell], count=1
                )
                row = _set_cells(row, cells)
            rows.append(row)
        self.template = html[:start] + html[start:end].split(">", 1)[0] + ">"
        self.template += "\n".join(rows) + html[end:]

    def sku_of(self, row: str, cells: list[str]) -> str:
        raise NotImplementedError

    def kinds(self, kinds: tuple[str, ...]) -> list[str]:
        small = len(self.doc) < self.min_rows_for_drop  # too few offers for the count guard
        return [k for k in kinds if k not in API_ONLY and not (small and k == "drop_90")]

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            def set_amount(doc: Any, amount: Decimal) -> None:
                doc[key] = amount

            return set_amount

        return {
            key: Knob(self.name, key, self.skus[key], amount, setter(key))
            for key, amount in self.doc.items()
        }

    def text(self, doc: Any) -> str:
        return SLOT.sub(lambda m: f"{doc[m.group(1)]:.2f}", self.template)

    def render(self, doc: Any) -> bytes:
        return self.text(doc).encode()

    def _table(self, html: str, edit: Callable[[str, list[str]], tuple[str, list[str]]]) -> str:
        """Rewrite the first table: ``edit(header_row, body_rows)``."""
        start = html.index("<table")
        end = html.index("</table>", start)
        table = html[start:end]
        head_at = table.index("<thead")
        head_end = table.index("</thead>")
        body_at = table.index("<tbody")
        body_end = table.index("</tbody>")
        header = _ROW.findall(table[head_at:head_end])[0]
        body = _ROW.findall(table[body_at:body_end])
        new_header, new_body = edit(header, body)
        body_open = table[body_at:].split(">", 1)[0] + ">"
        table = (
            table[:head_at]
            + table[head_at:head_end].replace(header, new_header)
            + table[head_end:body_at]
            + body_open
            + "\n".join(new_body)
            + table[body_end:]
        )
        return html[:start] + table + html[end:]

    def mangle(self, kind: str, doc: Any, rng: random.Random) -> bytes:
        html = self.text(doc)
        if kind == "drop_90":
            html = self._table(html, lambda h, rows: (h, _keep_tenth(rows, rng)))
        elif kind == "duplicates":
            html = self._table(html, lambda h, rows: (h, [r for r in rows for _ in (0, 1)]))
        elif kind == "columns_reordered":
            a, b = self.swap

            def reorder(row: str) -> str:
                cells = _cells(row)
                if len(cells) > max(a, b):
                    cells[a], cells[b] = cells[b], cells[a]
                    # the cells' own tags move along (th/td attributes)
                    tags = [(m.group(1), m.group(3)) for m in _CELL.finditer(row)]
                    tags[a], tags[b] = tags[b], tags[a]
                    parts = iter(zip(tags, cells, strict=True))
                    return _CELL.sub(lambda _m: "".join(_next3(parts)), row)
                return row

            html = self._table(html, lambda h, rows: (reorder(h), [reorder(r) for r in rows]))
        elif kind == "hostile":
            i = self.unread_cell

            def poison(row: str) -> str:
                cells = _cells(row)
                if len(cells) > i:
                    cells[i] = f"{cells[i]} {HOSTILE}"
                return _set_cells(row, cells)

            html = self._table(html, lambda h, rows: (h, [poison(r) for r in rows]))
            html = html.replace("</title>", f" {HOSTILE}</title>", 1)
            html = html.replace("</body>", f'<div hidden class="x">{BIG_FIELD}</div></body>', 1)
        elif kind == "layout_changed":
            html = self.relayout(html, rng.randrange(3))
        return html.encode()

    def relayout(self, html: str, variant: int) -> str:
        """A redesign the spider's hooks no longer find: 0 renamed header, 1 the table
        turned into cards (``div``s), 2 the table removed (prices moved to a script)."""
        if variant == 0:
            old, new = self.header
            return html.replace(f">{old}<", f">{new}<")
        start = html.index("<table")
        end = html.index("</table>", start) + len("</table>")
        if variant == 1:
            cards = re.sub(r"<(/?)(?:table|thead|tbody|tr|th|td)\b", r"<\1div", html[start:end])
            return html[:start] + cards + html[end:]
        return html[:start] + SCRIPT_MOUNT + html[end:]


def _next3(parts: Any) -> tuple[str, str, str]:
    (open_tag, close_tag), cell = next(parts)
    return open_tag, cell, close_tag


class GenesisCloudWeb(HtmlAdapter):
    name = "genesiscloud-web"
    page = "/pricing"
    fixture = FIXTURES_DIR / "genesiscloud-web" / "pricing.html"
    price_cell, unread_cell, swap = 4, 3, (1, 2)
    header = ("On-demand price per GPU/hour", "On-demand price / GPU-hour")

    def sku_of(self, row: str, cells: list[str]) -> str:
        found = re.search(r'data-gpu="([^"]+)"', row)
        assert found is not None
        return found.group(1)


class DataCrunchWeb(HtmlAdapter):
    name = "datacrunch-web"
    page = "/products"
    fixture = FIXTURES_DIR / "datacrunch-web" / "products.html"
    price_cell, unread_cell, swap = 7, 6, (3, 4)
    header = ("GPU model", "Accelerator")

    def sku_of(self, row: str, cells: list[str]) -> str:
        return re.sub(r"<[^>]+>", "", cells[0]).strip()


CORE_ADAPTERS: tuple[type[Adapter], ...] = (
    Oracle,
    Lambda,
    Ovh,
    Gcp,
    Azure,
    VastAi,
    RunPod,
    Ecb,
    GenesisCloudWeb,
    DataCrunchWeb,
    SkyPilotLambda,
    SkyPilotRunPod,
)
"""The adapters defined here; tests/chaos/adapters.py registers them with the rest."""


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A crawler killed or timed out mid-request resets its connection: not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class Armed:
    kind: str
    remaining: int
    armed_at: float
    page: int | None = 0
    """The page it is served on (None: every page of a crawl)."""
    bound: bool = False
    """A whole-crawl fault: a crawl started with it (no other crawl gets any of it)."""


@dataclass
class Crawl:
    """What one crawl of a source is served: the bodies and knob amounts when it asked for
    its first page (a consistent snapshot, like a paging cursor), and whether a fault was
    served to it (then its values are not counted as served)."""

    bodies: list[bytes]
    doc: Any
    amounts: dict[str, Decimal]
    tainted: bool = False
    whole: Armed | None = None
    """A fault served to every page of this crawl (``WHOLE_CRAWL``), from its first."""


@dataclass
class FarmLog:
    changes: list[dict[str, Any]] = field(default_factory=list)
    """Legitimate price changes: t, source, key, sku, old, new."""
    faults: list[dict[str, Any]] = field(default_factory=list)
    """Faults served: t, source, kind, page (one entry per bad answer)."""
    served: dict[tuple[str, str, Decimal], list[float]] = field(default_factory=dict)
    """(source, knob, value) -> [first, last] time a clean answer carried it."""
    spikes: list[tuple[str, str, Decimal]] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)
    """New FX days published legitimately: t, date, rates (currency -> per EUR)."""
    fx_spikes: list[dict[str, Any]] = field(default_factory=list)
    """FX days served with a ×100 rate (a fault): t, date, rates."""
    withdrawals: list[dict[str, Any]] = field(default_factory=list)
    """Products removed legitimately (once per source that can): t, source, skus."""
    requests: Counter[str] = field(default_factory=Counter)


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0
    truncate: bool = False
    clean: bool = False


class Farm:
    """The server plus its seeded schedule of changes and faults."""

    def __init__(
        self,
        sources: list[str],
        seed: int,
        *,
        http_timeout: float,
        attempts: int,
        event_gap: float = 2.5,
        change_share: float = 0.4,
        kinds: tuple[str, ...] = FAULT_KINDS,
    ) -> None:
        self.rng = random.Random(seed)
        from tests.chaos.adapters import ADAPTERS

        self.adapters = {name: ADAPTERS[name]() for name in sources}
        self.knobs = {name: a.knobs() for name, a in self.adapters.items()}
        self.http_timeout, self.attempts = http_timeout, attempts
        self.event_gap, self.change_share = event_gap, change_share
        self.order = list(kinds)
        self.rng.shuffle(self.order)
        self.kinds = {name: set(a.kinds(kinds)) for name, a in self.adapters.items()}
        self.turn = 0
        self.armed: dict[str, Armed] = {}
        self.log = FarmLog()
        self.t0 = time.time()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._faults_on = threading.Event()
        self._bodies = {n: self._render(a) for n, a in self.adapters.items()}
        self._crawls: dict[str, Crawl] = {}
        self.deliveries: list[tuple[float, str]] = []
        """(time, source) of every clean answer written in full: a crawl's fetch just ended."""
        self._delivered = threading.Condition()
        self._thread: threading.Thread | None = None
        self.httpd = _QuietServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self._server = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @staticmethod
    def _render(adapter: Adapter) -> list[bytes]:
        return [adapter.render_page(adapter.doc, page) for page in range(adapter.pages)]

    def route(
        self, method: str, path: str, query: str, body: bytes = b""
    ) -> tuple[str, int] | None:
        for name, adapter in self.adapters.items():
            page = adapter.route_body(method, path, query, body)
            if page is not None:
                return name, page
        return None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def base_urls(self) -> dict[str, str]:
        """Each source's base URL on the farm (the ``source_base_urls`` setting)."""
        return {name: self.url + a.prefix for name, a in self.adapters.items()}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._server.start()

    def start_chaos(self, until: float, max_events: int) -> None:
        self._faults_on.set()
        self._thread = threading.Thread(
            target=self._schedule, args=(until, max_events), name="farm-schedule", daemon=True
        )
        self._thread.start()

    def quiesce(self) -> None:
        """No more changes or faults; armed faults are dropped: clean answers from now on."""
        self._faults_on.clear()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self.armed.clear()

    def close(self) -> None:
        self.quiesce()
        if self._server.is_alive():  # shutdown() waits for serve_forever: only if it runs
            self.httpd.shutdown()
        self.httpd.server_close()

    def keep_knobs(self, keep: dict[str, set[str]]) -> None:
        """Only the knobs whose baseline the catalog shows are moved (self-calibration)."""
        for name in self.knobs:
            self.knobs[name] = {k: v for k, v in self.knobs[name].items() if k in keep[name]}

    def wait_delivery(self, after: float, timeout: float) -> tuple[float, str] | None:
        """The first clean answer written in full after ``after`` (None after ``timeout``)."""
        deadline = time.time() + timeout
        with self._delivered:
            while True:
                for at, source in self.deliveries[-50:]:
                    if at > after:
                        return at, source
                left = deadline - time.time()
                if left <= 0:
                    return None
                self._delivered.wait(min(left, 0.5))

    # ------------------------------------------------------------------ schedule

    def _schedule(self, until: float, max_events: int) -> None:
        # besides the random events: each source that can withdraw a product does so once,
        # at 30 % of the run, and a feed of dated rates publishes a new day at 25 % and 60 %
        start = time.time()
        specials = sorted(
            [
                (start + share * (until - start), name)
                for name, adapter in self.adapters.items()
                for share, kind in ((0.3, "withdraw"), (0.25, "publish"), (0.6, "publish"))
                if getattr(type(adapter), kind) is not getattr(Adapter, kind)
            ]
        )
        for _ in range(max_events):
            gap = self.rng.expovariate(1 / self.event_gap)
            if self._stop.wait(min(gap, max(0.0, until - time.time()))) or time.time() >= until:
                return
            while specials and specials[0][0] <= time.time():
                self._change(specials.pop(0)[1], withdraw=True)
            if self.rng.random() < self.change_share:
                self._change(self.rng.choice(sorted(self.adapters)), withdraw=True)
                continue
            with self._lock:  # round-robin over the kinds, each on a free source that has it
                for step in range(len(self.order)):
                    kind = self.order[(self.turn + step) % len(self.order)]
                    free = [
                        n
                        for n in sorted(self.adapters)
                        if kind in self.kinds[n] and n not in self.armed
                    ]
                    if free:
                        break
                else:
                    continue
                self.turn += step + 1
                source = self.rng.choice(free)
                count = 1 if kind in TRANSIENT or kind not in HTTP_FAULTS else self.attempts
                pages = self.adapters[source].pages
                page: int | None = self.rng.randrange(pages)
                if kind in WHOLE_CRAWL and pages > 1:
                    page, count = None, count * pages
                self.armed[source] = Armed(kind, count, time.time(), page)

    def _change(self, source: str, *, withdraw: bool = False) -> None:
        """A legitimate change: a new price, or (``withdraw``: the schedule's first change
        of a source that can) a product withdrawn, or a new FX day."""
        with self._lock:
            knobs = self.knobs[source]
            adapter = self.adapters[source]
            if not knobs:
                event = adapter.publish(adapter.doc, self.rng)
                if event is not None:
                    self.log.published.append(event)
                    self._bodies[source] = self._render(adapter)
                return
            if withdraw and not any(w["source"] == source for w in self.log.withdrawals):
                doc = copy.deepcopy(adapter.doc)
                skus = adapter.withdraw(doc, self.rng)
                if skus:  # the first change of a source that can withdraw: a withdrawal
                    adapter.doc = doc
                    self.knobs[source] = {k: v for k, v in knobs.items() if v.sku not in skus}
                    self.log.withdrawals.append({"t": time.time(), "source": source, "skus": skus})
                    self._bodies[source] = self._render(adapter)
                    return
            knob = knobs[self.rng.choice(sorted(knobs))]
            new = adapter.new_amount(knob.amount, self.rng)
            adapter.doc = copy.deepcopy(adapter.doc)  # a crawl in progress keeps its snapshot
            knob.setter(adapter.doc, new)
            self.log.changes.append(
                {
                    "t": time.time(),
                    "source": source,
                    "key": knob.key,
                    "sku": knob.sku,
                    "old": knob.amount,
                    "new": new,
                }
            )
            knob.amount = new
            self._bodies[source] = self._render(adapter)

    # ------------------------------------------------------------------ serving

    def _answer(self, source: str, page: int = 0) -> Answer:
        with self._lock:
            now = time.time()
            self.log.requests[source] += 1
            adapter = self.adapters[source]
            crawl = self._crawls.get(source)
            if page == 0 or crawl is None:  # a crawl starts (or retries its first page)
                amounts = {key: knob.amount for key, knob in self.knobs[source].items()}
                crawl = self._crawls[source] = Crawl(self._bodies[source], adapter.doc, amounts)
            armed = self.armed.get(source) if self._faults_on.is_set() else None
            if armed is not None and armed.page not in (None, page):
                armed = None
            if armed is not None and armed.page is None and armed.kind in WHOLE_CRAWL:
                # every page of one crawl, never a part of one (a part of the pages dropped
                # may pass the count guard): armed mid-crawl, it waits for the next crawl;
                # a crawl that ends early (killed, or a short page ends its paging) takes
                # the rest of it along
                if page == 0 and armed.bound:
                    del self.armed[source]
                    armed = None
                elif page == 0:
                    crawl.whole, armed.bound, armed.remaining = armed, True, adapter.pages
                elif crawl.whole is not armed:
                    armed = None
            if armed is None:
                if page < adapter.pages - 1 or crawl.tainted:
                    return Answer(
                        200, crawl.bodies[page], content_type=adapter.content_type_of(page)
                    )
                for key, amount in crawl.amounts.items():  # a whole crawl, fault-free
                    if key in self.knobs[source]:
                        span = self.log.served.setdefault((source, key, amount), [now, now])
                        span[1] = now
                return Answer(
                    200, crawl.bodies[page], content_type=adapter.content_type_of(page), clean=True
                )
            armed.remaining -= 1
            if armed.remaining <= 0:
                del self.armed[source]
            if armed.kind not in TRANSIENT:
                crawl.tainted = True
            self.log.faults.append({"t": now, "source": source, "kind": armed.kind, "page": page})
            answer = self._fault(source, armed.kind, crawl, page)
            answer.content_type = adapter.content_type_of(page)
            return answer

    def _fault(self, source: str, kind: str, crawl: Crawl, page: int) -> Answer:
        adapter = self.adapters[source]
        clean = crawl.bodies[page]
        if kind == "http_429":
            return Answer(429, b'{"error": "slow down"}', {"Retry-After": "1"})
        if kind == "http_500":
            return Answer(500, b"internal error")
        if kind == "http_503":
            return Answer(503, b"unavailable", {"Retry-After": "1"})
        if kind == "slow":
            return Answer(200, clean, delay=self.http_timeout + 1.5)
        if kind == "truncated":
            return Answer(200, clean, truncate=True)
        if kind == "invalid_json":
            return Answer(200, adapter.invalid_page(crawl.doc, clean, page, self.rng))
        doc = copy.deepcopy(crawl.doc)
        if kind == "spike_x100":
            knobs = self.knobs[source]
            on_page = sorted(k for k in knobs if page in adapter.knob_pages(k)) or sorted(knobs)
            if on_page:
                knob = knobs[self.rng.choice(on_page)]
                spiked = crawl.amounts.get(knob.key, knob.amount) * 100
                knob.setter(doc, spiked)
                self.log.spikes.append((source, knob.sku, spiked))
            else:
                event = adapter.spike_doc(doc, self.rng)
                if event is None:
                    return Answer(200, adapter.render_page(doc, page))
                self.log.fx_spikes.append(event)
                return Answer(200, adapter.mangle_page(kind, doc, page, self.rng))
            return Answer(200, adapter.render_page(doc, page))
        return Answer(200, adapter.mangle_page(kind, doc, page, self.rng))

    def _written(self, source: str) -> None:
        with self._delivered:
            self.deliveries.append((time.time(), source))
            del self.deliveries[:-1000]
            self._delivered.notify_all()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        farm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), 1_000_000)
                self._serve("POST", self.rfile.read(length))  # the query (a search's page)

            def _serve(self, method: str, body: bytes = b"") -> None:
                try:
                    path, _, query = self.path.partition("?")
                    if path == "/robots.txt":  # one site for every HTML source
                        self._send(Answer(200, ROBOTS, content_type="text/plain"))
                        return
                    found = farm.route(method, path, query, body)
                    if found is None:
                        self._send(Answer(404, b"not found", content_type="text/plain"))
                        return
                    answer = farm._answer(*found)
                    self._send(answer)
                    if answer.clean:  # the last page of a fault-free crawl: its fetch ended
                        farm._written(found[0])
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the crawler gave up (timeout): fine

            def _send(self, answer: Answer) -> None:
                if answer.delay:
                    time.sleep(min(answer.delay, 30.0))
                body = answer.body
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if answer.truncate:
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)
                self.wfile.flush()

        return Handler


HTTP_FAULTS = {"http_429", "http_500", "http_503", "slow", "truncated"}
"""Faults the fetcher retries: armed for every attempt of one crawl (except 429)."""
WHOLE_CRAWL = {"drop_90"}
"""Faults served on every page of a paged source's crawl (offers vanish from all of it)."""
