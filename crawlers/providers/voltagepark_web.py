"""Voltage Park prices, https://www.voltagepark.com/pricing (Relume/Webflow cards).

Page quirks (see docs/sources/web-pages.md and fixtures/voltagepark-web/):

- Each plan is a card ``div.pricing11_plan``: an eyebrow naming the plan (``On-Demand,
  Ethernet``, ``On-demand, 3200 Gbps Infiniband``, ``Long-Term Reserve``), the price in
  ``div.heading-style-h3`` (``$1.99/hr``, per GPU-hour) and a feature list.
- The GPU and the smallest count sold are only in a feature sentence (``1-1016 HGX H100
  GPUs ...``, ``8-1016 ...``): the count is that minimum, the price stays per GPU.
- Only on-demand cards are read; ``Long-Term Reserve`` has no price and no term.
- No location per price: region ``global``, placed from Voltage Park's reference regions.
- The eyebrow names the node network (``Ethernet``, ``3200 Gbps Infiniband``): the
  offer's ``network`` and ``network_gbps`` (docs/cluster-facts.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.network import network_fact
from crawlers.scrapy import HtmlSpider, has_class, slug, text

# "8-1016 HGX H100 GPUs", "1–1016 NVIDIA HGX H200 GPUs"
_GPUS = re.compile(r"(\d+)\s*[-–]\s*\d+\s+((?:NVIDIA\s+)?(?:HGX\s+)?[A-Z]\w*)\s+GPUs", re.I)


class VoltageParkWeb(HtmlSpider):
    name = "voltagepark-web"
    provider = "voltagepark"
    base_url = "https://www.voltagepark.com"
    start_paths = ("/pricing",)
    docs_url = "https://docs.voltagepark.com/"
    terms_url = "https://www.voltagepark.com/legal"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        cards = self.require(
            response.xpath(f"//div[{has_class('pricing11_plan')}]"), "div.pricing11_plan cards"
        )
        for card in cards:
            plan = text(card.xpath("(.//*[normalize-space(text())])[1]"))
            if not plan.lower().startswith("on-demand"):
                continue  # Long-Term Reserve: no price, no term
            price = text(card.xpath(f".//div[{has_class('heading-style-h3')}]"))
            found = _GPUS.search(text(card))  # the feature sentence, whatever its markup
            if not self.once(response, plan, price):
                continue
            gpu = found.group(2) if found else None
            yield from self.offer(
                response,
                sku=slug(f"{gpu or 'gpu'} {plan}"),
                gpu_name=gpu,
                gpu_count=int(found.group(1)) if found else None,
                price=price,
                per_gpu=True,
                **network_fact(plan),
            )
