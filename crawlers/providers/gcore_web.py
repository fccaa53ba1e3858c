"""Gcore AI GPU cloud prices, https://gcore.com/cloud/ai-gpu (Next.js page).

Page quirks (see docs/sources/web-pages.md and fixtures/gcore-web/):

- The price cards are rendered from ``__NEXT_DATA__``: a ``gpu-pricing`` section whose
  ``flavors`` carry the flavor name (``bm3-ai-1xlarge-h100-80-8``), ``cluster_type``
  (``baremetal``/``virtual``), ``hardware {gpu {model, count}, cpu {vcpus}, ram_gib}``
  and a ``price`` object in the vocabulary of Gcore's pricing API
  (``currency_code``, ``price_per_hour``, ``price_per_month``, ``price_status``). Only
  the JSON is read; the cards repeat it.
- Prices are per flavor (instance) and hour, excluding VAT, in the JSON's currency.
  ``price_per_month`` is the hourly price × 720, not a separate offer: skipped.
- ``price_status`` ``hide`` (the card says ``Contact sales``) means no public price:
  counted under ``Contact sales``, no offer. ``error`` (Gcore's price service failed) is a
  missing price: the row is rejected and the crawl marked incomplete.
- The page names no location per price: region ``global`` (Gcore has no reference
  regions yet). Accelerators that are not GPUs (Graphcore IPU pods) are kept; their
  unmapped name is reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.embedded import find_dicts, next_data
from crawlers.scrapy import HtmlSpider
from schema.enums import Unit


def _price(price: dict[str, Any]) -> str | None:
    status = price.get("price_status")
    if status == "hide":
        return "Contact sales"  # what the card prints instead of a hidden price
    amount = price.get("price_per_hour")
    if status != "show" or amount is None:
        return None
    return f"{amount} {price.get('currency_code') or ''}".strip()


class GcoreWeb(HtmlSpider):
    name = "gcore-web"
    provider = "gcore"
    base_url = "https://gcore.com"
    start_paths = ("/cloud/ai-gpu",)
    currency = "EUR"
    docs_url = "https://gcore.com/docs/cloud/pricing"
    terms_url = "https://gcore.com/legal"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        sections = find_dicts(next_data(response.text), component="gpu-pricing")
        flavors = [f for s in sections for f in s.get("flavors") or []]
        for flavor in self.require(flavors, "__NEXT_DATA__ gpu-pricing flavors"):
            hardware = flavor.get("hardware") or {}
            gpu = hardware.get("gpu") or {}
            yield from self.offer(
                response,
                sku=flavor["flavor_name"],
                gpu_name=gpu.get("model"),
                gpu_count=gpu.get("count"),
                price=_price(flavor.get("price") or {}),
                unit=Unit.hour,
                per_gpu=False,
                vcpus=(hardware.get("cpu") or {}).get("vcpus"),
                memory_gb=hardware.get("ram_gib"),
                bare_metal=flavor.get("cluster_type") == "baremetal",
            )
