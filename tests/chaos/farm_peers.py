"""The farm's AWS price list and peer catalogs (SkyPilot clouds, gpuhunt) beyond ``farm.py``."""

from __future__ import annotations

import copy
import io
import json
import random
import re
import zipfile
from collections.abc import Callable
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from service.core.config import FIXTURES_DIR
from tests.chaos.farm import BIG_FIELD, HOSTILE, Adapter, Knob, SkyPilotCsv, _keep_tenth


class Aws(Adapter):
    """AWS Price List bulk API (EC2): the region index, then each region's offer file at the
    path its ``currentVersionUrl`` names (the crawler asks for them in region-code order:
    pages 1..3). ``doc`` is small (the knobs' amounts and the instance types withdrawn):
    every answer is rendered from the fixture's parsed offer files, which are never copied
    whole. Knobs are the on-demand hourly price of each instance type the crawler keeps,
    served at one price in every region (its first region's, to the cent); reserved prices
    never move. A withdrawal takes one instance type (every product of it) off the list.

    Faults on an offer file: ``renamed_field`` renames ``products``, ``drop_90`` keeps a
    tenth of the products, ``duplicates`` lists every product and its terms twice (under a
    second SKU code), ``hostile`` goes in attributes the crawler does not read and the
    disclaimer. On the region index: ``renamed_field`` renames ``regions``, ``hostile`` the
    disclaimer; the other content faults leave it whole (a region left out of the index
    would only shorten the crawl)."""

    name = "aws"

    def __init__(self) -> None:
        from crawlers.providers.aws import INDEX_PATH, AwsPriceList

        self.path = INDEX_PATH
        folder = FIXTURES_DIR / "aws"
        self.index = json.loads((folder / "region_index.json").read_text())
        regions = sorted(self.index["regions"])  # the crawler's order
        self.pages = 1 + len(regions)
        self.paths = {
            urlsplit(self.index["regions"][code]["currentVersionUrl"]).path: page
            for page, code in enumerate(regions, start=1)
        }
        self.files = [json.loads((folder / f"{code}-index.json").read_text()) for code in regions]
        parser = AwsPriceList()
        self.instance: list[dict[str, str]] = []
        """Per offer file: product SKU -> its instance type (every product that has one)."""
        self.kept: list[dict[str, str]] = []
        """Per offer file: product SKU -> instance type, for the products the crawler keeps."""
        self.on_pages: dict[str, set[int]] = {}
        amounts: dict[str, Decimal] = {}
        for page, (code, offer) in enumerate(zip(regions, self.files, strict=True), start=1):
            instance, kept = {}, {}
            for sku, product in offer["products"].items():
                name = product.get("attributes", {}).get("instanceType")
                if name:
                    instance[sku] = name
                base = parser.product(product, code)
                prices = [
                    Decimal(dimension["pricePerUnit"]["USD"])
                    for term in offer["terms"]["OnDemand"].get(sku, {}).values()
                    for dimension in term["priceDimensions"].values()
                    if dimension["unit"] == "Hrs"
                ]
                if base is None or not prices or not prices[0]:
                    continue
                kept[sku] = base["sku"]
                self.on_pages.setdefault(base["sku"], set()).add(page)
                amount = max(prices[0].quantize(Decimal("0.01")), Decimal("0.01"))
                amounts.setdefault(base["sku"], amount)
            self.instance.append(instance)
            self.kept.append(kept)
        self.doc = {"amounts": amounts, "withdrawn": []}

    def route(self, method: str, path: str, query: str) -> int | None:
        if method != "GET":
            return None
        return 0 if path == self.path else self.paths.get(path)

    def knobs(self) -> dict[str, Knob]:
        def setter(key: str) -> Callable[[Any, Decimal], None]:
            def set_amount(doc: Any, amount: Decimal) -> None:
                doc["amounts"][key] = amount

            return set_amount

        return {
            key: Knob(self.name, key, key, amount, setter(key))
            for key, amount in self.doc["amounts"].items()
        }

    def knob_pages(self, key: str) -> set[int]:
        return self.on_pages[key]

    def offer_file(self, doc: Any, page: int) -> dict[str, Any]:
        """One region's offer file as served now: a new top level over the fixture's
        (shared, never modified) products and terms, the knobbed terms copied."""
        offer, instance, kept = self.files[page - 1], self.instance[page - 1], self.kept[page - 1]
        withdrawn = set(doc["withdrawn"])
        gone = {sku for sku, name in instance.items() if name in withdrawn}
        on_demand = {}
        for sku, terms in offer["terms"]["OnDemand"].items():
            if sku in gone:
                continue
            name = kept.get(sku)
            if name is not None:
                terms = copy.deepcopy(terms)
                for term in terms.values():
                    for dimension in term["priceDimensions"].values():
                        if dimension["unit"] == "Hrs":
                            dimension["pricePerUnit"] = {"USD": f"{doc['amounts'][name]:.10f}"}
            on_demand[sku] = terms
        return {
            **offer,
            "products": {s: p for s, p in offer["products"].items() if s not in gone},
            "terms": {
                **offer["terms"],
                "OnDemand": on_demand,
                "Reserved": {s: t for s, t in offer["terms"]["Reserved"].items() if s not in gone},
            },
        }

    def render_page(self, doc: Any, page: int) -> bytes:
        body = self.index if page == 0 else self.offer_file(doc, page)
        return json.dumps(body, separators=(",", ":")).encode()

    def render(self, doc: Any) -> bytes:
        return self.render_page(doc, 0)

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        if page == 0:
            index = dict(self.index)
            if kind == "renamed_field":
                index["regionIndex"] = index.pop("regions")
            elif kind == "hostile":
                index["disclaimer"] = f"{index['disclaimer']} {HOSTILE}"
                index["chaos_note"] = BIG_FIELD
            return json.dumps(index, ensure_ascii=False).encode()
        offer = self.offer_file(doc, page)
        products, terms = offer["products"], offer["terms"]
        if kind == "renamed_field":
            offer["skus"] = offer.pop("products")
        elif kind == "drop_90":
            offer["products"] = {s: products[s] for s in _keep_tenth(sorted(products), rng)}
        elif kind == "duplicates":
            offer["products"] = {**products}
            offer["terms"] = {
                **terms,
                "OnDemand": {**terms["OnDemand"]},
                "Reserved": {**terms["Reserved"]},
            }
            for sku, product in products.items():
                copied = f"{sku}COPY"
                offer["products"][copied] = {**product, "sku": copied}
                for kind_of_term in ("OnDemand", "Reserved"):
                    if sku in terms[kind_of_term]:
                        offer["terms"][kind_of_term][copied] = terms[kind_of_term][sku]
        elif kind == "hostile":
            offer["products"] = {
                sku: {
                    **product,
                    "attributes": {
                        **product["attributes"],
                        "physicalProcessor": f"{product['attributes'].get('physicalProcessor')} "
                        + HOSTILE,
                    },
                }
                for sku, product in products.items()
            }
            offer["disclaimer"] = BIG_FIELD
        return json.dumps(offer, ensure_ascii=False, separators=(",", ":")).encode()

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        left = {k: pages for k, pages in self.on_pages.items() if k not in doc["withdrawn"]}
        if len(left) < 2:
            return []
        fewest = min(len(pages) for pages in left.values())
        name = rng.choice(sorted(k for k, pages in left.items() if len(pages) == fewest))
        doc["withdrawn"].append(name)
        return [name]


