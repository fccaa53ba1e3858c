"""Genesis Cloud prices, https://www.genesiscloud.com/pricing (URL not verified).

Page quirks (see docs/sources/web-pages.md and fixtures/genesiscloud-web/):

- No capture of this page was found, so the spider keys only on what survives a
  redesign: a ``<table>`` found by header text (a ``GPU`` column and a price column
  naming ``per GPU/hour``), columns by name. The fixture is authored; re-check the hooks
  against the first live crawl.
- Prices are per GPU-hour (the header says so); the GPU count per instance is not
  fixed (1, 2, 4 or 8), so offers have ``gpu_count`` 1. ``from $2.80`` is a floor.
- The ``New``/``Coming soon`` tag next to the GPU name is not part of the name (only
  ``<strong>`` is read). ``Coming soon`` prices carry no price (counted); the
  ``Long-term contracts`` column (``Contact sales``, no term) is not read.
- No location on the page: region ``global``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number, parse_unit
from crawlers.scrapy import HtmlSpider, cell, column, text


class GenesisCloudWeb(HtmlSpider):
    name = "genesiscloud-web"
    provider = "genesiscloud"
    base_url = "https://www.genesiscloud.com"
    start_paths = ("/pricing",)
    docs_url = "https://support.genesiscloud.com/"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        table = self.require(
            response.xpath("//table[.//th[contains(., 'per GPU/hour')]]"),
            "price table with a 'per GPU/hour' header",
        )[0]
        headers = [text(th) for th in table.xpath(".//thead//th")]
        price = column(headers, "per gpu/hour") or 0
        cpus, ram = column(headers, "vcpu"), column(headers, "ram")
        unit, per_gpu = parse_unit(headers[price])
        for row in table.xpath(".//tbody/tr"):
            cells = [text(td) for td in row.xpath("./td")]
            name = text(row.xpath("./td[1]//strong")) or (cells[0] if cells else "")

            yield from self.offer(
                response,
                sku=row.attrib.get("data-gpu") or name,
                gpu_name=name,
                gpu_count=1,
                price=cell(cells, price),
                unit=unit,
                per_gpu=per_gpu,
                vcpus=parse_number(cell(cells, cpus)),
                memory_gb=parse_number(cell(cells, ram)),
            )
