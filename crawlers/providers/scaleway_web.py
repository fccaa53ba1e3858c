"""Scaleway GPU Instance prices, https://www.scaleway.com/en/pricing/gpu/ (Next.js page).

Page quirks (see docs/sources/web-pages.md and fixtures/scaleway-web/):

- A Next.js page: the table (``table.Table_table__6cXug``, a CSS-modules hash) is
  rendered from ``__NEXT_DATA__``, whose ``ComponentPricingOffer`` nodes carry the
  instance name, ``gpu {model, count, memory}``, specs, ``price {hourly, monthly}`` and
  ``availabilityZones``. The JSON is read first; without it, the table is read by its
  header text (``Instance``, ``GPU``, ``Availability zones``, ``Price``).
- Prices are EUR excluding VAT (HT), per instance-hour (``€2.73/hour``). GPU Instances
  are billed per minute (RENDER-S per hour) but priced per hour: the unit is the hour.
  The monthly figure is a cap on the hourly billing, not a separate offer: skipped.
- One offer per availability zone the page lists (``fr-par-2``; the table prints
  ``PAR-2``), all at the page's price. Offers without a GPU (storage) are skipped.
- ``Coming soon`` rows carry no price: counted, no offer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.embedded import find_dicts, next_data
from crawlers.normalize.prices import parse_number
from crawlers.scrapy import HtmlSpider, cell, column, text

_COUNT = re.compile(r"^(\d+)\s*x\s+(.+)$", re.IGNORECASE)
_ZONE = re.compile(r"^(PAR|AMS|WAW)-(\d)$", re.IGNORECASE)
_COUNTRY = {"par": "fr", "ams": "nl", "waw": "pl"}


def _zone(label: str) -> str:
    """``PAR-2`` (as the table prints it) -> ``fr-par-2``; codes pass through."""
    match = _ZONE.match(label.strip())
    if match is None:
        return label.strip().lower()
    city = match.group(1).lower()
    return f"{_COUNTRY[city]}-{city}-{match.group(2)}"


class ScalewayWeb(HtmlSpider):
    name = "scaleway-web"
    provider = "scaleway"
    base_url = "https://www.scaleway.com"
    start_paths = ("/en/pricing/gpu/",)
    currency = "EUR"
    docs_url = "https://www.scaleway.com/en/docs/instances/faq/"
    terms_url = "https://www.scaleway.com/en/contracts/"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        data = next_data(response.text)
        offers = [o for o in find_dicts(data, __typename="ComponentPricingOffer") if "gpu" in o]
        if offers:
            for item in offers:
                gpu, price = item["gpu"], item.get("price") or {}
                for zone in item.get("availabilityZones") or [self.region]:
                    yield from self.offer(
                        response,
                        sku=item["name"],
                        gpu_name=gpu.get("model"),
                        gpu_count=gpu.get("count"),
                        price=price.get("hourly"),
                        per_gpu=False,
                        region=_zone(zone),
                        gpu_memory_gb=parse_number(gpu.get("memory")),
                        vcpus=item.get("vcpus"),
                        memory_gb=parse_number(item.get("ram")),
                    )
            return
        yield from self._table(response)

    def _table(self, response: TextResponse) -> Iterator[Any]:
        table = self.require(
            response.xpath("//table[.//th[normalize-space()='Instance'] and .//th[.='GPU']]"),
            "GPU Instances table (__NEXT_DATA__ offers or a table with Instance/GPU headers)",
        )[0]
        headers = [text(th) for th in table.xpath(".//thead//th")]
        gpu_col, vram, cpus = (
            column(headers, "gpu"),
            column(headers, "vram"),
            column(headers, "vcpu"),
        )
        ram = next((i for i, h in enumerate(headers) if h.lower() == "ram"), None)  # not VRAM
        zones, price = column(headers, "zone"), column(headers, "price")
        for row in table.xpath(".//tbody/tr"):
            cells = [text(td) for td in row.xpath("./td")]
            match = _COUNT.match(cell(cells, gpu_col) or "")
            hourly = row.xpath(f"./td[{price + 1}]/span[1]") if price is not None else None
            for zone in (cell(cells, zones) or self.region).split(","):
                yield from self.offer(
                    response,
                    sku=cells[0],
                    gpu_name=match.group(2) if match else cell(cells, gpu_col),
                    gpu_count=match.group(1) if match else None,
                    price=text(hourly) if hourly else None,
                    per_gpu=False,
                    region=_zone(zone),
                    gpu_memory_gb=parse_number(cell(cells, vram)),
                    vcpus=parse_number(cell(cells, cpus)),
                    memory_gb=parse_number(cell(cells, ram)),
                )