class Gpuhunt(SkyPilotCsv):
    """One provider of dstack gpuhunt's published catalog: ``/v3/<provider>/version`` names
    the latest version (page 0), ``/v3/<provider>/<version>/catalog.zip`` holds
    ``<provider>.csv`` (page 1; every version stays published, like the bucket's). ``doc``
    is the CSV (header and rows) and its version: a legitimate change (a price, a
    withdrawal) publishes a new version, a new zip; a ×100 spike (a fault, on a copy) does
    not (a new version re-dates every offer's ``source_url``: a catalog version without a
    price change). Knobs, withdrawals and CSV faults are
    SkyPilotCsv's (the row parser is gpuhunt's: its skus). Zip faults: ``invalid_json`` is a
    zip cut short, a zip whose compressed data is corrupt or a zipped CSV with an
    unbalanced quote; ``hostile`` is stored uncompressed (its 10 MB field would exceed the
    crawler's compression-ratio cap, a zip bomb guard). On the version file only
    ``renamed_field`` (a JSON document instead of the version) and ``invalid_json`` are
    faults; the others serve it whole."""

    price_column = "price"
    sku_column = "instance_name"
    pages = 2

    def __init__(self) -> None:
        from crawlers.platforms.gpuhunt import CHANNEL

        self.channel = CHANNEL
        super().__init__()
        self.doc["version"] = (FIXTURES_DIR / "gpuhunt" / "version").read_text().strip()
        self.catalog = re.compile(
            rf"^/{re.escape(CHANNEL)}/{re.escape(self.peer)}/[A-Za-z0-9][A-Za-z0-9._-]*/catalog\.zip$"
        )

    def catalog_path(self) -> str:
        return f"/{self.channel}/{self.peer}/version"

    def route(self, method: str, path: str, query: str) -> int | None:
        if method != "GET":
            return None
        if path == self.path:
            return 0
        return 1 if self.catalog.match(path) else None

    def content_type_of(self, page: int) -> str:
        return "binary/octet-stream" if page == 0 else "application/zip"

    def knob_pages(self, key: str) -> set[int]:
        return {1}

    @staticmethod
    def publish_version(doc: Any) -> None:
        day, _, serial = str(doc["version"]).rpartition("-")
        doc["version"] = f"{day}-{int(serial) + 1}"

    def _set(self, doc: Any, key: str, amount: Decimal) -> None:
        super()._set(doc, key, amount)
        if doc is self.doc and "version" in doc:  # a legitimate change (not a spike's copy)
            self.publish_version(doc)

    def withdraw(self, doc: Any, rng: random.Random) -> list[str]:
        skus = super().withdraw(doc, rng)
        if skus:
            self.publish_version(doc)
        return skus

    def zipped(self, csv_body: bytes, *, stored: bool = False) -> bytes:
        out = io.BytesIO()
        method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
        with zipfile.ZipFile(out, "w", compression=method) as archive:
            info = zipfile.ZipInfo(f"{self.peer}.csv", date_time=(2025, 11, 28, 0, 0, 0))
            info.compress_type = method
            archive.writestr(info, csv_body)
        return out.getvalue()

    def render_page(self, doc: Any, page: int) -> bytes:
        if page == 0:
            return f"{doc['version']}\n".encode()
        return self.zipped(self.render(doc))

    def mangle_page(self, kind: str, doc: Any, page: int, rng: random.Random) -> bytes:
        if page == 0:
            if kind == "renamed_field":
                return json.dumps({"latest": doc["version"]}).encode()
            return self.render_page(doc, 0)
        return self.zipped(self.mangle(kind, doc, rng), stored=kind == "hostile")

    def invalid_page(self, doc: Any, clean: bytes, page: int, rng: random.Random) -> bytes:
        if page == 0:
            return super(SkyPilotCsv, self).invalid_page(doc, clean, page, rng)
        variant = rng.randrange(3)
        if variant == 0:  # cut short: no central directory
            return clean[: len(clean) * 2 // 3]
        if variant == 1:  # the deflated data corrupted (a bad block or a CRC mismatch)
            with zipfile.ZipFile(io.BytesIO(clean)) as archive:
                info = archive.infolist()[0]
            start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
            body = bytearray(clean)
            middle = start + info.compress_size // 2
            for at in range(middle, min(middle + 16, start + info.compress_size)):
                body[at] ^= 0xFF
            return bytes(body)
        return self.zipped(self.unbalanced(copy.deepcopy(doc)))


class GpuhuntGcp(Gpuhunt):
    name = "gpuhunt:gcp"
    peer = "gcp"
    fixture = FIXTURES_DIR / "gpuhunt" / "gcp.csv"


class GpuhuntLambdalabs(Gpuhunt):
    name = "gpuhunt:lambdalabs"
    peer = "lambdalabs"
    fixture = FIXTURES_DIR / "gpuhunt" / "lambdalabs.csv"


class GpuhuntNebius(Gpuhunt):
    name = "gpuhunt:nebius"
    peer = "nebius"
    fixture = FIXTURES_DIR / "gpuhunt" / "nebius.csv"


class GpuhuntRunpod(Gpuhunt):
    name = "gpuhunt:runpod"
    peer = "runpod"
    fixture = FIXTURES_DIR / "gpuhunt" / "runpod.csv"


class SkyPilotAws(SkyPilotCsv):
    name = "skypilot:aws"
    peer = "aws"
    fixture = FIXTURES_DIR / "skypilot" / "aws.csv"


class SkyPilotDo(SkyPilotCsv):
    name = "skypilot:do"
    peer = "do"
    version = "v6"
    fixture = FIXTURES_DIR / "skypilot" / "do.csv"


class SkyPilotPrimeIntellect(SkyPilotCsv):
    name = "skypilot:primeintellect"
    peer = "primeintellect"
    fixture = FIXTURES_DIR / "skypilot" / "primeintellect.csv"


class SkyPilotScaleway(SkyPilotCsv):
    name = "skypilot:scaleway"
    peer = "scaleway"
    version = "v6"
    fixture = FIXTURES_DIR / "skypilot" / "scaleway.csv"


class SkyPilotVast(SkyPilotCsv):
    name = "skypilot:vast"
    peer = "vast"
    fixture = FIXTURES_DIR / "skypilot" / "vast.csv"


ADAPTERS: tuple[type[Adapter], ...] = (
    Aws,
    GpuhuntGcp,
    GpuhuntLambdalabs,
    GpuhuntNebius,
    GpuhuntRunpod,
    SkyPilotAws,
    SkyPilotDo,
    SkyPilotPrimeIntellect,
    SkyPilotScaleway,
    SkyPilotVast,
)
