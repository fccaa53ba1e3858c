"""Crusoe Cloud prices, https://www.crusoe.ai/cloud/pricing (Webflow CMS list).

Page quirks (see docs/sources/web-pages.md and fixtures/crusoe-web/):

- Each GPU is a CMS list item ``div.prixing-item`` (sic, the page's spelling): the name in
  ``h4.pricing-item-heading``, tags ``div.pricing-tag`` (``80GB``, ``HGX``, ``PCIe``,
  ``NVL72``), then one ``div.pricing-rich`` cell per price column, in the order of the
  list's header (``On-demand | Current spot``). The header is read, not assumed.
- A cell holds ``<p>$3.90/GPU-hr</p>`` (per GPU-hour) or a ``Contact sales`` link (no
  public price, counted). Offers have ``gpu_count`` 1; the memory tag is the GPU memory.
- No location per price: region ``global``, placed from Crusoe's reference regions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.scrapy import HtmlSpider, cell, column, has_class, slug, text

_MEMORY = re.compile(r"^(\d+)\s*GB$", re.IGNORECASE)
KINDS = (("on-demand", "on_demand"), ("spot", "spot"))


class CrusoeWeb(HtmlSpider):
    name = "crusoe-web"
    provider = "crusoe"
    base_url = "https://www.crusoe.ai"
    start_paths = ("/cloud/pricing",)
    docs_url = "https://docs.crusoecloud.com/"
    terms_url = "https://www.crusoe.ai/legal/terms-of-service"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        items = self.require(
            response.xpath(f"//div[{has_class('prixing-item')}]"), "div.prixing-item list"
        )
        header = response.xpath(f"//div[{has_class('pricing-list-header')}]/div")
        headers = [text(h) for h in header][1:]  # the first header names the GPU column
        columns = [(i, kind) for word, kind in KINDS if (i := column(headers, word)) is not None]
        self.require([k for _, k in columns if k == "on_demand"], "an 'On-demand' header")
        for item in items:
            name = text(item.xpath(f".//h4[{has_class('pricing-item-heading')}]"))
            tags = [text(t) for t in item.xpath(f".//div[{has_class('pricing-tag')}]")]
            memory = next((m.group(1) for t in tags if (m := _MEMORY.match(t))), None)
            cells = [text(c) for c in item.xpath(f".//div[{has_class('pricing-rich')}]")]
            if not self.once(response, name, *tags):
                continue
            label = " ".join([name, *tags])  # "NVIDIA H100 80GB HGX"
            for index, kind in columns:  # a page without a spot column has no spot offers
                yield from self.offer(
                    response,
                    sku=slug(label),
                    gpu_name=label,
                    gpu_count=1,
                    gpu_memory_gb=memory,
                    price=cell(cells, index),
                    price_kind=kind,
                    per_gpu=True,
                )
