"""OVHcloud GPU prices from the French site: Public Cloud GPU instances (hourly) and
bare-metal GPU servers (monthly).

Pages (see docs/sources/web-pages.md and fixtures/ovhcloud-web/):

- https://www.ovhcloud.com/fr/public-cloud/prices/ — Drupal tables per range; the GPU
  table is the one with ``GPU`` and ``Prix`` headers (columns found by French header
  text: ``Nom``, ``Nombre de GPU``, ``Mémoire GPU``, ``vCore``, ``Mémoire``). Prices
  are per instance-hour, excluding VAT: ``€1,80 HT / heure`` (decimal comma). Each price
  cell also holds a ``hidden`` TTC (VAT-included) copy for the HT/TTC toggle: only
  visible children are read. ``Sur demande`` carries no price.
- https://www.ovhcloud.com/fr/bare-metal/gpu-dedicated-servers/ (URL not verified) —
  server cards ``div[data-server]`` with ``li`` spec pairs (``GPU`` -> ``2 × NVIDIA L4
  24 Go``: count, model and memory) and ``À partir de 1 299,99 € HT/mois``: a monthly
  floor price (price kind ``monthly``) per server. Cards without a GPU spec (storage
  servers) are skipped; ``Sur devis`` carries no price.
- Pages are recognised by content, not URL, so saved pages parse in any order.
- Public Cloud GPU prices are the same in every region (the page says so) and the
  bare-metal cards name no datacenter: region ``global``. The US site (USD, OVHcloud
  US) is a different subsidiary and is not read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from parsel import Selector
from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number
from crawlers.scrapy import HtmlSpider, cell, column, text, visible

_GPU_SPEC = re.compile(r"^(\d+)\s*[×x]\s*(.+?)(?:\s+(\d+)\s*(?:Go|GB))?$", re.IGNORECASE)
_TABLES = "//table[.//th[normalize-space()='GPU'] and .//th[normalize-space()='Prix']]"
_SERVERS = "//div[@data-server][.//li[normalize-space(span[1])='GPU']]"


def _exact(headers: list[str], name: str) -> int | None:
    return next((i for i, h in enumerate(headers) if h.lower() == name), None)


class OvhCloudWeb(HtmlSpider):
    name = "ovhcloud-web"
    provider = "ovhcloud"
    base_url = "https://www.ovhcloud.com"
    start_paths = ("/fr/public-cloud/prices/", "/fr/bare-metal/gpu-dedicated-servers/")
    currency = "EUR"
    decimal_comma = True
    seed_fixtures = ("public-cloud-prices.html", "bare-metal-gpu.html")
    docs_url = "https://help.ovhcloud.com/csm/fr-public-cloud-compute-gpu-instances"
    terms_url = "https://www.ovhcloud.com/fr/terms-and-conditions/contracts/"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        tables, servers = response.xpath(_TABLES), response.xpath(_SERVERS)
        self.require(tables or servers, "GPU price table (GPU/Prix headers) or GPU server cards")
        for table in tables:
            yield from self._instances(response, table)
        for card in servers:
            yield from self._server(response, card)

    def _instances(self, response: TextResponse, table: Selector) -> Iterator[Any]:
        headers = [text(th) for th in table.xpath(".//thead//th")]
        name, gpu, count = _exact(headers, "nom"), _exact(headers, "gpu"), column(headers, "nombre")
        vram, cpus = column(headers, "mémoire gpu"), column(headers, "vcore")
        ram, price = _exact(headers, "mémoire"), _exact(headers, "prix")
        for row in table.xpath(".//tbody/tr"):
            cells = row.xpath("./td")
            values = [text(td) for td in cells]
            shown = (
                " ".join(text(node) for node in visible(cells[price].xpath("./*")))
                if price is not None and price < len(cells)
                else None
            )
            yield from self.offer(
                response,
                sku=cell(values, name) or "",
                gpu_name=cell(values, gpu),
                gpu_count=parse_number(cell(values, count)),
                price=shown,
                per_gpu=False,
                gpu_memory_gb=parse_number(cell(values, vram)),
                vcpus=parse_number(cell(values, cpus)),
                memory_gb=parse_number(cell(values, ram)),
            )

    def _server(self, response: TextResponse, card: Selector) -> Iterator[Any]:
        specs = {
            text(li.xpath("./span[1]")).lower(): text(li.xpath("./span[2]"))
            for li in card.xpath(".//li")
        }
        match = _GPU_SPEC.match(specs.get("gpu", ""))
        prices = visible(card.xpath(".//p[contains(@class, 'price')]"))
        yield from self.offer(
            response,
            sku=text(card.xpath(".//h3[1]")) or card.attrib["data-server"],
            gpu_name=match.group(2) if match else specs.get("gpu"),
            gpu_count=match.group(1) if match else None,
            price=text(prices[0]) if prices else None,
            price_kind="monthly",
            per_gpu=False,
            bare_metal=True,
            gpu_memory_gb=match.group(3) if match else None,
        )
