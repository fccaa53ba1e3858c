"""DataCrunch (now Verda) instance prices, https://datacrunch.io/products (2025 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/datacrunch-web/):

- A server-rendered ``<table>`` with styled-components classes (``sc-…``, hashed and
  unstable): the table is found by its header text and columns by name: ``Instance
  name | GPU model | GPU | CPU | RAM | VRAM | P2P | On demand price | Dynamic price |
  Spot price``. Tables without a ``GPU model`` column (CPU instances) are skipped.
- Instance names encode count, model and vCPUs (``8B200.240V``); the ``GPU`` column
  gives the count and ``GPU model`` the name, so names are not decoded.
- Prices are per instance-hour (``$29.10/h``). The ``Dynamic price`` column changes
  daily and has no price kind of its own (it is neither the fixed on-demand price nor
  spot): skipped. ``On demand price`` -> on_demand, ``Spot price`` -> spot.
- Non-prices: ``–`` and ``Contact us``. ``VRAM`` is the instance total (``1440 GB``
  for 8 GPUs), not per GPU, and spiders do no arithmetic: it is not stored. ``RAM``
  and ``CPU`` (instance totals) are.
- DataCrunch became Verda in 2025; datacrunch.io redirects there (Scrapy follows).
- No location on the page: region ``global``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number
from crawlers.scrapy import HtmlSpider, cell, column, price_columns, text


class DataCrunchWeb(HtmlSpider):
    name = "datacrunch-web"
    provider = "datacrunch"
    base_url = "https://datacrunch.io"
    start_paths = ("/products",)
    docs_url = "https://docs.verda.com/"
    terms_url = "https://verda.com/terms-of-service"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        tables = self.require(
            response.xpath("//table[.//th[normalize-space()='GPU model']]"),
            "instance table with a 'GPU model' header",
        )
        for table in tables:
            headers = [text(th) for th in table.xpath(".//thead//th")]
            name, model = column(headers, "instance name"), column(headers, "gpu model")
            count = next((i for i, h in enumerate(headers) if h.lower() == "gpu"), None)
            cpu = column(headers, "cpu")
            ram = next((i for i, h in enumerate(headers) if h.lower() == "ram"), None)
            prices = price_columns(headers, on_demand="on demand", spot="spot")
            for row in table.xpath(".//tbody/tr"):
                cells = [text(td) for td in row.xpath("./td")]
                for index, kind in prices:
                    if index is None:
                        continue
                    yield from self.offer(
                        response,
                        sku=cell(cells, name) or "",
                        gpu_name=cell(cells, model),
                        gpu_count=parse_number(cell(cells, count)),
                        price=cell(cells, index),
                        price_kind=kind,
                        per_gpu=False,
                        vcpus=parse_number(cell(cells, cpu)),
                        memory_gb=parse_number(cell(cells, ram)),
                    )
