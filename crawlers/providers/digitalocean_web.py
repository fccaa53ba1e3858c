"""DigitalOcean GPU Droplets, https://www.digitalocean.com/pricing/gpu-droplets (2025 layout).

Page quirks (see docs/sources/web-pages.md and fixtures/digitalocean-web/):

- React cards with styled-components class names (hashed: never used). Each card is
  found from its price label ``<p>On-Demand Price</p>`` / ``<p>Reserved Price</p>`` and
  its ``<h3>`` title (``NVIDIA H100x8``, ``AMD Instinct™ MI300X``).
- Prices read ``$2.99`` + ``/GPU/hour``: per GPU-hour. React splits text with
  ``<!-- -->`` comments (``$<!-- -->1.99``); :func:`text` joins the pieces.
- Promotions: the price container holds the struck-through list price first and the
  promotional price last (``$6.74`` then ``$3.39``): the last one is the price.
- GPU count: the ``GPUs per Droplet`` spec, else the ``x8`` title suffix (reserved cards
  have no spec list). ``GPU Memory`` is per Droplet, divided by the count.
- Reserved cards state "a contractual commitment of 12 months": ``reserved_1y``. Their
  "Prices start as low as" wording makes the price a floor.
- The sign-up link's size slug is unreliable (``size%3Dundefined`` for L40S): the card
  title is the SKU.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from scrapy.http import TextResponse

from crawlers.normalize.prices import parse_number, reserved_kind
from crawlers.scrapy import HtmlSpider, text

_LABEL = re.compile(r"^(on-demand|reserved)\s+price$", re.IGNORECASE)
_COUNT_SUFFIX = re.compile(r"x(\d+)$")
_TERM = re.compile(r"commitment\s+of\s+(\d+)\s+months?", re.IGNORECASE)
_FLOOR = re.compile(r"\b(?:as\s+low\s+as|start(?:s|ing)?\s+(?:at|from))\b", re.IGNORECASE)


class DigitalOceanWeb(HtmlSpider):
    name = "digitalocean-web"
    provider = "digitalocean"
    base_url = "https://www.digitalocean.com"
    start_paths = ("/pricing/gpu-droplets",)
    docs_url = "https://docs.digitalocean.com/products/droplets/details/pricing/"
    terms_url = "https://www.digitalocean.com/legal/terms-of-service-agreement"

    def parse_page(self, response: TextResponse) -> Iterator[Any]:
        labels = [p for p in response.xpath("//p[contains(., 'Price')]") if _LABEL.match(text(p))]
        for label in self.require(labels, "card price labels ('On-Demand Price')"):
            card = label.xpath("ancestor::*[.//h3][1]")
            title = text(card.xpath(".//h3[1]"))
            specs = {}
            for item in card.xpath(".//li[count(span) = 2]"):
                key, value = item.xpath("./span")
                specs[text(key).lower()] = text(value)
            suffix = _COUNT_SUFFIX.search(title)
            count = parse_number(specs.get("gpus per droplet")) or (
                Decimal(suffix.group(1)) if suffix else None
            )
            gpu_name = _COUNT_SUFFIX.sub("", title).strip()
            memory = parse_number(specs.get("gpu memory"))
            wording = text(card)
            kind, floor = "on_demand", False
            if text(label).lower().startswith("reserved"):
                term = _TERM.search(wording)
                kind = reserved_kind(term.group(1) if term else None)
                floor = bool(_FLOOR.search(wording))
            # struck-through list price first, promotional price last
            shown = [text(span) for span in label.xpath("../span") if "$" in text(span)]
            yield from self.offer(
                response,
                sku=title,
                gpu_name=gpu_name,
                gpu_count=count,
                price=shown[-1] if shown else None,
                price_kind=kind,
                gpu_memory_gb=memory / count if memory and count else None,
                vcpus=parse_number(specs.get("droplet vcpus")),
                memory_gb=parse_number(specs.get("droplet memory")),
                floor=floor,
            )
